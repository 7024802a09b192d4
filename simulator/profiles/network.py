"""All-reduce time of a tensor-parallel group on one NVSwitch node (pure numpy, no I/O).

A ring all-reduce over ``n`` GPUs moves ``2 (n - 1) / n`` times the message through each GPU's
links in ``2 (n - 1)`` steps (reduce-scatter, then all-gather), so

    t = launch + 2 (n - 1) * hop + 2 (n - 1) / n * size / (NVLink bandwidth * bus_eff)

NVLink bandwidth (per GPU, per direction) comes from the datasheet; ``launch``, ``hop`` and
``bus_eff`` are three numbers per device, fitted once over every TP degree and message size of a
measured profile, never per TP degree.  The rows a profile trains on are written from it by
:mod:`simulator.profiles.all_reduce_rows`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from simulator.profiles.hardware import NetworkSpec

if TYPE_CHECKING:  # annotations only
    import pandas as pd

BYTES = 2  # fp16 / bf16 activations
# The messages a Llama-2-7B (embedding 4096) or 70B (8192) step all-reduces: 1 to 4,096 tokens.
STEP_MESSAGE_BYTES = (1 * 4096 * BYTES, 4096 * 8192 * BYTES)


def ring_all_reduce_ms(size_bytes, workers, net: NetworkSpec) -> np.ndarray:
    """Milliseconds for one all-reduce of ``size_bytes`` over ``workers`` GPUs of ``net``."""
    size = np.asarray(size_bytes, dtype=float)
    n = np.asarray(workers, dtype=float)
    steps = 2 * (n - 1)
    bandwidth = net.nvlink_bandwidth_gbps * 1e9 * net.bus_eff
    seconds = (net.launch_us + steps * net.hop_us) * 1e-6 + steps / n * size / bandwidth
    return np.where(n > 1, seconds * 1e3, 0.0)


def message_bytes(tokens, embedding_dim: int) -> np.ndarray:
    """A layer's all-reduce carries one activation row per token (what Vidur assumes too)."""
    return np.asarray(tokens, dtype=np.int64) * embedding_dim * BYTES


def fit(net: NetworkSpec, sizes, workers, measured_ms) -> NetworkSpec:
    """Fit launch, hop and bus_eff by robust least squares on log(predicted / measured), pooled
    over every TP degree and size (no refit per TP degree)."""
    from scipy.optimize import least_squares

    sizes, workers, measured = (np.asarray(x, dtype=float) for x in (sizes, workers, measured_ms))

    def residuals(p):
        trial = replace(net, launch_us=p[0], hop_us=p[1], bus_eff=p[2])
        return np.log(ring_all_reduce_ms(sizes, workers, trial) / measured)

    result = least_squares(
        residuals, [10.0, 1.0, 0.6], bounds=([0.0, 0.0, 0.05], [200.0, 50.0, 1.0]), loss="soft_l1", f_scale=0.1
    )
    launch, hop, eff = (float(f"{v:.4g}") for v in result.x)
    return replace(net, launch_us=launch, hop_us=hop, bus_eff=eff)


def error_table(frame: pd.DataFrame, net: NetworkSpec) -> pd.DataFrame:
    """Median APE and MAPE of the ring model against measured all-reduce rows, by TP and size band."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    predicted = ring_all_reduce_ms(frame["size"], frame.num_workers, net)
    ape = (predicted / frame["time_stats.all_reduce.median"] - 1).abs() * 100
    bands = pd.cut(frame["size"], [0, 2**20, 2**23, 2**40], labels=["< 1 MiB", "1-8 MiB", ">= 8 MiB"], right=False)
    rows = []
    for (tp, band), group in ape.groupby([frame.num_workers, bands], observed=True):
        rows.append({"TP": int(tp), "sizes": str(band), "rows": len(group), "median APE %": group.median(), "MAPE %": group.mean()})
    for tp, group in ape.groupby(frame.num_workers):
        rows.append({"TP": int(tp), "sizes": "all", "rows": len(group), "median APE %": group.median(), "MAPE %": group.mean()})
    rows.append({"TP": 0, "sizes": "all (pooled)", "rows": len(ape), "median APE %": ape.median(), "MAPE %": ape.mean()})
    return pd.DataFrame(rows)
