"""The published comparison's headline figures, computed from its recorded rows.

What the site states about ``data/results/published.csv``: the check rows' errors overall, by acceptance
class, at load and at batch one, and whether each published trend is reproduced.  It reads rows
only (as recorded, or as built), so the site needs no part of the reproduction that wrote them.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from simulator.schemas import ACCEPTANCE_CLASSES, SIMULATED


def _text(value) -> str:
    """A text cell as read back from a CSV (an empty cell is NaN) or as built."""
    return value if isinstance(value, str) else ""


def _cell(value) -> str:
    """Any cell as text for grouping: numbers by value (6 and 6.0 alike), blanks as empty."""
    if isinstance(value, str):
        return value
    number = _number(value)
    return "" if number != number else f"{number:g}"


def _median_abs(rows) -> float:
    return statistics.median(abs(r["error_pct"]) for r in rows) if rows else float("nan")


def _figures(rows: Sequence[dict]) -> dict:
    absolute = [r for r in rows if r["metric"] != "speedup"]
    speedups = [r for r in rows if r["metric"] == "speedup"]
    return {
        "rows": len(rows),
        "absolute_rows": len(absolute),
        "absolute_median_abs_error_pct": _median_abs(absolute),
        "absolute_rows_within_15pct": sum(abs(r["error_pct"]) <= 15 for r in absolute),
        "speedup_rows": len(speedups),
        "speedup_rows_within_15pct": sum(abs(r["error_pct"]) <= 15 for r in speedups),
        "speedup_max_abs_error_pct": max((abs(r["error_pct"]) for r in speedups), default=float("nan")),
        "median_abs_error_pct": _median_abs(rows),
    }


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def load_of(row: dict) -> float:
    """A row's load: its request rate, batch size or concurrency (nan when none)."""
    for key in ("qps", "batch_size", "concurrency"):
        value = _number(row.get(key))
        if value == value:
            return value
    return float("nan")


def at_load(row: dict) -> bool:
    """A check at load: a request rate, a batch or concurrency of 8 or more, or TP >= 2."""
    return _number(row.get("qps")) > 0 or max(_number(row.get("batch_size")), _number(row.get("concurrency"))) >= 8 or _number(row.get("tp")) >= 2


def batch_one(row: dict) -> bool:
    return 1 in (_number(row.get("batch_size")), _number(row.get("concurrency"))) and not _number(row.get("tp")) >= 2


TREND_KEYS = ("source", "model", "gpu", "tp", "proposer", "draft", "k", "dataset", "metric", "input_len", "output_len")


def trends(rows: Sequence[dict]) -> dict:
    """Whether each published series' direction is reproduced: rows that differ only in their load
    (same source, model, GPU, TP, proposer, k, dataset and metric), in load order; each consecutive
    pair whose published values differ by more than 2 % must move the same way in the simulation
    (TPOT rising with load, throughput saturating, speedup falling with batch)."""
    series: dict[tuple, list] = {}
    for r in rows:
        if load_of(r) == load_of(r):
            key = tuple(_cell(r.get(k)) for k in TREND_KEYS) + (_number(r.get("qps")) == _number(r.get("qps")),)
            series.setdefault(key, []).append(r)
    pairs, agree, misses = 0, 0, []
    for members in series.values():
        members.sort(key=load_of)
        for a, b in zip(members, members[1:]):
            published = float(b["published"]) - float(a["published"])
            if abs(published) <= 0.02 * abs(float(a["published"])):
                continue
            simulated = float(b["simulated"]) - float(a["simulated"])
            pairs += 1
            if (published > 0) == (simulated > 0):
                agree += 1
            else:
                misses.append(f"{a['id']} -> {b['id']}")
    return {"pairs": pairs, "reproduced": agree, "misses": misses}


def summary(rows: Sequence[dict]) -> dict:
    """The headline: simulated check rows only, overall and by acceptance class; calibration rows
    (which set a constant of the model, so are no evidence of its accuracy) apart."""
    simulated = [r for r in rows if r["status"] == SIMULATED]
    checks = [r for r in simulated if _text(r.get("role")) == "check"]
    calibration = [r for r in simulated if _text(r.get("role")) == "calibration"]
    return {
        "rows": len(rows),
        "simulated": len(simulated),
        "not_reproducible": len(rows) - len(simulated),
        "unlabelled": len(simulated) - len(checks) - len(calibration),  # recorded before rows had a role
        "check": _figures(checks),
        "by_class": {c: _figures([r for r in checks if r.get("acceptance_class") == c]) for c in ACCEPTANCE_CLASSES},
        "at_load": _figures([r for r in checks if at_load(r)]),
        "batch_one": _figures([r for r in checks if batch_one(r)]),
        "trends": trends(checks),
        "calibration": _figures(calibration),
        "calibrated_by": sorted({_text(r.get("calibrated_by")) for r in calibration if _text(r.get("calibrated_by"))}),
    }
