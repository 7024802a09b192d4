"""Where a measured verify step falls between the two bounds: fit lambda of the interpolated mode.

The simulator costs verify attention of B sequences with q = k' + 1 queries each over KV cached
tokens from decode timings alone (``simulator.speculative.verify_cost``):

* ``kv_once``   = decode(B, KV): each sequence's KV read once for all its queries (lower bound);
* ``per_token`` = decode(B x q, KV): every query pays a full decode read (upper bound);
* ``interpolated`` = (1 - lambda) x kv_once + lambda x per_token.

Given measured verify times and the two bounds, lambda is fitted by least squares on relative
error (each row weighs the same whatever its size), overall and per group (batch, KV, q), with
the residual the fitted lambda leaves.  Pure: frames in, numbers out; reading the CSVs is
``simulator.profiling.verify_table``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from simulator.speculative.verify_cost import extrapolate_batch

POINT_COLUMNS = ("batch_size", "kv_cache_size", "num_query_tokens", "measured_ms", "kv_once_ms", "per_token_ms")
GROUPINGS = {"batch": ["batch_size"], "kv": ["kv_cache_size"], "queries": ["num_query_tokens"], "batch_kv": ["batch_size", "kv_cache_size"]}


@dataclass(frozen=True)
class LambdaFit:
    """lambda overall and per group; residuals are (fitted - measured) / measured in percent."""

    overall: float
    residual_rms_pct: float
    residual_max_pct: float
    rows: int
    groups: dict[str, pd.DataFrame]  # GROUPINGS key -> keys, lambda, residual_rms_pct, rows
    points: pd.DataFrame  # the input rows with lambda_point, fitted_ms and residual_pct


def _least_squares(frame: pd.DataFrame) -> float:
    """argmin over lambda of sum(((kv_once + lambda (per_token - kv_once)) / measured - 1)^2)."""
    span = (frame.per_token_ms - frame.kv_once_ms) / frame.measured_ms
    above = (frame.measured_ms - frame.kv_once_ms) / frame.measured_ms
    denominator = float((span * span).sum())
    return float((span * above).sum()) / denominator if denominator > 0 else float("nan")


def _residual_pct(frame: pd.DataFrame, lam: float) -> pd.Series:
    fitted = frame.kv_once_ms + lam * (frame.per_token_ms - frame.kv_once_ms)
    return (fitted / frame.measured_ms - 1) * 100


def _rms(values: pd.Series) -> float:
    return float(np.sqrt(np.mean(np.square(values)))) if len(values) else float("nan")


def fit_lambda(points: pd.DataFrame) -> LambdaFit:
    """Fit lambda to rows of ``POINT_COLUMNS`` (times in ms, measured > 0).

    Rows whose bounds coincide (q = 1) say nothing about lambda and are left out.  A group whose
    rows all have coinciding bounds gets lambda NaN.
    """
    missing = [c for c in POINT_COLUMNS if c not in points.columns]
    if missing:
        raise ValueError(f"verify points lack columns {missing}")
    frame = points.loc[points.per_token_ms != points.kv_once_ms, list(POINT_COLUMNS)].reset_index(drop=True)
    if frame.empty:
        raise ValueError("no verify rows with two distinct bounds (every row has one query per sequence)")
    if (frame.measured_ms <= 0).any():
        raise ValueError("verify times must be positive")
    lam = _least_squares(frame)
    frame["lambda_point"] = (frame.measured_ms - frame.kv_once_ms) / (frame.per_token_ms - frame.kv_once_ms)
    frame["fitted_ms"] = frame.kv_once_ms + lam * (frame.per_token_ms - frame.kv_once_ms)
    frame["residual_pct"] = (frame.fitted_ms / frame.measured_ms - 1) * 100
    groups = {}
    for name, keys in GROUPINGS.items():
        rows = []
        for key, group in frame.groupby(keys, sort=True):
            group_lambda = _least_squares(group)
            key = key if isinstance(key, tuple) else (key,)
            rows.append({**dict(zip(keys, key)), "lambda": group_lambda, "residual_rms_pct": _rms(_residual_pct(group, group_lambda)), "rows": len(group)})
        groups[name] = pd.DataFrame(rows, columns=[*keys, "lambda", "residual_rms_pct", "rows"])
    return LambdaFit(lam, _rms(frame.residual_pct), float(frame.residual_pct.abs().max()), len(frame), groups, frame)


def same_run_bounds(verify: pd.DataFrame, stat: str = "median") -> pd.DataFrame:
    """Points from one verify-attention table alone: kv_once and per_token are its own one-query
    rows at (B, KV) and (B x q, KV), timed in the same run by the same kernel.

    Rows whose bound was not measured (skipped, or cut by the time budget) are left out.
    """
    column = f"time_stats.attention.{stat}"
    table = verify[["batch_size", "kv_cache_size", "num_query_tokens", column]].dropna(subset=[column])
    decode = table[table.num_query_tokens == 1].set_index(["batch_size", "kv_cache_size"])[column]
    rows = table[table.num_query_tokens > 1]
    kv_once = [decode.get((b, kv), np.nan) for b, kv in zip(rows.batch_size, rows.kv_cache_size)]
    per_token = [decode.get((b * q, kv), np.nan) for b, q, kv in zip(rows.batch_size, rows.num_query_tokens, rows.kv_cache_size)]
    points = pd.DataFrame(
        {
            "batch_size": rows.batch_size.to_numpy(),
            "kv_cache_size": rows.kv_cache_size.to_numpy(),
            "num_query_tokens": rows.num_query_tokens.to_numpy(),
            "measured_ms": rows[column].to_numpy(),
            "kv_once_ms": kv_once,
            "per_token_ms": per_token,
        }
    )
    return points.dropna().reset_index(drop=True)


def decode_lookup(decode: pd.DataFrame) -> Callable[[int, float], float]:
    """decode(batch, kv) in ms from a decode profile's rows (batch_size, kv_cache_size, ms):
    linear in batch and KV inside the grid (and in KV just beyond it); batches beyond the largest
    profiled one run as further full batches (``verify_cost.extrapolate_batch``)."""
    from scipy.interpolate import RegularGridInterpolator  # here: the site imports this module, and SciPy costs ~1 s to import

    table = decode.pivot_table(index="batch_size", columns="kv_cache_size", values="ms", aggfunc="mean").sort_index().sort_index(axis=1)
    table = table.interpolate(axis=1, limit_direction="both")
    batches, kvs = table.index.to_numpy(dtype=float), table.columns.to_numpy(dtype=float)
    if len(batches) < 2 or len(kvs) < 2:
        raise ValueError("a decode profile needs at least two batch sizes and two KV sizes")
    grid = RegularGridInterpolator((batches, kvs), table.to_numpy(dtype=float), bounds_error=False, fill_value=None)

    def lookup(batch: int, kv: float) -> float:
        return float(grid([[batch, kv]])[0])

    return extrapolate_batch(lookup, int(batches.max()))


def profile_bounds(verify: pd.DataFrame, decode: pd.DataFrame, stat: str = "median") -> pd.DataFrame:
    """Points with the bounds the simulator itself uses: looked up in a decode profile."""
    column = f"time_stats.attention.{stat}"
    lookup = decode_lookup(decode)
    rows = verify[verify.num_query_tokens > 1].dropna(subset=[column])
    return pd.DataFrame(
        {
            "batch_size": rows.batch_size.to_numpy(),
            "kv_cache_size": rows.kv_cache_size.to_numpy(),
            "num_query_tokens": rows.num_query_tokens.to_numpy(),
            "measured_ms": rows[column].to_numpy(),
            "kv_once_ms": [lookup(b, kv) for b, kv in zip(rows.batch_size, rows.kv_cache_size)],
            "per_token_ms": [lookup(b * q, kv) for b, q, kv in zip(rows.batch_size, rows.num_query_tokens, rows.kv_cache_size)],
        }
    )


def chart_table(verify: pd.DataFrame, decode: pd.DataFrame | None = None, stat: str = "median") -> pd.DataFrame:
    """The modeling page's chart: measured verify attention against the two bounds, per
    (batch, KV, q), with each row's own lambda and where the bounds came from.

    ``decode`` (batch_size, kv_cache_size, ms): bounds looked up in that decode profile, as the
    simulator does; None: the verify table's own one-query rows (same run, same kernel).
    """
    points = profile_bounds(verify, decode, stat) if decode is not None else same_run_bounds(verify, stat)
    points = points.sort_values(["kv_cache_size", "batch_size", "num_query_tokens"], ignore_index=True)
    span = points.per_token_ms - points.kv_once_ms
    points["lambda_point"] = np.where(span != 0, (points.measured_ms - points.kv_once_ms) / span.where(span != 0, 1.0), np.nan)
    points["bounds"] = "decode profile" if decode is not None else "same run"
    return points


def fit_summary(fit: LambdaFit) -> dict:
    """The fit as plain data (JSON-ready; NaN as None), rounded so a file of it is stable."""

    def clean(value):
        return None if value is None or (isinstance(value, float) and not np.isfinite(value)) else round(float(value), 6)

    def records(frame: pd.DataFrame) -> list[dict]:
        return [{k: (int(v) if k in ("batch_size", "kv_cache_size", "num_query_tokens", "rows") else clean(v)) for k, v in row.items()} for row in frame.to_dict("records")]

    return {
        "lambda": clean(fit.overall),
        "residual_rms_pct": clean(fit.residual_rms_pct),
        "residual_max_pct": clean(fit.residual_max_pct),
        "rows": fit.rows,
        "by": {name: records(frame) for name, frame in fit.groups.items()},
    }
