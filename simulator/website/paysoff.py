"""The "When does speculation pay off?" page: its charts, tables and the files it publishes.

Everything comes from the pays-off sweep's recorded files (``paysoff.csv``,
``paysoff_crossovers.csv``, ``recommended_schedules.json``); nothing is computed in the
browser.  Without those files the page says so and shows how to record them.
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
from simulator.website.charts import PLOT_CONFIG, REFERENCE_COLOR, export_layout, figure_json
from simulator.website import units

CSV_NAME = "paysoff.csv"
CROSSOVERS_NAME = "paysoff_crossovers.csv"
SCHEDULES_NAME = "recommended_schedules.json"
SCRIPT = Path(__file__).resolve().parent / "static" / "paysoff.js"
K_COLORS = ("#1f5fa8", "#0e7490", "#4d7c0f", "#a16207", "#c2410c", "#b91c1c", "#86198f", "#4b5563")
SCHEDULE_COLOR = "#111827"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
BOUND_LABEL = {"kv_once": "KV read once (lower bound)", "per_token": "per token (upper bound)", "interpolated": "interpolated"}


def _bool(series: pd.Series) -> pd.Series:
    return series.astype(str).str.lower().eq("true")


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
    for name in ("mode", "acceptance", "tpot_speedup", "num_speculative_tokens", "k_schedule", "attention"):
        if name not in rows.columns:
            raise ConfigError(f"pays-off CSV {paysoff_csv}: missing column {name!r}; rebuild with `python build.py`")
    rows["acceptance"] = rows["acceptance"].fillna("")
    rows["k_schedule"] = rows["k_schedule"].fillna("")
    rows["attention"] = rows["attention"].fillna("")
    for name in ("crossover", "crossings"):
        if name not in crossovers.columns:
            raise ConfigError(f"crossovers CSV {crossovers_csv}: missing column {name!r}; rebuild with `python build.py`")
        crossovers[name] = crossovers[name].fillna("").astype(str)
    return rows, crossovers, read_json(schedules_json, "recommended schedules")


def _axis(title: str, log: bool = False) -> dict:
    axis = {"title": {"text": title}, "gridcolor": "#e5e7eb", "zeroline": False}
    if log:
        axis.update(type="log", dtick=math.log10(2), tickformat="d")
    return axis


def _layout(fig: go.Figure, x_title: str, y_title: str, log_x: bool, y_range=None) -> go.Figure:
    fig.update_layout(
        template="none",
        font={"family": FONT, "size": 14, "color": "#111827"},
        margin={"l": 64, "r": 16, "t": 16, "b": 56},
        height=440,
        xaxis=_axis(x_title, log_x),
        yaxis={**_axis(y_title), "type": "log", "range": y_range, "tickvals": [0.5, 0.75, 1, 1.5, 2, 3, 4], "ticktext": ["0.5×", "0.75×", "1×", "1.5×", "2×", "3×", "4×"]},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
    )
    return fig


def speedup_vs_x(rows: pd.DataFrame, crossovers: pd.DataFrame, mode: str, acceptance: str, attention: str, y_range) -> go.Figure:
    """TPOT speedup per fixed k against concurrency or load, the recommended schedule, 1x and crossovers."""
    x_name = "concurrency" if mode == "closed_loop" else "arrival_rate"
    at = rows[(rows["mode"] == mode) & (rows["acceptance"] == acceptance) & (rows["attention"] == attention)]
    fig = go.Figure()
    xs = sorted(rows[rows["mode"] == mode][x_name].dropna().unique())
    fig.add_trace(go.Scatter(x=[xs[0], xs[-1]], y=[1, 1], mode="lines", line={"color": REFERENCE_COLOR, "dash": "dash", "width": 1.5}, name="1× (no speculation)", hoverinfo="skip"))
    fixed = at[at["k_schedule"] == ""]
    for i, (k, group) in enumerate(fixed.groupby("num_speculative_tokens", sort=True)):
        group = group.sort_values(x_name)
        fig.add_trace(
            go.Scatter(
                x=group[x_name].tolist(),
                y=group["tpot_speedup"].round(4).tolist(),
                mode="lines+markers",
                name=f"k = {k}",
                line={"color": K_COLORS[(int(k) - 1) % len(K_COLORS)], "width": 1.5},
                marker={"size": 6},
                hovertemplate=f"k = {k}<br>%{{x}}: %{{y:.2f}}×<extra></extra>",
            )
        )
    scheduled = at[at["k_schedule"] != ""].sort_values(x_name)
    if len(scheduled):
        fig.add_trace(
            go.Scatter(
                x=scheduled[x_name].tolist(),
                y=scheduled["tpot_speedup"].round(4).tolist(),
                mode="lines+markers",
                name="recommended schedule",
                line={"color": SCHEDULE_COLOR, "width": 4},
                marker={"size": 9, "symbol": "diamond"},
                customdata=scheduled["mean_scheduled_k"].round(2).tolist(),
                hovertemplate="schedule (mean k %{customdata})<br>%{x}: %{y:.2f}×<extra></extra>",
            )
        )
    crossed = crossovers[(crossovers["mode"] == mode) & (crossovers["acceptance"] == acceptance) & (crossovers["attention"] == attention)]
    crossed = crossed[crossed["crossover_x"].notna()]
    if len(crossed):
        fig.add_trace(
            go.Scatter(
                x=crossed["crossover_x"].round(3).tolist(),
                y=[1] * len(crossed),
                mode="markers",
                name="crossover (speedup = 1)",
                marker={"symbol": "x-thin", "size": 14, "line": {"width": 3, "color": "#b91c1c"}, "color": "#b91c1c"},
                customdata=crossed["num_speculative_tokens"].tolist(),
                hovertemplate="k = %{customdata} crosses 1× at %{x:.3g}<extra></extra>",
            )
        )
    title = "concurrency (requests in flight, log scale)" if mode == "closed_loop" else "Poisson arrival rate (req/s)"
    return _layout(fig, title, "median TPOT speedup", mode == "closed_loop", y_range)


def best_k_map(rows: pd.DataFrame, attention: str, labels: dict) -> go.Figure:
    """Best k per (acceptance profile, concurrency), closed loop: 0 = do not speculate."""
    best = rows[(rows["mode"] == "closed_loop") & (rows["attention"] == attention) & _bool(rows["best_k"])]
    fig = go.Figure()
    xs, ys, ks, hover = [], [], [], []
    for acceptance in labels:
        at = rows[(rows["mode"] == "closed_loop") & (rows["attention"] == attention) & (rows["acceptance"] == acceptance) & (rows["k_schedule"] == "")]
        for c in sorted(at["concurrency"].unique()):
            chosen = best[(best["acceptance"] == acceptance) & (best["concurrency"] == c)]
            k = int(chosen["num_speculative_tokens"].iloc[0]) if len(chosen) else 0
            s = float(chosen["tpot_speedup"].iloc[0]) if len(chosen) else 1.0
            xs.append(str(int(c)))
            ys.append(labels[acceptance])
            ks.append(k)
            hover.append(f"{labels[acceptance]}, concurrency {int(c)}: best k = {k} ({s:.2f}×)" if k else f"{labels[acceptance]}, concurrency {int(c)}: do not speculate")
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=[str(k) if k else "off" for k in ks],
            textfont={"color": "#ffffff", "size": 13},
            marker={"symbol": "square", "size": 40, "color": ks, "colorscale": [[0, "#9ca3af"], [0.0001, "#bfdbfe"], [1, "#1e3a8a"]], "cmin": 0, "cmax": 8, "line": {"width": 1, "color": "#ffffff"}},
            hovertext=hover,
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.update_layout(
        template="none",
        font={"family": FONT, "size": 14, "color": "#111827"},
        margin={"l": 250, "r": 16, "t": 16, "b": 56},
        height=120 + 56 * len(labels),
        xaxis={"title": {"text": "concurrency (requests in flight)"}, "type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    return fig


def setup_line(schedules: dict, rows: pd.DataFrame) -> str:
    workload = schedules.get("workload", {})
    return (
        f"Simulated with Vidur {schedules.get('vidur_version')} + vidur-specdec (model hash {schedules.get('simulator_source_hash')}): "
        f"{units.model_label(schedules.get('model'))}, {str(schedules.get('device')).upper()} built-in profile, "
        f"{workload.get('prompt_tokens')} prompt / {workload.get('output_tokens')} output tokens on average, n-gram proposer cost. Source: {CSV_NAME}."
    )


def context(data) -> dict:
    """What templates/paysoff.html renders; ``None`` data: not recorded yet."""
    if data is None:
        return {"recorded": False}
    rows, crossovers, schedules = data
    note = setup_line(schedules, rows)
    labels = {entry["acceptance"]: entry["label"] for entry in schedules["schedules"]}
    acceptances = list(dict.fromkeys(labels))
    attentions = list(dict.fromkeys(entry["attention"] for entry in schedules["schedules"]))
    speculative = rows[rows["num_speculative_tokens"] > 0]["tpot_speedup"]
    low, high = min(float(speculative.min()), 1.0), max(float(speculative.max()), 1.0)
    pad = 0.05 * (math.log10(high) - math.log10(low)) + 0.02
    y_range = [math.log10(low) - pad, math.log10(high) + pad]
    figures, selections = {}, []
    for entry in schedules["schedules"]:
        acceptance, attention = entry["acceptance"], entry["attention"]
        key = f"{acceptance}|{attention}"
        label = f"{entry['label']}, verify attention {BOUND_LABEL.get(attention, attention)}"
        notes = [note, "Dashed line: 1× = no speculation; ×: where a fixed k crosses 1× (interpolated); black diamonds: the recommended schedule, simulated."]
        for mode, name in (("closed_loop", "closed"), ("poisson", "open")):
            title = f"Median TPOT speedup vs {'concurrency (closed loop)' if mode == 'closed_loop' else 'Poisson load (open loop)'}: {label}"
            figures[f"{name}|{key}"] = {
                "figure": figure_json(speedup_vs_x(rows, crossovers, mode, acceptance, attention, y_range)),
                "export": export_layout(title, notes),
                "filename": f"paysoff-{name}-{acceptance}-{attention}",
            }
        cross = crossovers[(crossovers["acceptance"] == acceptance) & (crossovers["attention"] == attention)]
        poisson = rows[(rows["mode"] == "poisson") & (rows["acceptance"] == acceptance) & (rows["attention"] == attention) & (rows["k_schedule"] == "")]
        baselines = rows[(rows["mode"] == "poisson") & (rows["num_speculative_tokens"] == 0)].set_index("arrival_rate")
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
        selections.append(
            {
                "key": key,
                "id": f"sel-{acceptance}-{attention}".replace(".", "_"),
                "label": label,
                "entry": entry,
                "crossovers": cross.sort_values(["mode", "num_speculative_tokens"]).to_dict("records"),
                "little": little,
                "default": False,
            }
        )
    default = next((s for s in selections if s["entry"]["acceptance"] == acceptances[len(acceptances) // 2] and s["entry"]["attention"] == attentions[-1]), selections[0])
    default["default"] = True
    maps = {
        attention: {
            "figure": figure_json(best_k_map(rows, attention, labels)),
            "export": export_layout(f"Best k per concurrency (closed loop), verify attention {BOUND_LABEL.get(attention, attention)}", [note], legend=False),
            "filename": f"paysoff-best-k-{attention}",
        }
        for attention in attentions
    }
    return {
        "recorded": True,
        "acceptances": [(a, labels[a]) for a in acceptances],
        "attentions": [(a, BOUND_LABEL.get(a, a)) for a in attentions],
        "default": {"acceptance": default["entry"]["acceptance"], "attention": default["entry"]["attention"]},
        "selections": selections,
        "data": {"figures": figures, "maps": maps, "config": PLOT_CONFIG, "default": default["key"]},
        "model": schedules.get("model"),
        "device": schedules.get("device"),
        "workload": schedules.get("workload", {}),
        "batch_size_cap": schedules.get("batch_size_cap"),
        "files": {"csv": CSV_NAME, "crossovers": CROSSOVERS_NAME, "schedules": SCHEDULES_NAME},
        "concurrency": sorted(int(c) for c in rows["concurrency"].dropna().unique()),
        "loads": sorted(float(r) for r in rows["arrival_rate"].dropna().unique()),
    }


def copy_files(paysoff_csv, crossovers_csv, schedules_json, directory: Path) -> None:
    """The page's data files and script, published next to it."""
    shutil.copyfile(SCRIPT, directory / SCRIPT.name)
    for source, name in ((paysoff_csv, CSV_NAME), (crossovers_csv, CROSSOVERS_NAME), (schedules_json, SCHEDULES_NAME)):
        if source is not None and Path(source).is_file():
            shutil.copyfile(source, directory / name)
