"""Which published check rows are closest to a pays-off deployment, and whether they disagree.

The pays-off page answers with simulated numbers only; the published page checks the same model
against measurements.  A reader acting on a card needs both in one place: the check rows that
test what the card's answer rests on, with their errors, and a warning where they miss (issue
26: the SGLang batch series on the same model and GPU missed by up to 60 % while the card said
nothing).

"Closest" is two questions, because a speedup rests on two things:

* **the speculative step**: check rows with the same proposer on the same GPU, preferring the
  same model, then the same tensor parallelism;
* **the target's own step time**: check rows without speculation on the same GPU and tensor
  parallelism, the same model if there are any, else models of about the same size (within
  a factor of 1.5 in parameters, read from the model's name).

Only the best-matching tier of each is kept.  A check row misses when its |error| is above the
published page's own threshold (:data:`simulator.website.published.MISS_PCT`).
"""

from __future__ import annotations

import math
import re
from typing import Optional

import pandas as pd

from simulator.website.published import LABELS, MISS_PCT, percent, with_unit

SIZE_RATIO = 1.5  # "about the same size": parameters within this factor
PAGE = "published.html"
ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}
# metrics where a larger simulated value means the simulation is faster than the measurement
FASTER_WHEN_HIGHER = {"output_tokens_per_s", "decode_tokens_per_s", "requests_per_s", "speedup"}


def row_anchor(row_id: str) -> str:
    """The published page's anchor for one row (templates/published.html gives each row this id)."""
    return f"row-{row_id}"


def model_size(model: str) -> Optional[float]:
    """Billions of parameters as a model's name states them ("Llama-3.1-8B-Instruct" -> 8)."""
    match = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", model.split("/")[-1])
    return float(match.group(1)) if match else None


def _similar_size(a: Optional[float], b: Optional[float]) -> bool:
    return a is not None and b is not None and max(a, b) / min(a, b) <= SIZE_RATIO


def _checks(published: Optional[pd.DataFrame]) -> pd.DataFrame:
    if published is None or "role" not in published.columns:
        return pd.DataFrame()
    rows = published[(published["status"] == "simulated") & (published["role"] == "check") & published["error_pct"].notna()]
    return rows.assign(gpu=rows["gpu"].astype(str).str.lower(), tp=rows["tp"].astype(int))


def _best_tier(rows: pd.DataFrame, keys: list[pd.Series]) -> pd.DataFrame:
    """The rows matching the most of ``keys`` in order (lexicographic: the first key counts most)."""
    if rows.empty:
        return rows
    score = sum(key.astype(int) * 2 ** (len(keys) - i) for i, key in enumerate(keys))
    return rows[score == score.max()]


def speculative_rows(checks: pd.DataFrame, entry: dict) -> pd.DataFrame:
    same = checks[(checks["gpu"] == entry["device"].lower()) & (checks["proposer"] == entry["proposer"])]
    return _best_tier(same, [same["model"] == entry["model"], same["tp"] == int(entry["tensor_parallel_size"])])


def step_time_rows(checks: pd.DataFrame, entry: dict) -> pd.DataFrame:
    plain = checks[(checks["gpu"] == entry["device"].lower()) & (checks["proposer"] == "none") & (checks["tp"] == int(entry["tensor_parallel_size"]))]
    if plain.empty:
        return plain
    same = plain[plain["model"] == entry["model"]]
    if len(same):
        return same
    size = model_size(entry["model"])
    return plain[plain["model"].map(lambda m: _similar_size(model_size(m), size))]


def _load(row) -> str:
    for key, word in (("batch_size", "batch"), ("concurrency", "concurrency"), ("qps", "QPS")):
        value = row.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return f"{word} {float(value):g}"
    return ""


def _span(values: list[float], word: str) -> str:
    values = sorted(set(values))
    if not values:
        return ""
    return f"{word} {values[0]:g}" if len(values) == 1 else f"{word} {values[0]:g}–{values[-1]:g}"


def _series(rows: pd.DataFrame, kind: str) -> list[dict]:
    """One line per source and metric: where it was measured, its rows' errors, how many miss."""
    out = []
    for (source, metric), group in rows.groupby(["source", "metric"], sort=False):
        errors = group["error_pct"].astype(float)
        loads = []
        for key, word in (("batch_size", "batch"), ("concurrency", "concurrency"), ("qps", "QPS")):
            loads.append(_span([float(v) for v in group[key].dropna()], word))
        ks = [float(k) for k in group["k"].dropna()] if kind == "speculative" else []
        setting = ", ".join(part for part in [_span(ks, "k ="), *loads] if part)
        models = sorted(set(group["model"]))
        out.append({
            "kind": kind,
            "direction": direction(metric, errors.tolist()),
            "source": source,
            "engine": str(group["engine"].iloc[0]),
            "engine_label": ENGINES.get(str(group["engine"].iloc[0]), str(group["engine"].iloc[0])),
            "metric": metric,
            "metric_label": LABELS.get(metric, metric),
            "models": [m.split("/")[-1] for m in models],
            "setting": setting,
            "rows": len(group),
            "misses": int((errors.abs() > MISS_PCT).sum()),
            "low": percent(errors.min()),
            "high": percent(errors.max()),
            "href": f"{PAGE}#{row_anchor(group['id'].iloc[0])}",
        })
    return out


def direction(metric: str, errors: list[float]) -> str:
    """Which way a series misses, in a few words ("" when its errors go both ways)."""
    if all(e > 0 for e in errors):
        higher = True
    elif all(e < 0 for e in errors):
        higher = False
    else:
        return ""
    if metric == "speedup":
        return f"speedup {'over' if higher else 'under'}-predicted"
    faster = higher == (metric in FASTER_WHEN_HIGHER)
    return f"simulated {'faster' if faster else 'slower'} than measured"


def _summary(rows: pd.DataFrame) -> Optional[dict]:
    """All of a tier's rows at once: how many, from how many sources, how many miss, the error range."""
    if rows.empty:
        return None
    errors = rows["error_pct"].astype(float)
    return {
        "rows": len(rows),
        "sources": rows["source"].nunique(),
        "misses": int((errors.abs() > MISS_PCT).sum()),
        "low": percent(errors.min()),
        "high": percent(errors.max()),
        "models": sorted({str(m).split("/")[-1] for m in rows["model"]}),
    }


def _row(row: dict, kind: str) -> dict:
    return {
        "kind": kind,
        "id": row["id"],
        "href": f"{PAGE}#{row_anchor(row['id'])}",
        "model": str(row["model"]).split("/")[-1],
        "engine": ENGINES.get(str(row["engine"]), str(row["engine"])),
        "load": _load(row),
        "k": "" if kind != "speculative" or pd.isna(row["k"]) else f"{int(row['k'])}",
        "metric": LABELS.get(row["metric"], row["metric"]),
        "published": with_unit(row["published"], row["metric"]),
        "simulated": with_unit(row["simulated"], row["metric"], "3g"),
        "error": percent(row["error_pct"]),
        "misses": abs(float(row["error_pct"])) > MISS_PCT,
    }


def closest(published: Optional[pd.DataFrame], entry: dict) -> Optional[dict]:
    """The closest check rows to one deployment, in series and one by one; None without published data."""
    checks = _checks(published)
    if checks.empty:
        return None
    speculative, plain = speculative_rows(checks, entry), step_time_rows(checks, entry)
    series = _series(speculative, "speculative")
    mine = entry["model"].split("/")[-1]
    for item in series:
        item["other_models"] = [m for m in item["models"] if m != mine]
        item["range"] = item["low"] if item["rows"] == 1 else f"{item['low']} to {item['high']}"
    rows = [_row(r, "speculative") for r in speculative.to_dict("records")] + [_row(r, "step time") for r in plain.to_dict("records")]
    step = _summary(plain)
    if step is not None:
        step["same_model"] = bool((plain["model"] == entry["model"]).all())
    return {
        "speculative": series,
        "speculative_models": sorted({str(m).split("/")[-1] for m in speculative["model"]}),
        "step": step,
        "rows": rows,
        "disagreeing": [s for s in series if s["misses"]],
        "step_disagrees": step is not None and step["misses"] > 0,
        "misses": sum(r["misses"] for r in rows),
        "miss_pct": MISS_PCT,
    }
