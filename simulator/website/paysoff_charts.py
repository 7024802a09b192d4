"""The pays-off page's charts: speedup against concurrency or load for one deployment.

Fixed-k curves and the recommended schedule under the primary verify cost, the schedule's band
under the bounds, 1x and the crossovers.  Each chart's y-range is fitted to what it plots, and
each payload carries a phone-width layout (site.js applies it below ``NARROW_PX``), so a phone
gets a usable plot rather than a small one under a tall legend.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from simulator.util import units
from simulator.website import names
from simulator.website.charts import REFERENCE_COLOR, SPEEDUP_TICKS

K_COLORS = ("#1f5fa8", "#0e7490", "#4d7c0f", "#a16207", "#c2410c", "#b91c1c", "#86198f", "#4b5563")
K_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "solid", "dash")
SCHEDULE_COLOR = "#111827"
BAND_COLOR = "rgba(107, 114, 128, 0.25)"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
# finer speedup ticks for a chart whose data span less than the coarse ticks resolve
TICK_SETS = (
    SPEEDUP_TICKS,
    (0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6),
    (0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.5, 3, 4, 5, 6),
)
# On a phone-width chart (site.js applies it below NARROW_PX): a taller figure and a two-column
# legend in smaller type, so the plot keeps most of the height (issue 26: a 250 x 200 px plot
# under a legend as tall as itself).
NARROW_PX = 560
NARROW_LAYOUT = {
    "height": 560,
    "margin": {"l": 48, "r": 8, "t": 8, "b": 8},
    "font": {"size": 12},
    "legend": {"font": {"size": 10.5}, "entrywidth": 0.5, "entrywidthmode": "fraction", "itemwidth": 30, "tracegroupgap": 0},
    "yaxis": {"title": {"text": "TPOT speedup (×)"}},
}
# shorter legend names on a phone, where the legend has two columns of half the plot's width
ADAPTIVE_NAME = "adaptive verification"  # its k is in the hover text: a phone's legend has room for a short name only
NARROW_NAMES = {"recommended schedule": "schedule", "1× = no speculation": "1× (none)", ADAPTIVE_NAME: "adaptive"}

def _axis(title: str, log: bool = False) -> dict:
    axis = {"title": {"text": title, "standoff": 8}, "gridcolor": "#e5e7eb", "zeroline": False, "automargin": True}
    if log:
        axis.update(type="log", dtick=math.log10(2), tickformat="d")
    return axis


def y_ticks(y_range) -> list[float]:
    """The speedup ticks inside the (log10) range, so the top curve is never above the last label;
    the finer ticks where the coarse ones would leave fewer than four."""
    lo, hi = 10 ** y_range[0], 10 ** y_range[1]
    for ticks in TICK_SETS:
        inside = [t for t in ticks if lo <= t <= hi]
        if len(inside) >= 4:
            return inside
    return inside


def fitted_range(fig: go.Figure) -> list[float]:
    """A log10 y-range fitted to what this figure plots (1x included), with a small margin: one
    deployment's 0.9-2.3x is not drawn on an axis from 0.4 to 6x."""
    values = [float(y) for trace in fig.data for y in (trace.y or ()) if y is not None and y > 0]
    low, high = min(values + [1.0]), max(values + [1.0])
    pad = 0.04 * (math.log10(high) - math.log10(low)) + 0.012
    return [math.log10(low) - pad, math.log10(high) + pad]


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


def speedup_vs_x(rows: pd.DataFrame, crossovers: pd.DataFrame, mode: str, entry: dict, bounds: list[str]) -> go.Figure:
    """Fixed-k speedups and the recommended schedule under the primary setting, the schedule's band under
    the bounds, 1× and the crossovers, against concurrency or load."""
    x_name, unit = _unit(mode)
    acceptance, primary = entry["acceptance"], entry["attention"]
    mine = rows[(rows["mode"] == mode) & (rows["acceptance"] == acceptance)]
    fig = go.Figure()
    xs = sorted(rows[(rows["mode"] == mode) & (rows["model"] == entry["model"])][x_name].dropna().unique())
    fig.add_trace(go.Scatter(x=[xs[0], xs[-1]], y=[1, 1], mode="lines", line={"color": REFERENCE_COLOR, "dash": "dash", "width": 1.5}, name="1× = no speculation", hoverinfo="skip", legendrank=1))
    scheduled = mine[(mine["k_schedule"] != "") & ~mine["drafter_idle"]]
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
                name="schedule's band", hoverinfo="skip", legendrank=2,
            )
        )
    adaptive = mine[mine["adaptive_verification"]] if "adaptive_verification" in mine.columns else mine.iloc[0:0]
    fixed = mine[(mine["k_schedule"] == "") & (mine["attention"] == primary) & ~mine.index.isin(adaptive.index)]
    for k, group in fixed.groupby("num_speculative_tokens", sort=True):
        group = group.sort_values(x_name)
        i = (int(k) - 1) % len(K_COLORS)
        fig.add_trace(
            go.Scatter(
                x=group[x_name].tolist(), y=group["tpot_speedup"].round(4).tolist(), mode="lines+markers", name=f"k = {k}", legendrank=10 + int(k),
                line={"color": K_COLORS[i], "width": 1.5, "dash": K_DASHES[i]}, marker={"size": 6},
                hovertemplate=f"k = {k}, %{{x}}{unit}: %{{y:.2f}}× median TPOT speedup<extra></extra>",
            )
        )
    main = scheduled[scheduled["attention"] == primary].sort_values(x_name)
    if len(main):
        fig.add_trace(
            go.Scatter(
                x=main[x_name].tolist(), y=main["tpot_speedup"].round(4).tolist(), mode="lines+markers", name="recommended schedule", legendrank=3,
                line={"color": SCHEDULE_COLOR, "width": 4}, marker={"size": 9, "symbol": "diamond"}, customdata=main["mean_scheduled_k"].round(2).tolist(),
                hovertemplate=f"schedule (mean k %{{customdata}}), %{{x}}{unit}: %{{y:.2f}}× median TPOT speedup<extra></extra>",
            )
        )
    if len(adaptive):
        adaptive = adaptive.sort_values(x_name)
        k_max = int(adaptive["num_speculative_tokens"].iloc[0])
        fig.add_trace(
            go.Scatter(
                x=adaptive[x_name].tolist(), y=adaptive["tpot_speedup"].round(4).tolist(), mode="lines+markers", name=ADAPTIVE_NAME,
                legendrank=5, line={"color": SCHEDULE_COLOR, "width": 2, "dash": "dot"}, marker={"size": 7, "symbol": "circle-open"},
                hovertemplate=f"adaptive verification, k = {k_max}, %{{x}}{unit}: %{{y:.2f}}× median TPOT speedup<extra></extra>",
            )
        )
    crossed = crossovers[(crossovers["mode"] == mode) & (crossovers["acceptance"] == acceptance) & (crossovers["attention"] == primary)]
    crossed = crossed[crossed["crossover_x"].notna()]
    if len(crossed):
        fig.add_trace(
            go.Scatter(
                x=crossed["crossover_x"].round(3).tolist(), y=[1] * len(crossed), mode="markers", name="k crosses 1×", legendrank=4,
                marker={"symbol": "x-thin", "size": 14, "line": {"width": 3, "color": "#b91c1c"}, "color": "#b91c1c"},
                customdata=crossed["num_speculative_tokens"].tolist(), hovertemplate=f"k = %{{customdata}} crosses 1× at %{{x:.3g}}{unit}<extra></extra>",
            )
        )
    title = "requests in flight (log scale)" if mode == "closed_loop" else "Poisson arrival rate (req/s)"
    return _layout(fig, title, mode == "closed_loop", fitted_range(fig))


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
        f"verify cost {names.setting(entry['attention'])}. "
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
