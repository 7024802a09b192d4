"""Routing and the grouped GEMM of a mixture-of-experts FFN (pure numpy, no I/O).

**Routing.**  Each of a step's T tokens picks ``k`` of the ``E`` experts.  Expert i is picked by
a token with probability q_i (sum_i q_i = k).  Tokens route independently, so the number of the
step's tokens expert i receives is Binomial(T, q_i), and

    E[experts touched]  = sum_i 1 - (1 - q_i)^T          (uniform: E (1 - (1 - k/E)^T))
    E[routed rows]      = T sum_i q_i = T k

Uniform routing (q_i = k/E) is the default: what a load-balanced router (an auxiliary loss or
DeepSeek's bias correction) aims for.  ``skew`` s > 0 gives the experts a Zipf popularity,
q_i proportional to (i + 1)^-s, capped at 1 (a token picks an expert at most once) with the
excess spread over the others; skewed routing touches fewer experts, so it streams fewer weights.
Group-limited routing (DeepSeek-V3's 8 groups, top 4) constrains each token, not the
distribution: it is treated as uniform.

**The fused MoE kernel** (vLLM's Triton ``fused_moe``): the routed rows are sorted by expert and
padded to ``BLOCK_SIZE_M`` per expert (``moe_align_block_size``); each touched expert's rows are
one GEMM against that expert's weights, all in one launch.  Per GEMM of output width n and depth
k, with U experts touched and R routed rows (mean R / U rows per touched expert):

    padded rows  P = B U ceil((R / U) / B)
    compute      2 P n k / (peak(dtype) x gemm_compute_eff)
    memory       (U n k w + R k a + 2 R n) / (HBM bandwidth x gemm_memory_eff)
    time         launch + max(compute, memory) + overlap_loss x min(2 R n k / peak, memory)

(w, a: bytes per weight and per input element).  B is vLLM's default ``BLOCK_SIZE_M``: 16 when
the step has at most E tokens, else 64, and 64 for FP8 block-quantized weights
(``fused_moe.get_default_config``).  The per-kernel constants are the device's dense GEMM ones,
carried over (no MoE kernel has been measured).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import MoEShape

SMALL_BLOCK_M, LARGE_BLOCK_M, FP8_BLOCK_M = 16, 64, 64


@lru_cache(maxsize=64)
def _probabilities(num_experts: int, top_k: int, skew: float) -> tuple[float, ...]:
    if skew == 0:
        return (top_k / num_experts,) * num_experts
    weights = (np.arange(num_experts) + 1.0) ** -skew
    q = top_k * weights / weights.sum()
    capped = np.zeros(num_experts, dtype=bool)
    while (q > 1 + 1e-12).any():  # water-filling: an expert is picked at most once per token
        capped |= q >= 1
        excess = q[capped].sum() - capped.sum()
        q[capped] = 1.0
        free = ~capped
        q[free] += excess * weights[free] / weights[free].sum()
    return tuple(float(x) for x in q)


def routing_probabilities(num_experts: int, top_k: int, skew: float = 0.0) -> np.ndarray:
    """q_i: the probability that a token is routed to expert i (sum k), uniform or Zipf-skewed."""
    if not 0 < top_k <= num_experts:
        raise ValueError(f"top_k = {top_k} must be in 1..num_experts = {num_experts}")
    if skew < 0:
        raise ValueError(f"routing skew {skew} must be >= 0")
    return np.array(_probabilities(num_experts, top_k, float(skew)))


def local_probabilities(moe: MoEShape, tensor_parallel: int) -> np.ndarray:
    """The routing probabilities of the experts one GPU runs: every expert (their widths split
    over the TP group), or with expert parallelism the ``E / EP`` experts of the busiest GPU
    (EP = DP x TP).  Experts are placed round-robin by popularity, so the busiest GPU holds the
    most popular one and every EP-th after it (with uniform routing every GPU is alike)."""
    q = routing_probabilities(moe.num_experts, moe.experts_per_token, moe.routing_skew)
    return q[::moe.expert_groups(tensor_parallel)] if moe.expert_parallel else q


def expected_touched(tokens, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E[experts touched], E[routed rows]) among the experts of ``q`` for a step of ``tokens``."""
    t = np.asarray(tokens, dtype=float)
    values, counts = np.unique(q, return_counts=True)
    touched = np.zeros_like(t)
    for value, count in zip(values, counts):
        touched += count * (1.0 - np.exp(t * np.log1p(-min(value, 1 - 1e-15))))
    return touched, t * float(q.sum())


def block_m(tokens, num_experts: int, fp8_blocks: bool) -> np.ndarray:
    """vLLM's default BLOCK_SIZE_M for the fused MoE kernel at a step of ``tokens`` tokens."""
    t = np.asarray(tokens, dtype=float)
    if fp8_blocks:
        return np.full_like(t, FP8_BLOCK_M)
    return np.where(t <= num_experts, SMALL_BLOCK_M, LARGE_BLOCK_M)


def grouped_gemm_ms(touched, rows, n: int, k: int, block, dev: DeviceSpec, weight_bytes: float, act_bytes: float, dtype: str) -> np.ndarray:
    """One fused MoE GEMM: ``touched`` experts' GEMMs of width ``n`` and depth ``k`` over ``rows``
    routed rows in all, padded to ``block`` rows per expert (module docstring)."""
    c, d = dev.constants, dev.datasheet
    touched = np.asarray(touched, dtype=float)
    rows = np.asarray(rows, dtype=float)
    per_expert = rows / np.maximum(touched, 1e-12)
    padded = block * touched * np.ceil(per_expert / block)
    peak = d.peak_tflops(dtype) * 1e12 * c.gemm_compute_eff
    compute = 2 * padded * n * k / peak
    useful = 2 * rows * n * k / peak
    memory = (touched * n * k * weight_bytes + rows * k * act_bytes + rows * n * roofline.BYTES) / (d.hbm_bandwidth_tbps * 1e12 * c.gemm_memory_eff)
    exposed = np.maximum(compute, memory) + c.gemm_overlap_loss * np.minimum(useful, memory)
    return (c.gemm_launch_us * 1e-6 + exposed) * 1e3
