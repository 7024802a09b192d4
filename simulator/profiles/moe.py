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

**The fused MoE kernels** (:mod:`simulator.profiles.moe_kernels`): the routed rows are sorted by
expert and padded to a tile of B rows per expert; each touched expert's rows are one GEMM against
that expert's weights, all in one launch.  vLLM picks the kernel by GPU and precision (Triton
``fused_moe`` for BF16 and FP8, OpenAI's ``triton_kernels`` for MXFP4 on Hopper), and each
kernel's constants come from a published kernel benchmark (``moe_kernels.toml``).  Per GEMM of
output width n and depth k, with U experts touched and R routed rows (m = R / U per expert):

    padded rows  P = B U ceil(m / B)
    compute      2 P n k / (peak(compute dtype) x compute_eff)
    memory       (U n k w + R k a + 2 R n) / (HBM bandwidth x memory_eff(n k w))
    time         fixed + max(compute, memory) + overlap_loss x min(2 R n k / peak, memory)

(w, a: bytes per weight and per input element).  memory_eff grows with one expert's GEMM bytes
n k w, log-interpolated between a small-expert and a large-expert measurement: a small expert
leaves the SMs short of bytes in flight.  B follows the kernel's tile rule (:func:`block_rows`).
A GPU or precision with no measured kernel (the A100, NVFP4) keeps the device's dense GEMM
constants, and the kernel's name says so.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from simulator.profiles import moe_kernels, roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.profiles.moe_kernels import MoEKernel
from simulator.models.shapes import MoEShape, Precision
from simulator.util.errors import ConfigError

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
    """vLLM's default BLOCK_SIZE_M for the fused MoE kernel at a step of ``tokens`` tokens
    (``fused_moe.get_default_config``: 16 while the step has at most E tokens, else 64; 64 for
    FP8 weight blocks)."""
    t = np.asarray(tokens, dtype=float)
    if fp8_blocks:
        return np.full_like(t, FP8_BLOCK_M)
    return np.where(t <= num_experts, SMALL_BLOCK_M, LARGE_BLOCK_M)


def _pow2_tile(rows_per_expert, scale: float) -> np.ndarray:
    m = np.maximum(np.asarray(rows_per_expert, dtype=float) * scale, 1.0)
    return np.clip(2.0 ** np.ceil(np.log2(m)), SMALL_BLOCK_M, 128.0)


def block_rows(tokens, num_experts: int, top_k: int, rule: str) -> np.ndarray:
    """The tile of rows each expert is padded to, by the kernel's rule, at a step of ``tokens``
    tokens (m = tokens x k / E rows per expert, before the floor of one):

    * ``vllm_default``: :func:`block_m`; ``fixed_64``: 64 (FP8 weight blocks);
    * ``vllm_tuned``: vLLM's tuned configs for Qwen3-30B-A3B's experts on H100 and H200
      (``E=128,N=768``: BLOCK_SIZE_M 16 to batch 128, 32 at 256, 64 at 512, 128 from 1,024), i.e.
      the power of two at or above 2 m, within 16..128;
    * ``triton_kernels``: ``matmul_ogs``'s max(16, min(next_power_of_2(m), 128)).
    """
    t = np.asarray(tokens, dtype=float)
    m = np.floor(t * top_k / num_experts)
    if rule == "vllm_default":
        return block_m(t, num_experts, False)
    if rule == "fixed_64":
        return np.full_like(t, FP8_BLOCK_M)
    if rule == "vllm_tuned":
        return _pow2_tile(t * top_k / num_experts, 2.0)
    if rule == "triton_kernels":
        return _pow2_tile(m, 1.0)
    raise ValueError(f"unknown tile rule {rule!r}")


def dense_kernel(dev: DeviceSpec, compute_dtype: str, fp8_blocks: bool) -> MoEKernel:
    """The device's dense GEMM constants as a fused-MoE kernel: for a GPU or precision with no
    measured fused-MoE kernel (carried over, as the name says)."""
    c = dev.constants
    return MoEKernel(
        f"dense GEMM constants of {dev.name} (carried over: no fused-MoE kernel measured)", compute_dtype,
        "fixed_64" if fp8_blocks else "vllm_default", 1.0, c.gemm_memory_eff, 2.0, c.gemm_memory_eff,
        c.gemm_launch_us, c.gemm_compute_eff, c.gemm_overlap_loss,
    )


def expert_kernel(dev: DeviceSpec, precision: Precision) -> MoEKernel:
    """The fused-MoE kernel vLLM runs for ``precision``'s routed experts on ``dev``.  Refuses a
    precision whose compute dtype the GPU has no tensor cores for (FP8 on an A100, FP4 on Hopper)."""
    dtype = precision.compute_dtype("experts")
    if not dev.datasheet.has_dtype(dtype):
        raise ConfigError(f"routed experts in {precision.experts}: {dev.name} has no {dtype} tensor cores for its fused-MoE kernel")
    fp8_blocks = precision.experts == "fp8" and precision.method == "fp8"
    kernel = moe_kernels.kernel_for(dev.name, precision.experts, fp8_blocks)
    return kernel if kernel is not None else dense_kernel(dev, dtype, fp8_blocks)


def memory_efficiency(expert_bytes, kernel: MoEKernel) -> np.ndarray:
    """The fraction of HBM bandwidth an expert's weights stream at, by one expert's GEMM bytes:
    log-interpolated between the kernel's small- and large-expert measurements, held outside."""
    x = np.log(np.maximum(np.asarray(expert_bytes, dtype=float), 1.0) / 1e6)
    lo, hi = np.log(kernel.small_expert_mb), np.log(kernel.large_expert_mb)
    f = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return kernel.small_memory_eff + f * (kernel.large_memory_eff - kernel.small_memory_eff)


def grouped_gemm_ms(touched, rows, n: int, k: int, block, dev: DeviceSpec, weight_bytes: float, act_bytes: float, kernel: MoEKernel) -> np.ndarray:
    """One fused MoE GEMM: ``touched`` experts' GEMMs of width ``n`` and depth ``k`` over ``rows``
    routed rows in all, padded to ``block`` rows per expert, run by ``kernel`` (module docstring)."""
    d = dev.datasheet
    touched = np.asarray(touched, dtype=float)
    rows = np.asarray(rows, dtype=float)
    per_expert = rows / np.maximum(touched, 1e-12)
    padded = block * touched * np.ceil(per_expert / block)
    peak = d.peak_tflops(kernel.compute_dtype) * 1e12 * kernel.compute_eff
    compute = 2 * padded * n * k / peak
    useful = 2 * rows * n * k / peak
    bandwidth = d.hbm_bandwidth_tbps * 1e12 * memory_efficiency(n * k * weight_bytes, kernel)
    memory = (touched * n * k * weight_bytes + rows * k * act_bytes + rows * n * roofline.BYTES) / bandwidth
    exposed = np.maximum(compute, memory) + kernel.overlap_loss * np.minimum(useful, memory)
    return (kernel.fixed_us * 1e-6 + exposed) * 1e3
