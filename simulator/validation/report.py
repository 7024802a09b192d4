"""The validation report: ``report.json``, ``report.md``, ``comparison.csv`` and a
measured-vs-simulated scatter (``scatter.html`` with a local ``plotly.min.js``, and the
figure as ``scatter.json`` for the site).  Everything is computed before the first file is
written, and each file is written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from simulator.schemas import VALIDATION_REPORT_SCHEMA
from simulator.validation.calibrate import read_calibration
from simulator.validation.compare import (
    DEFAULT_PERCENTILES,
    LABELS,
    METRICS,
    PER_REQUEST,
    WINDOW_WORDS,
    acceptance_summary,
    check_same_workload,
    error_summary,
    join,
    measured_frame,
    measured_itls,
    measured_throughput,
    simulated_metrics,
    status_counts,
    throughput_comparison,
)
from simulator.util.textio import atomic_write_bytes
from simulator.validation.files import atomic_write_json, check_output_dir, json_safe
from simulator.validation.replay_files import check_replay_dir, read_results, read_summary
from simulator.validation.sessions import describe
from simulator.validation.simulate import read_simulated, read_simulated_itls
from simulator.validation.workload import read_workload

SCHEMA = VALIDATION_REPORT_SCHEMA  # shared with the site, which reads report.json
SCHEMA_VERSION = 3  # 2: vllm bench serve metrics (mean, median, percentiles in ms; ITL, E2EL; throughput); 3: ITL pooled (vLLM's), std, every session
FILES = {"json": "report.json", "markdown": "report.md", "csv": "comparison.csv", "scatter_html": "scatter.html", "scatter_json": "scatter.json", "plotlyjs": "plotly.min.js"}
UNITS = "per-request values (comparison.csv) in seconds; summaries (report.json, report.md) in milliseconds; throughput in req/s and tok/s, as vllm bench serve"


def build_report(workload, results, replay_summary: dict, calibration: dict, simulated: dict, simulated_frame: pd.DataFrame, simulated_itls: dict, percentiles=DEFAULT_PERCENTILES, percentile_metrics=METRICS) -> tuple[dict, pd.DataFrame]:
    """The report as data (``simulated_itls``: request id -> simulated emission gaps, seconds)."""
    workload_hash = check_same_workload(
        {
            "workload": workload.workload_hash,
            "replay": results.workload_hash,
            "calibration": calibration.get("workload_hash"),
            "simulated": simulated.get("workload_hash"),
        }
    )
    frame = join(measured_frame(workload, results.records), simulated_frame)
    config = simulated.get("config") or {}
    sessions = describe(replay_summary, results.history)
    entries = {e.get("session"): e for e in replay_summary.get("sessions", [])}
    report = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "workload_hash": workload_hash,
        "served_model": results.header.get("model"),
        "simulated_model": config.get("model"),
        "simulated_device": config.get("device"),
        "units": UNITS,
        "requests": status_counts(frame),
        "metrics": error_summary(frame, measured_itls(results.records), simulated_itls, percentiles, percentile_metrics),
        "throughput": throughput_comparison(
            measured_throughput(workload, results.records, sessions),
            simulated_metrics(simulated_frame, simulated_itls, percentiles)["throughput"],
        ),
        "acceptance": acceptance_summary(
            calibration,
            simulated.get("summary") or {},
            decode_tokens=sum(r.output_tokens - 1 for r in workload.requests),
            simulated_with=((config.get("speculation") or {}).get("proposal_probability")),
        ),
        "calibration": {key: calibration.get(key) for key in ("engine", "num_speculative_tokens", "acceptance_per_position", "acceptance_per_position_unconditional", "kv_cache", "drafts_per_decode_chunk", "proposal_probability", "tokens_per_decode_chunk", "sessions_used", "sessions_dropped", "sessions_flagged", "notes", "warnings")},
        # every session, however it ended (a killed one from its records), with the time it counts for
        "replay_sessions": [row | {key: (entries.get(row["session"]) or {}).get(key) for key in ("client_overhead", "after_scrape", "after_scrape_error")} for row in sessions],
        "provenance": simulated.get("provenance"),
        "files": {key: name for key, name in FILES.items() if key != "json"},
    }
    return json_safe(report), frame


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _percent(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _number(value: Optional[float], digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render_markdown(report: dict) -> str:
    requests = report["requests"]
    lines = [
        "# Validation report",
        "",
        f"Workload `{report['workload_hash'][:12]}`: {requests['total']} requests, {requests['compared']} compared "
        f"(statuses: {', '.join(f'{k} {v}' for k, v in requests['by_status'].items())}; length mismatches: {requests['length_mismatch']}).",
        f"Served model `{report['served_model']}`; simulated `{report['simulated_model']}` on `{report['simulated_device']}`.",
        "",
        "Latencies in milliseconds, as `vllm bench serve` prints them. ITL is vLLM's: every gap between consecutive content chunks"
        " (simulated: token emissions) of the compared requests, pooled; it has no per-request error. Errors are (simulated - measured) / measured:"
        " positive means the simulator predicts slower.",
        "",
        "| metric | statistic | measured (ms) | simulated (ms) | error |",
        "|---|---|---:|---:|---:|",
    ]
    for metric in METRICS:
        m = report["metrics"][metric]
        for key, measured in m["measured"].items():
            statistic = key[:-3]
            lines.append(f"| {m.get('label', LABELS[metric])} | {statistic} | {_ms(measured)} | {_ms(m['simulated'][key])} | {_percent(m['error_pct'][statistic])} |")
    lines += [
        "",
        "Per-request errors over the compared requests:",
        "",
        "| metric | requests | median error | MAPE | p90 abs error |",
        "|---|---:|---:|---:|---:|",
    ]
    for metric in METRICS:
        m = report["metrics"][metric]
        mape = "n/a" if m["mape_pct"] is None else f"{m['mape_pct']:.1f}%"
        p90 = "n/a" if m["p90_abs_err_pct"] is None else f"{m['p90_abs_err_pct']:.1f}%"
        lines.append(f"| {m.get('label', LABELS[metric])} | {m['requests']} | {_percent(m['median_signed_err_pct'])} | {mape} | {p90} |")
    throughput = report.get("throughput")
    if throughput:
        lines += ["", "| throughput | measured | simulated | error |", "|---|---:|---:|---:|"]
        for key, label, unit in (("request_throughput", "request throughput", "req/s"), ("output_throughput", "output token throughput", "tok/s"), ("total_token_throughput", "total token throughput", "tok/s")):
            lines.append(f"| {label} ({unit}) | {_number(throughput['measured'][key], 2)} | {_number(throughput['simulated'][key], 2)} | {_percent(throughput['error_pct'][key])} |")
        measured = throughput["measured"]
        stall = f"; {measured['stall_tail_s']:.2f} s the client spent waiting only on stalled streams are outside it" if measured.get("stall_tail_s") else ""
        lines += [
            "",
            f"Measured over {measured['completed']} completed requests and the tokens they received, in the measured window of {_number(measured['duration_s'], 2)} s "
            f"({WINDOW_WORDS}; {measured.get('sessions', 0)} replay session(s), {_number(measured.get('sessions_active_s'), 2)} s active in all{stall}); "
            "simulated from the first arrival to the last finish.",
        ]
        sessions = report.get("replay_sessions") or []
        if len(sessions) > 1 or any(s.get("state") != "closed" for s in sessions):
            lines += ["", "| session | how it ended | records | active (s) | duration from |", "|---:|---|---:|---:|---|"]
            lines += [f"| {s['session']} | {s['state_words']} | {s['records']} | {_number(s['active_s'], 2)} | {s['duration_from']} |" for s in sessions]
    acceptance = report["acceptance"]
    lines += [
        "",
        f"## Acceptance (k = {acceptance['num_speculative_tokens']}, counters: {acceptance['engine'] or 'none'})",
        "",
        "| | acceptance rate | mean acceptance length | draft probability per decode step |",
        "|---|---:|---:|---:|",
    ]
    for side in ("measured", "simulated"):
        values = acceptance[side]
        lines.append(f"| {side} | {_number(values['acceptance_rate'])} | {_number(values['mean_acceptance_length'])} | {_number(values.get('draft_probability'))} |")
    lines += [
        "",
        "Draft probability: decode steps at which the proposer produced a draft (an n-gram proposer misses at some);"
        " measured as vLLM's drafts per streamed decode chunk, simulated as verify steps per decode step."
        + (f" The simulation ran with proposal probability {_number(acceptance.get('proposal_probability_input'))}." if acceptance.get("proposal_probability_input") is not None else ""),
        "",
    ]
    warnings = report["calibration"].get("warnings") or []
    if warnings:
        lines += ["## Warnings", ""] + [f"- {warning}" for warning in warnings] + [""]
    notes = report["calibration"].get("notes") or []
    if notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    lines += ["Per-request values (seconds): `comparison.csv`; scatter plot: `scatter.html`.", ""]
    return "\n".join(lines)


def scatter_figure(frame: pd.DataFrame) -> go.Figure:
    """Measured (x) against simulated (y) per metric, with the y = x line."""
    rows = frame[frame["compared"]]
    figure = make_subplots(rows=1, cols=len(PER_REQUEST), subplot_titles=[f"{LABELS[m]} (ms)" for m in PER_REQUEST])
    for column, metric in enumerate(PER_REQUEST, start=1):
        data = rows.dropna(subset=[f"measured_{metric}_s", f"simulated_{metric}_s"])
        x = (data[f"measured_{metric}_s"] * 1000).round(4).tolist()
        y = (data[f"simulated_{metric}_s"] * 1000).round(4).tolist()
        figure.add_trace(
            go.Scatter(x=x, y=y, mode="markers", name=LABELS[metric], text=[f"request {i}" for i in data["request_id"]], showlegend=False),
            row=1,
            col=column,
        )
        if x:
            edge = max(max(x), max(y))
            figure.add_trace(go.Scatter(x=[0, edge], y=[0, edge], mode="lines", line={"dash": "dot", "color": "grey"}, showlegend=False, hoverinfo="skip"), row=1, col=column)
        figure.update_xaxes(title_text="measured", row=1, col=column)
        figure.update_yaxes(title_text="simulated", row=1, col=column)
    figure.update_layout(title="Measured vs simulated, per request", template="plotly_white", height=420)
    return figure


def compare_files(workload_path: Path, replay_dir: Path, calibration_path: Path, simulated_dir: Path, out_dir: Path, percentiles=DEFAULT_PERCENTILES, percentile_metrics=METRICS) -> dict:
    out_dir = check_output_dir(out_dir, "report directory", files=tuple(FILES.values()))
    workload = read_workload(workload_path)
    results = read_results(check_replay_dir(replay_dir, "--replay"))
    calibration = read_calibration(calibration_path)
    simulated, simulated_frame = read_simulated(simulated_dir)
    simulated_itls = read_simulated_itls(simulated_dir, len(workload))
    report, frame = build_report(workload, results, read_summary(replay_dir), calibration, simulated, simulated_frame, simulated_itls, percentiles, percentile_metrics)
    figure = scatter_figure(frame)
    outputs = {
        FILES["markdown"]: render_markdown(report).encode("utf-8"),
        FILES["csv"]: frame.to_csv(index=False, lineterminator="\n").encode("utf-8"),
        FILES["scatter_html"]: figure.to_html(include_plotlyjs="directory", full_html=True, div_id="validation-scatter").encode("utf-8"),
        FILES["scatter_json"]: figure.to_json().encode("utf-8"),
        FILES["plotlyjs"]: get_plotlyjs().encode("utf-8"),
    }
    for name, data in outputs.items():
        atomic_write_bytes(out_dir / name, data)
    atomic_write_json(out_dir / FILES["json"], report)  # last: its presence means the set is complete
    return report
