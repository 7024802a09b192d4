"""Pure speculative-decoding model (no Vidur, no I/O): acceptance, verify cost, progress, memory."""
