"""Plotly figures, built here in Python; the browser only draws the JSON it is given.

Figures are reduced to plain JSON (lists, not typed arrays; no uids) so they embed in the page
deterministically.  Marker shapes and dashes differ per series, so the charts read in greyscale.
"""

from __future__ import annotations

import json
import math
import textwrap

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from simulator.util.units import attention_label, number

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
OVERLOAD_NAME = "Run overloaded (queue grows)"
OVERLOAD_STYLE = {"symbol": "circle-open", "color": "#b91c1c", "size": 28}
# One button: a PNG download that carries the chart's title, selection and caveats (site.js
# builds it from the figure's "export" layout).  No cloud "share", no zoom tools to tab through.
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtons": [["toImage"]]}
SPEEDUP_TICKS = (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16)


def speedup_range(values) -> list[float]:
    """A fixed log10 y-range for every selection on the page, with 1x always inside it."""
    low, high = min(min(values), 1.0), max(max(values), 1.0)
    pad = 0.08 * (math.log10(high) - math.log10(low)) + 0.02
    return [math.log10(low) - pad, math.log10(high) + pad]


def speedup_figure(selection: pd.DataFrame, attentions: tuple[str, ...], proposals: tuple[int, ...], y_range: list[float]) -> go.Figure:
    """For each k, one marker per attention assumption, joined by a line; 1x = no speculation.

    Ratios sit on a log axis with one range for every selection, so selections compare by eye;
    runs whose queue grew through the run get a ring (and a legend entry on the page).
    """
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
                customdata=[
                    [int(row["num_speculative_tokens"]), float(row["tpot_p50_s"]) * 1000, float(row["mean_acceptance_length"]), _queue_note(row)]
                    for row in rows.to_dict("records")
                ],
                mode="markers",
                name=attention_label(attention),
                marker={"symbol": style["symbol"], "size": 14, "color": style["color"], "line": {"width": 2, "color": style["color"]}},
                # %{x} would print the tick text ("k = 2"); the plain k comes from customdata.
                hovertemplate="k = %{customdata[0]}<br>" + attention_label(attention)
                + ": %{y:.2f}× TPOT speedup<br>TPOT p50 %{customdata[1]:.2f} ms<br>%{customdata[2]:.2f} tokens per verify step%{customdata[3]}<extra></extra>",
            )
        )
    overloaded = selection[_is_overloaded(selection)]
    fig.add_trace(
        go.Scatter(
            x=[int(k) for k in overloaded["num_speculative_tokens"]],
            y=[float(v) for v in overloaded["tpot_speedup"]],
            mode="markers",
            name=OVERLOAD_NAME,
            marker={"symbol": OVERLOAD_STYLE["symbol"], "size": OVERLOAD_STYLE["size"], "color": OVERLOAD_STYLE["color"], "line": {"width": 2}},
            hoverinfo="skip",
        )
    )
    fig.add_hline(y=1, line={"color": REFERENCE_COLOR, "width": 1, "dash": "dash"})
    low, high = 10 ** y_range[0], 10 ** y_range[1]
    ticks = [t for t in SPEEDUP_TICKS if low <= t <= high]
    fig.update_layout(
        xaxis={"title": {"text": "Proposals per verify step (k)"}, "tickvals": list(proposals), "ticktext": [f"k = {k}" for k in proposals], "range": [min(proposals) - 1, max(proposals) + 1], "fixedrange": True},
        yaxis={"title": {"text": "TPOT speedup (×, log scale)"}, "type": "log", "range": y_range, "tickvals": ticks, "ticktext": [f"{t:g}×" for t in ticks], "fixedrange": True},
        showlegend=False,  # the page draws the legend in HTML: it wraps on a phone and is read by screen readers
    )
    return _style(fig)


# The downloaded PNG (site.js draws it at the layout's width and height).  Plotly places
# annotations and legends in fractions of the plot area and never wraps text, so the export
# lays everything out in pixels here: captions wrapped to the image's width and stacked below
# the x-axis title, the legend in its own column on the right, and an image tall enough to hold
# them all.  Character widths are estimates with headroom (system-ui / DejaVu Sans); the browser
# tests check the drawn boxes and the PNG itself.
EXPORT_WIDTH = 1100
EXPORT_PLOT_HEIGHT = 440
EXPORT_LEFT, EXPORT_RIGHT, EXPORT_RIGHT_WITH_LEGEND = 80, 30, 270
TITLE_SIZE, TITLE_CHARS, TITLE_LINE = 17, 100, 24
NOTE_SIZE, NOTE_CHARS, NOTE_LINE, NOTE_GAP = 12, 110, 16, 8
AXIS_SPACE = 84  # plot bottom to the first caption: tick labels and the x-axis title
BOTTOM_PAD = 20


def wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters, broken at spaces only (never inside "Llama-2-7B")."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def export_layout(title: str, notes: list[str], legend: bool = True) -> dict:
    """Layout changes for the PNG download: the title, the selection and caveats in the image."""
    title_lines = wrap(title, TITLE_CHARS)
    top = 24 + TITLE_LINE * len(title_lines)
    annotations, offset = [], AXIS_SPACE
    for note in notes:
        lines = wrap(note, NOTE_CHARS)
        annotations.append({
            "text": "<br>".join(lines), "xref": "paper", "yref": "paper", "x": 0, "y": 0, "xanchor": "left", "yanchor": "top",
            "yshift": -offset, "showarrow": False, "align": "left", "font": {"size": NOTE_SIZE},
        })
        offset += NOTE_LINE * len(lines) + NOTE_GAP
    bottom = offset - NOTE_GAP + BOTTOM_PAD
    return {
        "title": {"text": "<br>".join(title_lines), "x": 0.01, "xanchor": "left", "xref": "container", "y": 1, "yanchor": "top", "yref": "container", "pad": {"t": 16}, "font": {"size": TITLE_SIZE}},
        "showlegend": legend,
        "legend": {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
        "margin": {"l": EXPORT_LEFT, "r": EXPORT_RIGHT_WITH_LEGEND if legend else EXPORT_RIGHT, "t": top, "b": bottom},
        "width": EXPORT_WIDTH,
        "height": top + EXPORT_PLOT_HEIGHT + bottom,
        "annotations": annotations,
    }


def progress_figure(progress: pd.DataFrame) -> go.Figure:
    """Simulated progress per verify step (markers) against the closed form (1 - α^(k+1)) / (1 - α) (lines)."""
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


def _is_overloaded(frame: pd.DataFrame) -> pd.Series:
    return frame["overloaded"].astype(str).str.lower().eq("true")


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
