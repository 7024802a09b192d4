"""Plotly figures, built here in Python; the browser only draws the JSON it is given.

Figures are reduced to plain JSON (lists, not typed arrays; no uids) so they embed in the page
deterministically.  Marker shapes and dashes differ per series, so the charts read in greyscale.
"""

from __future__ import annotations

import json

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from simulator.website.units import attention_label, number

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
# Distinct in hue and in lightness; shapes carry the meaning on their own.
ATTENTION_STYLE = {
    "kv_once": {"symbol": "circle", "color": "#1f5fa8"},
    "per_token": {"symbol": "square-open", "color": "#c2410c"},
    "interpolated": {"symbol": "diamond", "color": "#4d7c0f"},
}
SERIES_STYLE = (
    {"symbol": "circle", "dash": "solid", "color": "#1f5fa8"},
    {"symbol": "square", "dash": "dash", "color": "#c2410c"},
    {"symbol": "diamond", "dash": "dot", "color": "#4d7c0f"},
    {"symbol": "triangle-up", "dash": "dashdot", "color": "#6b21a8"},
)
SPAN_NAME = "Span between assumptions"
SPAN_COLOR = "#6b7280"
REFERENCE_COLOR = "#111827"
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def speedup_figure(selection: pd.DataFrame, attentions: tuple[str, ...], proposals: tuple[int, ...]) -> go.Figure:
    """For each k, one marker per attention assumption, joined by a line; 1x = no speculation."""
    fig = go.Figure()
    span_x, span_y = [], []
    for k in proposals:
        values = selection[selection["num_speculative_tokens"] == k]["tpot_speedup"].tolist()
        span_x += [k, k, None]
        span_y += [min(values), max(values), None]
    fig.add_trace(
        go.Scatter(x=span_x, y=span_y, mode="lines", name=SPAN_NAME, line={"color": SPAN_COLOR, "width": 3}, hoverinfo="skip")
    )
    for attention in attentions:
        rows = selection[selection["attention"] == attention].sort_values("num_speculative_tokens")
        style = ATTENTION_STYLE.get(attention, {"symbol": "x", "color": "#111827"})
        fig.add_trace(
            go.Scatter(
                x=[int(k) for k in rows["num_speculative_tokens"]],
                y=[float(v) for v in rows["tpot_speedup"]],
                customdata=[[float(t) * 1000, _queue_note(row)] for t, row in zip(rows["tpot_p50_s"], rows.to_dict("records"))],
                mode="markers",
                name=attention_label(attention),
                marker={"symbol": style["symbol"], "size": 14, "color": style["color"], "line": {"width": 2, "color": style["color"]}},
                hovertemplate="k = %{x}<br>" + attention_label(attention) + ": %{y:.2f}×<br>TPOT p50 %{customdata[0]:.2f} ms%{customdata[1]}<extra></extra>",
            )
        )
    top = max(float(selection["tpot_speedup"].max()), 1.0)
    bottom = min(float(selection["tpot_speedup"].min()), 1.0)
    pad = 0.1 * (top - bottom) + 0.05
    fig.add_hline(y=1, line={"color": REFERENCE_COLOR, "width": 1, "dash": "dash"})
    fig.update_layout(
        xaxis={"title": {"text": "Proposals per verify step (k)"}, "tickvals": list(proposals), "ticktext": [f"k = {k}" for k in proposals], "range": [min(proposals) - 1, max(proposals) + 1]},
        yaxis={"title": {"text": "TPOT speedup (×)"}, "range": [bottom - pad, top + pad], "ticksuffix": "×"},
        showlegend=False,  # the page draws the legend in HTML: it wraps on a phone and is read by screen readers
    )
    return _style(fig)


def progress_figure(progress: pd.DataFrame) -> go.Figure:
    """Simulated progress per verify step (markers) against (1 - α^(k+1)) / (1 - α) (lines)."""
    fig = go.Figure()
    for i, (alpha, rows) in enumerate(progress.groupby("acceptance_rate", sort=True)):
        style = SERIES_STYLE[i % len(SERIES_STYLE)]
        rows = rows.sort_values("num_speculative_tokens")
        ks = [int(k) for k in rows["num_speculative_tokens"]]
        fig.add_trace(
            go.Scatter(
                x=ks, y=[float(v) for v in rows["closed_form_progress_per_step"]], mode="lines",
                name=f"α = {number(alpha)} closed form", line={"color": style["color"], "dash": style["dash"], "width": 2},
                hovertemplate="k = %{x}: %{y:.3f} tokens per step (closed form)<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=ks, y=[float(v) for v in rows["simulated_progress_per_step"]], mode="markers",
                name=f"α = {number(alpha)} simulated", marker={"symbol": style["symbol"], "size": 11, "color": style["color"]},
                hovertemplate="k = %{x}: %{y:.3f} tokens per step (simulated)<extra></extra>",
            )
        )
    ks = sorted(int(k) for k in progress["num_speculative_tokens"].unique())
    fig.update_layout(
        xaxis={"title": {"text": "Proposals per verify step (k)"}, "tickvals": ks},
        yaxis={"title": {"text": "Tokens per verify step"}, "rangemode": "tozero"},
    )
    return _style(fig)


def _queue_note(row: dict) -> str:
    overloaded = str(row["overloaded"]).lower() == "true"
    return f"<br>queue grows through the run ({row['ttft_growth']:.1f}× TTFT)" if overloaded else ""


# Trace types in plotly.js's basic bundle, the one the site ships.
BASIC_BUNDLE_TRACES = frozenset({"scatter", "bar", "pie"})


def figure_json(fig: go.Figure) -> dict:
    """The figure as plain JSON data (what Plotly.react takes), without run-specific uids."""
    outside = {trace.type for trace in fig.data} - BASIC_BUNDLE_TRACES
    if outside:
        raise ValueError(f"trace types {sorted(outside)} are not in the plotly.js basic bundle the site ships")
    return json.loads(pio.to_json(fig, validate=True, remove_uids=True))


def _style(fig: go.Figure) -> go.Figure:
    fig.update_layout(
        template="none",
        font={"family": FONT, "size": 14, "color": "#111827"},
        height=420,
        margin={"l": 70, "r": 20, "t": 10 if fig.layout.showlegend is False else 60, "b": 60},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        paper_bgcolor="#ffffff",
        plot_bgcolor="#ffffff",
        hoverlabel={"font": {"family": FONT}},
    )
    fig.update_xaxes(showgrid=False, zeroline=False, linecolor="#9ca3af", showline=True, ticks="outside")
    fig.update_yaxes(gridcolor="#e5e7eb", zeroline=False, linecolor="#9ca3af", showline=True)
    return fig
