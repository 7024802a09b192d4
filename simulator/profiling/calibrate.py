"""Fit a device's kernel constants to a measured Vidur-format profile.

Each kernel family is fitted on its own rows by robust least squares on log(predicted /
measured).  Attention is fitted on half of the shapes (alternate KV sizes for decode,
alternate chunk sizes for prefill) so the other half measures error on unseen shapes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec, KernelConstants
from simulator.profiling.measured import Measurements, alternate_split
from simulator.models.shapes import ModelShape


@dataclass(frozen=True)
class Group:
    """Constants fitted together, with (lower, upper) bounds."""

    name: str
    bounds: dict[str, tuple[float, float]]


GROUPS = (
    Group(
        "gemm",
        {
            "gemm_compute_eff": (0.2, 1.2),
            "gemm_memory_eff": (0.2, 1.0),  # a fraction of the datasheet bandwidth: at most all of it
            "gemm_launch_us": (0.0, 30.0),
            "gemm_tail_exponent": (0.01, 1.0),
            "gemm_k_overhead": (0.0, 4000.0),
        },
    ),
    Group(
        "norm",
        {
            "norm_launch_us": (0.0, 20.0),
            "norm_wave_l2_us": (0.0, 30.0),
            "norm_wave_hbm_us": (0.0, 30.0),
            "norm_tail_exponent": (0.01, 1.0),
        },
    ),
    Group(
        "elementwise",
        {
            "act_eff": (0.05, 2.0),
            "add_eff": (0.05, 2.0),
            "rope_eff": (0.05, 2.0),
            "elementwise_launch_us": (0.0, 20.0),
            "l2_bandwidth_gain": (1.0, 10.0),
        },
    ),
    Group(
        "decode",
        {
            "decode_fixed_us": (0.0, 30.0),
            "decode_per_seq_us": (0.0, 5.0),
            "decode_first_wave_eff": (0.2, 1.5),
            "decode_stream_gain": (0.5, 2.0),
            "decode_sm_gbps": (1.0, 100.0),
            "decode_short_kv_eff": (0.2, 3.0),
            "decode_short_kv_tokens": (10.0, 5000.0),
            "decode_doubling_penalty": (0.0, 1.0),
            "split_combine_us": (0.0, 20.0),
        },
    ),
    Group(
        "prefill",
        {
            "prefill_fixed_us": (0.0, 50.0),
            "prefill_compute_eff": (0.05, 2.0),
            "prefill_tail_weight": (0.0, 1.0),
            "prefill_cta_overhead_blocks": (0.0, 30.0),
        },
    ),
)
# Constants only a pooled fit (several models and TP degrees) can separate from the others.
POOLED_ONLY = {"gemm": {"gemm_overlap_loss": (0.0, 1.0)}}
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
NORM_OPS = ("input_layernorm", "post_attention_layernorm")
ELEMENTWISE_OPS = ("mlp_act", "add", "attn_rope")


MLP_GROUPS = ("gemm", "norm", "elementwise")


def _mlp_residuals(group: Group, parts, with_values):
    """Log-ratio residuals of one MLP-side group over ``parts``: (sharded shape, rows with
    num_tokens and one column per op) pairs, pooled so that one set of constants serves all."""
    ops = {"gemm": GEMM_OPS, "norm": NORM_OPS, "elementwise": ELEMENTWISE_OPS}[group.name]
    prepared = [
        (shape, rows.num_tokens.to_numpy(), {op: rows[op].to_numpy() for op in ops if op in rows.columns}) for shape, rows in parts
    ]

    def residuals(values):
        dev = with_values(values)
        out = []
        for shape, tokens, measured in prepared:
            predicted = roofline.mlp_side_ms(tokens, shape, dev)
            out.extend(np.log(predicted[op] / m) for op, m in measured.items())
        return np.concatenate(out)

    return residuals


def _residuals(group: Group, meas: Measurements, shape: ModelShape, dev: DeviceSpec):
    """Log-ratio residuals of one group's rows as a function of its constants."""
    names = list(group.bounds)

    def with_values(values) -> DeviceSpec:
        return replace(dev, constants=replace(dev.constants, **dict(zip(names, values))))

    if group.name in MLP_GROUPS:
        return names, _mlp_residuals(group, [(shape, meas.mlp)], with_values)
    elif group.name == "decode":
        fit = meas.decode[~alternate_split(meas.decode.kv_cache_size)]
        batch, kv, measured = fit.batch_size.to_numpy(), fit.kv_cache_size.to_numpy(), fit.ms.to_numpy()

        def residuals(values):
            return np.log(roofline.decode_attention_ms(batch, kv, shape, with_values(values)) / measured)

    else:
        fit = meas.prefill[~alternate_split(meas.prefill.prefill_chunk_size)]
        chunk, kv, measured = fit.prefill_chunk_size.to_numpy(), fit.kv_cache_size.to_numpy(), fit.ms.to_numpy()

        def residuals(values):
            return np.log(roofline.prefill_attention_ms(chunk, kv, shape, with_values(values)) / measured)

    return names, residuals


def fit(meas: Measurements, shape: ModelShape, dev: DeviceSpec, groups=GROUPS) -> KernelConstants:
    """Constants of ``dev`` refitted group by group (groups without rows keep their values)."""
    constants = dev.constants
    for group in groups:
        has_rows = {"decode": len(meas.decode), "prefill": len(meas.prefill)}.get(group.name, len(meas.mlp))
        if not has_rows:
            continue
        current = replace(dev, constants=constants)
        names, residuals = _residuals(group, meas, shape, current)
        constants = _solve(group, names, residuals, constants)
    return constants


def fit_mlp_side(parts, dev: DeviceSpec) -> KernelConstants:
    """GEMM, norm and element-wise constants of ``dev`` refitted on the pooled rows of ``parts``
    ((sharded shape, rows) pairs, e.g. several models at several TP degrees), starting from
    ``dev``'s constants; decode and prefill constants are returned unchanged."""
    constants = dev.constants
    for group in GROUPS:
        if group.name not in MLP_GROUPS:
            continue
        group = replace(group, bounds={**group.bounds, **POOLED_ONLY.get(group.name, {})})
        names = list(group.bounds)
        base = replace(dev, constants=constants)

        def with_values(values, base=base, names=names) -> DeviceSpec:
            return replace(base, constants=replace(base.constants, **dict(zip(names, values))))

        constants = _solve(group, names, _mlp_residuals(group, parts, with_values), constants)
    return constants


def _solve(group: Group, names, residuals, constants: KernelConstants) -> KernelConstants:
    lower = np.array([group.bounds[n][0] for n in names])
    upper = np.array([group.bounds[n][1] for n in names])
    start = np.clip([getattr(constants, n) for n in names], lower, upper)
    result = least_squares(residuals, start, bounds=(lower, upper), loss="soft_l1", f_scale=0.02)
    return replace(constants, **{n: float(v) for n, v in zip(names, result.x)})


def rounded(constants: KernelConstants, digits: int = 4) -> KernelConstants:
    """Round to significant digits so the data file stays readable and diffs stay small."""
    values = {k: float(f"{v:.{digits}g}") for k, v in asdict(constants).items()}
    return KernelConstants(**values)
