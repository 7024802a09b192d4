"""Error of the built-in TP-sharded MLP-side rows against a measured multi-TP ``mlp.csv`` (pure)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS


def mlp_side_errors(measured: pd.DataFrame, shape: ModelShape, dev: DeviceSpec, degrees=(1, 2, 4, 8)) -> pd.DataFrame:
    """Per TP degree: APE of the per-layer MLP-side time (the nine ops Vidur predicts, summed)
    over every measured num_tokens; duplicate measurements of one shape are averaged by median."""
    rows = []
    for tp in degrees:
        at_tp = measured[measured.num_tensor_parallel_workers == tp]
        if at_tp.empty:
            continue
        per_tokens = at_tp.groupby("num_tokens").median(numeric_only=True).reset_index()
        predicted = roofline.mlp_side_ms(per_tokens.num_tokens.to_numpy(), shape.sharded(tp), dev)
        model = sum(predicted[op] for op in PREDICTED_MLP_OPS)
        truth = sum(per_tokens[f"time_stats.{op}.median"].to_numpy() for op in PREDICTED_MLP_OPS)
        error = model / truth - 1
        rows.append(
            {
                "TP": tp,
                "rows": len(per_tokens),
                "median APE %": float(np.median(np.abs(error)) * 100),
                "MAPE %": float(np.mean(np.abs(error)) * 100),
                "median bias %": float(np.median(error) * 100),
            }
        )
    return pd.DataFrame(rows)
