"""The modeling page's verify-step section: measured verify attention against the two bounds.

Reads a profile directory's ``verify_attention.csv`` (written by
``python -m simulator.profiling measure --tables verify`` on a GPU) and shapes it for the
template: the fitted lambda, a chart of measured time against both bounds, and the table.
Without such a table the section says the measurement is pending and how to make it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import plotly.graph_objects as go

from simulator.profiling import verify_fit
from simulator.profiling.verify_table import read_provenance, read_verify_attention
from simulator.website.charts import PLOT_CONFIG, _style, export_layout, figure_json

MEASURE_COMMAND = "bash bench/measure_verify_h200.sh"


def figure(points) -> go.Figure:
    fig = go.Figure()
    label = [f"B={b}, KV={kv}, q={q}" for b, kv, q in zip(points.batch_size, points.kv_cache_size, points.num_query_tokens)]
    for column, name, style in (
        ("kv_once_ms", "KV read once (lower bound)", {"dash": "dot"}),
        ("per_token_ms", "per-token (upper bound)", {"dash": "dash"}),
        ("measured_ms", "measured", {}),
    ):
        fig.add_trace(go.Scatter(x=list(range(len(points))), y=points[column], mode="lines+markers" if not style else "lines",
                                 name=name, line=style, text=label, hovertemplate="%{text}<br>%{y:.3g} ms<extra>" + name + "</extra>"))
    fig.update_layout(xaxis={"title": {"text": "verify shape (sorted by KV length, batch, queries per sequence)"}, "showticklabels": False},
                      yaxis={"type": "log", "title": {"text": "attention time per layer (ms)"}}, legend={"orientation": "h", "y": -0.2})
    return _style(fig)


def source_line(provenance: dict) -> str:
    """The PNG's caption: what was measured where (not the seed sweep's setup: nothing here is simulated)."""
    measured = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in provenance.items())
    return "Measured verify attention from the profile's verify_attention.csv" + (f" ({measured})" if measured else "") + "; both bounds from the same table's one-query rows."


def context(profile_dir: Optional[Path]) -> dict:
    """{"pending": True, "command": ...} without a verify table, else the fit, chart and rows."""
    if profile_dir is None or not any((Path(profile_dir) / f"verify_attention{ext}").is_file() for ext in (".csv", ".csv.xz")):
        return {"pending": True, "command": MEASURE_COMMAND}
    verify = read_verify_attention(profile_dir)
    points = verify_fit.chart_table(verify)
    fit = verify_fit.fit_summary(verify_fit.fit_lambda(points))
    provenance = read_provenance(profile_dir)
    return {
        "pending": False,
        "command": MEASURE_COMMAND,
        "fit": fit,
        "provenance": provenance,
        "rows": points.to_dict("records"),
        "figure": {
            "figure": figure_json(figure(points)),
            "export": export_layout(f"Verify attention: measured against the two bounds (λ = {fit['lambda']})", [source_line(provenance)]),
            "filename": "verify-attention-measured",
            "config": PLOT_CONFIG,
        },
    }
