"""The "When does speculation pay off?" page: one answer per deployment, with its uncertainty.

Everything comes from the pays-off sweep's recorded files (``paysoff.csv``,
``paysoff_crossovers.csv``, ``recommended_schedules.json``); nothing is computed in the
browser.  Each deployment (model, GPU, tensor parallelism, proposer and head, acceptance) gets
one answer under the primary verify-cost setting; the two verify-attention bounds are drawn as
a band around the recommended schedule, not as a second answer.  Without the files the page
says so and shows how to record them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Optional

import pandas as pd

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json
from simulator.schemas import CROSSOVER_REQUIRED, PAYSOFF_REQUIRED, SCHEDULE_ENTRY_FIELDS, SCHEDULES_FIELDS
from simulator.util import units
from simulator.website import crosscheck, names
from simulator.website.charts import PLOT_CONFIG, export_layout, figure_json
from simulator.website.paysoff_answer import answer, setting_label
from simulator.website.paysoff_charts import NARROW_LAYOUT, NARROW_NAMES, NARROW_PX, describe, speedup_vs_x

CSV_NAME = "paysoff.csv"
CROSSOVERS_NAME = "paysoff_crossovers.csv"
SCHEDULES_NAME = "recommended_schedules.json"
SCRIPT = Path(__file__).resolve().parent / "static" / "paysoff.js"
# dotted Python paths in recorded derivation texts ("...; simulator.speculative.acceptance_convert.f)"):
# the page says how, in words, not which function did it
CODE_PATH = re.compile(r"\s*\(simulator(?:\.\w+)+[^)]*\)|(?:;\s*|,?\s*solved by\s+)?\bsimulator(?:\.\w+)+")
# the page opens on the first deployment of this proposer (a learned drafter most readers compare against)
DEFAULT_PROPOSER = "eagle3"


def proposer_label(name: str) -> str:
    """The proposer registry's label for a recorded proposer name (the name itself if unknown)."""
    return names.proposer(name)


def profile_words(rows: pd.DataFrame, entry: dict) -> str:
    """Which step-time profile a deployment's runs used, from their recorded profile id: where the
    built-in profile of the card's GPU carries another GPU's kernel constants (the H200 keeps the
    H100's), the card says so instead of "H200 (built-in profile)" over H100 constants (issue 33)."""
    if "profile_id" not in rows.columns:
        return "profile not recorded"
    mine = rows[(rows["model"] == entry["model"]) & (rows["device"] == entry["device"]) & (rows["tensor_parallel_size"] == int(entry["tensor_parallel_size"]))]
    ids = sorted({str(v) for v in mine["profile_id"].dropna()})
    sources = sorted({str(v) for v in mine["profile_source"].dropna()}) if "profile_source" in mine.columns else []
    if not ids:
        return "profile not recorded"
    kind = "built-in profile" if sources == ["builtin"] else f"{', '.join(sources)} profile"
    device = str(entry["device"]).lower()
    constants = {m.group(1) for i in ids if (m := re.match(r"builtin-v\d+:([a-z0-9_]+?)-", i))}
    carried = sorted(constants - {device})
    text = f"{kind} {', '.join(ids)}"
    if carried:
        text += (f": the {', '.join(c.upper() for c in carried)}'s kernel constants (measured there; the {device.upper()} has none of its own yet), "
                 f"with the {device.upper()}'s own memory and bandwidth")
    return text


def load(paysoff_csv: Optional[Path], crossovers_csv: Optional[Path], schedules_json: Optional[Path]):
    """The three recorded files, or None when the sweep has not been recorded."""
    paths = (paysoff_csv, crossovers_csv, schedules_json)
    if any(p is None for p in paths) or not all(Path(p).is_file() for p in paths):
        return None
    try:
        rows = pd.read_csv(paysoff_csv, keep_default_na=False, na_values=[""])
        crossovers = pd.read_csv(crossovers_csv, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"pays-off CSV {paysoff_csv}: not readable ({exc})") from exc
    for name in PAYSOFF_REQUIRED:
        if name not in rows.columns:
            raise ConfigError(f"pays-off CSV {paysoff_csv}: missing column {name!r}; rebuild with `python build.py`")
    for name in ("acceptance", "k_schedule", "attention"):
        rows[name] = rows[name].fillna("")
    # a speculative server's runs at k = 0 everywhere (the schedule's "off"), not the schedule itself
    rows["drafter_idle"] = rows["drafter_idle"].astype(str).str.lower() == "true" if "drafter_idle" in rows.columns else False
    # vLLM 0.30's adaptive verification at the grid's largest k: compared with the answer, never a fixed k of the grid
    rows["adaptive_verification"] = rows["adaptive_verification"].astype(str).str.lower() == "true" if "adaptive_verification" in rows.columns else False
    for name in CROSSOVER_REQUIRED:
        if name not in crossovers.columns:
            raise ConfigError(f"crossovers CSV {crossovers_csv}: missing column {name!r}; rebuild with `python build.py`")
        crossovers[name] = crossovers[name].fillna("").astype(str)
    schedules = read_json(schedules_json, "recommended schedules")
    if not isinstance(schedules, dict) or any(f not in schedules for f in SCHEDULES_FIELDS) or any(
        f not in e for e in schedules["schedules"] for f in SCHEDULE_ENTRY_FIELDS
    ):
        raise ConfigError(f"recommended schedules {schedules_json}: from an older sweep (no deployments or verify cost); rebuild with `python build.py`")
    return rows, crossovers, schedules


def best_k_table(entries: list[dict], bounds: list[str]) -> dict:
    """Best k per deployment and concurrency (closed loop, primary setting), with the bounds' best k beside it
    and, where the measured best k rises again at a larger batch, by how much it beats the schedule's k."""
    xs = sorted({c["x"] for e in entries for c in e["comparison"] if c["mode"] == "closed_loop"})
    table = []
    for e in entries:
        by_x = {c["x"]: c for c in e["comparison"] if c["mode"] == "closed_loop"}
        cells = []
        for x in xs:
            c = by_x.get(x)
            if c is None:
                cells.append(None)
                continue
            scheduled = _schedule_k(e["num_speculative_tokens_per_batch_size"], int(x))
            others = [str(k) if k else "off" for k in sorted(set(c.get("best_k_under_bounds", {}).values()))]
            gain = c["best_fixed_tpot_speedup"] / c["schedule_tpot_speedup"] - 1 if c["best_fixed_k"] != scheduled and c["schedule_tpot_speedup"] else None
            cells.append({"k": c["best_fixed_k"], "bounds": others, "schedule_k": scheduled, "gain": gain})
        table.append({"label": e["deployment_label"], "acceptance": e["label"], "cells": cells})
    return {"xs": [int(x) for x in xs], "rows": table, "bounds": bounds}


def _ks(rows: pd.DataFrame, acceptance: str, mode: str) -> list[int]:
    fixed = rows[(rows["acceptance"] == acceptance) & (rows["mode"] == mode) & (rows["k_schedule"] == "") & ~rows["adaptive_verification"]]
    return sorted(int(k) for k in fixed["num_speculative_tokens"].unique())


def _schedule_k(schedule, batch: int) -> int:
    return next((k for start, end, k in schedule if start <= batch <= end), 0)


def plain_words(text: str) -> str:
    """A recorded derivation as a reader reads it: no dotted Python paths, arrows and powers typeset."""
    text = units.acceptance_lengths_in_text(names.methods_in_text(names.settings_in_text(CODE_PATH.sub("", text or ""))))
    return re.sub(r"\^([a-z0-9])", lambda m: SUPERSCRIPT.get(m.group(1), "^" + m.group(1)), text.replace(" -> ", " → "))


SUPERSCRIPT = dict(zip("0123456789ik", "⁰¹²³⁴⁵⁶⁷⁸⁹ⁱᵏ"))


def acceptance_summary(entry: dict) -> str:
    """The acceptance a deployment's runs used, in words, from the recorded numbers."""
    lengths = ", ".join(f"{v:.2f} at k = {k}" for k, v in entry.get("acceptance_length_at_k", {}).items())
    if entry.get("acceptance_per_position"):
        rates = ", ".join(f"{p:.2f}" for p in entry["acceptance_per_position"])
        text = f"Per-position acceptance rates {rates} (position 1 first, each given the earlier ones were accepted)"
    elif entry.get("acceptance_rate") is not None:
        text = f"An acceptance rate of {entry['acceptance_rate']:.3g} for every proposed token, independently"
    else:
        text = "Acceptance as recorded"
    return text + (f"; mean acceptance length {lengths}" if lengths else "")


def crossover_table(crossovers: pd.DataFrame, key: str, modes: list[str], settings: list[str]) -> dict:
    """Where each fixed k crosses 1x, under the primary verify cost and under each bound: one column
    per (mode, setting), one row per k (issue 26: the bounds' crossovers were only in the CSV)."""
    mine = crossovers[crossovers["acceptance"] == key]
    columns = [{"mode": m, "setting": s, "label": setting_label(s), "unit": "in flight" if m == "closed_loop" else "req/s"}
               for m in modes for s in settings if len(mine[(mine["mode"] == m) & (mine["attention"] == s)])]
    table = []
    for k in sorted(int(k) for k in mine["num_speculative_tokens"].unique()):
        cells = []
        for c in columns:
            found = mine[(mine["mode"] == c["mode"]) & (mine["attention"] == c["setting"]) & (mine["num_speculative_tokens"] == k)]
            if found.empty:
                cells.append({"text": "not run", "pays": None})
                continue
            r = found.iloc[0]
            if pd.isna(r["crossover_x"]):
                cells.append({"text": "pays throughout", "pays": True})
            else:
                several = ";" in str(r["crossings"])
                cells.append({"text": f"{r['crossover']}" + (f" ({r['crossings']})" if several else ""), "pays": False})
        table.append({"k": k, "cells": cells})
    return {"columns": columns, "rows": table}


def context(data, published: Optional[pd.DataFrame] = None) -> dict:
    """What templates/paysoff.html renders; ``None`` data: not recorded yet.  ``published``: the
    published comparison (published.csv), whose closest check rows each card links to."""
    if data is None:
        return {"recorded": False}
    rows, crossovers, schedules = data
    entries = schedules["schedules"]
    verify = schedules["verify_cost"]
    bounds = list(verify.get("bounds", []))
    figures, selections = {}, []
    provenance = f"Simulated with Vidur {schedules.get('vidur_version')} + vidur-specdec (model hash {schedules.get('simulator_source_hash')}); source: {CSV_NAME}."
    for entry in entries:
        modes = [m for m in ("closed_loop", "poisson") if any(c["mode"] == m for c in entry["comparison"])]
        figures.update(_figures(rows, crossovers, entry, modes, bounds, provenance))
        selections.append(_selection(rows, crossovers, schedules, entry, modes, bounds, published))
    default = next((s for s in selections if s["entry"]["proposer"] == DEFAULT_PROPOSER), selections[0])
    groups: dict[str, list] = {}
    for s in selections:
        groups.setdefault(s["entry"]["deployment_label"], []).append(s)
    return {
        "recorded": True,
        "groups": groups,
        "default": default["key"],
        "selections": selections,
        "data": {"figures": figures, "config": PLOT_CONFIG, "default": default["key"], "keys": [s["key"] for s in selections]},
        "verify": {**verify, "why": plain_words(verify.get("why", "")), "label": names.setting_with_role(verify["attention"])},
        "bounds": bounds,
        "bound_labels": [names.setting_with_role(b) for b in bounds],
        "deployments": list(dict.fromkeys(e["deployment_label"] for e in entries)),
        "tie_rule": schedules.get("tie_rule", ""),
        "vllm": schedules.get("vllm", {}),
        "best": best_k_table(entries, bounds),
        "workload": schedules.get("workload", {}),
        "batch_size_cap": schedules.get("batch_size_cap"),
        "chunk_size": schedules.get("chunk_size"),
        "provenance": provenance,
        "files": {"csv": CSV_NAME, "crossovers": CROSSOVERS_NAME, "schedules": SCHEDULES_NAME},
        "loads": sorted(float(r) for r in rows["arrival_rate"].dropna().unique()),
    }


def _card_line(entry: dict, bounds: list[str]) -> str:
    """The deployment in one line (target, GPUs, proposer, acceptance, verify cost and band): an
    exported chart carries it, so a saved image still says what was simulated."""
    return (
        f"{units.model_label(entry['model'])} on {entry['tensor_parallel_size']} × {entry['device'].upper()} (TP {entry['tensor_parallel_size']}), "
        f"{proposer_label(entry['proposer'])}" + (f" {entry['draft_model']}" if entry.get("draft_model") else "")
        + f"; acceptance: {entry['label']}; verify cost {names.setting(entry['attention'])}, band {' / '.join(names.setting(b) for b in bounds)}"
    )


def _figures(rows: pd.DataFrame, crossovers: pd.DataFrame, entry: dict, modes: list[str], bounds: list[str], provenance: str) -> dict:
    """One deployment's speedup charts, one per load mode, keyed 'closed|key' / 'open|key' as
    static/paysoff.js looks them up; each with its narrow-screen layout and export captions."""
    key = entry["acceptance"]
    card = _card_line(entry, bounds)
    figures = {}
    for mode in modes:
        name = "closed" if mode == "closed_loop" else "open"
        title = f"Median TPOT speedup vs {'requests in flight (closed loop)' if mode == 'closed_loop' else 'Poisson load (open loop)'}: {entry['deployment_label']}"
        figures[f"{name}|{key}"] = {
            "figure": figure_json(speedup_vs_x(rows, crossovers, mode, entry, bounds)),
            "narrow": {"below_px": NARROW_PX, "layout": NARROW_LAYOUT, "names": NARROW_NAMES},
            "export": export_layout(title, [card, provenance, "Dashed: 1× = no speculation; ×: where a fixed k crosses 1×; black diamonds: the recommended schedule; grey: its band under the verify-cost bounds."]),
            "filename": f"paysoff-{name}-{key}",
        }
    return figures


def _selection(rows: pd.DataFrame, crossovers: pd.DataFrame, schedules: dict, entry: dict, modes: list[str], bounds: list[str],
               published: Optional[pd.DataFrame]) -> dict:
    """Everything one deployment's card shows besides its charts: the answer, crossovers under
    each verify-cost setting, the closest published checks, its profile and acceptance in words,
    and the open- and closed-loop batch tables that explain the speedups."""
    key = entry["acceptance"]
    settings = [entry["attention"]] + [b for b in bounds if b != entry["attention"]]
    little = _poisson_batches(rows, entry)
    return {
        "key": key,
        "id": f"sel-{key}".replace(".", "_"),
        "entry": entry,
        "modes": modes,
        "descriptions": {m: describe(entry, m, bounds, _ks(rows, key, m)) for m in modes},
        "crossovers": crossover_table(crossovers, key, modes, settings),
        "answer": answer(entry, bounds),
        "checks": crosscheck.closest(published, entry, schedules.get("vllm", {}).get("version")),
        "profile": profile_words(rows, entry),
        "proposer": proposer_label(entry["proposer"]),
        "verify_label": names.setting(entry["attention"]),
        "band_labels": [names.setting(b) for b in entry.get("stops_paying_band", {})],
        "acceptance": {"summary": acceptance_summary(entry), "how": plain_words(entry.get("acceptance_derivation", ""))},
        "little": little,
        "poisson_k": sorted({int(r["k"]) for r in little}),
        "batches": _batches(_closed_loop_rows(rows, entry)),
    }


def _poisson_batches(rows: pd.DataFrame, entry: dict) -> list[dict]:
    """Per Poisson load and fixed k (primary verify cost): the speedup beside the decoding batch
    with and without speculation, since at a fixed arrival rate a faster server runs a smaller
    batch (Little's law) and that, not only the tokens per step, sets the speedup."""
    key = entry["acceptance"]
    poisson = rows[(rows["mode"] == "poisson") & (rows["acceptance"] == key) & (rows["k_schedule"] == "") & ~rows["adaptive_verification"] & (rows["attention"] == entry["attention"])]
    baselines = rows[(rows["mode"] == "poisson") & (rows["num_speculative_tokens"] == 0) & (rows["model"] == entry["model"])].set_index("arrival_rate")
    return [
        {
            "load": r["arrival_rate"],
            "k": int(r["num_speculative_tokens"]),
            "speedup": r["tpot_speedup"],
            "tokens_per_step": r["mean_acceptance_length"],
            "batch": r["mean_decode_batch"],
            "baseline_batch": baselines.loc[r["arrival_rate"], "mean_decode_batch"],
            "overloaded": str(baselines.loc[r["arrival_rate"], "overloaded"]).lower() == "true",
        }
        for r in poisson.sort_values(["arrival_rate", "num_speculative_tokens"]).to_dict("records")
    ]


def _closed_loop_rows(rows: pd.DataFrame, entry: dict) -> pd.DataFrame:
    """The deployment's fixed-k closed-loop runs and its target's baselines (k = 0), under the
    primary verify cost: what :func:`_batches` reads the decoding batch from."""
    return rows[(rows["mode"] == "closed_loop") & (rows["model"] == entry["model"]) & (rows["k_schedule"] == "") & ~rows["adaptive_verification"]
                & ((rows["acceptance"] == entry["acceptance"]) | (rows["num_speculative_tokens"] == 0)) & (rows["attention"].isin(["", entry["attention"]]))]


def _batches(rows: pd.DataFrame) -> list[dict]:
    """Mean decoding batch per concurrency: without speculation, and at the smallest and largest k."""
    out = []
    for c, group in rows.groupby("concurrency", sort=True):
        base = group[group["num_speculative_tokens"] == 0]["mean_decode_batch"]
        spec = group[group["num_speculative_tokens"] > 0].sort_values("num_speculative_tokens")
        if base.empty or spec.empty:
            continue
        out.append({
            "concurrency": int(c), "baseline": float(base.iloc[0]),
            "k_low": int(spec.iloc[0]["num_speculative_tokens"]), "low": float(spec.iloc[0]["mean_decode_batch"]),
            "k_high": int(spec.iloc[-1]["num_speculative_tokens"]), "high": float(spec.iloc[-1]["mean_decode_batch"]),
        })
    return out


def copy_files(paysoff_csv, crossovers_csv, schedules_json, directory: Path) -> None:
    """The page's data files and script, published next to it."""
    shutil.copyfile(SCRIPT, directory / SCRIPT.name)
    for source, name in ((paysoff_csv, CSV_NAME), (crossovers_csv, CROSSOVERS_NAME), (schedules_json, SCHEDULES_NAME)):
        if source is not None and Path(source).is_file():
            shutil.copyfile(source, directory / name)
