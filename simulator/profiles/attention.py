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
* ``flashinfer`` (Blackwell; vLLM's default on compute capability 10): costed with the same CTA
  model and the device's own fractions (the B200's are the H100's, carried over until measured).
* ``flash_attn_2`` (Ampere): the decode and prefill kernels fitted on Vidur's measured A100
  FlashAttention profile (:mod:`simulator.profiles.roofline`), summed.

Layer kinds (:class:`simulator.models.shapes.LayerKind`):

* ``sliding``: a query sees at most ``window`` keys, so a decode or verify row of q queries over
  kv cached tokens reads min(kv, window + q - 1) of them, and a prefill tile's keys are capped at
  window + its 128 queries;
* multi-head latent attention (``shape.mla``), FlashMLA's decode kernel: a row's queries and
  its ``heads`` query heads are packed into 64-row tiles (``q_seq_per_hk``) over the latent read
  once, so a row of q queries costs

      max(kv x latent x b / (HBM bandwidth x mla_decode_bandwidth_eff),
          ceil(q heads / 64) x 64 x kv x 2 (latent + kv_lora_rank) / (BF16 peak x mla_decode_compute_eff))

  (b: bytes per cached element); prefill runs FlashAttention over the heads' up-projected keys
  (qk head dim nope + rope, V head dim v), after up-projecting the cached prefix's latent
  (kv_b_proj) for the chunk's context;
* ``linear`` (Gated DeltaNet): a decode or verify row of q tokens reads its recurrent state once
  and writes q states (vLLM keeps one per speculative position to roll back), every state
  ``value heads x key_head_dim x value_head_dim`` 16-bit elements; a prefill chunk runs the
  chunked delta rule, 6 key_head_dim x value_head_dim FLOPs per token and value head at
  ``prefill_compute_eff`` of the BF16 peak, reading and writing the state once.

Decode and verify rows go through :func:`simulator.speculative.verify_cost.verify_attention_ms`,
the one definition of the verify assumptions: ``kv_once`` (a row's KV read once for all its
queries, what ``pack_gqa`` does; the default), ``per_token`` (every query pays a read) and
``interpolated``.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import DENSE_LAYER, LayerKind, ModelShape
from simulator.speculative.verify_cost import DEFAULT_ATTENTION, DEFAULT_INTERPOLATION, DecodeLookup, blend, verify_attention_ms

KV_BLOCK = 128  # keys per tile (FlashAttention-3, head dim <= 128)
QUERY_TILE = 128  # queries per prefill tile
MLA_HEAD_TILE = 64  # FlashMLA packs (queries x heads) of a row into tiles of 64
BACKENDS = ("flash_attn_3", "flashinfer", "flash_attn_2")
CTA_BACKENDS = ("flash_attn_3", "flashinfer")
# chunked delta rule: state update, output and inter-chunk terms, 2 FLOPs per state element each
GDN_FLOPS_PER_STATE_ELEMENT = 6


class AttentionRows(NamedTuple):
    """A step's attention work: decode/verify rows as (queries, cached tokens including the step's
    own), prefill chunks as (chunk, tokens cached before it).  A NamedTuple: one is built per step
    and draft pass."""

    decode: tuple[tuple[int, int], ...] = ()
    prefill: tuple[tuple[int, int], ...] = ()


def _head_bytes_per_token(shape: ModelShape) -> float:
    """K and V of one token for one KV head, in the cache's dtype."""
    return 2 * shape.head_dim * shape.precision.kv_bytes


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


def fa3_prefill_ms(chunk: int, cached: int, shape: ModelShape, dev: DeviceSpec, window: int = 0, head_dim: float = 0) -> float:
    """FlashAttention-3's work for one prefill chunk of ``chunk`` queries after ``cached`` tokens,
    without the call's fixed time; ``window`` > 0 caps the keys a query sees; ``head_dim``: the
    mean of the QK and V head dims where they differ (MLA's prefill), else the shape's."""
    a, d = dev.attention, dev.datasheet
    sms = d.num_sms
    sm_flops = d.peak_fp16_tflops * 1e12 * a.prefill_compute_eff / sms
    # seconds per key of one query tile: its two matrix multiplies (QK^T and PV); K and V stream in
    # behind them (TMA, shared through L2 by the query tiles and heads of a KV head)
    per_key = 4 * QUERY_TILE * (head_dim or shape.head_dim) / sm_flops
    # causal: tile i's last query sees every cached key and the chunk up to itself; a partial last
    # tile still runs a whole tile's matrix multiplies
    full, partial = divmod(chunk, QUERY_TILE)
    tiles = full + (partial > 0)
    if window:
        # tile i (0-based) sees cached + (i + 1) x 128 keys (the last: cached + chunk), at most
        # window + 128 of them
        seen = np.minimum(cached + np.minimum((np.arange(tiles) + 1) * QUERY_TILE, chunk), window + QUERY_TILE)
        keys, longest_keys = float(seen.sum()), float(seen.max())
    else:
        keys = tiles * cached + QUERY_TILE * full * (full + 1) // 2 + (chunk if partial else 0)
        longest_keys = cached + chunk
    total = shape.q_heads_per_worker * keys * per_key
    longest = longest_keys * per_key
    return max(total / sms, longest) * 1e3


def mla_decode_ms(rows, shape: ModelShape, dev: DeviceSpec) -> float:
    """FlashMLA-style decode of ``rows`` = [(queries, cached tokens), ...], without the call's
    fixed time (module docstring)."""
    if not rows:
        return 0.0
    mla, a, d = shape.mla, dev.attention, dev.datasheet
    q = np.array([r[0] for r in rows], dtype=float)
    kv = np.array([r[1] for r in rows], dtype=float)
    heads = shape.q_heads_per_worker
    tiles = np.ceil(q * heads / MLA_HEAD_TILE)
    bytes_read = float((kv * mla.latent_dim * shape.precision.kv_bytes).sum())
    flops = float((tiles * MLA_HEAD_TILE * kv * 2 * (mla.latent_dim + mla.kv_lora_rank)).sum())
    memory = bytes_read / (d.hbm_bandwidth_tbps * 1e12 * a.mla_decode_bandwidth_eff)
    compute = flops / (d.peak_fp16_tflops * 1e12 * a.mla_decode_compute_eff)
    return max(memory, compute) * 1e3


def mla_prefill_ms(chunk: int, cached: int, shape: ModelShape, dev: DeviceSpec) -> float:
    """MLA's prefill: the cached prefix's latent up-projected to keys and values (kv_b_proj, for
    the chunk's context; the chunk's own tokens' up-projection is the linear part's), then
    FlashAttention over ``heads`` heads of QK dim nope + rope and V dim v."""
    mla = shape.mla
    heads = shape.q_heads_per_worker
    up = float(roofline.gemm_ms(cached, heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank, dev)) if cached else 0.0
    head_dim = (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim) / 2
    return up + fa3_prefill_ms(chunk, cached, shape, dev, head_dim=head_dim)


def gdn_state_bytes(shape: ModelShape) -> float:
    """One sequence's recurrent state on one worker (16-bit)."""
    lin = shape.linear
    return lin.num_value_heads // shape.tensor_parallel * lin.key_head_dim * lin.value_head_dim * roofline.BYTES


def linear_attention_ms(rows: AttentionRows, shape: ModelShape, dev: DeviceSpec) -> float:
    """Gated DeltaNet's recurrence over a step's rows, without the call's fixed time."""
    a, d = dev.attention, dev.datasheet
    state = gdn_state_bytes(shape)
    bandwidth = d.hbm_bandwidth_tbps * 1e12 * (a.decode_bandwidth_eff or dev.constants.add_eff)
    decode = sum((1 + q) * state for q, _ in rows.decode) / bandwidth
    lin = shape.linear
    flops_per_token = GDN_FLOPS_PER_STATE_ELEMENT * lin.num_value_heads // shape.tensor_parallel * lin.key_head_dim * lin.value_head_dim
    prefill_eff = a.prefill_compute_eff or dev.constants.prefill_compute_eff
    prefill = sum(
        max(chunk * flops_per_token / (d.peak_fp16_tflops * 1e12 * prefill_eff), 2 * state / bandwidth) for chunk, _ in rows.prefill
    )
    return (decode + prefill) * 1e3


def _windowed(rows: tuple[tuple[int, int], ...], window: int) -> tuple[tuple[int, int], ...]:
    return tuple((q, min(kv, window + q - 1)) for q, kv in rows)


def _mla_rows_ms(rows, shape: ModelShape, dev: DeviceSpec, mode: str, interpolation: float) -> float:
    """MLA's decode under the run's verify assumption: ``kv_once`` is the kernel's own packing (a
    row's queries share one read of the latent); ``per_token`` runs every query as its own row."""
    once = mla_decode_ms(rows, shape, dev)
    if mode == "kv_once":
        return once
    return blend(once, mla_decode_ms([(1, kv) for q, kv in rows for _ in range(q)], shape, dev), mode, interpolation)


def decode_lookup(shape: ModelShape, dev: DeviceSpec) -> DecodeLookup:
    """The device backend's decode kernel for ``shape``: (sequences, mean cached tokens) -> ms,
    without the call's fixed time (what :func:`verify_attention_ms` charges decode rows with)."""
    if dev.attention.backend in CTA_BACKENDS:
        return lambda b, kv: fa3_decode_ms(b, kv, shape, dev)
    return lambda b, kv: float(roofline.decode_attention_ms(b, kv, shape, dev))


def attention_ms(
    rows: AttentionRows, shape: ModelShape, dev: DeviceSpec, mode: str = DEFAULT_ATTENTION, interpolation: float = DEFAULT_INTERPOLATION, kind: LayerKind = DENSE_LAYER,
    decode_ms: Optional[DecodeLookup] = None,
) -> float:
    """The step's attention on one worker, for one layer of ``kind``, by the device's backend.
    ``decode_ms``: :func:`decode_lookup` of ``shape`` and ``dev``, when the caller keeps one (a
    step model memoises it)."""
    backend = dev.attention.backend
    if backend not in BACKENDS:
        raise ValueError(f"device '{dev.name}': unknown attention backend {backend!r}; expected one of {BACKENDS}")
    if not rows.decode and not rows.prefill:
        return 0.0
    window = kind.window if kind.attention == "sliding" else 0
    decode_rows = _windowed(rows.decode, window) if window else rows.decode
    if kind.attention == "linear":
        return dev.attention.kernel_us * 1e-3 + linear_attention_ms(rows, shape, dev)
    if shape.mla is not None:
        if not dev.attention.mla_backend:
            raise ValueError(f"device '{dev.name}': no MLA attention backend is modelled")
        decode = _mla_rows_ms(decode_rows, shape, dev, mode, interpolation)
        prefill = sum(mla_prefill_ms(chunk, cached, shape, dev) for chunk, cached in rows.prefill)
        return dev.attention.kernel_us * 1e-3 + decode + prefill
    decode = verify_attention_ms(decode_rows, decode_ms or decode_lookup(shape, dev), mode, interpolation)
    if backend in CTA_BACKENDS:
        prefill = sum(fa3_prefill_ms(chunk, cached, shape, dev, window) for chunk, cached in rows.prefill)
        return dev.attention.kernel_us * 1e-3 + decode + prefill
    # FlashAttention-2's fitted prefill kernel has no window: a windowed chunk is costed over the
    # window's share of its prefix
    return decode + sum(float(roofline.prefill_attention_ms(chunk, min(cached, window) if window else cached, shape, dev)) for chunk, cached in rows.prefill)
