"""How far the built-in model is from measured rows (pure: frames in, numbers out)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.profiling.measured import Measurements, alternate_split
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS


def ape(predicted, measured) -> np.ndarray:
    """Absolute percentage error, in percent."""
    measured = np.asarray(measured, dtype=float)
    return np.abs(np.asarray(predicted, dtype=float) / measured - 1) * 100


def mlp_error_table(meas: Measurements, shape: ModelShape, dev: DeviceSpec) -> pd.DataFrame:
    """Per op (plus the per-layer sum of all MLP-side ops): median and mean APE, 90th percentile."""
    tokens = meas.mlp.num_tokens.to_numpy()
    predicted = roofline.mlp_side_ms(tokens, shape, dev)
    rows, errors = [], []
    for op in PREDICTED_MLP_OPS:
        e = ape(predicted[op], meas.mlp[op])
        errors.append(e)
        rows.append({"op": op, "rows": len(e), "median_ape": np.median(e), "mape": e.mean(), "p90_ape": np.percentile(e, 90)})
    pooled = np.concatenate(errors)
    rows.append({"op": "all ops pooled", "rows": len(pooled), "median_ape": np.median(pooled), "mape": pooled.mean(), "p90_ape": np.percentile(pooled, 90)})
    layer = ape(sum(predicted[op] for op in PREDICTED_MLP_OPS), meas.mlp[list(PREDICTED_MLP_OPS)].sum(axis=1))
    rows.append({"op": "per-layer sum", "rows": len(layer), "median_ape": np.median(layer), "mape": layer.mean(), "p90_ape": np.percentile(layer, 90)})
    return pd.DataFrame(rows)


def decode_errors(meas: Measurements, shape: ModelShape, dev: DeviceSpec) -> pd.DataFrame:
    d = meas.decode
    predicted = roofline.decode_attention_ms(d.batch_size.to_numpy(), d.kv_cache_size.to_numpy(), shape, dev)
    return d.assign(predicted_ms=predicted, ape=ape(predicted, d.ms), held_out=alternate_split(d.kv_cache_size))


def prefill_errors(meas: Measurements, shape: ModelShape, dev: DeviceSpec) -> pd.DataFrame:
    p = meas.prefill
    predicted = roofline.prefill_attention_ms(p.prefill_chunk_size.to_numpy(), p.kv_cache_size.to_numpy(), shape, dev)
    return p.assign(predicted_ms=predicted, ape=ape(predicted, p.ms), held_out=alternate_split(p.prefill_chunk_size))


def summarize_attention(errors: pd.DataFrame) -> dict:
    fit, held = errors[~errors.held_out], errors[errors.held_out]
    return {
        "fit_rows": len(fit),
        "fit_mape": float(fit.ape.mean()) if len(fit) else float("nan"),
        "held_out_rows": len(held),
        "held_out_mape": float(held.ape.mean()) if len(held) else float("nan"),
        "held_out_median_ape": float(held.ape.median()) if len(held) else float("nan"),
    }
