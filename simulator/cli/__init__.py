"""The command lines: ``python -m simulator`` and ``python -m simulator.paysoff``, their flags and vLLM's terms."""
