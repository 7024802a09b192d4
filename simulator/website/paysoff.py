"""The "When does speculation pay off?" page: one answer per deployment, with its uncertainty.

Everything comes from the pays-off sweep's recorded files (``paysoff.csv``,
``paysoff_crossovers.csv``, ``recommended_schedules.json``); nothing is computed in the
browser.  Each deployment (model, GPU, tensor parallelism, proposer and head, acceptance) gets
one answer under the primary verify-cost setting; the two verify-attention bounds are drawn as
a band around the recommended schedule, not as a second answer.  Without the files the page
says so and shows how to record them.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Optional

import pandas as pd
import plotly.graph_objects as go

from simulator.errors import ConfigError
from simulator.inputs import read_json
from simulator.website import units
from simulator.website.charts import PLOT_CONFIG, REFERENCE_COLOR, SPEEDUP_TICKS, export_layout, figure_json

CSV_NAME = "paysoff.csv"
CROSSOVERS_NAME = "paysoff_crossovers.csv"
SCHEDULES_NAME = "recommended_schedules.json"
SCRIPT = Path(__file__).resolve().parent / "static" / "paysoff.js"
K_COLORS = ("#1f5fa8", "#0e7490", "#4d7c0f", "#a16207", "#c2410c", "#b91c1c", "#86198f", "#4b5563")
K_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "solid", "dash")
SCHEDULE_COLOR = "#111827"
BAND_COLOR = "rgba(107, 114, 128, 0.25)"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
BOUND_LABEL = {"kv_once": "KV read once (lower bound)", "per_token": "per token (upper bound)", "interpolated": "interpolated"}
# the page opens on the first deployment of this proposer (a learned drafter most readers compare against)
DEFAULT_PROPOSER = "eagle3"
REQUIRED = ("mode", "acceptance", "tpot_speedup", "num_speculative_tokens", "k_schedule", "attention", "model", "device", "tensor_parallel_size", "mean_decode_batch")


def proposer_label(name: str) -> str:
    """The proposer registry's label for a recorded proposer name (the name itself if unknown)."""
    from simulator.speculative import proposers

    kind = proposers.find(name)
    return kind.label if kind else name


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
    for name in REQUIRED:
        if name not in rows.columns:
            raise ConfigError(f"pays-off CSV {paysoff_csv}: missing column {name!r}; rebuild with `python build.py`")
    for name in ("acceptance", "k_schedule", "attention"):
        rows[name] = rows[name].fillna("")
    for name in ("crossover", "crossings"):
        if name not in crossovers.columns:
            raise ConfigError(f"crossovers CSV {crossovers_csv}: missing column {name!r}; rebuild with `python build.py`")
        crossovers[name] = crossovers[name].fillna("").astype(str)
    schedules = read_json(schedules_json, "recommended schedules")
    if "verify_cost" not in schedules or any("deployment" not in e for e in schedules.get("schedules", [])):
        raise ConfigError(f"recommended schedules {schedules_json}: from an older sweep (no deployments or verify cost); rebuild with `python build.py`")
    return rows, crossovers, schedules


def _axis(title: str, log: bool = False) -> dict:
    axis = {"title": {"text": title, "standoff": 8}, "gridcolor": "#e5e7eb", "zeroline": False, "automargin": True}
    if log:
        axis.update(type="log", dtick=math.log10(2), tickformat="d")
    return axis


def y_ticks(y_range) -> list[float]:
    """The speedup ticks inside the (log10) range, so the top curve is never above the last label."""
    lo, hi = 10 ** y_range[0], 10 ** y_range[1]
    return [t for t in SPEEDUP_TICKS if lo <= t <= hi]


def _layout(fig: go.Figure, x_title: str, log_x: bool, y_range) -> go.Figure:
    ticks = y_ticks(y_range)
    fig.update_layout(
        template="none",
        font={"family": FONT, "size": 14, "color": "#111827"},
        margin={"l": 56, "r": 12, "t": 8, "b": 8},
        height=460,
        xaxis=_axis(x_title, log_x),
        yaxis={**_axis("median TPOT speedup (×, log scale)"), "type": "log", "range": y_range, "tickvals": ticks, "ticktext": [f"{t:g}×" for t in ticks]},
        # the legend sits above the plot: below it, it collided with the x-axis title
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom", "traceorder": "normal"},
        hovermode="closest",
    )
    return fig


def _unit(mode: str) -> tuple[str, str]:
    return ("concurrency", " in flight") if mode == "closed_loop" else ("arrival_rate", " req/s")


def speedup_vs_x(rows: pd.DataFrame, crossovers: pd.DataFrame, mode: str, entry: dict, bounds: list[str], y_range) -> go.Figure:
    """Fixed-k speedups and the recommended schedule under the primary setting, the schedule's band under
    the bounds, 1× and the crossovers, against concurrency or load."""
    x_name, unit = _unit(mode)
    acceptance, primary = entry["acceptance"], entry["attention"]
    mine = rows[(rows["mode"] == mode) & (rows["acceptance"] == acceptance)]
    fig = go.Figure()
    xs = sorted(rows[(rows["mode"] == mode) & (rows["model"] == entry["model"])][x_name].dropna().unique())
    fig.add_trace(go.Scatter(x=[xs[0], xs[-1]], y=[1, 1], mode="lines", line={"color": REFERENCE_COLOR, "dash": "dash", "width": 1.5}, name="1× = no speculation", hoverinfo="skip"))
    scheduled = mine[mine["k_schedule"] != ""]
    band = scheduled[scheduled["attention"].isin(bounds)]
    if len(band):
        by_x = band.groupby(x_name)["tpot_speedup"]
        lo, hi = by_x.min(), by_x.max()
        main = scheduled[scheduled["attention"] == primary].set_index(x_name)["tpot_speedup"]
        lo, hi = pd.concat([lo, main], axis=1).min(axis=1), pd.concat([hi, main], axis=1).max(axis=1)
        fig.add_trace(go.Scatter(x=[float(v) for v in hi.index], y=hi.round(4).tolist(), mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip"))
        fig.add_trace(
            go.Scatter(
                x=[float(v) for v in lo.index], y=lo.round(4).tolist(), mode="lines", line={"width": 0}, fill="tonexty", fillcolor=BAND_COLOR,
                name="schedule's band (verify-cost bounds)", hoverinfo="skip",
            )
        )
    fixed = mine[(mine["k_schedule"] == "") & (mine["attention"] == primary)]
    for k, group in fixed.groupby("num_speculative_tokens", sort=True):
        group = group.sort_values(x_name)
        i = (int(k) - 1) % len(K_COLORS)
        fig.add_trace(
            go.Scatter(
                x=group[x_name].tolist(), y=group["tpot_speedup"].round(4).tolist(), mode="lines+markers", name=f"k = {k}",
                line={"color": K_COLORS[i], "width": 1.5, "dash": K_DASHES[i]}, marker={"size": 6},
                hovertemplate=f"k = {k}, %{{x}}{unit}: %{{y:.2f}}× median TPOT speedup<extra></extra>",
            )
        )
    main = scheduled[scheduled["attention"] == primary].sort_values(x_name)
    if len(main):
        fig.add_trace(
            go.Scatter(
                x=main[x_name].tolist(), y=main["tpot_speedup"].round(4).tolist(), mode="lines+markers", name="recommended schedule",
                line={"color": SCHEDULE_COLOR, "width": 4}, marker={"size": 9, "symbol": "diamond"}, customdata=main["mean_scheduled_k"].round(2).tolist(),
                hovertemplate=f"schedule (mean k %{{customdata}}), %{{x}}{unit}: %{{y:.2f}}× median TPOT speedup<extra></extra>",
            )
        )
    crossed = crossovers[(crossovers["mode"] == mode) & (crossovers["acceptance"] == acceptance) & (crossovers["attention"] == primary)]
    crossed = crossed[crossed["crossover_x"].notna()]
    if len(crossed):
        fig.add_trace(
            go.Scatter(
                x=crossed["crossover_x"].round(3).tolist(), y=[1] * len(crossed), mode="markers", name="k crosses 1×",
                marker={"symbol": "x-thin", "size": 14, "line": {"width": 3, "color": "#b91c1c"}, "color": "#b91c1c"},
                customdata=crossed["num_speculative_tokens"].tolist(), hovertemplate=f"k = %{{customdata}} crosses 1× at %{{x:.3g}}{unit}<extra></extra>",
            )
        )
    title = "requests in flight (log scale)" if mode == "closed_loop" else "Poisson arrival rate (req/s)"
    return _layout(fig, title, mode == "closed_loop", y_range)


def describe(entry: dict, mode: str, bounds: list[str], ks: list[int]) -> str:
    """The chart's text description: what it shows and what it says, for screen readers and no-JS readers."""
    compared = [c for c in entry["comparison"] if c["mode"] == mode]
    if not compared:
        return ""
    _, unit = _unit(mode)
    first, last = compared[0], compared[-1]
    what = "requests in flight" if mode == "closed_loop" else "Poisson load"
    text = (
        f"Median TPOT speedup over no speculation against {what}, one line per fixed k ({', '.join(map(str, ks))}), "
        f"verify cost {entry['attention']}. "
    )
    if entry["speculative_config"]:
        text += (
            f"The recommended schedule gives {first['schedule_tpot_speedup']:.2f}× at {units.number(first['x'])}{unit} "
            f"(band {first['band_low']:.2f}–{first['band_high']:.2f}×) and {last['schedule_tpot_speedup']:.2f}× at {units.number(last['x'])}{unit} "
            f"(band {last['band_low']:.2f}–{last['band_high']:.2f}×)."
        )
    else:
        text += "No k beats running without speculation anywhere in this range."
    return text


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
    fixed = rows[(rows["acceptance"] == acceptance) & (rows["mode"] == mode) & (rows["k_schedule"] == "")]
    return sorted(int(k) for k in fixed["num_speculative_tokens"].unique())


def _schedule_k(schedule, batch: int) -> int:
    return next((k for start, end, k in schedule if start <= batch <= end), 0)


def _y_range(rows: pd.DataFrame) -> list[float]:
    speculative = rows[rows["num_speculative_tokens"] > 0]["tpot_speedup"]
    low, high = min(float(speculative.min()), 1.0), max(float(speculative.max()), 1.0)
    pad = 0.05 * (math.log10(high) - math.log10(low)) + 0.02
    return [math.log10(low) - pad, math.log10(high) + pad]


def context(data) -> dict:
    """What templates/paysoff.html renders; ``None`` data: not recorded yet."""
    if data is None:
        return {"recorded": False}
    rows, crossovers, schedules = data
    entries = schedules["schedules"]
    verify = schedules["verify_cost"]
    bounds = list(verify.get("bounds", []))
    y_range = _y_range(rows)
    figures, selections = {}, []
    provenance = f"Simulated with Vidur {schedules.get('vidur_version')} + vidur-specdec (model hash {schedules.get('simulator_source_hash')}); source: {CSV_NAME}."
    for entry in entries:
        key = entry["acceptance"]
        card = (
            f"{units.model_label(entry['model'])} on {entry['tensor_parallel_size']} × {entry['device'].upper()} (TP {entry['tensor_parallel_size']}), "
            f"{proposer_label(entry['proposer'])}" + (f" {entry['draft_model']}" if entry.get("draft_model") else "")
            + f"; acceptance: {entry['label']}; verify cost {entry['attention']}, band {' / '.join(bounds)}"
        )
        modes = [m for m in ("closed_loop", "poisson") if any(c["mode"] == m for c in entry["comparison"])]
        for mode in modes:
            name = "closed" if mode == "closed_loop" else "open"
            title = f"Median TPOT speedup vs {'requests in flight (closed loop)' if mode == 'closed_loop' else 'Poisson load (open loop)'}: {entry['deployment_label']}"
            figures[f"{name}|{key}"] = {
                "figure": figure_json(speedup_vs_x(rows, crossovers, mode, entry, bounds, y_range)),
                "export": export_layout(title, [card, provenance, "Dashed: 1× = no speculation; ×: where a fixed k crosses 1×; black diamonds: the recommended schedule; grey: its band under the verify-cost bounds."]),
                "filename": f"paysoff-{name}-{key}",
            }
        cross = crossovers[(crossovers["acceptance"] == key) & (crossovers["attention"] == entry["attention"])]
        poisson = rows[(rows["mode"] == "poisson") & (rows["acceptance"] == key) & (rows["k_schedule"] == "") & (rows["attention"] == entry["attention"])]
        baselines = rows[(rows["mode"] == "poisson") & (rows["num_speculative_tokens"] == 0) & (rows["model"] == entry["model"])].set_index("arrival_rate")
        little = [
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
        closed_batches = rows[(rows["mode"] == "closed_loop") & (rows["model"] == entry["model"]) & (rows["k_schedule"] == "")
                              & ((rows["acceptance"] == key) | (rows["num_speculative_tokens"] == 0)) & (rows["attention"].isin(["", entry["attention"]]))]
        selections.append(
            {
                "key": key,
                "id": f"sel-{key}".replace(".", "_"),
                "entry": entry,
                "modes": modes,
                "descriptions": {m: describe(entry, m, bounds, _ks(rows, key, m)) for m in modes},
                "crossovers": cross.sort_values(["mode", "num_speculative_tokens"]).to_dict("records"),
                "little": little,
                "poisson_k": sorted({int(r["k"]) for r in little}),
                "batches": _batches(closed_batches),
            }
        )
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
        "verify": verify,
        "bounds": bounds,
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
