"""The published comparison's headline figures, computed from its recorded rows.

What the site states about ``data/results/published.csv``: the vLLM check rows' errors overall, by
acceptance class, at load and at batch one, and whether each published trend is reproduced; each
other engine class's apart.  It reads rows
only (as recorded, or as built), so the site needs no part of the reproduction that wrote them.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from simulator.schemas import ACCEPTANCE_CLASSES, ENGINE_CLASSES, SIMULATED, VLLM


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
    # each compared apart: max(nan, 16) is nan, which counted a concurrency row (blank batch_size) as not at load
    return _number(row.get("qps")) > 0 or _number(row.get("batch_size")) >= 8 or _number(row.get("concurrency")) >= 8 or _number(row.get("tp")) >= 2


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


def _by_engine(checks: Sequence[dict]) -> dict:
    """Each engine class's check rows: overall and at load, and the engine profiles they ran on."""
    out = {}
    for cls in ENGINE_CLASSES:
        members = [r for r in checks if _text(r.get("engine_class")) == cls]
        out[cls] = {
            **_figures(members),
            "at_load": _figures([r for r in members if at_load(r)]),
            "profiles": sorted({_text(r.get("engine_profile")) for r in members if _text(r.get("engine_profile"))}),
        }
    return out


def summary(rows: Sequence[dict]) -> dict:
    """The headline: simulated check rows of vLLM run on their own version's engine generation
    (``engine_class`` "vllm"), overall, by acceptance class, at load and at batch one; the other
    engine classes (vLLM V0 on the oldest profile, vLLM of unknown version on a proxy, other engines
    on an SGLang profile or a proxy) apart in ``by_engine``; calibration rows (which set a constant of the model, so are no
    evidence of its accuracy) apart."""
    simulated = [r for r in rows if r["status"] == SIMULATED]
    every_check = [r for r in simulated if _text(r.get("role")) == "check"]
    checks = [r for r in every_check if _text(r.get("engine_class")) == VLLM]
    calibration = [r for r in simulated if _text(r.get("role")) == "calibration"]
    return {
        "rows": len(rows),
        "simulated": len(simulated),
        "not_reproducible": len(rows) - len(simulated),
        "unlabelled": len(simulated) - len(every_check) - len(calibration),  # recorded before rows had a role
        # check rows recorded before rows had an engine class: counted in no engine's figures
        "engine_unrecorded": sum(_text(r.get("engine_class")) not in ENGINE_CLASSES for r in every_check),
        "check": _figures(checks),
        "by_class": {c: _figures([r for r in checks if r.get("acceptance_class") == c]) for c in ACCEPTANCE_CLASSES},
        "at_load": _figures([r for r in checks if at_load(r)]),
        "batch_one": _figures([r for r in checks if batch_one(r)]),
        "trends": trends(checks),
        "by_engine": _by_engine(every_check),
        "every_check": _figures(every_check),
        "calibration": _figures(calibration),
        "calibrated_by": sorted({_text(r.get("calibrated_by")) for r in calibration if _text(r.get("calibrated_by"))}),
    }
