"""Measure a Vidur-format profile (``mlp.csv``, ``attention.csv``) on one GPU with PyTorch alone.

Vidur's own profiler needs Sarathi, Ray and a multi-GPU node; this one times the same ops with
plain PyTorch on whatever single device is at hand (TP = 1), so a profile can be re-measured
for a new GPU or a new PyTorch release.  Every layer op of ``mlp.csv`` runs in the order of
a transformer layer; attention runs through ``scaled_dot_product_attention`` for decode
(batch x one query x KV) and chunked prefill (chunk x (KV + chunk), causal inside the chunk).

On a GPU each op is captured into a CUDA graph after its warm-up runs and the graph's replays
are timed between CUDA events, so the time is GPU execution alone, as Vidur's kernel-time
profiler records it, not the GPU waiting for Python to launch the next kernel (an op that
cannot be captured is timed between events around its eager launch instead, and the metadata
says so); on a CPU, ``time.perf_counter``.  The repeated runs are summarised as
min/max/mean/median/std in milliseconds per layer.  Shapes are measured coarse-to-fine (the grid's corners first, then
ever finer bisections), so a run cut short by ``--time-budget`` still leaves a profile that
spans the whole grid, only more sparsely.  Shapes that do not fit in device memory are skipped
and listed in ``metadata.json``.

PyTorch is an optional dependency (``pip install -e '.[profile]'``): this module imports it
only when measuring.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from simulator.catalog import model_config
from simulator.errors import ConfigError
from simulator.profiles import grid as vidur_grid
from simulator.profiles.vidur_format import (
    ATTENTION_KEY_COLUMNS,
    ATTENTION_OPS,
    MLP_KEY_COLUMNS,
    MLP_OPS,
    STAT_SUFFIXES,
    stat_columns,
    write_profile,
)

DTYPES = ("float16", "bfloat16", "float32")
ATTENTION_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
# Tried in this order by "auto": PyTorch's own preference among its fused kernels.
AUTO_BACKEND_ORDER = ("flash", "efficient", "math")
GRIDS = ("vidur", "small")
DEFAULT_MAX_KV = 4096
GPU_BURN_IN_S = 1.0  # clocks ramp up from idle before the first timed shape
TIMERS = ("auto", "graph", "event")
# CUDA-graph timing: a graph holds enough copies of a small op to run about this long (so the
# replay's own start-up is shared among them), judged from the op's eager time.
GRAPH_TARGET_MS = 0.1
MAX_GRAPH_COPIES = 8
# The GPU spins this long per queued replay before the first one, so the CPU is never behind;
# doubled (up to the maximum) whenever the GPU still got there first.
QUEUE_HEAD_START_MS = 0.03
MAX_HEAD_START_MS = 0.2
MAX_HOLD_MS = 50.0
QUEUE_ATTEMPTS = 3
CALIBRATION_CYCLES = 10_000_000
KIND_ORDER = ("mlp", "decode", "prefill")


# ---------------------------------------------------------------------------------------------
# The grid: which shapes, in which order (pure, no torch)


@dataclass(frozen=True)
class Shape:
    """One measurement: ``mlp`` (a = num_tokens), ``decode`` (a = batch, b = KV tokens cached
    per sequence) or ``prefill`` (a = chunk, b = KV tokens before the chunk)."""

    kind: str
    a: int
    b: int = 0
    depth: int = 0  # 0 for the grid's corners; each level bisects the gaps of the previous ones

    def describe(self) -> dict:
        names = {"mlp": ("num_tokens", None), "decode": ("batch_size", "kv_cache_size"), "prefill": ("prefill_chunk_size", "kv_cache_size")}
        first, second = names[self.kind]
        return {"kind": self.kind, first: self.a, **({second: self.b} if second else {})}


def refinement_depth(index: int, count: int) -> int:
    """0 at both ends of an axis of ``count`` points, then 1, 2, ... for ever finer bisections.

    Sorting by depth gives a coarse-to-fine order: any prefix covers the whole axis.
    """
    if index == 0 or index == count - 1:
        return 0
    levels = (count - 2).bit_length()  # ceil(log2(count - 1))
    trailing_zeros = (index & -index).bit_length() - 1
    return levels - trailing_zeros


def _powers_of_two(low: int, high: int) -> list[int]:
    values, v = [], 1
    while v <= high:
        if v >= low:
            values.append(v)
        v *= 2
    return sorted(set(values + [high])) if high >= low else []


def _small_axes(max_tokens: int, max_batch: int, max_kv: int):
    """Powers of two up to each maximum (maximum included): ~130 shapes where Vidur's grid has ~12,000."""
    tokens = _powers_of_two(1, max_tokens)
    decode = [(b, kv) for kv in _powers_of_two(min(16, max_kv), max_kv) for b in _powers_of_two(1, max_batch)]
    prefill = []
    for chunk in _powers_of_two(min(32, max_tokens, max_kv), min(max_tokens, max_kv)):
        prefill += [(chunk, 0)] + [(chunk, kv) for kv in _powers_of_two(chunk, max_kv - chunk) if kv % chunk == 0]
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
    return sorted(shapes, key=lambda s: (s.depth, KIND_ORDER.index(s.kind), s.a, s.b))


def summarize(times_ms) -> dict[str, float]:
    """Vidur's five statistics of one op's repeated timings (population std, as numpy's default)."""
    a = np.asarray(times_ms, dtype=float)
    return {"min": float(a.min()), "max": float(a.max()), "mean": float(a.mean()), "median": float(np.median(a)), "std": float(a.std())}


# ---------------------------------------------------------------------------------------------
# Timing and the measured ops (torch)


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise ConfigError("measuring a profile needs PyTorch, an optional dependency: pip install -e '.[profile]'") from exc
    return torch


def _is_out_of_memory(torch, exc: BaseException) -> bool:
    # CUDA raises torch.OutOfMemoryError; the CPU allocator a plain RuntimeError.
    return isinstance(exc, torch.OutOfMemoryError) or (isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))


class _Stopwatch:
    """Per-op timings in ms around eager launches: CUDA events on a GPU (read after one
    synchronize), perf_counter on a CPU."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.recording = False
        self.samples: dict[str, list] = {}

    def time(self, name: str, fn):
        if not self.recording:
            return fn()
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            self.samples.setdefault(name, []).append((start, end))
        else:
            t0 = time.perf_counter()
            out = fn()
            self.samples.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        return out

    def stats(self) -> dict[str, dict[str, float]]:
        if self.cuda:
            self.torch.cuda.synchronize()
            return {n: summarize([s.elapsed_time(e) for s, e in pairs]) for n, pairs in self.samples.items()}
        return {n: summarize(ms) for n, ms in self.samples.items()}


class _CaptureFailed(Exception):
    """An op of a shape could not be captured into (or replayed from) a CUDA graph."""


class _Capture:
    """Stands in for a stopwatch during one ``run``: records each op into its own CUDA graph,
    ``copies[name]`` back-to-back runs of it, on the side stream the warm-up ran on."""

    def __init__(self, torch, stream, copies: dict[str, int]):
        self.torch, self.stream, self.copies = torch, stream, copies
        self.graphs: list[tuple[str, object, int]] = []  # (op, graph, copies) in layer order
        self.outputs: list = []  # what the graphs write into, alive as long as the graphs

    def time(self, name: str, fn):
        torch, copies = self.torch, self.copies.get(name, 1)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")  # views launch no kernel
            graph.capture_begin()
            try:
                for _ in range(copies):
                    out = fn()
            except BaseException:
                try:
                    graph.capture_end()  # leave the stream out of capture mode; the capture is void anyway
                except Exception:
                    pass
                raise
            graph.capture_end()
        self.graphs.append((name, graph, copies))
        self.outputs.append(out)
        return out

    def release(self) -> None:
        """Graphs hold private memory pools: drop them (and their outputs) before the next shape."""
        self.graphs.clear()
        self.outputs.clear()


@dataclass
class _Timed:
    stats: dict[str, dict[str, float]]
    timer: str  # cuda_graph, cuda_event or perf_counter
    fallback: str | None = None  # why CUDA-graph timing was wanted but not used


class _Clock:
    """Times every op of a ``run(watch)`` (one transformer layer, or one attention call).

    Eager timing puts two CUDA events around each launch, so the interval includes the GPU
    idling while Python issues the op's kernels: for small shapes that launch gap, not the
    kernels, is what gets measured. With ``graphs`` each op is captured into a CUDA graph and
    the graphs are replayed behind a GPU spin-wait long enough for the CPU to queue every
    replay first, so an event pair brackets GPU execution only. An op that cannot be captured
    makes its shape fall back to eager timing, recorded in the metadata.
    """

    def __init__(self, torch, device, graphs: bool):
        self.torch, self.device, self.graphs = torch, device, graphs
        self.eager_timer = "cuda_event" if device.type == "cuda" else "perf_counter"
        self.stream = torch.cuda.Stream(device) if graphs else None
        self.head_start_ms = QUEUE_HEAD_START_MS
        self._cycles_per_ms: float | None = None
        self._calibrated = False

    def measure(self, run, warmup: int, repeats: int) -> _Timed:
        if not self.graphs:
            return _Timed(self._eager(run, warmup, repeats), self.eager_timer)
        try:
            return _Timed(self._replayed(run, warmup, repeats), "cuda_graph")
        except _CaptureFailed as exc:
            reason = str(exc)
        _free_memory(self.torch, self.device)
        return _Timed(self._eager(run, warmup, repeats), self.eager_timer, reason)

    def _eager(self, run, warmup: int, repeats: int) -> dict[str, dict[str, float]]:
        watch = _Stopwatch(self.torch, self.device)
        for _ in range(warmup):
            run(watch)
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()
        watch.recording = True
        for _ in range(repeats):
            run(watch)
        return watch.stats()

    def _replayed(self, run, warmup: int, repeats: int) -> dict[str, dict[str, float]]:
        torch = self.torch
        # Warm up on the side stream the capture uses (lazy library set-up must not be captured);
        # the last warm-up's eager timings decide how many copies of each op one graph holds.
        watch = _Stopwatch(torch, self.device)
        self.stream.wait_stream(torch.cuda.current_stream())
        rounds = max(warmup, 1)
        with torch.cuda.stream(self.stream):
            for i in range(rounds):
                watch.recording = i == rounds - 1
                run(watch)
        eager_ms = {name: s["median"] for name, s in watch.stats().items()}  # stats() synchronizes
        copies = {name: max(1, min(MAX_GRAPH_COPIES, int(GRAPH_TARGET_MS / max(ms, 1e-6)))) for name, ms in eager_ms.items()}
        capture = _Capture(torch, self.stream, copies)
        try:
            run(capture)
            return self._replay(capture.graphs, repeats)
        except Exception as exc:
            if _is_out_of_memory(torch, exc):
                raise
            torch.cuda.synchronize()
            raise _CaptureFailed(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}") from exc
        finally:
            capture.release()

    def _replay(self, graphs, repeats: int) -> dict[str, dict[str, float]]:
        torch = self.torch
        self._calibrate()
        with torch.cuda.stream(self.stream):
            for _, graph, _ in graphs:  # the first replay uploads each graph; not timed
                graph.replay()
            torch.cuda.synchronize()
            for _ in range(QUEUE_ATTEMPTS):
                pairs = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in graphs] for _ in range(repeats)]
                self._hold_gpu(len(graphs) * repeats)
                ran_dry, previous_end = False, None
                for round_pairs in pairs:
                    for (_, graph, _), (start, end) in zip(graphs, round_pairs):
                        # The GPU done with all queued work here would idle inside the next pair.
                        ran_dry = ran_dry or (previous_end is not None and previous_end.query())
                        start.record()
                        graph.replay()
                        end.record()
                        previous_end = end
                torch.cuda.synchronize()
                if not ran_dry or self._cycles_per_ms is None or self.head_start_ms >= MAX_HEAD_START_MS:
                    break
                self.head_start_ms = min(2 * self.head_start_ms, MAX_HEAD_START_MS)
        samples: dict[str, list[float]] = {}
        for round_pairs in pairs:
            for (name, _, copies), (start, end) in zip(graphs, round_pairs):
                samples.setdefault(name, []).append(start.elapsed_time(end) / copies)
        return {name: summarize(ms) for name, ms in samples.items()}

    def _calibrate(self) -> None:
        """GPU clock cycles per millisecond for ``torch.cuda._sleep`` (absent: no head start)."""
        if self._calibrated:
            return
        self._calibrated = True
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is None:
            return
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        sleep(CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end)
        if elapsed > 0:
            self._cycles_per_ms = CALIBRATION_CYCLES / elapsed

    def _hold_gpu(self, replays: int) -> None:
        if self._cycles_per_ms is not None:
            self.torch.cuda._sleep(int(self._cycles_per_ms * min(self.head_start_ms * replays, MAX_HOLD_MS)))


def _make_clock(torch, device, timer: str) -> _Clock:
    """The clock for ``--timer`` (already checked against the device); a seam for tests."""
    return _Clock(torch, device, graphs=device.type == "cuda" and timer in ("auto", "graph"))


class _Layer:
    """One transformer layer's non-attention weights, with random values, run op by op as Vidur names them."""

    def __init__(self, torch, cfg, device, dtype, max_tokens: int):
        self.torch, self.cfg, self.device = torch, cfg, device
        self.F = torch.nn.functional
        h, f = cfg.embedding_dim, cfg.mlp_hidden_dim
        self.head_dim = h // cfg.num_q_heads
        self.q_width = cfg.num_q_heads * self.head_dim
        qkv = (cfg.num_q_heads + 2 * cfg.num_kv_heads) * self.head_dim
        up = 2 * f if cfg.use_gated_mlp else f

        def weight(*size):
            return torch.empty(*size, device=device, dtype=dtype).normal_(0.0, 0.02)

        def bias(size, present):
            return weight(size) if present else None

        self.emb = weight(cfg.vocab_size, h)
        self.norm_w, self.norm_b = torch.ones(h, device=device, dtype=dtype), torch.zeros(h, device=device, dtype=dtype)
        self.w_qkv, self.b_qkv = weight(qkv, h), bias(qkv, cfg.use_bias or cfg.use_qkv_bias)
        self.w_o, self.b_o = weight(h, self.q_width), bias(h, cfg.use_bias)
        self.w_up, self.b_up = weight(up, h), bias(up, cfg.use_bias)
        self.w_down, self.b_down = weight(h, f), bias(h, cfg.use_bias)
        self.rotary = int(self.head_dim * cfg.partial_rotary_factor) // 2 * 2
        half = self.rotary // 2
        inv_freq = 1.0 / (float(cfg.rope_theta or 10000.0) ** (torch.arange(half, device=device, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(max_tokens, device=device, dtype=torch.float32), inv_freq)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self.gelu = cfg.activation.name == "GELU"
        self.rms = cfg.norm.name == "RMS_NORM"

    def ops(self) -> tuple[str, ...]:
        """The ops this architecture runs; the others (e.g. a second norm) cost nothing."""
        return tuple(op for op in MLP_OPS if op != "post_attention_layernorm" or self.cfg.post_attn_norm)

    def activation_bytes(self, tokens: int, element_size: int) -> int:
        c = self.cfg
        per_token = 7 * c.embedding_dim + self.w_qkv.shape[0] + self.q_width + self.w_up.shape[0] + c.mlp_hidden_dim
        return tokens * per_token * element_size

    def _norm(self, x):
        h = self.cfg.embedding_dim
        if self.rms:
            return self.F.rms_norm(x, (h,), self.norm_w, eps=1e-6)
        return self.F.layer_norm(x, (h,), self.norm_w, self.norm_b, eps=1e-5)

    def _rope(self, qkv, positions):
        """Neox-style rotation of the query and key heads, in place (unfused eager kernels)."""
        c, half = self.cfg, self.rotary // 2
        heads = qkv.view(qkv.shape[0], -1, self.head_dim)[:, : c.num_q_heads + c.num_kv_heads]
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        x1, x2 = heads[..., :half], heads[..., half : self.rotary]
        rotated = self.torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        heads[..., : self.rotary] = rotated
        return qkv

    def _act(self, up):
        f = self.cfg.mlp_hidden_dim
        act = self.F.gelu if self.gelu else self.F.silu
        return act(up[:, :f]) * up[:, f:] if self.cfg.use_gated_mlp else act(up)

    def measure(self, tokens: int, clock: _Clock, warmup: int, repeats: int) -> _Timed:
        torch, F = self.torch, self.F
        ids = torch.randint(0, self.cfg.vocab_size, (tokens,), device=self.device)
        positions = torch.arange(tokens, device=self.device)
        attn_out = torch.randn(tokens, self.q_width, device=self.device, dtype=self.emb.dtype)
        post_norm = self.cfg.post_attn_norm

        def run(watch):
            # Vidur's layer: with a second norm the MLP follows the attention residual and "add"
            # is the MLP residual; without one (parallel blocks) "add" sums attention, MLP and input.
            x = watch.time("emb", lambda: F.embedding(ids, self.emb))
            normed = watch.time("input_layernorm", lambda: self._norm(x))
            qkv = watch.time("attn_pre_proj", lambda: F.linear(normed, self.w_qkv, self.b_qkv))
            watch.time("attn_rope", lambda: self._rope(qkv, positions))
            o = watch.time("attn_post_proj", lambda: F.linear(attn_out, self.w_o, self.b_o))
            if post_norm:
                residual = x + o
                normed = watch.time("post_attention_layernorm", lambda: self._norm(residual))
            up = watch.time("mlp_up_proj", lambda: F.linear(normed, self.w_up, self.b_up))
            act = watch.time("mlp_act", lambda: self._act(up))
            down = watch.time("mlp_down_proj", lambda: F.linear(act, self.w_down, self.b_down))
            watch.time("add", lambda: residual + down if post_norm else o + down + x)

        return clock.measure(run, warmup, repeats)


class _Attention:
    """Decode and prefill attention over K/V cut from two flat, randomly filled buffers.

    Each shape views the first ``batch x (kv + new)`` tokens of the buffers as contiguous
    (batch, kv_heads, tokens, head_dim) caches, so the grid needs one allocation and one fill.
    """

    def __init__(self, torch, cfg, device, dtype, capacity_tokens: int, backend: str):
        self.torch, self.device, self.dtype = torch, device, dtype
        self.F = torch.nn.functional
        self.q_heads, self.kv_heads = cfg.num_q_heads, cfg.num_kv_heads
        self.head_dim = cfg.embedding_dim // cfg.num_q_heads
        self.backend = backend
        self.capacity, self.k_flat, self.v_flat = 0, None, None
        while capacity_tokens >= 1 and self.k_flat is None:
            try:
                size = capacity_tokens * self.kv_heads * self.head_dim
                self.k_flat = torch.randn(size, device=device, dtype=dtype)
                self.v_flat = torch.randn(size, device=device, dtype=dtype)
                self.capacity = capacity_tokens
            except Exception as exc:  # halve until the buffers fit; shapes beyond them are skipped
                if not _is_out_of_memory(torch, exc):
                    raise
                self.k_flat = self.v_flat = None
                _free_memory(torch, device)
                capacity_tokens //= 2

    @staticmethod
    def tokens_needed(shape: Shape) -> int:
        """K/V tokens a shape reads: every sequence's cache plus its new tokens."""
        return shape.a * (shape.b + 1) if shape.kind == "decode" else shape.a + shape.b

    def transient_bytes(self, shape: Shape, element_size: int) -> int:
        """Per-shape tensors beyond the buffers: queries, new K/V, the output and its reshaped copy."""
        return shape.a * (3 * self.q_heads + 2 * self.kv_heads) * self.head_dim * element_size

    def _candidates(self):
        from torch.nn.attention import SDPBackend

        names = AUTO_BACKEND_ORDER if self.backend == "auto" else (self.backend,)
        members = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
        return [(name, members[name]) for name in names]

    def measure(self, shape: Shape, clock: _Clock, warmup: int, repeats: int) -> tuple[str, _Timed]:
        """Returns the SDPA backend that ran and the per-op timings."""
        torch, F = self.torch, self.F
        from torch.nn.attention import sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right

        decode = shape.kind == "decode"
        batch, new, kv = (shape.a, 1, shape.b) if decode else (1, shape.a, shape.b)
        total = kv + new
        hd, hq, hkv = self.head_dim, self.q_heads, self.kv_heads
        k_cache = self.k_flat[: batch * hkv * total * hd].view(batch, hkv, total, hd)
        v_cache = self.v_flat[: batch * hkv * total * hd].view(batch, hkv, total, hd)
        q_flat = torch.randn(batch * new, hq * hd, device=self.device, dtype=self.dtype)
        k_new = torch.randn(batch * new, hkv * hd, device=self.device, dtype=self.dtype)
        v_new = torch.randn(batch * new, hkv * hd, device=self.device, dtype=self.dtype)
        mask = {} if decode else ({"is_causal": True} if kv == 0 else {"attn_mask": causal_lower_right(new, total)})
        op = "attn_decode" if decode else "attn_prefill"
        gqa = hq != hkv

        def as_heads(flat, heads):
            return flat.view(batch, new, heads, hd).transpose(1, 2)

        def save():
            k_cache[:, :, kv:].copy_(as_heads(k_new, hkv))
            v_cache[:, :, kv:].copy_(as_heads(v_new, hkv))

        def run(watch):
            q = watch.time("attn_input_reshape", lambda: as_heads(q_flat, hq))
            watch.time("attn_kv_cache_save", save)
            out = watch.time(op, lambda: F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=gqa, **mask))
            watch.time("attn_output_reshape", lambda: out.transpose(1, 2).reshape(batch * new, hq * hd))

        failures = []
        for name, member in self._candidates():
            with sdpa_kernel([member]):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the reasons a kernel declines a shape
                        run(_Stopwatch(torch, self.device))
                except RuntimeError as exc:
                    if _is_out_of_memory(torch, exc):
                        raise
                    failures.append(f"{name}: {str(exc).splitlines()[0]}")
                    continue
                return name, clock.measure(run, max(warmup - 1, 0), repeats)
        raise _ShapeRejected("no scaled_dot_product_attention backend accepts this shape (" + "; ".join(failures) + ")")


class _ShapeRejected(Exception):
    """A shape this device or PyTorch cannot run; recorded as skipped."""


def _free_memory(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _measure_shape(layer: _Layer, attention: _Attention, clock: _Clock, shape: Shape, warmup: int, repeats: int):
    """(backend or None, timings) for one shape; module-level so a test can stand in an OOM."""
    if shape.kind == "mlp":
        return None, layer.measure(shape.a, clock, warmup, repeats)
    return attention.measure(shape, clock, warmup, repeats)


# ---------------------------------------------------------------------------------------------
# The measurement


@dataclass(frozen=True)
class MeasureOptions:
    model: str
    device: str = "auto"
    dtype: str = "auto"
    grid: str = "vidur"
    max_tokens: int = 4096
    max_batch: int = 128
    max_kv: int | None = None  # None: the model's context length, at most DEFAULT_MAX_KV
    repeats: int = 10
    warmup: int = 3
    time_budget_s: float | None = None
    attention_backend: str = "auto"
    block_size: int = 16
    seed: int = 0
    timer: str = "auto"  # auto: CUDA graphs on a GPU, perf_counter on a CPU


@dataclass
class MeasuredProfile:
    mlp: pd.DataFrame
    attention: pd.DataFrame
    metadata: dict = field(default_factory=dict)


def _check_options(o: MeasureOptions) -> None:
    for name in ("max_tokens", "max_batch", "repeats", "block_size"):
        if getattr(o, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(o, name)}: must be at least 1")
    if o.max_kv is not None and o.max_kv < 2:
        raise ConfigError(f"--max-kv {o.max_kv}: must be at least 2")
    if o.warmup < 0:
        raise ConfigError(f"--warmup {o.warmup}: must not be negative")
    if o.time_budget_s is not None and (o.time_budget_s < 0 or not math.isfinite(o.time_budget_s)):
        raise ConfigError(f"--time-budget {o.time_budget_s}: must be a non-negative number of seconds")
    if o.dtype not in ("auto", *DTYPES):
        raise ConfigError(f"--dtype {o.dtype!r}: must be one of auto, {', '.join(DTYPES)}")
    if o.timer not in TIMERS:
        raise ConfigError(f"--timer {o.timer!r}: must be one of {', '.join(TIMERS)}")
    if o.attention_backend not in ATTENTION_BACKENDS:
        raise ConfigError(f"--attention-backend {o.attention_backend!r}: must be one of {', '.join(ATTENTION_BACKENDS)}")


def _resolve_device(torch, name: str):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cuda", "cpu"):
        raise ConfigError(f"--device {name!r}: must be cuda or cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: this PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    return torch.device(name)


def _device_facts(torch, device) -> dict:
    facts = {"type": device.type, "torch_version": torch.__version__, "cuda_version": torch.version.cuda}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            cudnn_version=torch.backends.cudnn.version(),
        )
    else:
        facts.update(
            name=platform.processor() or platform.machine(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
            threads=torch.get_num_threads(),
        )
    return facts


def _fits(torch, device, needed_bytes: int) -> bool:
    """Pre-check on a GPU: free memory plus what PyTorch's allocator holds unused."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    spare = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return needed_bytes <= 0.95 * (free + spare)


def _kv_capacity(torch, device, shapes, cfg, element_size: int, reserve_bytes: int) -> int:
    """Tokens the K/V buffers must hold for the largest attention shape, capped by free GPU memory."""
    needed = max(_Attention.tokens_needed(s) for s in shapes if s.kind != "mlp")
    if device.type != "cuda":
        return needed
    per_token = 2 * cfg.num_kv_heads * (cfg.embedding_dim // cfg.num_q_heads) * element_size
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(needed, int((0.9 * free - reserve_bytes) // per_token)))


def _mlp_row(cfg, tokens: int, stats: dict, ops: tuple[str, ...]) -> dict:
    row = {}
    for op in MLP_OPS:  # an op the architecture lacks takes no time (Vidur's loader assumes the same)
        for suffix in STAT_SUFFIXES:
            row[f"time_stats.{op}.{suffix}"] = stats[op][suffix] if op in ops else 0.0
    row.update(
        n_head=cfg.num_q_heads,
        n_kv_head=cfg.num_kv_heads,
        n_embd=cfg.embedding_dim,
        n_expanded_embd=cfg.mlp_hidden_dim,
        vocab_size=cfg.vocab_size,
        use_gated_mlp=bool(cfg.use_gated_mlp),
        num_tokens=tokens,
        num_tensor_parallel_workers=1,
    )
    return row


def _attention_row(cfg, shape: Shape, stats: dict, backend: str, block_size: int, max_kv: int) -> dict:
    row = {f"time_stats.{op}.{s}": stats[op][s] if op in stats else np.nan for op in ATTENTION_OPS for s in STAT_SUFFIXES}
    decode = shape.kind == "decode"
    row.update(
        n_embd=cfg.embedding_dim,
        n_q_head=cfg.num_q_heads,
        n_kv_head=cfg.num_kv_heads,
        block_size=block_size,
        num_tensor_parallel_workers=1,
        max_model_len=max_kv,
        batch_size=shape.a if decode else 1,
        prefill_chunk_size=0 if decode else shape.a,
        kv_cache_size=shape.b,
        is_prefill=not decode,
        attention_backend=f"sdpa_{backend}",
    )
    return row


@dataclass
class _GridOutcome:
    mlp_rows: list = field(default_factory=list)
    attention_rows: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    over_budget: dict = field(default_factory=lambda: {kind: 0 for kind in KIND_ORDER})
    backends: set = field(default_factory=set)
    absent_ops: list = field(default_factory=list)
    timers: dict = field(default_factory=dict)  # timer -> shapes it timed
    timer_fallbacks: list = field(default_factory=list)  # shapes not timed by the timer asked for, and why


def _measure_grid(torch, cfg, device, dtype, shapes: list[Shape], options: MeasureOptions, max_kv: int) -> _GridOutcome:
    started = time.perf_counter()
    element_size = torch.empty((), dtype=dtype).element_size()
    max_tokens = max(s.a for s in shapes if s.kind == "mlp")
    try:
        layer = _Layer(torch, cfg, device, dtype, max(max_tokens, max_kv))
    except Exception as exc:
        if _is_out_of_memory(torch, exc):
            raise ConfigError(f"model '{options.model}': one layer's weights do not fit in {device.type} memory") from exc
        raise
    capacity = _kv_capacity(torch, device, shapes, cfg, element_size, layer.activation_bytes(max_tokens, element_size))
    attention = _Attention(torch, cfg, device, dtype, capacity, options.attention_backend)
    if device.type == "cuda":  # a second of the largest layer's matmuls
        burn_in, burn_in_end = _Clock(torch, device, graphs=False), time.perf_counter() + GPU_BURN_IN_S
        while time.perf_counter() < burn_in_end:
            layer.measure(max_tokens, burn_in, 0, 1)
        torch.cuda.synchronize()
    clock = _make_clock(torch, device, options.timer)

    outcome = _GridOutcome(absent_ops=[op for op in MLP_OPS if op not in layer.ops()])
    for shape in tqdm(shapes, desc=f"measuring {options.model}", unit="shape", disable=None):
        if shape.depth > 0 and options.time_budget_s is not None and time.perf_counter() - started >= options.time_budget_s:
            outcome.over_budget[shape.kind] += 1
            continue
        if shape.kind == "mlp":
            needed = layer.activation_bytes(shape.a, element_size)
        elif _Attention.tokens_needed(shape) > attention.capacity:
            reason = f"K/V for {_Attention.tokens_needed(shape)} tokens exceeds the {attention.capacity} that fit in device memory"
            outcome.skipped.append({**shape.describe(), "reason": reason})
            continue
        else:
            needed = attention.transient_bytes(shape, element_size)
        if not _fits(torch, device, needed):
            outcome.skipped.append({**shape.describe(), "reason": f"needs about {needed / 2**30:.2f} GiB more device memory than is free"})
            continue
        try:
            backend, timed = _measure_shape(layer, attention, clock, shape, options.warmup, options.repeats)
        except _ShapeRejected as exc:
            outcome.skipped.append({**shape.describe(), "reason": str(exc)})
            continue
        except Exception as exc:
            if not _is_out_of_memory(torch, exc):
                raise
            outcome.skipped.append({**shape.describe(), "reason": f"out of memory: {str(exc).splitlines()[0]}"})
            continue
        finally:
            _free_memory(torch, device)
        outcome.timers[timed.timer] = outcome.timers.get(timed.timer, 0) + 1
        if timed.fallback is not None:
            outcome.timer_fallbacks.append({**shape.describe(), "timer": timed.timer, "reason": timed.fallback})
        if shape.kind == "mlp":
            outcome.mlp_rows.append(_mlp_row(cfg, shape.a, timed.stats, layer.ops()))
        else:
            outcome.backends.add(backend)
            outcome.attention_rows.append(_attention_row(cfg, shape, timed.stats, backend, options.block_size, max_kv))
    print(f"measured {len(outcome.mlp_rows) + len(outcome.attention_rows)} of {len(shapes)} shapes in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return outcome


def measure_profile(options: MeasureOptions) -> MeasuredProfile:
    """Time every shape of the grid on one device; a shape that does not fit is skipped, not fatal."""
    _check_options(options)
    cfg = model_config(options.model)
    max_kv = options.max_kv or min(cfg.max_model_len, DEFAULT_MAX_KV)
    shapes = build_shapes(options.grid, options.max_tokens, options.max_batch, max_kv)
    torch = _import_torch()
    device = _resolve_device(torch, options.device)
    if options.timer == "graph" and device.type != "cuda":
        raise ConfigError(f"--timer graph: CUDA graphs need a CUDA device, and this run measures on {device.type}")
    dtype_name = options.dtype if options.dtype != "auto" else ("float16" if device.type == "cuda" else "float32")
    torch.manual_seed(options.seed)
    with torch.inference_mode():
        outcome = _measure_grid(torch, cfg, device, getattr(torch, dtype_name), shapes, options, max_kv)

    mlp = pd.DataFrame(outcome.mlp_rows, columns=[c for op in MLP_OPS for c in stat_columns(op)] + list(MLP_KEY_COLUMNS))
    mlp = mlp.sort_values("num_tokens", ignore_index=True)
    attention = pd.DataFrame(outcome.attention_rows, columns=[c for op in ATTENTION_OPS for c in stat_columns(op)] + list(ATTENTION_KEY_COLUMNS))
    attention = attention.sort_values(["is_prefill", "prefill_chunk_size", "kv_cache_size", "batch_size"], ignore_index=True)
    metadata = {
        "source": "measured with PyTorch (python -m simulator.profiles measure)",
        "model": options.model,
        "measured_on": _device_facts(torch, device),
        "date": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "dtype": dtype_name,
        "timer": dict(sorted(outcome.timers.items())),
        "timer_requested": options.timer,
        "timer_fallbacks": outcome.timer_fallbacks,
        "units": "milliseconds per layer",
        "attention": "torch.nn.functional.scaled_dot_product_attention on contiguous K/V (not paged)",
        "attention_backends": sorted(f"sdpa_{b}" for b in outcome.backends),
        "ops_absent_from_model": outcome.absent_ops,
        "tensor_parallel_workers": 1,
        "block_size": options.block_size,
        "warmup": options.warmup,
        "repeats": options.repeats,
        "seed": options.seed,
        "time_budget_s": options.time_budget_s,
        "grid": {
            "kind": options.grid,
            "max_tokens": options.max_tokens,
            "max_batch": options.max_batch,
            "max_kv": max_kv,
            "shapes": {kind: sum(s.kind == kind for s in shapes) for kind in KIND_ORDER},
        },
        "measured_shapes": {
            "mlp": len(mlp),
            "decode": int((attention.prefill_chunk_size == 0).sum()),
            "prefill": int((attention.prefill_chunk_size > 0).sum()),
        },
        "skipped_for_time_budget": outcome.over_budget,
        "skipped": outcome.skipped,
    }
    return MeasuredProfile(mlp, attention, metadata)


# ---------------------------------------------------------------------------------------------
# Command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model name, e.g. meta-llama/Llama-2-7b-hf")
    parser.add_argument("--out", required=True, help="profile directory to write (mlp.csv, attention.csv, metadata.json)")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"), help="default: cuda when available")
    parser.add_argument("--dtype", default="auto", choices=("auto", *DTYPES), help="default: float16 on cuda, float32 on cpu")
    parser.add_argument("--grid", default="vidur", choices=GRIDS, help="vidur: Vidur's profiler grids; small: powers of two")
    parser.add_argument("--max-tokens", type=int, default=4096, help="largest num_tokens and prefill chunk (default 4096)")
    parser.add_argument("--max-batch", type=int, default=128, help="largest decode batch (default 128)")
    parser.add_argument("--max-kv", type=int, default=None, help="largest KV cache size; for prefill, earlier tokens plus chunk (default: the model's context, at most 4096)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per shape (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per shape first (default 3)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS", help="stop refining the grid after this long; corners are always measured")
    parser.add_argument("--timer", default="auto", choices=TIMERS, help="graph: replay each op from a CUDA graph, so CPU launch gaps are not timed (auto's choice on a GPU); event: CUDA events around eager launches")
    parser.add_argument("--attention-backend", default="auto", choices=ATTENTION_BACKENDS, help="SDPA kernel; auto tries flash, efficient, math")
    parser.add_argument("--block-size", type=int, default=16, help="block_size written into attention.csv for loaders that filter on it (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compress", action="store_true", help="write mlp.csv.xz and attention.csv.xz")
    parser.add_argument("--overwrite", action="store_true", help="replace the profile in a non-empty --out directory")


def _check_out_dir(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"--out {out}: directory exists and is not empty; pass --overwrite to replace its profile")


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    _check_out_dir(out, args.overwrite)
    options = MeasureOptions(
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        grid=args.grid,
        max_tokens=args.max_tokens,
        max_batch=args.max_batch,
        max_kv=args.max_kv,
        repeats=args.repeats,
        warmup=args.warmup,
        time_budget_s=args.time_budget,
        attention_backend=args.attention_backend,
        block_size=args.block_size,
        seed=args.seed,
        timer=args.timer,
    )
    profile = measure_profile(options)
    missing = [kind for kind, rows in profile.metadata["measured_shapes"].items() if rows == 0]
    if missing:
        reasons = "; ".join(f"{s['kind']}: {s['reason']}" for s in profile.metadata["skipped"][:3])
        raise ConfigError(f"no {' or '.join(missing)} shape of '{args.model}' could be measured here ({reasons}): no profile written")
    files = write_profile(out, profile.mlp, profile.attention, profile.metadata, compress=args.compress)
    for path in (files.mlp, files.attention, out / "metadata.json"):
        path.chmod(0o644)  # written through private temporary files; a profile is for everyone to read
    other_suffix = ".csv" if args.compress else ".csv.xz"  # a previous profile in the other format
    for stem in ("mlp", "attention"):
        (out / f"{stem}{other_suffix}").unlink(missing_ok=True)
    skipped = len(profile.metadata["skipped"]) + sum(profile.metadata["skipped_for_time_budget"].values())
    print(f"wrote {files.mlp}, {files.attention} ({len(profile.mlp)} + {len(profile.attention)} rows; {skipped} shapes skipped)")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m simulator.profiles.measure", description=__doc__.split("\n\n")[0])
    add_arguments(_parser)
    try:
        sys.exit(main(_parser.parse_args()))
    except ConfigError as _exc:
        print(f"error: {_exc}", file=sys.stderr)
        sys.exit(2)
