"""The "Published measurements" page: data/results/published.csv as a table, a chart and the misses.

Markup lives in ``templates/published.html`` and the prose in ``content/published.md``; this
module only reads the CSV and shapes what the template shows.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from simulator.util.errors import ConfigError
from simulator.schemas import ACCEPTANCE_CLASSES, ENGINE_CLASSES, OTHER_ENGINE, PUBLISHED_COLUMNS, PUBLISHED_LATER_COLUMNS, SIMULATED, VLLM, VLLM_UNKNOWN, VLLM_V0
from simulator.website.charts import PLOT_CONFIG, REFERENCE_COLOR, _style, export_layout, figure_json
from simulator.website import misses as miss_causes
from simulator.util import units
from simulator.website import names
from simulator.website.published_summary import summary

CSV_NAME = "published.csv"
MISS_PCT = 15.0  # a row is listed among the misses above this |error|
# The accuracy the model aims for before its answers are trusted to choose a deployment: the
# median |error| of the absolute figures, and the share of the absolute rows under load within
# ±MISS_PCT.  Reported as met or missed on the page, never tuned for.
TARGETS = {"median_pct": 10.0, "at_load_share": 0.8}
SYMBOLS = {
    "output_tokens_per_s": "circle", "tpot_ms": "square", "speedup": "diamond", "decode_tokens_per_s": "triangle-up",
    "tpot_mean_ms": "square-x", "itl_mean_ms": "cross", "requests_per_s": "star",
}
LABELS = {
    "output_tokens_per_s": "output tokens/s", "decode_tokens_per_s": "decode tokens/s", "tpot_ms": "TPOT (ms)", "speedup": "speedup (×)",
    "tpot_mean_ms": "mean TPOT (ms)", "itl_mean_ms": "mean ITL (ms)", "requests_per_s": "requests/s",
}
UNITS = {"tpot_ms": "ms", "tpot_mean_ms": "ms", "itl_mean_ms": "ms", "requests_per_s": "req/s"}  # else tok/s
BAND_COLOR = "rgba(31, 95, 168, 0.18)"  # the ±15 % band, light enough for markers to read over it
# On a phone the legend wraps to many lines under the plot and took the plot down to 227 px for
# five decades (issue 33): below NARROW_PX the chart is taller and its legend smaller.
NARROW_PX = 600
NARROW_LAYOUT = {
    "height": 800, "legend": {"font": {"size": 11}, "orientation": "h", "x": 0, "y": -0.17, "yanchor": "top"},
    "margin": {"l": 56, "r": 12, "t": 12, "b": 230},
}
CALIBRATION_COLOR = "#888888"  # calibration rows: hollow grey markers, their own legend entries
CLASS_LABELS = {c: f"acceptance {label}" for c, label in names.ACCEPTANCE_CLASS_WORDS.items()}
CLASS_SHORT = {"same_source": "same source", "same_setting_other_run": "another run", "other_dataset": "another dataset", "assumed": "assumed"}
# The engine classes (simulator/published/plan.py engine_identity): only vLLM rows run on their own
# version's engine generation make the headline; the others are reported apart: V0 rows on the
# oldest profile, SGLang rows on the SGLang profile of their stated version (else of their source's
# date), the rest on a proxy (issue 31).
ENGINE_CLASS_LABELS = {
    VLLM: "vLLM, on its own version's profile (the headline)",
    VLLM_V0: "vLLM V0 (before 0.8.0): informational, on the oldest profile",
    VLLM_UNKNOWN: "vLLM, neither version nor date stated: on a proxy profile",
    OTHER_ENGINE: "another engine (SGLang, TensorRT-LLM): SGLang on the SGLang profile of its stated version or its source's date, the rest on a proxy",
}
ENGINE_CLASS_SHORT = {VLLM: "vLLM", VLLM_V0: "vLLM V0", VLLM_UNKNOWN: "unversioned vLLM", OTHER_ENGINE: "other engines"}


def load_published(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise ConfigError(f"published comparison {path}: file not found; run python build.py") from None
    for column in PUBLISHED_LATER_COLUMNS:  # recorded before roles: every row unlabelled, a warning to re-record
        if column not in frame.columns:
            frame[column] = float("nan")
    missing = [c for c in PUBLISHED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"published comparison {path}: missing column(s) {missing}")
    return frame


def _setting(row: dict) -> str:
    load = next(f"{name} {row[key]:g}" for key, name in (("batch_size", "batch"), ("concurrency", "concurrency"), ("qps", "QPS")) if not _blank(row[key]))
    label = names.proposer(row["proposer"])
    proposer = "no speculation" if row["proposer"] == "none" else f"{label}, k = {int(row['k'])}" if not _blank(row["k"]) else label
    tp = int(row["tp"])
    gpu = ("GPU not stated" if _blank(row["gpu"]) else row["gpu"].upper()) + ("" if tp == 1 else f" ×{tp}")
    metric = {
        "output_tokens_per_s": "output throughput", "decode_tokens_per_s": "decode throughput (one request)",
        "tpot_mean_ms": "mean TPOT", "itl_mean_ms": "mean ITL", "requests_per_s": "request throughput",
    }.get(row["metric"])
    return (f"{row['model'].split('/')[-1]}, {gpu}, {proposer}, {load}" + ("" if _blank(row["dataset"]) else f", {row['dataset']}")
            + ("" if metric is None else f"; {metric}"))


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def figure(frame: pd.DataFrame) -> go.Figure:
    """One marker per simulated row; calibration rows (which set a constant) as hollow grey markers
    in legend entries of their own, so they are never read as evidence."""
    simulated = frame[frame.status == SIMULATED]
    fig = go.Figure()
    low = min(simulated.published.min(), simulated.simulated.min()) * 0.8
    high = max(simulated.published.max(), simulated.simulated.max()) * 1.25
    # the ±MISS_PCT band: a row inside it is not a miss (issue 33: the chart had no band); on log
    # axes it is a strip of constant width along the diagonal
    over, under = 1 + MISS_PCT / 100, 1 - MISS_PCT / 100
    fig.add_trace(go.Scatter(x=[low, high], y=[low * over, high * over], mode="lines", line={"width": 0}, name=f"+{MISS_PCT:g} % edge", showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=[low, high], y=[low * under, high * under], mode="lines", line={"width": 0}, fill="tonexty", fillcolor=BAND_COLOR,
        name=f"within ±{MISS_PCT:g} % (not a miss)", hoverinfo="skip",
    ))
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="simulated = published", line={"color": REFERENCE_COLOR, "dash": "dash"}, hoverinfo="skip"))
    calibration = simulated.role.map(lambda r: r == "calibration")
    for is_calibration, part in ((False, simulated[~calibration]), (True, simulated[calibration])):
        for metric, rows in part.groupby("metric", sort=True):
            marker = {"symbol": SYMBOLS[metric] + ("-open" if is_calibration else ""), "size": 10}
            if is_calibration:
                marker["color"] = CALIBRATION_COLOR
            fig.add_trace(
                go.Scatter(
                    x=rows.published,
                    y=rows.simulated,
                    mode="markers",
                    name=("calibration: " if is_calibration else "") + LABELS[metric],
                    legendgroup="calibration" if is_calibration else "check",
                    marker=marker,
                    customdata=list(zip(rows.id, rows.error_pct)),
                    hovertemplate="%{customdata[0]}<br>published %{x:.3g}, simulated %{y:.3g}<br>error %{customdata[1]:+.1f}%<extra></extra>",
                )
            )
    ticks = log_ticks(low, high)
    fig.update_layout(
        xaxis={"type": "log", "title": {"text": "published"}, "range": [math.log10(low), math.log10(high)], **ticks},
        yaxis={"type": "log", "title": {"text": "simulated"}, "range": [math.log10(low), math.log10(high)], **ticks},
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 20},
    )
    return _style(fig)


def log_ticks(low: float, high: float) -> dict:
    """A log axis labelled at each power of ten in full ("0.1", "10", "1,000"), with unlabelled minor
    ticks at 2x and 5x: Plotly's own minor labels print as bare digits ("2", "5"), which read as
    2 and 5 whatever their decade (issue 26)."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    decades = [10.0 ** e for e in range(first, last + 1)]
    labelled = [d for d in decades if low <= d <= high]
    minor = [m * d for d in decades for m in (2, 5) if low <= m * d <= high]
    return {
        "tickvals": labelled,
        "ticktext": [f"{d:,.0f}" if d >= 1 else f"{d:g}" for d in labelled],
        "minor": {"tickvals": minor, "ticks": "outside", "ticklen": 4, "showgrid": True, "gridcolor": "#f3f4f6"},
    }


def with_unit(value: float, metric: str, digits: str = "g") -> str:
    """A published or simulated figure with its unit, the same way in both columns."""
    if _blank(value):
        return "—"
    if metric == "speedup":
        return f"{value:.2f}×"
    text = units.figure(value, 3 if digits == "3g" else None)
    return f"{text} {UNITS.get(metric, 'tok/s')}"  # output or decode tokens: the setting says which


percent = units.percent  # a signed error in percent (kept here: the published pages' modules import it from here)


def _text_cell(value) -> str:
    return "" if _blank(value) else str(value)


def engine_text(row: dict) -> str:
    """The engine that ran the row and the profile it was simulated on: "vLLM 0.15.1: profile
    vllm-0.15.1", "SGLang 0.5.3: another engine, on profile sglang-0.5.3", "SGLang: another
    engine, on the proxy vllm-0.10.1" ('' when not recorded)."""
    cls, profile = _text_cell(row.get("engine_class")), _text_cell(row.get("engine_profile"))
    if not cls:
        return ""
    version = _text_cell(row.get("engine_version"))
    name = names.engine(_text_cell(row.get("engine"))) + (f" {version}" if version else "")
    return name + {
        VLLM: f": profile {profile}", VLLM_V0: f": V0, informational, on {profile}",
        VLLM_UNKNOWN: f": version unknown, on the proxy {profile}",
        OTHER_ENGINE: f": another engine, on {'profile' if profile.startswith(_text_cell(row.get('engine')) + '-') else 'the proxy'} {profile}",
    }.get(cls, f": {cls}, on {profile}")


def context(path: Path, setup_line: str) -> dict:
    """What templates/published.html shows."""
    frame = load_published(path)
    records = frame.to_dict("records")
    for row in records:
        row["setting"] = _setting(row)
        row["published_text"] = with_unit(row["published"], row["metric"])
        row["simulated_text"] = with_unit(row["simulated"], row["metric"], "3g")
        row["error_text"] = percent(row["error_pct"])
        row["acceptance_text"] = units.acceptance_lengths_in_text(_text_cell(row["acceptance_used"])) or ("none needed (no speculation)" if row["proposer"] == "none" else "—")
        row["class_text"] = names.acceptance_class(_text_cell(row["acceptance_class"]))
        row["source_label"] = names.source(row["source_url"])
        row["engine_text"] = engine_text(row)
        for key in ("role", "acceptance_class", "plausible", "error_range_pct", "calibrated_by", "engine_profile", "engine_class", "engine_basis"):
            row[key] = _text_cell(row[key])
    simulated = [r for r in records if r["status"] == SIMULATED]
    checks = [r for r in simulated if r["role"] == "check"]
    misses = sorted((r for r in checks if abs(r["error_pct"]) > MISS_PCT), key=lambda r: (-abs(r["error_pct"]), r["id"]))
    figures = summary(records)
    return {
        "rows": records,
        "simulated": simulated,
        "checks": checks,
        "calibration": [r for r in simulated if r["role"] == "calibration"],
        "unlabelled": [r for r in simulated if r["role"] not in ("check", "calibration")],
        "unreproducible": [r for r in records if r["status"] != SIMULATED],
        "misses": misses,
        # the headline's misses: check rows of vLLM run on their own version's profile
        "headline_misses": [r for r in misses if r["engine_class"] == VLLM],
        "engines": [(c, ENGINE_CLASS_LABELS[c]) for c in ENGINE_CLASSES],
        "miss_groups": miss_causes.groups(misses),
        "speculative_at_load": _speculative_at_load(checks),
        "trend_misses": _trend_misses(figures["trends"]["misses"], {r["id"]: r for r in records}),
        "miss_pct": MISS_PCT,
        "targets": TARGETS,
        "targets_met": targets_met(figures),
        "summary": figures,
        "classes": [(c, CLASS_LABELS[c]) for c in ACCEPTANCE_CLASSES],
        "headline": headline(records),
        "figure": {
            "figure": figure_json(figure(frame)),
            "narrow": {"below_px": NARROW_PX, "layout": NARROW_LAYOUT},
            "export": export_layout("Published vs simulated, one marker per row (calibration rows hollow grey)", [setup_line]),
            "filename": "published-vs-simulated",
            "config": PLOT_CONFIG,
        },
        "file": CSV_NAME,
    }


def _trend_misses(pairs: list[str], by_id: dict) -> list[dict]:
    """The series steps the simulation does not reproduce, as two linked rows each (the summary
    names them "a -> b" by row id, which is no reader text)."""
    out = []
    for pair in pairs:
        first, second = (by_id[i.strip()] for i in pair.split("->"))
        out.append({"from": first["id"], "from_setting": first["setting"], "to": second["id"], "to_setting": second["setting"]})
    return out


def _speculative_at_load(checks: list[dict]) -> dict:
    """The check rows the pays-off answers rest on (speculation, under load): how many, how many
    miss, their error range and the rows by |error|, for the page's first lines (issue 33)."""
    rows = sorted((r for r in checks if miss_causes.speculative_at_load(r)), key=lambda r: (-abs(r["error_pct"]), r["id"]))
    errors = [float(r["error_pct"]) for r in rows]
    return {
        "rows": rows, "count": len(rows), "misses": sum(abs(e) > MISS_PCT for e in errors),
        "low": percent(min(errors)) if errors else "—", "high": percent(max(errors)) if errors else "—",
    }


def targets_met(figures: dict) -> dict:
    """Whether the check rows meet each of :data:`TARGETS` (nan, no rows: not met)."""
    load = figures["at_load"]
    share = load["absolute_rows_within_15pct"] / load["absolute_rows"] if load["absolute_rows"] else 0.0
    return {
        "median": figures["check"]["absolute_median_abs_error_pct"] <= TARGETS["median_pct"],
        "at_load": share >= TARGETS["at_load_share"],
    }


def headline(records) -> list[str]:
    """The home page's summary, one short line each: vLLM check rows run on their own version's
    profile only, by acceptance class, with the other engines and the calibration rows apart
    (issue 26: one five-line sentence before; issue 31: every engine counted as vLLM 0.10.1)."""
    s = summary(records)
    check = s["check"]
    if not check["rows"]:
        return ["No vLLM check rows with an engine class are recorded yet."]
    misses = sum(
        1 for r in records
        if r["status"] == SIMULATED and _text_cell(r.get("role")) == "check" and _text_cell(r.get("engine_class")) == VLLM and abs(r["error_pct"]) > MISS_PCT
    )
    lines = [f"vLLM, on its own version's profile: {check['rows']} check rows; {misses} miss by more than {MISS_PCT:g} %."]
    if check["absolute_rows"]:
        lines.append(
            f"Tokens/s and TPOT: median |error| {check['absolute_median_abs_error_pct']:.0f} %, "
            f"{check['absolute_rows_within_15pct']} of {check['absolute_rows']} within ±{MISS_PCT:g} %."
        )
    if check["speedup_rows"]:
        lines.append(f"Speedups: {check['speedup_rows_within_15pct']} of {check['speedup_rows']} within ±{MISS_PCT:g} %.")
    classes = [
        f"{CLASS_SHORT[c]} {s['by_class'][c]['median_abs_error_pct']:.0f} % ({s['by_class'][c]['rows']} rows)"
        for c in ACCEPTANCE_CLASSES if s["by_class"][c]["rows"]
    ]
    lines.append("Median |error| by where the acceptance comes from: " + ", ".join(classes) + ".")
    apart = [
        f"{ENGINE_CLASS_SHORT[c]} {s['by_engine'][c]['median_abs_error_pct']:.0f} % ({s['by_engine'][c]['rows']} rows)"
        for c in ENGINE_CLASSES if c != VLLM and s["by_engine"][c]["rows"]
    ]
    if apart:
        lines.append("Reported apart: " + ", ".join(apart) + ".")
    calibration = s["calibration"]["rows"]
    lines.append(f"{calibration} calibration row{'' if calibration == 1 else 's'} shown apart (they set constants of the model).")
    return lines
