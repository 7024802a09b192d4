"""Which measured MLP-side rows a pooled fit may see, and its error on the rows it may not (pure).

A fit over several models and TP degrees is scored on two kinds of rows it never saw:

* **the held-out model**: every TP degree and token count of one model, so the error says how the
  constants carry to a model of other widths;
* **the held-out token range**: the fitted models' rows with num_tokens in [lo, hi], so the error
  says how the constants interpolate between the token counts they were fitted on.

Everything else is the fit set.  The error is that of the per-layer MLP-side time (the sum of the
ops Vidur predicts that the model has), the quantity a simulated step adds up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.profiling.shards import Shard


@dataclass(frozen=True)
class HoldOut:
    model: Optional[str] = None
    tokens: Optional[tuple[int, int]] = None  # inclusive num_tokens range

    def token_mask(self, tokens: np.ndarray) -> np.ndarray:
        if self.tokens is None:
            return np.zeros(len(tokens), dtype=bool)
        lo, hi = self.tokens
        return (tokens >= lo) & (tokens <= hi)

    def describe(self) -> str:
        parts = []
        if self.model:
            parts.append(f"model {self.model} (all TP degrees)")
        if self.tokens:
            parts.append(f"num_tokens {self.tokens[0]}-{self.tokens[1]} of the other models")
        return " and ".join(parts) or "nothing"


def parse_token_range(text: str) -> tuple[int, int]:
    """``"LO-HI"`` (inclusive, 1 <= LO <= HI) as a pair of ints."""
    try:
        lo, hi = (int(part) for part in text.split("-"))
    except ValueError:
        raise ConfigError(f"--hold-out-tokens '{text}': expected LO-HI, two token counts such as 513-1024") from None
    if not 1 <= lo <= hi:
        raise ConfigError(f"--hold-out-tokens '{text}': need 1 <= LO <= HI")
    return lo, hi


def check(shards: Sequence[Shard], hold: HoldOut) -> None:
    """Refuse a hold-out that leaves nothing to fit or nothing to score."""
    models = sorted({s.model for s in shards})
    if hold.model is not None and hold.model not in models:
        raise ConfigError(f"--hold-out-model '{hold.model}' is not one of the fitted models ({', '.join(models)}); add its --mlp-tp file")
    if hold.model is not None and len(models) < 2:
        raise ConfigError(f"--hold-out-model '{hold.model}': at least two models are needed to hold one out")
    fitted = [s for s in shards if s.model != hold.model]
    tokens = np.concatenate([s.rows.num_tokens.to_numpy() for s in fitted])
    in_range = hold.token_mask(tokens)
    if hold.tokens is not None and not in_range.any():
        raise ConfigError(f"--hold-out-tokens {hold.tokens[0]}-{hold.tokens[1]}: no measured num_tokens in that range")
    if in_range.all():
        raise ConfigError(f"--hold-out-tokens {hold.tokens[0]}-{hold.tokens[1]}: covers every measured num_tokens, nothing left to fit")


def fit_parts(shards: Sequence[Shard], hold: HoldOut) -> list[tuple]:
    """(sharded shape, rows) of the fit set, for :func:`calibrate.fit_mlp_side`."""
    parts = []
    for s in shards:
        if s.model == hold.model:
            continue
        keep = ~hold.token_mask(s.rows.num_tokens.to_numpy())
        parts.append((s.shape, s.rows[keep]))
    return parts


def layer_rows(shards: Sequence[Shard], hold: HoldOut, dev: DeviceSpec) -> pd.DataFrame:
    """One row per (model, TP, num_tokens): measured and predicted per-layer MLP-side ms and
    which set the row is in (``fit``, ``held-out model``, ``held-out tokens``)."""
    frames = []
    for s in shards:
        tokens = s.rows.num_tokens.to_numpy()
        predicted = roofline.mlp_side_ms(tokens, s.shape, dev)
        if s.model == hold.model:
            subset = np.full(len(tokens), "held-out model", dtype=object)
        else:
            subset = np.where(hold.token_mask(tokens), "held-out tokens", "fit").astype(object)
        frames.append(
            pd.DataFrame(
                {
                    "model": s.model,
                    "TP": s.tp,
                    "num_tokens": tokens,
                    "measured_ms": s.rows[s.ops].sum(axis=1).to_numpy(),
                    "predicted_ms": sum(predicted[op] for op in s.ops),
                    "subset": subset,
                }
            )
        )
    rows = pd.concat(frames, ignore_index=True)
    return rows.assign(error_pct=(rows.predicted_ms / rows.measured_ms - 1) * 100)


def summary(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Median APE, MAPE, 90th-percentile APE and median signed error of each group of ``rows``."""
    out = []
    for key, group in rows.groupby(list(by), sort=True):
        ape = group.error_pct.abs()
        key = key if isinstance(key, tuple) else (key,)
        out.append(
            {
                **dict(zip(by, key)),
                "rows": len(group),
                "median APE %": float(ape.median()),
                "MAPE %": float(ape.mean()),
                "p90 APE %": float(np.percentile(ape, 90)),
                "median bias %": float(group.error_pct.median()),
            }
        )
    return pd.DataFrame(out)
