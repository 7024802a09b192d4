"""Physical execution-time model of one transformer layer's kernels (pure numpy, no I/O).

Every function returns milliseconds per layer, the unit of Vidur's profiles.  The model is a
roofline (FLOPs against bytes moved) refined by the effects that dominate measured profiles:

* GEMMs: work is issued in the device library's tiles (64x64, two CTAs per SM, on the A100;
  128x256, one per SM, on Hopper: ``KernelShapes``); a partial last wave still costs a
  good part of a full one, and every tile pays a fixed prologue/epilogue (``k_overhead``).
* RMSNorm: one CTA per token row, so time grows in waves of ``2 * SMs`` rows, each wave
  latency-bound (longer for wider rows where a device's fit saw several widths); slower once the
  working set spills out of L2.
* Element-wise kernels: bytes over bandwidth, faster while the working set fits in L2.
* Decode attention: one CTA per (sequence, KV head), two per SM; the first wave is
  latency-bound, later waves stream at full bandwidth, the tail wave is limited per SM.
  Small grids are split along the KV axis as FlashAttention's split-KV heuristic does.
  This is why decode time steps up at batch 7, 14, 21, 28 with 32 heads on 108 SMs.
* Prefill attention: 64x128 tiles over the rectangle chunk x (context + chunk), in waves.

The ``*_launch_us`` constants are each kernel family's fitted intercept: the kernel's duration as
its size vanishes (the ramp of its first wave, its prologue and epilogue), fitted on kernel
durations alone (Vidur's profiler sums the GPU kernels' own durations, not the CPU's launches).  A
CUDA graph replays that duration unchanged; the gap between kernels and the CPU's launch costs are
the engine's (:mod:`simulator.profiles.engines`, :mod:`simulator.profiles.step`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simulator.models.shapes import ModelShape  # noqa: F401  (the shapes every cost function takes)
from simulator.profiles.hardware import DeviceSpec

CTAS_PER_SM = 2
NORM_REFERENCE_WIDTH = 4096  # the row width the norm constants are stated at (Llama-2-7B's)
PREFILL_TILE_M = 64
KV_TILE_N = 128
BYTES = 2  # fp16 / bf16


def _us(x):
    return np.asarray(x, dtype=float) * 1e-6


def _partial_waves(waves: np.ndarray, exponent: float) -> np.ndarray:
    whole = np.floor(waves)
    return whole + (waves - whole) ** exponent


def gemm_ms(m, n: int, k: int, dev: DeviceSpec, weight_bytes: float = BYTES, act_bytes: float = BYTES, dtype: str = "bf16") -> np.ndarray:
    """y[m, n] = x[m, k] @ W[k, n], in the device's GEMM tiles (``dev.kernels``).

    ``weight_bytes`` / ``act_bytes``: bytes per element of W and of x (FP8: 1; the 4-bit
    formats a little over 0.5 with their block scales); ``dtype``: the tensor-core dtype it
    computes in, whose dense peak bounds the compute ("bf16", "fp8", "fp4").  The output is
    16-bit."""
    c, d, shapes = dev.constants, dev.datasheet, dev.kernels
    m = np.asarray(m, dtype=float)
    peak = d.peak_tflops(dtype) * 1e12 * c.gemm_compute_eff
    tiles = np.ceil(m / shapes.gemm_tile_m) * math.ceil(n / shapes.gemm_tile_n)
    slots = d.num_sms * shapes.gemm_ctas_per_sm
    waves = _partial_waves(tiles / slots, c.gemm_tail_exponent)
    flops_per_wave = 2 * shapes.gemm_tile_m * shapes.gemm_tile_n * (k + c.gemm_k_overhead) * slots
    compute = waves * flops_per_wave / peak
    memory = (act_bytes * m * k + weight_bytes * n * k + BYTES * m * n) / (d.hbm_bandwidth_tbps * 1e12 * c.gemm_memory_eff)
    # near the ridge point neither side hides the other completely: part of the shorter (useful,
    # unpadded) one shows
    useful = 2 * m * n * k / peak
    exposed = np.maximum(compute, memory) + c.gemm_overlap_loss * np.minimum(useful, memory)
    return (_us(c.gemm_launch_us) + exposed) * 1e3


def _l2_resident_fraction(working_set_bytes: np.ndarray, dev: DeviceSpec) -> np.ndarray:
    l2 = dev.datasheet.l2_cache_mib * 2**20
    return np.minimum(1.0, l2 / np.maximum(working_set_bytes, 1.0))


def rmsnorm_ms(tokens, width: int, dev: DeviceSpec) -> np.ndarray:
    c, d = dev.constants, dev.datasheet
    tokens = np.asarray(tokens, dtype=float)
    # input, output and the residual stream it is fused with
    hit = _l2_resident_fraction(3 * tokens * width * BYTES, dev)
    waves = _partial_waves(tokens / (d.num_sms * CTAS_PER_SM), c.norm_tail_exponent)
    width_scale = (width / NORM_REFERENCE_WIDTH) ** dev.kernels.norm_width_exponent
    per_wave = (c.norm_wave_l2_us * hit + c.norm_wave_hbm_us * (1 - hit)) * width_scale
    return (_us(c.norm_launch_us) + waves * _us(per_wave)) * 1e3


def streaming_ms(total_bytes, efficiency: float, dev: DeviceSpec) -> np.ndarray:
    c, d = dev.constants, dev.datasheet
    total_bytes = np.asarray(total_bytes, dtype=float)
    hit = _l2_resident_fraction(total_bytes, dev)
    bandwidth = d.hbm_bandwidth_tbps * 1e12 * efficiency * ((1 - hit) + c.l2_bandwidth_gain * hit)
    return (_us(c.elementwise_launch_us) + total_bytes / bandwidth) * 1e3


def mlp_side_ms(tokens, shape: ModelShape, dev: DeviceSpec) -> dict[str, np.ndarray]:
    """Every non-attention op of Vidur's ``mlp.csv`` on one tensor-parallel worker, keyed by Vidur's op names."""
    c = dev.constants
    tokens = np.asarray(tokens, dtype=float)
    h, f, hd = shape.embedding_dim, shape.mlp_hidden_per_worker, shape.head_dim
    up_width = 2 * f if shape.use_gated_mlp else f
    act_bytes = tokens * (up_width + f) * BYTES  # read gate and up, write the product
    residual_bytes = tokens * 3 * h * BYTES  # read two streams, write one
    rope_bytes = tokens * 2 * (shape.q_heads_per_worker + shape.kv_heads_per_worker) * hd * BYTES
    return {
        # gathering one row per token: the same streaming kernel as the residual add
        "emb": streaming_ms(tokens * 2 * h * BYTES, c.add_eff, dev),
        "input_layernorm": rmsnorm_ms(tokens, h, dev),
        "attn_pre_proj": gemm_ms(tokens, shape.qkv_dim, h, dev),
        "attn_rope": streaming_ms(rope_bytes, c.rope_eff, dev),
        "attn_post_proj": gemm_ms(tokens, h, shape.q_heads_per_worker * hd, dev),
        "post_attention_layernorm": rmsnorm_ms(tokens, h, dev),
        "mlp_up_proj": gemm_ms(tokens, up_width, h, dev),
        "mlp_act": streaming_ms(act_bytes, c.act_eff, dev),
        "mlp_down_proj": gemm_ms(tokens, h, f, dev),
        "add": streaming_ms(residual_bytes, c.add_eff, dev),
    }


def kv_cache_save_ms(tokens, shape: ModelShape, dev: DeviceSpec) -> np.ndarray:
    """Writing new K and V into the paged cache: a copy, costed like the residual add."""
    tokens = np.asarray(tokens, dtype=float)
    copy_bytes = tokens * 2 * 2 * shape.kv_heads_per_worker * shape.head_dim * BYTES
    return streaming_ms(copy_bytes, dev.constants.add_eff, dev)


@lru_cache(maxsize=65536)
def kv_splits(ctas: int, kv_blocks: int, num_sms: int) -> int:
    """Number of KV splits FlashAttention's split-KV heuristic picks for a small grid.

    Splitting is used only when the grid covers under 80% of the SMs; among the split
    counts that change the per-split block count, the smallest whose wave efficiency is
    within 85% of the best is chosen.
    """
    if ctas >= 0.8 * num_sms:
        return 1
    limit = max(1, min(128, num_sms, kv_blocks))
    efficiency = {}
    for splits in range(1, limit + 1):
        distinct = splits == 1 or math.ceil(kv_blocks / splits) != math.ceil(kv_blocks / (splits - 1))
        if not distinct:
            efficiency[splits] = 0.0
            continue
        waves = ctas * splits / num_sms
        efficiency[splits] = waves / math.ceil(waves)
    best = max(efficiency.values())
    return next(s for s in range(1, limit + 1) if efficiency[s] >= 0.85 * best)


def _split_grid(ctas: np.ndarray, kv_blocks: np.ndarray, num_sms: int) -> np.ndarray:
    """kv_splits over arrays of grid sizes."""
    flat = [kv_splits(int(n), int(b), num_sms) for n, b in zip(ctas.ravel(), kv_blocks.ravel())]
    return np.array(flat, dtype=float).reshape(ctas.shape)


def decode_attention_ms(batch, kv, shape: ModelShape, dev: DeviceSpec) -> np.ndarray:
    """Decode attention for ``batch`` sequences with ``kv`` cached tokens each (one query each)."""
    c, d = dev.constants, dev.datasheet
    batch = np.asarray(batch, dtype=float)
    kv = np.asarray(kv, dtype=float)
    batch, kv = np.broadcast_arrays(batch, kv)
    sms = d.num_sms
    slots = sms * CTAS_PER_SM
    ctas = batch * shape.kv_heads_per_worker * math.ceil(shape.gqa_group / PREFILL_TILE_M)
    kv_blocks = np.maximum(1, np.ceil(kv / KV_TILE_N))
    splits = _split_grid(ctas, kv_blocks, sms)
    ctas = ctas * splits
    cta_bytes = np.ceil(kv / splits) * shape.head_dim * 2 * BYTES  # K and V of one head
    bandwidth = d.hbm_bandwidth_tbps * 1e12
    eff = c.decode_first_wave_eff + (c.decode_short_kv_eff - c.decode_first_wave_eff) * np.exp(
        -kv / c.decode_short_kv_tokens
    )
    full = np.floor(ctas / slots)
    tail = ctas - full * slots
    first_wave = slots * cta_bytes / (bandwidth * eff)
    streamed_wave = first_wave / c.decode_stream_gain
    lone_cta = cta_bytes / (c.decode_sm_gbps * 1e9)  # one CTA streaming alone on an SM
    # A lone partial wave is set by its busiest SM: one CTA, or two sharing the SM (partly
    # relieved while few SMs double up).  A tail behind full waves overlaps their drain and
    # grows smoothly from one CTA's time towards a full wave's.
    doubled = np.clip((tail - sms) / sms, 0.0, 1.0)
    per_sm_load = np.where(tail > sms, 1 + c.decode_doubling_penalty + (1 - c.decode_doubling_penalty) * doubled, 1.0)
    lone_wave = np.maximum(per_sm_load * lone_cta, tail * cta_bytes / (bandwidth * eff))
    trailing_wave = lone_cta + np.maximum(first_wave - lone_cta, 0.0) * tail / slots
    tail_time = np.where(tail > 0, np.where(full > 0, trailing_wave, lone_wave), 0.0)
    seconds = (
        _us(c.decode_fixed_us)
        + batch * _us(c.decode_per_seq_us)
        + np.minimum(full, 1) * first_wave
        + np.maximum(full - 1, 0) * streamed_wave
        + tail_time
        + (splits > 1) * _us(c.split_combine_us)
    )
    return seconds * 1e3


def prefill_attention_ms(chunk, kv, shape: ModelShape, dev: DeviceSpec) -> np.ndarray:
    """Prefill attention for one request: ``chunk`` new tokens after ``kv`` cached ones."""
    c, d = dev.constants, dev.datasheet
    chunk = np.asarray(chunk, dtype=float)
    kv = np.asarray(kv, dtype=float)
    chunk, kv = np.broadcast_arrays(chunk, kv)
    sms = d.num_sms
    slots = sms * CTAS_PER_SM
    ctas = np.ceil(chunk / PREFILL_TILE_M) * shape.q_heads_per_worker
    kv_blocks = np.ceil((kv + chunk) / KV_TILE_N)
    splits = _split_grid(ctas, kv_blocks, sms)
    ctas = ctas * splits
    blocks_per_cta = np.ceil(kv_blocks / splits) + c.prefill_cta_overhead_blocks
    full = np.floor(ctas / slots)
    tail = ctas - full * slots
    tail_waves = np.where(
        tail > 0,
        c.prefill_tail_weight * np.ceil(tail / sms) / CTAS_PER_SM + (1 - c.prefill_tail_weight) * tail / slots,
        0.0,
    )
    block_flops = 4 * PREFILL_TILE_M * KV_TILE_N * shape.head_dim
    block_seconds = block_flops * CTAS_PER_SM / (d.peak_fp16_tflops * 1e12 / sms * c.prefill_compute_eff)
    seconds = (
        _us(c.prefill_fixed_us)
        + (full + tail_waves) * blocks_per_cta * block_seconds
        + (splits > 1) * _us(c.split_combine_us)
    )
    return seconds * 1e3


# Kernels a sampling step launches over the logits (cast, temperature/softmax, argmax or
# sample, gather of the chosen ids): each one streams the fp32 logits once.
SAMPLER_PASSES = 3
SAMPLER_KERNELS = 4


def lm_head_ms(tokens, shape: ModelShape, dev: DeviceSpec) -> np.ndarray:
    """Logits for ``tokens`` rows on one worker: [tokens, h] @ [h, vocab / TP] (vLLM shards the vocabulary)."""
    return gemm_ms(tokens, -(-shape.vocab_size // shape.tensor_parallel), shape.embedding_dim, dev)


def sampler_ms(tokens, shape: ModelShape, dev: DeviceSpec) -> np.ndarray:
    """Sampling from gathered fp32 logits over the full vocabulary: a few streaming passes.

    An estimate from first principles (no profile measures it yet): SAMPLER_PASSES reads of
    tokens x vocab x 4 bytes at the element-wise efficiency, plus the kernels' launches.
    """
    c = dev.constants
    tokens = np.asarray(tokens, dtype=float)
    logits_bytes = tokens * shape.vocab_size * 4
    stream = streaming_ms(SAMPLER_PASSES * logits_bytes, c.act_eff, dev)
    return stream + (SAMPLER_KERNELS - 1) * _us(c.elementwise_launch_us) * 1e3
