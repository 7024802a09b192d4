"""Metrics the sweep derives from runs: TPOT speedup over the baseline, queue growth, mean decoding batch.

Part of the model hash (:mod:`simulator.util.versions`): a change here changes published numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from simulator.util.errors import ConfigError
from simulator.runs.results import speedup
from simulator.schemas import OVERLOAD_TTFT_GROWTH  # the overloaded column's definition, shared with the site

if TYPE_CHECKING:  # annotations only
    import pandas as pd


def queue_growth(requests: pd.DataFrame) -> dict:
    """Median TTFT of the first vs last tenth of requests by arrival: grows when the queue does."""
    ordered = requests.sort_values(["arrival_s", "request_id"], kind="stable")
    tenth = max(1, len(ordered) // 10)
    first = float(ordered["ttft_s"].iloc[:tenth].median())
    last = float(ordered["ttft_s"].iloc[-tenth:].median())
    growth = last / first if first > 0 else math.nan
    return {
        "ttft_first_tenth_p50_s": first,
        "ttft_last_tenth_p50_s": last,
        "ttft_growth": growth,
        "overloaded": bool(growth > OVERLOAD_TTFT_GROWTH),
    }


def mean_decode_batch(requests: pd.DataFrame, makespan_s: float) -> float:
    """Requests decoding at once (past their first token, not finished), averaged over the run:
    the sum of every request's decode time divided by the makespan (Little's law).  Speculation
    shortens decode times, so fewer requests share each step; this is why a speedup can exceed
    the tokens of progress per verify step."""
    if makespan_s <= 0:
        return math.nan
    return float((requests["e2e_s"] - requests["ttft_s"]).clip(lower=0).sum() / makespan_s)


def with_speedups(records: Sequence[dict]) -> list[dict]:
    """TPOT speedup = baseline median TPOT / run median TPOT at the same load (baseline = 1)."""
    baselines = {r["arrival_rate"]: r for r in records if r["num_speculative_tokens"] == 0}
    rows = []
    for r in records:
        if r["arrival_rate"] not in baselines:
            raise ConfigError(f"run at {r['arrival_rate']:g} req/s has no baseline (num_speculative_tokens = 0) at the same load")
        rows.append({**r, "tpot_speedup": speedup(baselines[r["arrival_rate"]], r, "tpot_p50_s")})
    return rows
