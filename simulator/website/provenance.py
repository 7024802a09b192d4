"""What each page says about where its numbers come from: the footer's setup line and files.

The site shows results of four different simulations (the seed sweep, the batch-1 progress
check, the pays-off sweep and the reproductions of published measurements), each with its own
model, lengths, loads and seeds.  A footer that repeated the seed sweep's setup on every page
would misstate three of them, so each page names its own setup and the files its simulated
numbers come from.  The lines are built from the recorded files themselves, never typed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from simulator.util import units


@dataclass(frozen=True)
class Footer:
    """``setup``: one line on what was simulated; None means the seed sweep's (``_setup.html``).
    ``files``: the site's files every simulated number on the page comes from (may be empty).
    ``also``: further sources in words (a report in the repository), after the files or alone.
    ``lead``: the words before the files."""

    setup: Optional[str]
    files: tuple[str, ...] = ()
    also: str = ""
    lead: str = "Every simulated result on this page comes from"


def _values(frame: pd.DataFrame, column: str) -> str:
    """The distinct values of a provenance column, in order: "0.0.26" or "a, b"."""
    if column not in frame.columns:
        return "?"
    seen = [units.number(v) if isinstance(v, float) else str(v) for v in frame[column].dropna().unique() if str(v) != ""]
    return ", ".join(seen) if seen else "?"


def _span(values, unit: str) -> str:
    values = sorted(float(v) for v in values)
    low, high = units.number(values[0]), units.number(values[-1])
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


def progress_line(progress: pd.DataFrame) -> str:
    """The batch-1 progress check (progress.csv): one request in flight at a time."""
    first = progress.iloc[0]
    return (
        f"Setup: {units.model_label(first['model'])} · {str(first['device']).upper()} profile ({_values(progress, 'profile_id')}) · "
        f"batch-1 check: {first['num_requests']} requests of {first['prompt_tokens']} prompt / {first['output_tokens']} output tokens per point, "
        f"arriving {units.number(first['interarrival_s'])} s apart (one in flight at a time) · Vidur {_values(progress, 'vidur_version')} · "
        f"simulator {_values(progress, 'simulator_version')} (source {_values(progress, 'simulator_source_hash')}) · acceptance seed {_values(progress, 'seed')}."
    )


def paysoff_line(rows: pd.DataFrame, schedules: dict) -> str:
    """The pays-off sweep (paysoff.csv and recommended_schedules.json): its deployments, lengths,
    loads and acceptance inputs.  A schedule names its deployment; a file recorded before
    deployments existed names one model and GPU at its top level."""
    workload = schedules.get("workload", {})
    entries = schedules.get("schedules", [])
    deployments = list(dict.fromkeys(
        entry.get("deployment_label")
        or f"{units.model_label(entry.get('model', schedules.get('model')))}, {str(entry.get('device', schedules.get('device'))).upper()}"
        for entry in entries
    ))
    closed = rows[rows["mode"] == "closed_loop"]
    poisson = rows[rows["mode"] == "poisson"]
    loads = []
    if len(closed):
        spread = workload.get("closed_loop_length_spread")
        drawn = f", lengths drawn within ±{100 * float(spread):.0f} %" if spread else ""
        loads.append(f"closed loop at {_span(closed['concurrency'].dropna(), 'requests in flight')}{drawn}")
    if len(poisson):
        loads.append(f"Poisson arrivals at {_span(poisson['arrival_rate'].dropna(), 'req/s')}")
    labels = ", ".join(dict.fromkeys(entry["label"] for entry in entries))
    return (
        f"Setup: {'; '.join(deployments)} · {workload.get('prompt_tokens')} prompt / {workload.get('output_tokens')} output tokens on average · "
        f"{' · '.join(loads)} · acceptance: {labels} · profiles: {_values(rows, 'profile_id')} · Vidur {_values(rows, 'vidur_version')} · "
        f"simulator source {_values(rows, 'simulator_source_hash')} · seeds: workload {_values(rows, 'workload_seed')}, acceptance {_values(rows, 'seed')}."
    )


def published_line(frame: pd.DataFrame) -> str:
    """The reproductions of published measurements (published.csv): one setting per row."""
    simulated = frame[frame["status"] == "simulated"] if "status" in frame.columns else frame
    overhead = _values(simulated, "engine_overhead_ms")
    return (
        "Setup: each row is simulated in its own published setting (model, GPU, tensor parallelism, proposer, k, load and lengths "
        "from data/published.toml; lengths and acceptance a row leaves unstated from data/published_assumptions.toml) · "
        f"profiles: {_values(simulated, 'profile_id')} · Vidur {_values(simulated, 'vidur_version')} · "
        f"simulator {_values(simulated, 'simulator_version')} (source {_values(simulated, 'simulator_source_hash')}) · "
        f"engine overhead {overhead} ms per step · acceptance seed {_values(simulated, 'seed')}."
    )


def footers(
    *,
    files: dict,
    progress: pd.DataFrame,
    calibration_docs: tuple[str, ...],
    paysoff: Optional[tuple],
    published: Optional[pd.DataFrame],
    published_file: str,
    paysoff_files: tuple[str, ...],
    validation_name: Optional[str],
    verify_measured: bool,
) -> dict[str, Footer]:
    """Page file -> its footer."""
    sweep, progress_csv = files["sweep"], files["progress"]
    calibration = (
        f"the built-in profile's calibration error comes from the repository's calibration reports ({', '.join(calibration_docs)})"
        if calibration_docs else "no calibration report is recorded"
    )
    published_files = (published_file,) if published is not None else ()
    return {
        "index.html": Footer(
            None,
            (sweep,) + published_files,
            "published.csv only for the line on published measurements, whose settings published.html states" if published is not None else "",
        ),
        "modeling.html": Footer(
            progress_line(progress),
            (progress_csv,),
            calibration + ("; the measured verify attention from the profile's verify_attention.csv" if verify_measured else ""),
        ),
        "paysoff.html": (
            Footer(paysoff_line(paysoff[0], paysoff[2]), paysoff_files)
            if paysoff is not None
            else Footer("The pays-off sweep is not recorded in this build: this page shows no simulated result.")
        ),
        "published.html": (
            Footer(published_line(published), published_files)
            if published is not None
            else Footer("No comparison with published measurements is recorded in this build: this page shows no simulated result.")
        ),
        "validation.html": Footer(
            "This page shows no simulated result: its commands run the simulator and the validation harness on your machine.",
            (),
            f"The results table is the validation harness's report ({validation_name})" if validation_name else "",
        ),
        "data.html": Footer(
            "Setup: each file this page describes states its own in its provenance columns (profile, Vidur version, simulator version and source hash).",
            (sweep, progress_csv) + paysoff_files + published_files,
            lead="The files this page describes:",
        ),
    }
