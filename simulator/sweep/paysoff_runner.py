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
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from simulator.runs.config import ClosedLoopWorkload, PoissonWorkload, RunConfig
from simulator.runs.results import speedup
from simulator.schemas import CROSSOVER_COLUMNS, PAYSOFF_COLUMNS
from simulator.speculative.k_schedule import Schedule, max_k, to_vllm
from simulator.sweep.crossover import TIE, best_fixed_k, fixed_k, best_k, crossover_rows, guarded_best_k, noise, recommended_schedule, value, x_of
from simulator.sweep.error_bar import ErrorBar, Regime, SpeedupCheck, error_bar
from simulator.cli.vllm_serve import DYNAMIC_SD_VERSION
from simulator.specs.paysoff_sweep import AcceptanceProfile, PaysoffSpec, kind_settings, profile_length, verify_settings
from simulator.sweep.runner import simulate_all, to_csv_text

# The vLLM release whose speculative_config accepts num_speculative_tokens_per_batch_size
# (simulator.cli.vllm_serve.DYNAMIC_SD_VERSION), with vLLM's own sources; older releases get the
# best fixed k instead (each schedule's fixed_k_fallback).
VLLM_DYNAMIC_SD = {
    "version": DYNAMIC_SD_VERSION,
    "text": f"vLLM {DYNAMIC_SD_VERSION} or later: its SpeculativeConfig declares num_speculative_tokens_per_batch_size (vllm/config/speculative.py "
    f"at v{DYNAMIC_SD_VERSION}; v0.23.0's has no such field), added by vLLM PR #32374 ('[V1][Spec Decode] Add Dynamic SD'). Older versions "
    "reject the key: run the best fixed k (its --speculative-config is given with each schedule).",
    "sources": [
        f"https://github.com/vllm-project/vllm/blob/v{DYNAMIC_SD_VERSION}/vllm/config/speculative.py",
        "https://github.com/vllm-project/vllm/pull/32374",
    ],
}

ERROR_BAR_RULE = (
    "each speedup carries the error bar of the check rows of its regime (load range, proposer class, engine and version, TP; "
    "simulator/sweep/error_bar.py): a simulated band [low, high] with errors [e_min, e_max] may measure [low / (1 + e_max), "
    "high / (1 + e_min)]; where that guarded low is below 1x the recommendation runs k = 0 there, and the fixed k is the best "
    "on average among those whose guarded low stays at or above 1x at every concurrency simulated"
)


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
        from simulator.runs.config import ExplicitWorkload
        from simulator.runs.workloads import poisson_arrivals

        prompts, outputs = _trace_lengths(spec, model or spec.profiles[0].model, spec.poisson_requests, spec.workload_seed)
        return ExplicitWorkload(poisson_arrivals(spec.poisson_requests, rate, spec.workload_seed), prompts, outputs)
    return PoissonWorkload(spec.poisson_requests, spec.prompt_tokens, spec.output_tokens, rate, spec.workload_seed)


def speculation(spec: PaysoffSpec, profile: AcceptanceProfile, attention: str, k: int = 0, schedule=None, adaptive: bool = False) -> dict:
    """The deployment's proposer, costed as ``python -m simulator`` costs it, at one k or schedule:
    the speculation's fields, for :func:`run_config` (an empty dict is the baseline)."""
    return dict(
        num_speculative_tokens=k,
        k_schedule=schedule,
        acceptance_rate=profile.rate,
        acceptance_per_position=profile.per_position,
        proposer=profile.proposer,
        options=profile.options,
        draft_model=profile.draft_model,
        draft_tensor_parallel_size=profile.draft_tensor_parallel_size,
        attention=attention,
        interpolation=spec.interpolation,
        proposal_probability=profile.proposal_probability,
        adaptive_verification=adaptive,
    )


def run_config(spec: PaysoffSpec, system: tuple[str, str, int], workload, speculation_fields: dict, profile_dir: Optional[str] = None) -> RunConfig:
    """One run of the sweep: what ``python -m simulator`` would run with the same flags (the
    speculation's fields from :func:`speculation`; ``{}`` for the baseline)."""
    model, device, tp = system
    return RunConfig.from_deployment(
        workload=workload,
        **speculation_fields,
        model=model,
        device=device,
        tensor_parallel_size=tp,
        profile_dir=profile_dir,
        seed=spec.seed,
        batch_size_cap=spec.batch_size_cap,
        chunk_size=spec.chunk_size,
        quantization=spec.quantization,
        kv_cache_dtype=spec.kv_cache_dtype,
        engine=spec.engine,
        step_scales=spec.step_scales,
        **({} if spec.engine_overhead_ms is None else {"engine_overhead_ms": spec.engine_overhead_ms}),
    )


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
            jobs.append(Job(run_config(spec, system, workload, {}, profile_dir), mode, x, None))
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


def speculative_config(profile: AcceptanceProfile, schedule: Optional[Schedule], k: Optional[int] = None) -> Optional[dict]:
    """vLLM's ``--speculative-config`` for the schedule, or at one fixed ``k`` (None: do not speculate)."""
    k_max = max_k(schedule) if schedule is not None else k
    if not k_max:
        return None
    from simulator.cli.vllm_serve import served_model_name

    draft = served_model_name(profile.draft_model) if profile.draft_model else None
    config = profile.kind.speculative_config(kind_settings(profile, k_max), draft, profile.draft_tensor_parallel_size)
    if schedule is not None:
        config["num_speculative_tokens_per_batch_size"] = to_vllm(schedule)
    return config


def serve_command(spec: PaysoffSpec, profile: AcceptanceProfile, config: Optional[dict]) -> str:
    """The ``vllm serve`` line, naming the model as vLLM loads it (not a local config.json path)."""
    from simulator.cli.vllm_serve import served_model_name

    flags = [f"--tensor-parallel-size {profile.tensor_parallel_size}"] if profile.tensor_parallel_size > 1 else []
    flags.append(f"--max-num-seqs {spec.batch_size_cap} --max-num-batched-tokens {spec.chunk_size}")
    if spec.quantization:
        flags.append(f"--quantization {spec.quantization}")
    if spec.kv_cache_dtype != "auto":
        flags.append(f"--kv-cache-dtype {spec.kv_cache_dtype}")
    return profile.kind.serve_command(served_model_name(profile.model, profile.served_model_name), flags, config)


def stops_paying(best: dict, profile: AcceptanceProfile, attention: str, up_to: int) -> Optional[int]:
    """The smallest simulated concurrency from which the recommended schedule runs k = 0 to its
    end; None: it speculates at its last row (it may be off at smaller batches and on again at
    larger ones: a mixture of experts pays more the fuller its batch).  The schedule's first row
    starts at batch size 1 whatever was simulated, so a schedule off from its first row stops
    paying "from" the smallest concurrency simulated, never from an unsimulated 1."""
    schedule = recommended_schedule(best, profile.name, attention, up_to)
    start = None
    for row_start, _, k in schedule:
        if k == 0 and start is None:
            start = row_start
        elif k > 0:
            start = None
    if start is None:
        return None
    simulated = [int(x) for (mode, acc, att, x) in best if mode == "closed_loop" and acc == profile.name and att == attention]
    return max(start, min(simulated)) if simulated else start


def fixed_k_fallback(spec: PaysoffSpec, profile: AcceptanceProfile, rows: Sequence[dict], bars=None) -> dict:
    """The best fixed k for a vLLM without ``num_speculative_tokens_per_batch_size``
    (:func:`simulator.sweep.crossover.best_fixed_k`, guarded by the error bars), its
    ``--speculative-config`` and serve line, and the best k on average without the guard."""
    k, mean, losing = best_fixed_k(rows, profile.name, spec.attention, bars)
    unguarded_k, unguarded_mean, unguarded_losing = best_fixed_k(rows, profile.name, spec.attention)
    config = speculative_config(profile, None, k)
    return {
        "num_speculative_tokens": k,
        "geomean_tpot_speedup": round(mean, 4),
        "below_1x_at": losing,
        "best_on_average": {"num_speculative_tokens": unguarded_k, "geomean_tpot_speedup": round(unguarded_mean, 4), "below_1x_at": unguarded_losing},
        "for_vllm": f"before {DYNAMIC_SD_VERSION}",
        "speculative_config": config,
        "speculative_config_json": json.dumps(config, separators=(",", ":")) if config else None,
        "serve_command": serve_command(spec, profile, config),
    }


def recommendation(spec: PaysoffSpec, schedule: Schedule, config: Optional[dict], compared: Sequence[dict], fallback: dict,
                   profile: AcceptanceProfile) -> dict:
    """What to deploy, never worse than the fallback: the schedule where the release takes one and
    it is at least the fallback (the best fixed k, or no speculation) at every concurrency
    simulated and better at one, each within the runs' sampling noise; the fallback otherwise.  A
    schedule can lose to it: its k = 0 rows still run the drafter (vLLM >= 0.24), so switching a
    load off inside a speculative server costs what switching the server off does not.  Where no
    fixed k is safe and the schedule gains at the smaller loads but loses above them, the answer
    depends on the load: ``schedule_up_to`` says up to where to serve with it, and from where
    without speculation (both serve lines are kept)."""
    from simulator.cli.vllm_serve import at_least
    from simulator.profiles.engines import get_engine
    from simulator.sweep.crossover import tied

    k = fallback["num_speculative_tokens"]
    fallback_kind = "fixed_k" if k else "none"
    chosen = {"kind": fallback_kind, "num_speculative_tokens": k, "speculative_config_json": fallback["speculative_config_json"],
              "serve_command": fallback["serve_command"]}
    closed = [c for c in compared if c["mode"] == "closed_loop"]
    if not at_least(get_engine(spec.engine).version, DYNAMIC_SD_VERSION):
        return chosen | {"why": f"vLLM {get_engine(spec.engine).version} takes no k schedule (num_speculative_tokens_per_batch_size needs {DYNAMIC_SD_VERSION})"}
    if config is None or not closed:
        return chosen | {"why": "the schedule runs k = 0 at every concurrency simulated"}
    fallback_words = f"the fixed k = {k}" if k else "no speculation"
    worse = [c for c in closed if c["schedule_tpot_speedup"] < c["fallback_tpot_speedup"]
             and not tied((c["schedule_tpot_speedup"], c["schedule_noise"]), (c["fallback_tpot_speedup"], c["fallback_noise"]))]
    better = [c for c in closed if c["schedule_tpot_speedup"] > c["fallback_tpot_speedup"]
              and not tied((c["schedule_tpot_speedup"], c["schedule_noise"]), (c["fallback_tpot_speedup"], c["fallback_noise"]))]
    schedule_choice = {"num_speculative_tokens": max_k(schedule), "speculative_config_json": json.dumps(config, separators=(",", ":")),
                       "serve_command": serve_command(spec, profile, config)}
    if worse:
        where = ", ".join(f"{c['x']:g} in flight ({c['schedule_tpot_speedup']:.2f}× against {c['fallback_tpot_speedup']:.2f}×)" for c in worse)
        losing = {"schedule_loses_at": [c["x"] for c in worse]}
        ahead = [c for c in closed if c["x"] < worse[0]["x"]]
        if not k and any(c in better for c in ahead):
            # no fixed k is safe, and the schedule gains up to a load and loses above it: the answer depends on the load
            return {"kind": "schedule_up_to", "up_to": ahead[-1]["x"], "from": worse[0]["x"], **schedule_choice, **losing,
                    "plain_serve_command": fallback["serve_command"],
                    "why": f"the schedule gains up to {ahead[-1]['x']:g} in flight and loses to no speculation at {where} (even its k = 0 "
                           f"steps still run the drafter): serve with it only while your load stays below {worse[0]['x']:g} in flight"}
        return chosen | losing | {"why": f"the schedule loses to {fallback_words} at {where} (even its k = 0 steps still run the drafter), "
                                         f"so {fallback_words} is recommended"}
    if not better:
        return chosen | {"why": f"the schedule is within the sampling noise of {fallback_words} at every concurrency simulated: the simpler one is recommended"}
    return {"kind": "schedule", **schedule_choice,
            "why": f"the schedule is at least {fallback_words} at every concurrency simulated and better at "
                   + ", ".join(f"{c['x']:g}" for c in better) + " in flight"}


def adaptive_config(spec: PaysoffSpec, profile: AcceptanceProfile) -> dict:
    """vLLM's ``--speculative-config`` for adaptive verification at the grid's largest k."""
    return speculative_config(profile, None, max(spec.speculative_tokens)) | {"enable_adaptive_verification": True}


def adaptive_choice(spec: PaysoffSpec, profile: AcceptanceProfile, rows: dict) -> dict:
    """What the adaptive-verification runs were: their k, config, serve line and the acceptance length
    each concurrency reached (below the fixed k's where the budget cut drafts)."""
    config = adaptive_config(spec, profile)
    lengths = {f"{x:g}": round(r["mean_acceptance_length"], 3) for x, r in sorted(rows.items()) if not math.isnan(r["mean_acceptance_length"])}
    return {"num_speculative_tokens": max(spec.speculative_tokens), "speculative_config_json": json.dumps(config, separators=(",", ":")),
            "serve_command": serve_command(spec, profile, config), "acceptance_length_by_concurrency": lengths}


def _answer_speedup(rec: dict, c: dict) -> tuple[float, float]:
    """(speedup, noise) the recommendation ``rec`` gives at closed-loop entry ``c``."""
    if rec["kind"] == "schedule" or (rec["kind"] == "schedule_up_to" and c["x"] < rec["from"]):
        return c["schedule_tpot_speedup"], c["schedule_noise"]
    if rec["kind"] == "fixed_k":
        return c["fallback_tpot_speedup"], c["fallback_noise"]
    return 1.0, c["fallback_noise"] if rec["kind"] == "none" else 0.0


def with_adaptive(spec: PaysoffSpec, rec: dict, compared: Sequence[dict], profile: AcceptanceProfile, rows: dict) -> dict:
    """The recommendation, or adaptive verification where the version has it and it is at least the
    recommendation at every concurrency simulated and better at one (within the runs' sampling
    noise), and its speedup, widened by the check rows' error bar, stays at or above 1x at every
    one: the same rule a fixed k meets, so adaptive verification is never recommended into a loss."""
    from simulator.sweep.crossover import tied

    closed = [c for c in compared if c["mode"] == "closed_loop" and "adaptive_tpot_speedup" in c]
    if not rows or not closed:
        return rec
    mine = lambda c: (c["adaptive_tpot_speedup"], c["adaptive_noise"])  # noqa: E731
    worse = [c for c in closed if mine(c)[0] < _answer_speedup(rec, c)[0] and not tied(mine(c), _answer_speedup(rec, c))]
    better = [c for c in closed if mine(c)[0] > _answer_speedup(rec, c)[0] and not tied(mine(c), _answer_speedup(rec, c))]
    unsafe = [c for c in closed if c["adaptive_guarded_low"] < 1]
    k = max(spec.speculative_tokens)
    at = lambda entries: ", ".join(format(c["x"], "g") for c in entries)  # noqa: E731
    answer = {"schedule": "the k schedule", "schedule_up_to": "the k schedule", "fixed_k": f"the fixed k = {rec['num_speculative_tokens']}",
              "none": "no speculation"}[rec["kind"]]
    if worse or unsafe or not better:
        figures = ", ".join(f"{c['x']:g} in flight ({mine(c)[0]:.2f}× against {_answer_speedup(rec, c)[0]:.2f}×)" for c in worse)
        why = (f"loses to {answer} at {figures}" if worse
               else f"may measure below 1× at {at(unsafe)} in flight (its speedup divided by the error bar)" if unsafe
               else f"is within the sampling noise of {answer} at every concurrency simulated")
        return rec | {"adaptive_verification": f"at k = {k} (the budget verifying part of each draft) it {why}"}
    choice = adaptive_choice(spec, profile, rows)
    return {"kind": "adaptive", **{key: choice[key] for key in ("num_speculative_tokens", "speculative_config_json", "serve_command")},
            "instead_of": rec["kind"],
            "why": f"adaptive verification at k = {k} is at least {answer} at every concurrency simulated, "
                   f"better at {at(better)} in flight, and stays at or above 1× with its error bar"}


def schedule_document(spec: PaysoffSpec, schedules: dict, best: dict, rows: Sequence[dict], guarded: Optional[dict] = None, bars=None) -> dict:
    """``data/results/recommended_schedules.json``: per deployment, the schedule in vLLM's format, the exact
    ``--speculative-config`` and ``vllm serve`` command, and the schedule simulated at every
    concurrency and load under the primary verify setting, with both bounds as its band."""
    provenance = next((r for r in rows), {})
    attention, interpolation, why = verify_settings()
    if (attention, interpolation) != (spec.attention, spec.interpolation):  # a spec built with another setting says so
        why = f"set for this run (attention = '{spec.attention}')"
    bounds = [m for m in spec.attention_modes if m != spec.attention]
    baseline_noise = {(r["mode"], x_of(r)): round(noise(r), 5) for r in rows if not r["acceptance"]}
    entries = []
    for profile in spec.profiles:
        schedule = schedules[profile.name]
        config = speculative_config(profile, schedule)
        scheduled = {(r["mode"], x_of(r), r["attention"]): r for r in rows if r["acceptance"] == profile.name and r["k_schedule"] and not r["drafter_idle"]}
        idle = {x_of(r): r for r in rows if r["acceptance"] == profile.name and r["drafter_idle"]}
        compared = []
        for (mode, name, att, x), (k, s) in sorted(best.items(), key=lambda item: (item[0][0], item[0][3])):
            if name != profile.name or att != spec.attention:
                continue
            row = scheduled.get((mode, x, spec.attention))
            entry = {
                "mode": mode,
                "x": x,
                "schedule_tpot_speedup": round(value(row), 4) if row else 1.0,  # at most the closed loop's ceiling
                "schedule_tpot_speedup_simulated": round(row["tpot_speedup"], 4) if row else 1.0,
                "schedule_noise": round(noise(row), 5) if row else baseline_noise.get((mode, x), 0.0),
                "idle_tpot_speedup": round(value(idle[x]), 4) if mode == "closed_loop" and x in idle else None,
                "schedule_mean_k": round(row["mean_scheduled_k"], 3) if row else 0.0,
                "best_fixed_k": k,
                "best_fixed_tpot_speedup": round(s, 4),
                "no_speculation_tpot_speedup": 1.0,
            }
            band = [scheduled[(mode, x, b)]["tpot_speedup"] if (mode, x, b) in scheduled else 1.0 for b in bounds]
            entry["band"] = {b: round(v, 4) for b, v in zip(bounds, band)}
            entry["band_low"], entry["band_high"] = round(min(band + [entry["schedule_tpot_speedup"]]), 4), round(max(band + [entry["schedule_tpot_speedup"]]), 4)
            entry["best_k_under_bounds"] = {b: best[(mode, name, b, x)][0] for b in bounds if (mode, name, b, x) in best}
            bar = bars(mode, name, x) if bars is not None else None
            entry["error_bar"] = bar.as_dict() if bar is not None else None
            guarded_band = bar.guarded(entry["band_low"], entry["band_high"]) if bar is not None else (entry["band_low"], entry["band_high"])
            entry["guarded_band_low"], entry["guarded_band_high"] = round(guarded_band[0], 4), round(guarded_band[1], 4)
            if guarded is not None and (mode, name, att, x) in guarded:
                entry["guarded_best_k"] = guarded[(mode, name, att, x)][0]
            compared.append(entry)
        fallback = fixed_k_fallback(spec, profile, rows, bars)
        fixed = {x_of(r): r for r in rows if r["acceptance"] == profile.name and r["mode"] == "closed_loop" and fixed_k(r)
                 and r["attention"] == spec.attention and r["num_speculative_tokens"] == fallback["num_speculative_tokens"]}
        adaptive = {x_of(r): r for r in rows if r["acceptance"] == profile.name and r["mode"] == "closed_loop" and r["adaptive_verification"]}
        for c in compared:
            r = fixed.get(c["x"]) if c["mode"] == "closed_loop" else None
            c["fallback_tpot_speedup"] = round(value(r), 4) if r else 1.0
            c["fallback_noise"] = round(noise(r), 5) if r else baseline_noise.get((c["mode"], c["x"]), 0.0)
            a = adaptive.get(c["x"]) if c["mode"] == "closed_loop" else None
            if a is not None:
                bar = bars(c["mode"], profile.name, c["x"]) if bars is not None else None
                c["adaptive_tpot_speedup"], c["adaptive_noise"] = round(value(a), 4), round(noise(a), 5)
                c["adaptive_guarded_low"] = round(bar.guarded(value(a), value(a))[0] if bar is not None else value(a), 4)
        off = {m: stops_paying(best, profile, m, spec.batch_size_cap) for m in spec.attention_modes}
        if guarded is not None:
            off[spec.attention] = stops_paying(guarded, profile, spec.attention, spec.batch_size_cap)
        entries.append(
            {
                "acceptance": profile.name,
                "label": profile.label,
                "deployment": profile.deployment,
                "deployment_label": profile.deployment_label,
                "model": profile.model,
                "device": profile.device,
                "tensor_parallel_size": profile.tensor_parallel_size,
                "proposer": profile.proposer,
                "draft_model": profile.draft_model,
                "draft_tensor_parallel_size": profile.draft_tensor_parallel_size,
                "acceptance_source": profile.source,
                "acceptance_derivation": profile.derivation,
                "acceptance_rate": profile.rate,
                "acceptance_per_position": list(profile.per_position[: max(spec.speculative_tokens)]) if profile.per_position else None,
                "acceptance_length_at_k": {str(k): round(profile_length(profile, k), 4) for k in spec.speculative_tokens},
                "attention": spec.attention,
                "interpolation": spec.interpolation if spec.attention == "interpolated" else None,
                "num_speculative_tokens_per_batch_size": to_vllm(schedule),
                "speculative_config": config,
                "speculative_config_json": json.dumps(config, separators=(",", ":")) if config else None,
                "serve_command": serve_command(spec, profile, config),
                "note": "" if config else "speculation never pays in this range: run without --speculative-config",
                "simulated_up_to": max(spec.concurrency) if spec.concurrency else None,
                "stops_paying_from": off[spec.attention],
                "stops_paying_band": {b: off[b] for b in bounds},
                "comparison": compared,
                "fixed_k_fallback": fallback,
                "adaptive_verification": adaptive_choice(spec, profile, adaptive) if adaptive else None,
                "recommended": with_adaptive(spec, recommendation(spec, schedule, config, compared, fallback, profile), compared, profile, adaptive),
            }
        )
    return {
        "description": "Recommended num_speculative_tokens_per_batch_size per deployment, from simulated closed-loop runs (the best k per "
        "concurrency under the primary verify-cost setting whose band, widened by the check rows' error bar, stays at or above 1x); each schedule re-simulated at every concurrency and load under the primary "
        "setting and both bounds (the band).",
        "batch_size_cap": spec.batch_size_cap,
        "chunk_size": spec.chunk_size,
        "workload": {
            "prompt_tokens": spec.prompt_tokens,
            "output_tokens": spec.output_tokens,
            "closed_loop_length_spread": spec.length_spread,
            "trace": spec.trace,
        },
        "verify_cost": {"attention": spec.attention, "interpolation": spec.interpolation if spec.attention == "interpolated" else None, "why": why, "bounds": bounds},
        "tie_rule": f"speedups within {TIE:.1%}, or within their runs' sampling noise (the 95% interval of each median TPOT), count as equal "
                    "and the smaller k wins: it risks less when acceptance is lower than assumed",
        "tie_tolerance": TIE,
        "error_bar_rule": ERROR_BAR_RULE,
        "vllm": VLLM_DYNAMIC_SD,
        "vidur_version": provenance.get("vidur_version"),
        "simulator_source_hash": provenance.get("simulator_source_hash"),
        "schedules": entries,
    }


def schedules_json_text(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def csv_texts(output: PaysoffOutput) -> tuple[str, str]:
    return to_csv_text(output.rows, PAYSOFF_COLUMNS), to_csv_text(output.crossovers, CROSSOVER_COLUMNS)
