"""Which shapes to measure, in which order, and which of them fit in device memory.

The grid itself is pure (no torch): Vidur's profiler grids or powers of two, ordered
coarse-to-fine so a run cut short by a time budget still spans the whole grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.util.errors import ConfigError
from simulator.profiles import grid as vidur_grid

GRIDS = ("vidur", "small")
DEFAULT_MAX_KV = 4096
KIND_ORDER = ("mlp", "decode", "prefill", "verify_attention", "verify_layer")
PROFILE_KINDS = KIND_ORDER[:3]  # the Vidur-format profile
VERIFY_KINDS = KIND_ORDER[3:]  # verify_attention.csv, verify_layer.csv
VERIFY_MIN_KV = 128


@dataclass(frozen=True)
class Shape:
    """One measurement: ``mlp`` (a = num_tokens), ``decode`` (a = batch, b = KV tokens cached
    per sequence), ``prefill`` (a = chunk, b = KV tokens before the chunk), or a verify step,
    ``verify_attention`` / ``verify_layer`` (a = batch, b = KV tokens cached per sequence,
    q = k' + 1 new tokens per sequence)."""

    kind: str
    a: int
    b: int = 0
    depth: int = 0  # 0 for the grid's corners; each level bisects the gaps of the previous ones
    q: int = 1

    def describe(self) -> dict:
        if self.kind in VERIFY_KINDS:
            return {"kind": self.kind, "batch_size": self.a, "kv_cache_size": self.b, "num_query_tokens": self.q}
        names = {"mlp": ("num_tokens", None), "decode": ("batch_size", "kv_cache_size"), "prefill": ("prefill_chunk_size", "kv_cache_size")}
        first, second = names[self.kind]
        return {"kind": self.kind, first: self.a, **({second: self.b} if second else {})}

    @property
    def new_tokens(self) -> int:
        """Tokens this shape puts through the layer: the whole chunk, or every sequence's queries."""
        return self.a if self.kind in ("mlp", "prefill") else self.a * self.q


def refinement_depth(index: int, count: int) -> int:
    """0 at both ends of an axis of ``count`` points, then 1, 2, ... for ever finer bisections.

    Sorting by depth gives a coarse-to-fine order: any prefix covers the whole axis.
    """
    if index == 0 or index == count - 1:
        return 0
    levels = (count - 2).bit_length()  # ceil(log2(count - 1))
    trailing_zeros = (index & -index).bit_length() - 1
    return levels - trailing_zeros


def powers_of_two(low: int, high: int) -> list[int]:
    values, v = [], 1
    while v <= high:
        if v >= low:
            values.append(v)
        v *= 2
    return sorted(set(values + [high])) if high >= low else []


def _small_axes(max_tokens: int, max_batch: int, max_kv: int):
    """Powers of two up to each maximum (maximum included): ~130 shapes where Vidur's grid has ~12,000."""
    tokens = powers_of_two(1, max_tokens)
    decode = [(b, kv) for kv in powers_of_two(min(16, max_kv), max_kv) for b in powers_of_two(1, max_batch)]
    prefill = []
    for chunk in powers_of_two(min(32, max_tokens, max_kv), min(max_tokens, max_kv)):
        prefill += [(chunk, 0)] + [(chunk, kv) for kv in powers_of_two(chunk, max_kv - chunk) if kv % chunk == 0]
    return tokens, decode, prefill


def _vidur_axes(max_tokens: int, max_batch: int, max_kv: int):
    """The grids of Vidur's profiler (``simulator.profiles.grid`` mirrors them); chunks <= max_tokens."""
    return (
        vidur_grid.num_tokens_grid(max_tokens),
        vidur_grid.decode_shapes(max_kv, max_batch),
        vidur_grid.prefill_shapes(max_kv, max_tokens),
    )


def _with_depths(kind: str, pairs: list[tuple[int, int]]) -> list[Shape]:
    """Depth of a 2-D point: the deeper of its two axes (the second axis is taken per first value)."""
    pairs = sorted(set(pairs))
    firsts = sorted({a for a, _ in pairs})
    seconds: dict[int, list[int]] = {}
    for a, b in pairs:
        seconds.setdefault(a, []).append(b)
    first_depth = {a: refinement_depth(i, len(firsts)) for i, a in enumerate(firsts)}
    return [
        Shape(kind, a, b, max(first_depth[a], refinement_depth(j, len(seconds[a]))))
        for a in firsts
        for j, b in enumerate(seconds[a])
    ]


def build_shapes(grid: str, max_tokens: int, max_batch: int, max_kv: int) -> list[Shape]:
    """Every shape to measure, coarse-to-fine across all three kinds."""
    if grid not in GRIDS:
        raise ConfigError(f"--grid {grid!r}: must be one of {', '.join(GRIDS)}")
    tokens, decode, prefill = (_vidur_axes if grid == "vidur" else _small_axes)(max_tokens, max_batch, max_kv)
    if not tokens or not decode or not prefill:
        raise ConfigError(
            f"grid '{grid}' with --max-tokens {max_tokens}, --max-batch {max_batch}, --max-kv {max_kv} has no "
            f"{'num_tokens' if not tokens else 'decode' if not decode else 'prefill'} shapes; raise the limits"
        )
    shapes = [Shape("mlp", t, 0, refinement_depth(i, len(tokens))) for i, t in enumerate(sorted(set(tokens)))]
    shapes += _with_depths("decode", decode) + _with_depths("prefill", prefill)
    return sort_shapes(shapes)


def build_verify_shapes(max_batch: int, max_kv: int, max_k: int, min_kv: int = VERIFY_MIN_KV) -> list[Shape]:
    """Verify steps: every (batch, KV, k' + 1) of powers-of-two batches 1..max_batch, powers-of-two
    KV lengths min_kv..max_kv and k' = 0..max_k, for attention alone and for the whole layer.

    Attention also gets the one-query rows the two bounds need: ``kv_once`` is the (batch, KV, 1)
    row itself, ``per_token`` the (batch x (k' + 1), KV, 1) row, at batches up to
    max_batch x (max_k + 1).  A bound row takes the depth of the shallowest verify row that
    needs it, so a run cut short by its time budget keeps the bounds of every row it measured.
    """
    batches, kvs, queries = powers_of_two(1, max_batch), powers_of_two(min(min_kv, max_kv), max_kv), list(range(1, max_k + 2))
    if not batches or not kvs:
        raise ConfigError(f"verify grid with --max-batch {max_batch}, --max-kv {max_kv} has no shapes; raise the limits")
    depth = {}
    for i, b in enumerate(batches):
        for j, kv in enumerate(kvs):
            for n, q in enumerate(queries):
                depth[(b, kv, q)] = max(refinement_depth(i, len(batches)), refinement_depth(j, len(kvs)), refinement_depth(n, len(queries)))
    attention = dict(depth)
    for (b, kv, q), d in depth.items():
        bound = (b * q, kv, 1)
        attention[bound] = min(attention.get(bound, d), d)
    shapes = [Shape("verify_attention", b, kv, d, q) for (b, kv, q), d in attention.items()]
    shapes += [Shape("verify_layer", b, kv, d, q) for (b, kv, q), d in depth.items()]
    return sort_shapes(shapes)


def sort_shapes(shapes: list[Shape]) -> list[Shape]:
    """Coarse-to-fine, then by kind, then by size."""
    return sorted(shapes, key=lambda s: (s.depth, KIND_ORDER.index(s.kind), s.a, s.b, s.q))


def kv_tokens_needed(shape: Shape) -> int:
    """K/V tokens an attention shape reads: every sequence's cache plus its new tokens."""
    return shape.a + shape.b if shape.kind == "prefill" else shape.a * (shape.b + shape.q)


def fits(torch, device, needed_bytes: int) -> bool:
    """Pre-check on a GPU: free memory plus what PyTorch's allocator holds unused."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    spare = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return needed_bytes <= 0.95 * (free + spare)


def kv_capacity(torch, device, shapes, cfg, element_size: int, reserve_bytes: int) -> int:
    """Tokens the K/V buffers must hold for the largest attention shape, capped by free GPU memory."""
    needed = max(kv_tokens_needed(s) for s in shapes if s.kind != "mlp")
    if device.type != "cuda":
        return needed
    per_token = 2 * cfg.num_kv_heads * (cfg.embedding_dim // cfg.num_q_heads) * element_size
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(needed, int((0.9 * free - reserve_bytes) // per_token)))

