"""Which published check rows are closest to a pays-off deployment, and whether they disagree.

The pays-off page answers with simulated numbers only; the published page checks the same model
against measurements.  A reader acting on a card needs both in one place: the check rows that
test what the card's answer rests on, with their errors, and a warning where they miss (issue
26: the SGLang batch series on the same model and GPU missed by up to 60 % while the card said
nothing).

"Closest" is two questions, because a speedup rests on two things:

* **the speculative step**: check rows with the same proposer on the same GPU, the same model
  when there are any;
* **the target's own step time**: check rows without speculation on the same GPU and tensor
  parallelism, of the same model or one of about the same size (within a factor of 1.5 in
  parameters, read from the model's name).

Within each, the rows closest to the *serving* the card answers for are kept (issue 33: the 70B
TP 4 cards quoted four vLLM 0.6.0 rows, 17-24 % too fast, and left out eleven vLLM 0.15.1 rows
at the same TP, 18-77 % too slow): the same engine (the cards answer for vLLM), then the stated
version nearest the one the schedule needs (a row whose version is unstated is not ruled out by
it), then the same tensor parallelism.  The rows this drops are still listed, as "further".
Every card's load range covers every check row's load, so load orders the rows but drops none.

A check row misses when its |error| is above the published page's own threshold
(:data:`simulator.website.published.MISS_PCT`).  A measured slowdown (a published speedup below
1x) that the simulation puts at or above 1x contradicts a card whose schedule speculates at that
load (or, for a row under a request rate, anywhere), miss or not: it is named on the answer,
never folded into "1 of 5 miss".
"""

from __future__ import annotations

import math
import re
from typing import Optional

import pandas as pd
from packaging.version import InvalidVersion, Version

from simulator.util import units
from simulator.website import names
from simulator.website.published import LABELS, MISS_PCT, percent, with_unit

SIZE_RATIO = 1.5  # "about the same size": parameters within this factor
PAGE = "published.html"
ENGINES = names.ENGINES
SERVING_ENGINE = "vllm"  # every pays-off card answers for vLLM (its schedule is a vLLM config key)
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


def _version(value) -> Optional[Version]:
    try:
        return Version(str(value)) if isinstance(value, str) and value else None
    except InvalidVersion:
        return None


def _distance(a: Version, b: Version) -> float:
    """How far apart two releases are, in minor versions (0.6.0 to 0.24.0: 18)."""
    return abs((a.major * 1000 + a.minor) - (b.major * 1000 + b.minor)) + abs(a.micro - b.micro) / 1000


def nearest_version(rows: pd.DataFrame, version: Optional[str]) -> pd.Series:
    """True for the rows whose stated engine version is the nearest to ``version`` among those stated,
    and for every row that states none (an unstated version is not evidence of a far one)."""
    target = _version(version)
    stated = rows["engine_version"].map(_version)
    if target is None or stated.isna().all():
        return pd.Series(True, index=rows.index)
    distance = stated.map(lambda v: _distance(v, target) if v is not None else math.nan)
    return distance.isna() | (distance == distance.min())


def _closest_serving(rows: pd.DataFrame, entry: dict, version: Optional[str]) -> pd.DataFrame:
    """The rows of ``rows`` nearest the card's serving: engine, then version, then TP (module docstring)."""
    if rows.empty:
        return rows
    same_engine = rows["engine"] == SERVING_ENGINE
    rows = rows[same_engine] if same_engine.any() else rows
    rows = rows[nearest_version(rows, version)]
    same_tp = rows["tp"] == int(entry["tensor_parallel_size"])
    return rows[same_tp] if same_tp.any() else rows


def speculative_candidates(checks: pd.DataFrame, entry: dict) -> pd.DataFrame:
    """Every check row with the card's proposer on its GPU (the same model first, when there are any)."""
    same = checks[(checks["gpu"] == entry["device"].lower()) & (checks["proposer"] == entry["proposer"])]
    return _best_tier(same, [same["model"] == entry["model"]])


def step_time_candidates(checks: pd.DataFrame, entry: dict) -> pd.DataFrame:
    """Every check row without speculation on the card's GPU and TP, of a model about its size."""
    plain = checks[(checks["gpu"] == entry["device"].lower()) & (checks["proposer"] == "none") & (checks["tp"] == int(entry["tensor_parallel_size"]))]
    size = model_size(entry["model"])
    return plain[(plain["model"] == entry["model"]) | plain["model"].map(lambda m: _similar_size(model_size(m), size)).astype(bool)]


def speculative_rows(checks: pd.DataFrame, entry: dict, version: Optional[str] = None) -> pd.DataFrame:
    return _by_load(_closest_serving(speculative_candidates(checks, entry), entry, version))


def step_time_rows(checks: pd.DataFrame, entry: dict, version: Optional[str] = None) -> pd.DataFrame:
    return _by_load(_closest_serving(step_time_candidates(checks, entry), entry, version))


def _by_load(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows in load order (batch, concurrency or request rate), the row id breaking ties: a stable order."""
    if rows.empty:
        return rows
    load = rows[["batch_size", "concurrency", "qps"]].bfill(axis=1).iloc[:, 0].astype(float)
    return rows.assign(_load=load).sort_values(["_load", "id"], kind="mergesort").drop(columns="_load")


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
            "source_label": names.source(group["source_url"].iloc[0]),
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
            "slowdowns": contradictions(group) if kind == "speculative" else [],
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
        "sources_text": units.plural(rows["source"].nunique(), "source"),
        "misses": int((errors.abs() > MISS_PCT).sum()),
        "low": percent(errors.min()),
        "high": percent(errors.max()),
        "models": sorted({str(m).split("/")[-1] for m in rows["model"]}),
    }


def _row(row: dict, kind: str) -> dict:
    return {
        "kind": kind,
        "id": row["id"],
        "source": names.source(row["source_url"]),
        "href": f"{PAGE}#{row_anchor(row['id'])}",
        "model": str(row["model"]).split("/")[-1],
        "engine": names.engine(row["engine"]) + (f" {row['engine_version']}" if isinstance(row.get("engine_version"), str) and row["engine_version"] else ""),
        "tp": int(row["tp"]),
        "load": _load(row),
        "k": "" if kind != "speculative" or pd.isna(row["k"]) else f"{int(row['k'])}",
        "metric": LABELS.get(row["metric"], row["metric"]),
        "published": with_unit(row["published"], row["metric"]),
        "simulated": with_unit(row["simulated"], row["metric"], "3g"),
        "error": percent(row["error_pct"]),
        "misses": abs(float(row["error_pct"])) > MISS_PCT,
        "further": False,  # True: a candidate the serving match dropped (listed, not in the card's error)
    }


def _speculates_at(entry: dict, in_flight: Optional[float]) -> bool:
    """Whether the card's schedule runs a k > 0 at ``in_flight`` requests (None, a request rate the
    schedule cannot be read at: anywhere); only there does a measured slowdown contradict the card."""
    schedule = entry.get("num_speculative_tokens_per_batch_size") or []
    if in_flight is None:
        return any(k for _, _, k in schedule)
    return any(k for start, end, k in schedule if start <= in_flight <= end)


def _in_flight(row: dict) -> Optional[float]:
    """A closed-loop row's requests in flight (its batch size or concurrency); None under a request rate."""
    for key in ("batch_size", "concurrency"):
        value = row.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return None


def contradictions(rows: pd.DataFrame) -> list[dict]:
    """Speculative check rows that measured a slowdown the simulation does not: a published speedup
    below 1x simulated at 1x or more (issue 33: "1 of 5 miss" hid a measured 0.71x)."""
    speedups = rows[(rows["metric"] == "speedup") & (rows["published"].astype(float) < 1) & (rows["simulated"].astype(float) >= 1)]
    return [{
        "id": r["id"], "href": f"{PAGE}#{row_anchor(r['id'])}", "source": names.source(r["source_url"]), "load": _load(r),
        "k": "" if pd.isna(r["k"]) else f"{int(r['k'])}", "published": units.speedup(float(r["published"])), "simulated": units.speedup(float(r["simulated"])),
        "engine": names.engine(r["engine"]), "in_flight": _in_flight(r),
    } for r in _by_load(speedups).to_dict("records")]


def error_range(rows: pd.DataFrame, model: Optional[str] = None) -> Optional[dict]:
    """The signed errors of a set of rows as a range, with what they share, for the answer's line;
    with ``model`` (the card's), the models the rows are of where none is the card's own."""
    if rows.empty:
        return None
    models = sorted({str(m).split("/")[-1] for m in rows["model"]})
    other = model is not None and model not in set(rows["model"])
    errors = rows["error_pct"].astype(float)
    versions = sorted({str(v) for v in rows["engine_version"] if isinstance(v, str) and v}, key=Version)
    engines = sorted({names.engine(e) for e in rows["engine"]})
    serving = ", ".join(engines) + (f" {', '.join(versions)}" if versions else "")
    return {
        "low": percent(errors.min()), "high": percent(errors.max()), "single": len(rows) == 1,
        "rows": units.plural(len(rows), "row"), "sources": units.plural(rows["source"].nunique(), "source"),
        "serving": serving, "tp": ", ".join(f"TP {tp}" for tp in sorted(set(rows["tp"]))),
        "misses": int((errors.abs() > MISS_PCT).sum()),
        "direction": direction(str(rows["metric"].iloc[0]), errors.tolist()) if rows["metric"].nunique() == 1 else "",
        "other_models": (", ".join(models[:3]) + (", …" if len(models) > 3 else "")) if other else "",
    }


def further(candidates: pd.DataFrame, closest: pd.DataFrame) -> Optional[dict]:
    """The candidate rows the serving match dropped (another engine, version or TP), as one range."""
    rest = candidates[~candidates["id"].isin(closest["id"])]
    return error_range(rest)


def closest(published: Optional[pd.DataFrame], entry: dict, version: Optional[str] = None) -> Optional[dict]:
    """The closest check rows to one deployment, in series and one by one; None without published data.
    ``version``: the vLLM version the card's schedule is for (the rows nearest it are kept)."""
    checks = _checks(published)
    if checks.empty:
        return None
    spec_candidates, plain_candidates = speculative_candidates(checks, entry), step_time_candidates(checks, entry)
    speculative, plain = speculative_rows(checks, entry, version), step_time_rows(checks, entry, version)
    series = _series(speculative, "speculative")
    mine = entry["model"].split("/")[-1]
    for item in series:
        item["other_models"] = [m for m in item["models"] if m != mine]
        item["range"] = item["low"] if item["rows"] == 1 else f"{item['low']} to {item['high']}"
    rows = [_row(r, "speculative") for r in speculative.to_dict("records")] + [_row(r, "step time") for r in plain.to_dict("records")]
    dropped = pd.concat([spec_candidates[~spec_candidates["id"].isin(speculative["id"])], plain_candidates[~plain_candidates["id"].isin(plain["id"])]])
    rows += [{**_row(r, "speculative" if r["proposer"] != "none" else "step time"), "further": True} for r in _by_load(dropped).to_dict("records")]
    step = _summary(plain)
    if step is not None:
        step["same_model"] = bool((plain["model"] == entry["model"]).all())
        step["range"] = error_range(plain, entry["model"])
    return {
        "speculative": series,
        "speculative_models": sorted({str(m).split("/")[-1] for m in speculative["model"]}),
        "speculative_range": error_range(speculative, entry["model"]),
        "speculative_further": further(spec_candidates, speculative),
        "step": step,
        "step_further": further(plain_candidates, plain),
        "rows": rows,
        # any candidate, the further ones too: a measured slowdown is never hidden by the serving match
        "contradictions": [x for x in contradictions(spec_candidates) if _speculates_at(entry, x["in_flight"])],
        "disagreeing": [s for s in series if s["misses"]],
        "step_disagrees": step is not None and step["misses"] > 0,
        "misses": sum(r["misses"] for r in rows if not r.get("further")),
        "miss_pct": MISS_PCT,
    }
