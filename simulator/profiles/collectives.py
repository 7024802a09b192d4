"""A tensor-parallel all-reduce as vLLM runs it inside one NVLink node (pure, no I/O).

vLLM picks one of three implementations by message size
(``vllm/distributed/device_communicators/cuda_communicator.py``, ``all_reduce``):

* its own **custom all-reduce** (``custom_all_reduce.py``, ``csrc/custom_all_reduce.cuh``) for
  messages below its limit (the version's per-TP size, never beyond its 8 MiB buffer), when every
  GPU pair is linked by NVLink: each GPU reads its peers' buffers directly, in CUDA graphs too.
  Small messages take the **one-shot** kernel (every GPU reads all ``n - 1`` peers' whole
  messages), larger ones the **two-shot** kernel (a reduce-scatter, then an all-gather: each GPU
  reads ``(n - 1) / n`` of the message twice);
* from vLLM 0.11 on Hopper, **torch symmetric memory** below its own limit: the **multimem**
  kernel (NVSwitch reduces as it loads) at 4, 6 and 8 GPUs, its **two-shot** kernel at 2;
* **NCCL**'s ring above both (:func:`simulator.profiles.network.ring_all_reduce_ms`, fitted on
  Vidur's measured NCCL profile).

    custom one-shot:  t = custom_oneshot_us + (n - 1) * bytes / (NVLink bandwidth * custom_bus_eff)
    custom two-shot:  t = custom_twoshot_us + 2 (n - 1) / n * bytes / (NVLink bandwidth * custom_twoshot_eff)
    symm multimem:    t = symm_mem_us + bytes / (NVLink bandwidth * symm_multimem_eff)
    symm two-shot:    t = symm_mem_us + 2 (n - 1) / n * bytes / (NVLink bandwidth * symm_twoshot_eff)

The custom kernel's choice between its two follows vLLM's (``CustomAllreduce::allreduce``):
one-shot for two GPUs, and on a fully connected node below 512 KiB (up to 4 GPUs) or 256 KiB (up
to 8).  Its bandwidth was measured on messages up to 4 MiB, so under its limit the model takes the
faster of its estimate and NCCL's.

These are the kernels' times as a CUDA graph replays them (vLLM captures its all-reduces in its
decode graphs and pieces): each constant comes from a benchmark that captures several
all-reduces back to back in one graph and divides the replay by their count, so the fixed time
holds the kernel's own latency and the gap to the next kernel, and no CPU launch
(``data/calibration/graph_costs.toml``, ``step_time.toml``).  NCCL's ring is the fit on Vidur's
eagerly timed profile: vLLM runs it only above the custom and symmetric-memory limits, i.e. for
batches above the capture sizes, which run eagerly.  :func:`fit_custom` fits the custom kernel's
four numbers to a measured table, pooled over every TP degree (no refit per degree).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.profiles.hardware import NetworkSpec
from simulator.profiles.network import ring_all_reduce_ms

CUSTOM_WORLD_SIZES = (2, 4, 6, 8)  # vLLM's custom all-reduce supports these group sizes
ONESHOT_MAX_BYTES = {4: 512 * 1024, 8: 256 * 1024}  # one-shot below these, two-shot above


def uses_oneshot(size_bytes: float, workers: int) -> bool:
    if workers == 2:
        return True
    limit = ONESHOT_MAX_BYTES[4] if workers <= 4 else ONESHOT_MAX_BYTES[8]
    return size_bytes < limit


def custom_all_reduce_us(size_bytes: float, workers: int, net: NetworkSpec) -> float:
    """Microseconds of vLLM's custom kernel (the one-shot or two-shot kernel vLLM picks for the
    size and GPU count) inside a CUDA graph, by the formulas above."""
    bandwidth = net.nvlink_bandwidth_gbps * 1e9
    if uses_oneshot(size_bytes, workers):
        return net.custom_oneshot_us + (workers - 1) * size_bytes / (bandwidth * net.custom_bus_eff) * 1e6
    return net.custom_twoshot_us + 2 * (workers - 1) / workers * size_bytes / (bandwidth * net.custom_twoshot_eff) * 1e6


def all_reduce_ms(
    size_bytes: float, workers: int, net: NetworkSpec, custom_max_bytes: int, symm_max_bytes: int = 0, multimem_tp: tuple[int, ...] = ()
) -> float:
    """Milliseconds for one all-reduce of ``size_bytes`` over ``workers`` GPUs of ``net``: the custom
    kernel below ``custom_max_bytes``, torch symmetric memory below ``symm_max_bytes`` (multimem at
    ``multimem_tp``), NCCL above."""
    if workers <= 1:
        return 0.0
    bandwidth = net.nvlink_bandwidth_gbps * 1e9
    nccl = float(ring_all_reduce_ms(size_bytes, workers, net))
    if workers in CUSTOM_WORLD_SIZES and size_bytes < custom_max_bytes and net.custom_oneshot_us is not None:
        return min(custom_all_reduce_us(size_bytes, workers, net) * 1e-3, nccl)
    if size_bytes < symm_max_bytes and net.symm_mem_us is not None:
        if workers in multimem_tp:
            seconds = net.symm_mem_us * 1e-6 + size_bytes / (bandwidth * net.symm_multimem_eff)
        else:
            seconds = net.symm_mem_us * 1e-6 + 2 * (workers - 1) / workers * size_bytes / (bandwidth * net.symm_twoshot_eff)
        return seconds * 1e3
    return nccl


def fit_custom(net: NetworkSpec, sizes, workers, measured_us) -> NetworkSpec:
    """``net`` with the custom kernel's four numbers (one-shot and two-shot fixed times, their
    fractions of NVLink bandwidth) fitted to measured in-graph times (microseconds) of messages of
    ``sizes`` bytes over ``workers`` GPUs: one robust least-squares fit on log(predicted /
    measured), pooled over every TP degree and size, as :func:`simulator.profiles.network.fit`
    fits NCCL's ring; each value kept to four significant digits."""
    from scipy.optimize import least_squares

    sizes, workers, measured = (np.asarray(x, dtype=float) for x in (sizes, workers, measured_us))

    def residuals(p):
        trial = replace(net, custom_oneshot_us=p[0], custom_bus_eff=p[1], custom_twoshot_us=p[2], custom_twoshot_bus_eff=p[3])
        predicted = np.array([custom_all_reduce_us(s, int(n), trial) for s, n in zip(sizes, workers)])
        return np.log(predicted / measured)

    result = least_squares(
        residuals, [5.0, 0.5, 10.0, 0.6], bounds=([0.0, 0.05, 0.0, 0.05], [50.0, 1.0, 50.0, 1.0]), loss="soft_l1", f_scale=0.1
    )
    oneshot, eff, twoshot, twoshot_eff = (float(f"{v:.4g}") for v in result.x)
    return replace(net, custom_oneshot_us=oneshot, custom_bus_eff=eff, custom_twoshot_us=twoshot, custom_twoshot_bus_eff=twoshot_eff)


def all_gather_ms(total_bytes: float, workers: int, net: NetworkSpec) -> float:
    """NCCL's ring all-gather of ``total_bytes`` in all (each GPU contributes 1 / workers of it):
    vLLM V1 gathers the vocabulary shards' logits this way.  The ring moves ``(n - 1) / n`` of the
    result through each GPU's links in ``n - 1`` steps, with the launch and hop costs fitted on
    Vidur's measured NCCL all-reduce (:mod:`simulator.profiles.network`)."""
    if workers <= 1:
        return 0.0
    steps = workers - 1
    seconds = (net.launch_us + steps * net.hop_us) * 1e-6 + steps / workers * total_bytes / (net.nvlink_bandwidth_gbps * 1e9 * net.bus_eff)
    return seconds * 1e3


def reduce_scatter_ms(total_bytes: float, workers: int, net: NetworkSpec) -> float:
    """NCCL's ring reduce-scatter of ``total_bytes`` (each GPU keeps 1 / workers of the sum): the
    same ``n - 1`` steps and bytes per link as the all-gather, reversed."""
    return all_gather_ms(total_bytes, workers, net)


def moe_dispatch_combine_ms(tokens_per_rank: int, hidden: int, ranks: int, net: NetworkSpec, bytes_per_element: float = 2.0) -> float:
    """The exchange around an MoE layer's experts with ``ranks`` data-parallel ranks, as vLLM's
    ``allgather_reducescatter`` all-to-all backend runs it (``naive``, the older default, moves the
    same data by broadcasts and an all-reduce): every rank's
    hidden states [T, h] are all-gathered to every rank before the experts, and the experts'
    outputs reduce-scattered back after them, [ranks x T, h] each way."""
    if ranks <= 1:
        return 0.0
    total = ranks * tokens_per_rank * hidden * bytes_per_element
    return all_gather_ms(total, ranks, net) + reduce_scatter_ms(total, ranks, net)
