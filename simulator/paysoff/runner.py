"""The pays-off sweep: speedup against concurrency and load, the best k, recommended schedules.

One implementation for ``python build.py`` (every deployment of ``data/paysoff.toml``) and for
``python -m simulator.paysoff`` (one deployment from flags).

Phase 1 runs every fixed k of every deployment (and one baseline per system and concurrency or
load) under the primary verify-cost setting and under both bounds; phase 2 derives the
recommended ``num_speculative_tokens_per_batch_size`` schedule of each deployment from the
primary setting's best k, and simulates that one schedule under the primary setting and both
bounds at every concurrency and load.  So there is one answer per deployment, and the bounds
give its uncertainty band rather than a second answer.

Every run is costed as ``python -m simulator`` costs it: the deployment's proposer (its kind's
lookups or network passes, :mod:`simulator.speculative.proposers`) on its model, GPU and tensor
parallelism.

Closed-loop lengths are drawn once per concurrency (seeded, uniform within ``length_spread``
of the means, or from a trace): with equal lengths every request of a wave would finish at the
same step and the batch would drain and refill in lockstep, which no server sees.  Poisson
runs use fixed lengths (or the trace) and Vidur's arrival generator.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np

from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload, PoissonWorkload
from simulator.runs.deployment import Speculation
from simulator.runs.results import speedup
from simulator.schemas import CROSSOVER_COLUMNS, PAYSOFF_COLUMNS
from simulator.speculative.k_schedule import Schedule, max_k, to_vllm
from simulator.sweep.crossover import best_k, crossover_rows, guarded_best_k, noise, recommended_schedule, value, x_of
from simulator.sweep.error_bar import ErrorBar, Regime, SpeedupCheck, error_bar
from simulator.paysoff.spec import AcceptanceProfile, PaysoffSpec, profile_length
from simulator.paysoff.document import schedule_document
from simulator.sweep.runner import simulate_all, to_csv_text


@dataclass(frozen=True)
class Job:
    """One run and what the CSV says about it beyond its config."""

    config: RunConfig
    mode: str  # "closed_loop" | "poisson"
    x: float  # concurrency or arrival rate
    profile: Optional[AcceptanceProfile]  # None: the baseline
    idle: bool = False  # the deployment's server with a schedule that verifies nothing (k = 0 at every batch size)
    adaptive: bool = False  # vLLM's adaptive verification at the grid's largest k


@dataclass(frozen=True)
class PaysoffOutput:
    rows: list[dict]
    crossovers: list[dict]
    schedules: dict


def _trace_lengths(spec: PaysoffSpec, model: str, n: int, seed) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from simulator.vidur.models import model_config
    from simulator.runs.workloads import draw_lengths, read_trace

    return draw_lengths(read_trace(spec.trace, model_config(model).max_model_len), n, seed)


def closed_loop_workload(spec: PaysoffSpec, concurrency: int, model: Optional[str] = None) -> ClosedLoopWorkload:
    n = max(spec.min_requests, spec.requests_per_slot * concurrency)
    if spec.trace:
        prompts, outputs = _trace_lengths(spec, model or spec.profiles[0].model, n, spec.workload_seed + concurrency)
        return ClosedLoopWorkload(concurrency, prompts, outputs)
    rng = np.random.default_rng([spec.workload_seed, concurrency])

    def lengths(mean: int) -> tuple[int, ...]:
        lo, hi = max(1, round(mean * (1 - spec.length_spread))), max(2, round(mean * (1 + spec.length_spread)))
        return tuple(int(v) for v in rng.integers(lo, hi + 1, n))

    prompts = lengths(spec.prompt_tokens)
    outputs = tuple(max(2, v) for v in lengths(spec.output_tokens))
    return ClosedLoopWorkload(concurrency, prompts, outputs)


def poisson_workload(spec: PaysoffSpec, rate: float, model: Optional[str] = None):
    if spec.trace:
        from simulator.runs.workload_kinds import ExplicitWorkload
        from simulator.runs.workloads import poisson_arrivals

        prompts, outputs = _trace_lengths(spec, model or spec.profiles[0].model, spec.poisson_requests, spec.workload_seed)
        return ExplicitWorkload(poisson_arrivals(spec.poisson_requests, rate, spec.workload_seed), prompts, outputs)
    return PoissonWorkload(spec.poisson_requests, spec.prompt_tokens, spec.output_tokens, rate, spec.workload_seed)


def speculation(spec: PaysoffSpec, profile: AcceptanceProfile, attention: str, k: int = 0, schedule=None, adaptive: bool = False) -> Speculation:
    """The deployment's proposer, costed as ``python -m simulator`` costs it, at one k or schedule."""
    return Speculation(
        proposer=profile.proposer,
        k=k,
        schedule=schedule,
        acceptance=profile.acceptance,
        options=profile.options,
        draft_model=profile.draft_model,
        draft_tensor_parallel_size=profile.draft_tensor_parallel_size,
        attention=attention,
        interpolation=spec.interpolation,
        proposal_probability=profile.proposal_probability,
        adaptive_verification=adaptive,
    )


def run_config(spec: PaysoffSpec, system: tuple[str, str, int], workload, speculation_: Optional[Speculation], profile_dir: Optional[str] = None) -> RunConfig:
    """One run of the sweep: what ``python -m simulator`` would run with the same flags
    (``speculation_`` from :func:`speculation`; None for the baseline)."""
    return replace(spec.deployment(system, profile_dir), speculation=speculation_).run(workload, seed=spec.seed)


def _workloads(spec: PaysoffSpec, system, poisson: bool) -> list[tuple[str, float, object]]:
    model = system[0]
    out: list[tuple[str, float, object]] = [("closed_loop", c, closed_loop_workload(spec, c, model)) for c in spec.concurrency]
    if poisson:
        out += [("poisson", rate, poisson_workload(spec, rate, model)) for rate in spec.arrival_rates]
    return out


def profile_dirs(spec: PaysoffSpec, profile_dir: Optional[str], profile_system: Optional[tuple[str, str, int]] = None) -> dict:
    """Which systems a Vidur-format ``profile_dir`` applies to: those whose (model, device, TP) is
    ``profile_system`` (a profile is measured for one model on one GPU at one TP degree), or every
    system when None (a one-deployment question).  Other systems use the built-in profile."""
    if profile_dir is None:
        return {}

    def key(system):
        return (system[0], system[1].lower(), system[2])

    return {s: profile_dir for s in spec.systems if profile_system is None or key(s) == key(profile_system)}


def fixed_k_jobs(spec: PaysoffSpec, dirs: Optional[dict] = None) -> list[Job]:
    """Phase 1: a baseline per system and workload, every fixed k of every deployment under every verify setting."""
    jobs, dirs = [], dirs or {}
    for system in spec.systems:
        profile_dir = dirs.get(system)
        profiles = [p for p in spec.profiles if p.system == system]
        any_poisson = any(p.poisson for p in profiles)
        for mode, x, workload in _workloads(spec, system, any_poisson):
            jobs.append(Job(run_config(spec, system, workload, None, profile_dir), mode, x, None))
            ks = spec.speculative_tokens if mode == "closed_loop" else spec.poisson_k
            for profile in profiles:
                if mode == "poisson" and not profile.poisson:
                    continue
                for attention in spec.attention_modes:
                    for k in ks:
                        jobs.append(Job(run_config(spec, system, workload, speculation(spec, profile, attention, k), profile_dir), mode, x, profile))
                if mode == "closed_loop":
                    jobs.append(idle_job(spec, system, workload, x, profile, profile_dir))
    return jobs


def idle_job(spec: PaysoffSpec, system, workload, x: float, profile: AcceptanceProfile, profile_dir: Optional[str]) -> Job:
    """The deployment's server at a load where its schedule runs k = 0: loaded with the largest k
    of the grid and a schedule of k = 0 at every batch size.  vLLM 0.24 and later still draft
    there (Model Runner V2 the full k, the V1 runner the drafter's first pass, a V1 schedule on
    piecewise graphs), so switching a load off inside a speculative server is not free; the
    schedule's choice compares each k with this run, not with a server without speculation."""
    idle = ((1, spec.batch_size_cap, 0),)
    fields = speculation(spec, profile, spec.attention, max(spec.speculative_tokens), schedule=idle)
    return Job(run_config(spec, system, workload, fields, profile_dir), "closed_loop", x, profile, idle=True)


def schedule_jobs(spec: PaysoffSpec, schedules: dict[str, Schedule], dirs: Optional[dict] = None) -> list[Job]:
    """Phase 2: each deployment's recommended schedule at every concurrency and load, under the primary
    setting and both bounds (a schedule whose k is 0 everywhere is no speculation: its rows are the baselines)."""
    jobs = []
    for profile in spec.profiles:
        schedule = schedules[profile.name]
        if max_k(schedule) == 0:
            continue
        for mode, x, workload in _workloads(spec, profile.system, profile.poisson):
            for attention in spec.attention_modes:
                config = run_config(spec, profile.system, workload, speculation(spec, profile, attention, schedule=schedule), (dirs or {}).get(profile.system))
                jobs.append(Job(config, mode, x, profile))
    return jobs


def adapts(spec: PaysoffSpec, profile: AcceptanceProfile, profile_dir: Optional[str] = None) -> bool:
    """The deployment's vLLM has adaptive verification for its proposer: the version has
    ``enable_adaptive_verification``, the proposer runs on Model Runner V2 and drafts a chain, and
    the built-in step model can time the start-up profiling (no profile directory)."""
    from simulator.profiles.engines import get_engine
    from simulator.speculative.proposers.base import SpeculationSettings

    engine = get_engine(spec.engine)
    kind = profile.kind
    chain = kind.tree(SpeculationSettings(k=max(spec.speculative_tokens), options=kind.resolve_options(dict(profile.options)))) is None
    return engine.adaptive_verification and engine.runner_for(kind.name) == "mrv2" and chain and profile_dir is None


def adaptive_jobs(spec: PaysoffSpec, dirs: Optional[dict] = None) -> list[Job]:
    """Phase 3, where the version has it: adaptive verification at the grid's largest k (the budget
    picks how much of it each step verifies; the drafter drafts all of it) at every concurrency,
    under the primary verify setting."""
    jobs, k = [], max(spec.speculative_tokens)
    for profile in spec.profiles:
        profile_dir = (dirs or {}).get(profile.system)
        if not adapts(spec, profile, profile_dir):
            continue
        for mode, x, workload in _workloads(spec, profile.system, False):
            fields = speculation(spec, profile, spec.attention, k, adaptive=True)
            jobs.append(Job(run_config(spec, profile.system, workload, fields, profile_dir), mode, x, profile, adaptive=True))
    return jobs


def _row(job: Job, record: dict) -> dict:
    s, w, c = job.config.speculation, job.config.workload, job.config
    row = {
        "mode": job.mode,
        "concurrency": job.x if job.mode == "closed_loop" else None,
        "arrival_rate": job.x if job.mode == "poisson" else None,
        "deployment": job.profile.deployment if job.profile else "",
        "model": c.model,
        "device": c.device,
        "tensor_parallel_size": c.tensor_parallel_size,
        "proposer": s.proposer if s.enabled else "",
        "draft_model": (s.draft_model or "") if s.enabled else "",
        "num_requests": record["num_requests"],
        "acceptance": job.profile.name if job.profile else "",
        "acceptance_rate": s.acceptance_rate if s.enabled else None,
        "num_speculative_tokens": s.num_speculative_tokens,
        "k_schedule": json.dumps(to_vllm(s.k_schedule), separators=(",", ":")) if s.k_schedule else "",
        "drafter_idle": job.idle,
        "adaptive_verification": job.adaptive,
        "attention": s.attention if s.enabled else "",
        "interpolation": s.interpolation if s.enabled and s.attention == "interpolated" else None,
        "seed": c.seed,
        "speedup_ceiling": speedup_ceiling(job),
    }
    if isinstance(w, PoissonWorkload):
        row.update(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, workload_seed=w.seed)
    else:
        row.update(prompt_tokens=float(np.mean(w.prompt_tokens)), output_tokens=float(np.mean(w.output_tokens)), workload_seed=None)
    for key in PAYSOFF_COLUMNS:
        if key not in row and key in record:
            row[key] = record[key]
    return row


def speedup_ceiling(job: Job) -> float:
    """The most a closed loop's TPOT can gain: the acceptance length at the run's largest k (a
    verify step costs at least a plain one and advances a request by that much on average; 1
    without speculation).  Open loops have none: a faster server also runs smaller batches."""
    if job.mode != "closed_loop":
        return float("nan")
    if job.profile is None:
        return 1.0
    k = max_k(job.config.speculation.k_schedule) if job.config.speculation.k_schedule else job.config.speculation.num_speculative_tokens
    return round(profile_length(job.profile, k), 6)


def _system_key(row: dict) -> tuple:
    return (row["mode"], x_of(row), row["model"], row["device"], row["tensor_parallel_size"])


def _with_speedups(rows: list[dict], baselines: Sequence[dict]) -> list[dict]:
    by_key = {_system_key(r): r for r in baselines}
    for r in rows:
        base = by_key[_system_key(r)]
        r["tpot_speedup"] = speedup(base, r, "tpot_p50_s")
        r["throughput_speedup"] = speedup(base, r, "throughput_tok_s")
        r["tpot_speedup_low"], r["tpot_speedup_high"] = speedup_interval(base, r)
    return rows


def speedup_interval(base: dict, row: dict) -> tuple[float, float]:
    """The TPOT speedup's 95% sampling interval: both medians' intervals (each run's requests)
    combined as independent log errors; the baseline against itself is exactly 1."""
    if row is base:
        return 1.0, 1.0
    h = math.hypot(noise(base), noise(row))
    s = row["tpot_speedup"]
    return s * math.exp(-h), s * math.exp(h)


def _order(row: dict) -> tuple:
    return (row["mode"], x_of(row), row["model"], row["device"], row["tensor_parallel_size"], row["acceptance"], row["attention"],
            row["k_schedule"] != "", row["num_speculative_tokens"])


def _simulate(jobs: Sequence[Job], executor, run) -> list[dict]:
    return [_row(job, rec) for job, rec in zip(jobs, simulate_all([j.config for j in jobs], executor, run, label="pays-off"))]


def error_bars(spec: PaysoffSpec, checks: Sequence[SpeedupCheck]):
    """``bars(mode, acceptance, x)``: the error bar of the check rows of each deployment's regime at
    that load (:mod:`simulator.sweep.error_bar`; None without check rows)."""
    from simulator.profiles.engines import get_engine

    version = get_engine(spec.engine).version
    profiles = {p.name: p for p in spec.profiles}
    memo: dict = {}
    if spec.fit_error_pct is not None:
        # a server's fitted profile: its own held-out error, at every load, is the bar
        fitted = ErrorBar(-spec.fit_error_pct, spec.fit_error_pct, 1, 1, ("fitted",), ("held-out levels of the fitted profile",))

        def fitted_bars(mode: str, acceptance: str, x: float) -> ErrorBar:
            return fitted

        return fitted_bars

    def bars(mode: str, acceptance: str, x: float) -> Optional[ErrorBar]:
        p = profiles[acceptance]
        regime = Regime.of(proposer=p.proposer, engine="vllm", version=version, tensor_parallel_size=p.tensor_parallel_size,
                           in_flight=x if mode == "closed_loop" else None, qps=x if mode == "poisson" else None)
        if regime not in memo:
            memo[regime] = error_bar(checks, regime)
        return memo[regime]

    return bars


def run_paysoff(spec: PaysoffSpec, executor, profile_dir: Optional[str] = None, run=None, profile_system: Optional[tuple[str, str, int]] = None,
                checks: Sequence[SpeedupCheck] = ()) -> PaysoffOutput:
    """Both phases; ``profile_dir`` applies to the systems :func:`profile_dirs` picks; ``checks``
    are the check rows' speedup errors the recommendation's error bar reads (none: no bar, and
    the recommendation trusts the simulated band alone)."""
    dirs = profile_dirs(spec, profile_dir, profile_system)
    rows = _simulate(fixed_k_jobs(spec, dirs), executor, run)
    baselines = [r for r in rows if r["num_speculative_tokens"] == 0]
    rows = _with_speedups(rows, baselines)
    best = best_k(rows)
    bars = error_bars(spec, checks)
    idle = {(r["mode"], r["acceptance"], x_of(r)): (value(r), noise(r)) for r in rows if r["drafter_idle"]}
    guarded = guarded_best_k(rows, spec.attention, bars, idle)
    schedules = {p.name: recommended_schedule(guarded, p.name, spec.attention, spec.batch_size_cap) for p in spec.profiles}
    rows2 = _with_speedups(_simulate(schedule_jobs(spec, schedules, dirs) + adaptive_jobs(spec, dirs), executor, run), baselines)
    for r in rows:
        fixed = r["acceptance"] and not r["k_schedule"]
        r["best_k"] = best[(r["mode"], r["acceptance"], r["attention"], x_of(r))][0] == r["num_speculative_tokens"] if fixed else None
    for r in rows2:
        r["best_k"] = None
    all_rows = sorted(rows + rows2, key=_order)
    return PaysoffOutput(all_rows, crossover_rows(rows), schedule_document(spec, schedules, best, all_rows, guarded, bars))


def schedules_json_text(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def csv_texts(output: PaysoffOutput) -> tuple[str, str]:
    return to_csv_text(output.rows, PAYSOFF_COLUMNS), to_csv_text(output.crossovers, CROSSOVER_COLUMNS)
