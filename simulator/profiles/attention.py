"""A step's attention, as the GPU's attention backend runs it (pure, no I/O).

vLLM V1 runs a step's attention as one varlen kernel over every row of the batch: decode rows
(one query), verify rows (k' + 1 queries) and prefill chunks together (``FlashAttentionImpl``).
The backend is the device's (``[<device>.attention]`` in devices.toml):

* ``flash_attn_3`` (Hopper; vLLM's default on compute capability 9): decode rows give one thread
  block (CTA) per KV head, a row's query heads and verify queries packed into one 64-row tile
  (``pack_gqa``; vLLM's decode tile), split along the KV axis when the grid is small
  (FlashAttention's split heuristic, then a combine kernel).  They stream K and V at
  ``decode_bandwidth_eff`` of the HBM bandwidth, multi-head attention too (its one query head per
  KV head pads the tile, but 64 padded rows are 64 FLOP per byte of K and V, under the ridge), and
  no CTA finishes before its own share streams at one SM's part of it.  Prefill
  chunks give one CTA per (query head, 128-query tile), each computing against the keys its causal
  mask admits at ``prefill_compute_eff`` of the FP16 tensor peak (one SM's share for the longest
  tile, which no other SM can help).  The call pays ``kernel_us`` once.
* ``flash_attn_2`` (Ampere): the decode and prefill kernels fitted on Vidur's measured A100
  FlashAttention profile (:mod:`simulator.profiles.roofline`), summed.

Decode and verify rows go through :func:`simulator.speculative.verify_cost.verify_attention_ms`,
the one definition of the verify assumptions: ``kv_once`` (a row's KV read once for all its
queries, what ``pack_gqa`` does; the default), ``per_token`` (every query pays a read) and
``interpolated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.shapes import ModelShape
from simulator.speculative.verify_cost import verify_attention_ms

KV_BLOCK = 128  # keys per tile (FlashAttention-3, head dim <= 128)
QUERY_TILE = 128  # queries per prefill tile
BACKENDS = ("flash_attn_3", "flash_attn_2")


@dataclass(frozen=True)
class AttentionRows:
    """A step's attention work: decode/verify rows as (queries, cached tokens including the step's
    own), prefill chunks as (chunk, tokens cached before it)."""

    decode: tuple[tuple[int, int], ...] = ()
    prefill: tuple[tuple[int, int], ...] = ()


def _head_bytes_per_token(shape: ModelShape) -> int:
    """K and V of one token for one KV head, 16-bit."""
    return 2 * shape.head_dim * roofline.BYTES


def fa3_decode_ms(batch: int, mean_kv: float, shape: ModelShape, dev: DeviceSpec) -> float:
    """FlashAttention-3's decode work for ``batch`` sequences of ``mean_kv`` cached tokens, without
    the call's fixed time."""
    if batch <= 0:
        return 0.0
    a, d = dev.attention, dev.datasheet
    kv_heads = shape.kv_heads_per_worker
    bandwidth = d.hbm_bandwidth_tbps * 1e12 * a.decode_bandwidth_eff
    splits = roofline.kv_splits(batch * kv_heads, max(1, math.ceil(mean_kv / KV_BLOCK)), d.num_sms)
    streaming = batch * kv_heads * mean_kv * _head_bytes_per_token(shape) / bandwidth
    one_cta = mean_kv / splits * _head_bytes_per_token(shape) / (bandwidth / d.num_sms)
    seconds = max(streaming, one_cta) + (a.combine_us * 1e-6 if splits > 1 else 0.0)
    return seconds * 1e3


def fa3_prefill_ms(chunk: int, cached: int, shape: ModelShape, dev: DeviceSpec) -> float:
    """FlashAttention-3's work for one prefill chunk of ``chunk`` queries after ``cached`` tokens,
    without the call's fixed time."""
    a, d = dev.attention, dev.datasheet
    sms = d.num_sms
    sm_flops = d.peak_fp16_tflops * 1e12 * a.prefill_compute_eff / sms
    # seconds per key of one query tile: its two matrix multiplies (QK^T and PV); K and V stream in
    # behind them (TMA, shared through L2 by the query tiles and heads of a KV head)
    per_key = 4 * QUERY_TILE * shape.head_dim / sm_flops
    # causal: tile i's last query sees every cached key and the chunk up to itself; a partial last
    # tile still runs a whole tile's matrix multiplies
    full, partial = divmod(chunk, QUERY_TILE)
    tiles = full + (partial > 0)
    keys = tiles * cached + QUERY_TILE * full * (full + 1) // 2 + (chunk if partial else 0)
    total = shape.q_heads_per_worker * keys * per_key
    longest = (cached + chunk) * per_key
    return max(total / sms, longest) * 1e3


def attention_ms(rows: AttentionRows, shape: ModelShape, dev: DeviceSpec, mode: str = "kv_once", interpolation: float = 0.0) -> float:
    """The step's attention on one worker, per layer, by the device's backend."""
    backend = dev.attention.backend
    if backend == "flash_attn_3":
        if not rows.decode and not rows.prefill:
            return 0.0
        decode = verify_attention_ms(rows.decode, lambda b, kv: fa3_decode_ms(b, kv, shape, dev), mode, interpolation)
        prefill = sum(fa3_prefill_ms(chunk, cached, shape, dev) for chunk, cached in rows.prefill)
        return dev.attention.kernel_us * 1e-3 + decode + prefill
    if backend == "flash_attn_2":
        decode = verify_attention_ms(rows.decode, lambda b, kv: float(roofline.decode_attention_ms(b, kv, shape, dev)), mode, interpolation)
        return decode + sum(float(roofline.prefill_attention_ms(chunk, cached, shape, dev)) for chunk, cached in rows.prefill)
    raise ValueError(f"device '{dev.name}': unknown attention backend {backend!r}; expected one of {BACKENDS}")
