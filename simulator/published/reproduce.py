"""Simulate every reproducible published row and write ``data/results/published.csv``.

Runs go through the sweep's executor and result cache (:func:`simulator.sweep.runner.simulate_all`),
so the reproductions are parallel, deterministic and cached like the seed sweep.  Rows that cannot
be simulated stay in the CSV with their reason, so the page can list them.
"""

from __future__ import annotations

from typing import Sequence

from simulator.published.plan import Plan, engine_identity, plan, simulated_value
from simulator.specs.measurements import METRICS, Assumptions, Measurement
from simulator.schemas import NOT_REPRODUCIBLE, PROVENANCE_COLUMNS, PUBLISHED_COLUMNS as COLUMNS, SIMULATED
from simulator.sweep.runner import simulate_all, to_csv_text



def source_of(m: Measurement) -> str:
    """Rows of one source share the prefix of their ids up to the setting ("vllm-pr16937")."""
    return "-".join(m.id.split("-")[:2])


def plans_for(measurements: Sequence[Measurement], assumptions: Assumptions) -> list[Plan]:
    rows = {m.id: m for m in measurements}
    return [plan(m, assumptions, rows) for m in measurements]


def run_plans(plans: Sequence[Plan], executor, run=None) -> list[dict]:
    """Simulate every planned run once (baselines are shared between rows that need the same one)."""
    configs = []
    for p in plans:
        for config in (p.run, p.baseline, *(c for _, *pair in p.variants for c in pair)):
            if config is not None and config not in configs:
                configs.append(config)
    records = simulate_all(configs, executor, run, label="published reproductions") if configs else []
    by_config = dict(zip(configs, records))
    return [_row(p, by_config) for p in plans]


def _range_text(key: str, values: tuple) -> str:
    return f"{key} {' or '.join(str(v) for v in values)}" if key in ("gpu", "tp") else f"{key} {values[0]}-{values[1]}"


def _error_range(p: Plan, by_config: dict) -> str:
    """The row's error at each end of its plausible ranges: "-12.0 to +3.1" (empty without ranges)."""
    m = p.measurement
    errors = [100 * (simulated_value(m, by_config[run], by_config.get(base)) - m.value) / m.value for _, run, base in p.variants]
    return f"{min(errors):+.1f} to {max(errors):+.1f}" if errors else ""


def _row(p: Plan, by_config: dict) -> dict:
    m = p.measurement
    record, baseline = by_config.get(p.run), by_config.get(p.baseline)
    engine = engine_identity(m)
    row = {
        "id": m.id, "source_url": m.source_url, "metric": m.metric, "unit": METRICS[m.metric], "published": m.value,
        "role": m.role, "acceptance_class": m.acceptance_class, "calibrated_by": m.calibrated_by or "",
        "plausible": "; ".join(_range_text(key, values) for key, values in m.plausible), "source": source_of(m),
        "engine_profile": engine.profile, "engine_class": engine.engine_class, "engine_basis": engine.basis,
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
        error_range_pct=_error_range(p, by_config),
        **{key: record[key] for key in (*PROVENANCE_COLUMNS, "seed")},
        engine_overhead_ms=p.run.engine_overhead_ms,
    )
    return row


def csv_text(rows: Sequence[dict]) -> str:
    return to_csv_text(rows, COLUMNS)
