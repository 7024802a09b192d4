"""Simulate every reproducible published row and write ``data/published.csv``.

Runs go through the sweep's executor and result cache (:func:`simulator.sweep.runner.simulate_all`),
so the reproductions are parallel, deterministic and cached like the seed sweep.  Rows that cannot
be simulated stay in the CSV with their reason, so the page can list them.
"""

from __future__ import annotations

import statistics
from typing import Optional, Sequence

from simulator.published.plan import Plan, plan, simulated_value
from simulator.published.spec import METRICS, Assumptions, Measurement
from simulator.sweep.runner import simulate_all, to_csv_text

# Sources whose measurements informed a default of the model (the 1.2 ms engine overhead per
# step is SpecDecode-Bench's fit to its vLLM 0.10.1 runs): their rows are reported apart.
INFORMED_DEFAULTS = {"specdecode-bench": "engine_overhead_ms"}

COLUMNS = (
    "id", "source_url", "metric", "published", "simulated", "error_pct", "unit", "status", "reason",
    "source", "informed_default", "engine", "engine_version", "gpu", "tp", "model", "proposer", "draft", "k",
    "batch_size", "concurrency", "qps", "dataset", "input_len", "output_len", "acceptance_used", "acceptance_source",
    "profile_id", "vidur_version", "simulator_version", "simulator_source_hash", "seed", "engine_overhead_ms",
)
SIMULATED, NOT_REPRODUCIBLE = "simulated", "not reproducible"


def source_of(m: Measurement) -> str:
    """Rows of one source share the prefix of their ids up to the setting ("vllm-pr16937")."""
    for prefix in INFORMED_DEFAULTS:
        if m.id.startswith(prefix):
            return prefix
    return "-".join(m.id.split("-")[:2])


def plans_for(measurements: Sequence[Measurement], assumptions: Assumptions) -> list[Plan]:
    rows = {m.id: m for m in measurements}
    return [plan(m, assumptions, rows) for m in measurements]


def run_plans(plans: Sequence[Plan], executor, run=None) -> list[dict]:
    """Simulate every planned run once (baselines are shared between rows that need the same one)."""
    configs = []
    for p in plans:
        for config in (p.run, p.baseline):
            if config is not None and config not in configs:
                configs.append(config)
    records = simulate_all(configs, executor, run) if configs else []
    by_config = dict(zip(configs, records))
    return [_row(p, by_config.get(p.run), by_config.get(p.baseline)) for p in plans]


def _row(p: Plan, record: Optional[dict], baseline: Optional[dict]) -> dict:
    m = p.measurement
    row = {
        "id": m.id, "source_url": m.source_url, "metric": m.metric, "unit": METRICS[m.metric], "published": m.value,
        "source": source_of(m), "informed_default": INFORMED_DEFAULTS.get(source_of(m), ""),
        **{key: getattr(m, key) for key in ("engine", "engine_version", "gpu", "tp", "model", "proposer", "draft", "k",
                                           "batch_size", "concurrency", "qps", "dataset", "input_len", "output_len")},
    }
    if p.acceptance is not None:
        row.update(acceptance_used=p.acceptance.description, acceptance_source=p.acceptance.source)
    if record is None:
        row.update(status=NOT_REPRODUCIBLE, reason=p.reason)
        return row
    simulated = simulated_value(m, record, baseline)
    row.update(
        status=SIMULATED,
        simulated=simulated,
        error_pct=100 * (simulated - m.value) / m.value,
        **{key: record[key] for key in ("profile_id", "vidur_version", "simulator_version", "simulator_source_hash", "seed")},
        engine_overhead_ms=p.run.engine_overhead_ms,
    )
    return row


def csv_text(rows: Sequence[dict]) -> str:
    return to_csv_text(rows, COLUMNS)


def summary(rows: Sequence[dict]) -> dict:
    """The headline figures: median |error| over absolute rows, the worst speedup error, each
    split by whether the row's source informed a default."""
    simulated = [r for r in rows if r["status"] == SIMULATED]

    def median_abs(selected):
        return statistics.median(abs(r["error_pct"]) for r in selected) if selected else float("nan")

    def informed(row) -> bool:  # read back from a CSV, an empty cell is NaN
        return isinstance(row["informed_default"], str) and bool(row["informed_default"])

    absolute = [r for r in simulated if r["metric"] != "speedup"]
    speedups = [r for r in simulated if r["metric"] == "speedup"]
    independent = [r for r in simulated if not informed(r)]
    return {
        "rows": len(rows),
        "simulated": len(simulated),
        "not_reproducible": len(rows) - len(simulated),
        "absolute_rows": len(absolute),
        "absolute_median_abs_error_pct": median_abs(absolute),
        "speedup_rows": len(speedups),
        "speedup_rows_within_15pct": sum(abs(r["error_pct"]) <= 15 for r in speedups),
        "speedup_max_abs_error_pct": max((abs(r["error_pct"]) for r in speedups), default=float("nan")),
        "independent_rows": len(independent),
        "independent_median_abs_error_pct": median_abs(independent),
        "informed_rows": len(simulated) - len(independent),
        "informed_median_abs_error_pct": median_abs([r for r in simulated if informed(r)]),
    }
