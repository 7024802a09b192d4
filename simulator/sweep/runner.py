"""Expand a spec into runs, execute them, and write one deterministic CSV row per run.

Workers return flat records (not whole RunResults) so only a few hundred bytes cross process
or node boundaries.  Rows are sorted by their inputs and floats are printed with a fixed
format, so the same spec and seeds give a byte-identical CSV whatever executor ran them.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from simulator.util.progress import say
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ExplicitWorkload, PoissonWorkload
from simulator.speculative.verify_cost import ATTENTION_MODES
from simulator.runs.deployment import Speculation
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.sweep.metrics import mean_decode_batch, queue_growth, with_speedups
from simulator.specs.sweep import SweepSpec
from simulator.schemas import LATENCY_COLUMNS, PROVENANCE_COLUMNS

FLOAT_FORMAT = "%.6g"

RunFn = Callable[[RunConfig], object]


@dataclass(frozen=True)
class SweepOutput:
    rows: list[dict]
    progress_rows: list[dict]


def expand(spec: SweepSpec, profile_dir: Optional[str] = None) -> list[RunConfig]:
    """Every run of the grid plus one baseline per baseline load, in CSV row order."""
    configs = [_config(spec, rate, None, profile_dir) for rate in spec.baseline_rates]
    for rate in spec.arrival_rates:
        for alpha in spec.acceptance_rates:
            for k in spec.speculative_tokens:
                for attention in spec.attention_modes:
                    for proposer in spec.proposers:
                        speculation = Speculation(proposer=proposer, k=k, acceptance=AcceptanceInput.given(rate=alpha), attention=attention)
                        configs.append(_config(spec, rate, speculation, profile_dir))
    return sorted(configs, key=row_order)


def expand_progress(spec: SweepSpec, profile_dir: Optional[str] = None) -> list[RunConfig]:
    """Batch-1 runs: requests arrive ``interarrival_s`` apart, so at most one is in flight."""
    p = spec.progress
    if p is None:
        return []
    workload = ExplicitWorkload(
        arrival_s=tuple(i * p.interarrival_s for i in range(p.num_requests)),
        prompt_tokens=(p.prompt_tokens,) * p.num_requests,
        output_tokens=(p.output_tokens,) * p.num_requests,
    )
    deployment = spec.deployment(profile_dir)
    return [
        # the default proposer: n-gram
        replace(deployment, speculation=Speculation(k=k, acceptance=AcceptanceInput.given(rate=alpha), attention="kv_once")).run(workload, seed=spec.seed)
        for alpha in p.acceptance_rates
        for k in p.speculative_tokens
    ]


def row_order(config: RunConfig) -> tuple:
    s = config.speculation
    alpha = -1.0 if not s.enabled else (s.acceptance_rate if s.acceptance_rate is not None else -1.0)
    attention = -1 if not s.enabled else ATTENTION_MODES.index(s.attention)
    return (config.workload.arrival_rate, s.num_speculative_tokens, alpha, attention, s.proposer if s.enabled else "")


def run_sweep(spec: SweepSpec, executor, run: Optional[RunFn] = None, profile_dir: Optional[str] = None) -> SweepOutput:
    """Run the grid and the progress check through one executor call (one pool start-up)."""
    grid = expand(spec, profile_dir)
    progress = expand_progress(spec, profile_dir)
    records = simulate_all(grid + progress, executor, run, label="seed sweep")
    rows = with_speedups(records[: len(grid)])
    progress_rows = [_progress_row(config, record) for config, record in zip(progress, records[len(grid) :])]
    return SweepOutput(rows=rows, progress_rows=progress_rows)


def simulate_all(configs: Sequence[RunConfig], executor, run: Optional[RunFn] = None, label: str = "simulating") -> list[dict]:
    """One record per config, in order.  Real runs (``run`` None) go through the result cache
    (:mod:`simulator.runs.cache`): only the misses are simulated, so a warm rebuild runs none.
    ``label`` names the stage in the progress lines and bar."""
    from simulator.runs import cache
    from simulator.sweep.executors import LocalExecutor

    configs = list(configs)
    shown = getattr(executor, "progress", None)
    if run is not None or not cache.enabled():
        if run is None:
            warm_predictors(configs, shown)
        return executor.map(simulate, [(run, config) for config in configs], desc=label)
    keys = [cache.run_key(config) for config in configs]
    records = [cache.load(config, key) for config, key in zip(configs, keys)]
    missing = [i for i, found in enumerate(records) if found is None]
    say(f"{label}: {len(configs)} runs, {len(configs) - len(missing)} from the result cache, {len(missing)} to simulate", shown)
    if missing:
        warm_predictors([configs[i] for i in missing], shown, label)
        missing.sort(key=lambda i: -expected_work(configs[i]))  # the longest first: no long run left for the end
        # each worker stores its run as it finishes, so an interrupted sweep keeps what it simulated; the
        # parent stores them too, for workers whose cache is another machine's (Ray)
        for i, fresh in zip(missing, executor.map(simulate_and_store, [(configs[i], keys[i]) for i in missing], desc=label)):
            records[i] = fresh
            if not isinstance(executor, LocalExecutor):
                cache.store(configs[i], fresh, keys[i])
    return records


def simulate_and_store(job: tuple[RunConfig, str]) -> dict:
    """Worker entry point of a cached sweep: simulate one config and keep its record in the cache."""
    from simulator.runs import cache

    config, key = job
    fresh = simulate((None, config))
    cache.store(config, fresh, key)
    return fresh


def expected_work(config: RunConfig) -> float:
    """A rough size of a run, to start the longest runs of a pool first (a pool that picks up a
    20 s run last finishes on one core).  A run costs per step and per row: about its output
    tokens over its running batch (the steps), plus a sixteenth of them (the rows).  The batch is
    a closed loop's concurrency; an open loop's arrival rate stands in for it (more steps per token
    at a lighter load).  Only the order of the runs depends on it, never a number."""
    workload = config.workload
    if isinstance(workload, PoissonWorkload):
        tokens, batch = workload.num_requests * workload.output_tokens, workload.arrival_rate
    else:
        tokens, batch = sum(workload.output_tokens), getattr(workload, "concurrency", 1)
    return tokens / max(batch, 1e-9) + tokens / 16


def warm_predictors(configs: Sequence[RunConfig], progress: Optional[bool] = None, label: str = "simulating") -> None:
    """Every distinct target predictor the runs need, trained here before any worker starts:
    workers forked while one of them trains (with joblib's own pool) wait on its lock forever.
    Off a terminal it reports at least every few seconds (:mod:`simulator.util.progress`): a cold
    profile can take minutes to build.  Vidur's simulation machinery is imported here too, once:
    forked workers inherit it instead of each importing it (about 2 s of CPU per worker and pool)."""
    import simulator.engine.simulation  # noqa: F401
    from simulator.util.progress import bar

    todo = {}
    for config in configs:
        spec = config.speculation
        draft = (spec.draft_model, spec.draft_profile_dir, config.draft_tensor_parallel_size) if spec.uses_draft_network else None
        identity = (config.model, config.device, config.profile_dir, config.tensor_parallel_size, config.network_profile_dir, config.block_size, draft)
        todo.setdefault(identity, config)
    if not todo:
        return
    with closing(bar(len(todo), f"{label}: preparing predictors", unit="model", enabled=progress)) as shown:
        for config in todo.values():
            say(preparing_message(config), progress)
            warm_predictor(config)
            shown.update()


def preparing_message(config: RunConfig) -> str:
    """What is being prepared, in words: the target, and the drafter by its name (MTP layers are
    the target's own, so the kind names them)."""
    spec = config.speculation
    drafter = spec.draft_model or spec.kind.label
    drafting = f" with {drafter} at TP {config.draft_tensor_parallel_size}" if spec.uses_draft_network else ""
    return f"preparing {config.model} on {config.device} at TP {config.tensor_parallel_size}{drafting}"


def warm_predictor(config: RunConfig) -> None:
    """Check the run (it is resolved), then train or load its profile directories' predictors
    (target, and draft or EAGLE head) once, here: a cold cache is then filled by one process
    instead of by every worker at once, and forked workers inherit the tables.  The built-in
    step model has nothing to prepare (each run builds its own tables), so a run without a
    profile directory never loads Vidur's predictors here."""
    from simulator.engine.resolve import resolve_run

    run = resolve_run(config)
    if all(side.profile.builtin is not None for side in (run.target, run.draft) if side is not None):
        return
    from simulator.engine.simulation import warm_predictors as warm_all

    warm_all(run)


def simulate(job: tuple[Optional[RunFn], RunConfig]) -> dict:
    """Worker entry point: run one config, reduce the result to a flat record."""
    run, config = job
    if run is None:
        from simulator import run
    return record(run(config))


def record(result) -> dict:
    """One CSV row (without the speedup) from a RunResult."""
    config: RunConfig = result.config
    s = config.speculation
    summary, provenance = result.summary, result.provenance
    row = {
        "model": config.model,
        "device": config.device,
        "num_requests": summary["num_requests"],
        "prompt_tokens": getattr(config.workload, "prompt_tokens", None),
        "output_tokens": getattr(config.workload, "output_tokens", None),
        "arrival_rate": getattr(config.workload, "arrival_rate", None),
        "workload_seed": getattr(config.workload, "seed", None),
        "num_speculative_tokens": s.num_speculative_tokens,
        "acceptance_rate": s.acceptance_rate if s.enabled else None,
        "proposer": s.proposer if s.enabled else None,
        "attention": s.attention if s.enabled else None,
        "seed": config.seed,
    }
    for column in LATENCY_COLUMNS + ("tpot_mean_s", "itl_mean_s"):  # the means: for published rows, not in the CSV
        row[column] = summary[column]
    for key in ("realized_acceptance_rate", "mean_acceptance_length", "proposed_tokens", "accepted_tokens", "verify_steps", "makespan_s", "throughput_tok_s", "preemptions", "peak_kv_blocks", "kv_blocks_total"):
        row[key] = summary[key]
    row.update(queue_growth(result.requests))
    row["mean_decode_batch"] = mean_decode_batch(result.requests, summary["makespan_s"])
    row["mean_scheduled_k"] = summary.get("mean_scheduled_k")  # a k schedule's average pick (not in SWEEP_COLUMNS)
    row["tpot_p50_low_s"], row["tpot_p50_high_s"] = summary["tpot_p50_low_s"], summary["tpot_p50_high_s"]  # its sampling interval (pays-off ties)
    for key in PROVENANCE_COLUMNS:
        row[key] = provenance[key]
    return row


def _progress_row(config: RunConfig, record: dict) -> dict:
    from simulator.speculative.progress import expected_progress

    s, w = config.speculation, config.workload
    return {
        "model": record["model"],
        "device": record["device"],
        "num_requests": record["num_requests"],
        "prompt_tokens": w.prompt_tokens[0],
        "output_tokens": w.output_tokens[0],
        "interarrival_s": w.arrival_s[1] - w.arrival_s[0] if w.num_requests > 1 else None,
        "num_speculative_tokens": s.num_speculative_tokens,
        "acceptance_rate": s.acceptance_rate,
        "seed": config.seed,
        "verify_steps": record["verify_steps"],
        "realized_acceptance_rate": record["realized_acceptance_rate"],
        "simulated_progress_per_step": record["mean_acceptance_length"],
        "closed_form_progress_per_step": expected_progress(s.acceptance_rate, s.num_speculative_tokens),
        **{k: record[k] for k in PROVENANCE_COLUMNS},
    }


def to_csv_text(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """Fixed column order and float format: identical rows give identical bytes."""
    import pandas as pd  # only to write a CSV: a warm answer without --csv never needs it

    frame = pd.DataFrame(list(rows), columns=list(columns))
    return frame.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n", na_rep="")


def _config(spec: SweepSpec, rate: float, speculation: Optional[Speculation], profile_dir: Optional[str]) -> RunConfig:
    """One run of the grid (``speculation`` None: the baseline)."""
    w = spec.workload
    workload = PoissonWorkload(num_requests=w.num_requests, prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, arrival_rate=rate, seed=w.seed)
    return replace(spec.deployment(profile_dir), speculation=speculation).run(workload, seed=spec.seed)
