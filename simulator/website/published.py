"""The "Published measurements" page: data/published.csv as a table, a chart and the misses.

Markup lives in ``templates/published.html`` and the prose in ``content/published.md``; this
module only reads the CSV and shapes what the template shows.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from simulator.errors import ConfigError
from simulator.published.reproduce import COLUMNS, SIMULATED, summary
from simulator.website.charts import PLOT_CONFIG, REFERENCE_COLOR, _style, export_layout, figure_json

CSV_NAME = "published.csv"
MISS_PCT = 15.0  # a row is listed among the misses above this |error|
SYMBOLS = {"output_tokens_per_s": "circle", "tpot_ms": "square", "speedup": "diamond"}
LABELS = {"output_tokens_per_s": "output tokens/s", "tpot_ms": "TPOT (ms)", "speedup": "speedup (×)"}


def load_published(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise ConfigError(f"published comparison {path}: file not found; run python build.py") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"published comparison {path}: missing column(s) {missing}")
    return frame


def _setting(row: dict) -> str:
    load = next(f"{name} {row[key]:g}" for key, name in (("batch_size", "batch"), ("concurrency", "concurrency"), ("qps", "QPS")) if not _blank(row[key]))
    proposer = "no speculation" if row["proposer"] == "none" else f"{row['proposer']} k = {int(row['k'])}" if not _blank(row["k"]) else row["proposer"]
    tp = int(row["tp"])
    gpu = ("GPU not stated" if _blank(row["gpu"]) else row["gpu"].upper()) + ("" if tp == 1 else f" ×{tp}")
    return f"{row['model'].split('/')[-1]}, {gpu}, {proposer}, {load}" + ("" if _blank(row["dataset"]) else f", {row['dataset']}")


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def figure(frame: pd.DataFrame) -> go.Figure:
    simulated = frame[frame.status == SIMULATED]
    fig = go.Figure()
    low = min(simulated.published.min(), simulated.simulated.min()) * 0.8
    high = max(simulated.published.max(), simulated.simulated.max()) * 1.25
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="simulated = published", line={"color": REFERENCE_COLOR, "dash": "dash"}, hoverinfo="skip"))
    for metric, rows in simulated.groupby("metric", sort=True):
        fig.add_trace(
            go.Scatter(
                x=rows.published,
                y=rows.simulated,
                mode="markers",
                name=LABELS[metric],
                marker={"symbol": SYMBOLS[metric], "size": 10},
                customdata=list(zip(rows.id, rows.error_pct)),
                hovertemplate="%{customdata[0]}<br>published %{x:.3g}, simulated %{y:.3g}<br>error %{customdata[1]:+.1f}%<extra></extra>",
            )
        )
    fig.update_layout(
        xaxis={"type": "log", "title": {"text": "published"}},
        yaxis={"type": "log", "title": {"text": "simulated"}},
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 20},
    )
    return _style(fig)


def context(path: Path, setup_line: str) -> dict:
    """What templates/published.html shows."""
    frame = load_published(path)
    records = frame.to_dict("records")
    for row in records:
        row["setting"] = _setting(row)
    simulated = [r for r in records if r["status"] == SIMULATED]
    return {
        "rows": records,
        "simulated": simulated,
        "unreproducible": [r for r in records if r["status"] != SIMULATED],
        "misses": sorted((r for r in simulated if abs(r["error_pct"]) > MISS_PCT), key=lambda r: -abs(r["error_pct"])),
        "miss_pct": MISS_PCT,
        "summary": summary(records),
        "figure": {
            "figure": figure_json(figure(frame)),
            "export": export_layout("Published vs simulated, one marker per row", [setup_line]),
            "filename": "published-vs-simulated",
            "config": PLOT_CONFIG,
        },
        "file": CSV_NAME,
    }
