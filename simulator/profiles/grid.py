"""The shapes a profile covers: the grids of Vidur's own profiler (``vidur.profiling.utils``).

Mirrored here because that module imports torch.  Decode batches go past Vidur's usual 128
(its profiler's grid continues to 1024 in steps of 8) so a per-token verify step, which puts
B x (k + 1) queries through the decode kernel, stays inside the profiled range.
"""

from __future__ import annotations


def num_tokens_grid(max_tokens: int) -> list[int]:
    space = [1, 2, 4] + list(range(8, 1024, 8)) + list(range(1024, 2048 + 1, 16)) + list(range(2048, 4096 + 1, 32))
    space += list(range(4096 + 64, 8192 + 1, 64)) + list(range(8192 + 128, 16384 + 1, 128))
    return sorted({t for t in space if t <= max_tokens})


def decode_batch_grid(max_batch: int) -> list[int]:
    space = list(range(1, 129)) + list(range(136, 1024 + 1, 8))
    return [b for b in space if b <= max_batch]


def seq_length_grid(max_seq_len: int) -> list[int]:
    space = list(range(0, 1024 + 1, 32)) + list(range(1024 + 64, 4096 + 1, 64)) + list(range(4096 + 256, 65536 + 1, 256))
    return [s for s in space if s < max_seq_len]


def prefill_chunk_grid(max_seq_len: int, max_chunk: int) -> list[int]:
    space = list(range(32, 128 + 1, 32)) + list(range(256, 1024 + 1, 128)) + list(range(1536, 8192 + 1, 512))
    return [c for c in space if c <= max_seq_len and c <= max_chunk]


def prefill_shapes(max_seq_len: int, max_chunk: int) -> list[tuple[int, int]]:
    """(chunk, kv) pairs: every chunk at every chunk-aligned offset, plus whole prompts from empty."""
    shapes = []
    for chunk in prefill_chunk_grid(max_seq_len, max_chunk):
        shapes += [(chunk, i * chunk) for i in range(max_seq_len // chunk)]
    if max_seq_len <= max_chunk:
        shapes += [(length, 0) for length in seq_length_grid(max_seq_len) if length > 0]
    return sorted(set(shapes))


def decode_shapes(max_seq_len: int, max_batch: int) -> list[tuple[int, int]]:
    """(batch, kv) pairs."""
    kvs = [s for s in seq_length_grid(max_seq_len) if s > 0]
    return [(b, kv) for kv in kvs for b in decode_batch_grid(max_batch)]
