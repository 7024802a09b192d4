"""The pays-off sweep: speedup against concurrency and load, the best k, recommended schedules.

Phase 1 runs every fixed k (and one baseline per concurrency or load); phase 2 derives the
recommended ``num_speculative_tokens_per_batch_size`` schedule of each acceptance profile and
bound from phase 1 and simulates it at every concurrency and load, so the recommendation is
compared with the best fixed k and with no speculation on the same workloads.

Closed-loop lengths are drawn once per concurrency (seeded, uniform within ``length_spread``
of the means): with equal lengths every request of a wave would finish at the same step and
the batch would drain and refill in lockstep, which no server sees.  Poisson runs use the
seed sweep's fixed lengths and Vidur's arrival generator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from simulator.config import ClosedLoopWorkload, PoissonWorkload, RunConfig, SpeculationConfig
from simulator.errors import ConfigError
from simulator.speculative.k_schedule import max_k, to_vllm
from simulator.sweep.crossover import best_k, crossover_rows, recommended_schedule, x_of
from simulator.sweep.paysoff_spec import AcceptanceProfile, PaysoffSpec
from simulator.sweep.runner import FLOAT_FORMAT, simulate_all, to_csv_text  # noqa: F401

PAYSOFF_COLUMNS = (
    "mode",
    "concurrency",
    "arrival_rate",
    "num_requests",
    "prompt_tokens",
    "output_tokens",
    "acceptance",
    "acceptance_rate",
    "num_speculative_tokens",
    "k_schedule",
    "attention",
    "proposer",
    "seed",
    "workload_seed",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "e2e_p50_s",
    "throughput_tok_s",
    "tpot_speedup",
    "throughput_speedup",
    "best_k",
    "mean_acceptance_length",
    "realized_acceptance_rate",
    "mean_decode_batch",
    "mean_scheduled_k",
    "preemptions",
    "overloaded",
    "profile_source",
    "profile_id",
    "vidur_version",
    "simulator_source_hash",
)
CROSSOVER_COLUMNS = (
    "mode",
    "acceptance",
    "attention",
    "num_speculative_tokens",
    "crossover_x",
    "crossover",
    "crossings",
    "x_min",
    "x_max",
    "speedup_at_x_min",
    "speedup_at_x_max",
)


@dataclass(frozen=True)
class Job:
    """One run and what the CSV says about it beyond its config."""

    config: RunConfig
    mode: str  # "closed_loop" | "poisson"
    x: float  # concurrency or arrival rate
    profile: Optional[AcceptanceProfile]  # None: the baseline


@dataclass(frozen=True)
class PaysoffOutput:
    rows: list[dict]
    crossovers: list[dict]
    schedules: dict


def closed_loop_workload(spec: PaysoffSpec, concurrency: int) -> ClosedLoopWorkload:
    n = max(spec.min_requests, spec.requests_per_slot * concurrency)
    rng = np.random.default_rng([spec.workload_seed, concurrency])

    def lengths(mean: int) -> tuple[int, ...]:
        lo, hi = max(1, round(mean * (1 - spec.length_spread))), max(2, round(mean * (1 + spec.length_spread)))
        return tuple(int(v) for v in rng.integers(lo, hi + 1, n))

    prompts = lengths(spec.prompt_tokens)
    outputs = tuple(max(2, v) for v in lengths(spec.output_tokens))
    return ClosedLoopWorkload(concurrency, prompts, outputs)


def _speculation(profile: AcceptanceProfile, attention: str, k: int = 0, schedule=None) -> SpeculationConfig:
    return SpeculationConfig(
        num_speculative_tokens=k,
        k_schedule=schedule,
        acceptance_rate=profile.rate,
        acceptance_per_position=profile.per_position,
        proposer="ngram",
        attention=attention,
    )


def _config(spec: PaysoffSpec, workload, speculation: SpeculationConfig, profile_dir: Optional[str]) -> RunConfig:
    return RunConfig(
        workload=workload,
        speculation=speculation,
        model=spec.model,
        device=spec.device,
        profile_dir=profile_dir,
        seed=spec.seed,
        batch_size_cap=spec.batch_size_cap,
        chunk_size=spec.chunk_size,
    )


def _workloads(spec: PaysoffSpec) -> list[tuple[str, float, object]]:
    out: list[tuple[str, float, object]] = [("closed_loop", c, closed_loop_workload(spec, c)) for c in spec.concurrency]
    out += [
        ("poisson", rate, PoissonWorkload(spec.poisson_requests, spec.prompt_tokens, spec.output_tokens, rate, spec.workload_seed))
        for rate in spec.arrival_rates
    ]
    return out


def fixed_k_jobs(spec: PaysoffSpec, profile_dir: Optional[str] = None) -> list[Job]:
    """Phase 1: a baseline per workload, every fixed k of every profile and bound."""
    too_big = [c for c in spec.concurrency if c > spec.batch_size_cap]
    if too_big:
        raise ConfigError(f"pays-off spec: [closed_loop] concurrency {too_big} exceeds [run] batch_size_cap = {spec.batch_size_cap}")
    jobs = []
    for mode, x, workload in _workloads(spec):
        jobs.append(Job(_config(spec, workload, SpeculationConfig(), profile_dir), mode, x, None))
        ks = spec.speculative_tokens if mode == "closed_loop" else spec.poisson_k
        for profile in spec.profiles:
            for attention in spec.attention_modes:
                for k in ks:
                    jobs.append(Job(_config(spec, workload, _speculation(profile, attention, k), profile_dir), mode, x, profile))
    return jobs


def schedule_jobs(spec: PaysoffSpec, schedules: dict[tuple[str, str], tuple], profile_dir: Optional[str] = None) -> list[Job]:
    """Phase 2: each recommended schedule at every concurrency and load (a schedule whose k
    is 0 everywhere is no speculation: its rows are the baselines)."""
    jobs = []
    by_name = {p.name: p for p in spec.profiles}
    for (name, attention), schedule in schedules.items():
        if max_k(schedule) == 0:
            continue
        for mode, x, workload in _workloads(spec):
            speculation = _speculation(by_name[name], attention, schedule=schedule)
            jobs.append(Job(_config(spec, workload, speculation, profile_dir), mode, x, by_name[name]))
    return jobs


def _row(job: Job, record: dict) -> dict:
    s, w = job.config.speculation, job.config.workload
    row = {
        "mode": job.mode,
        "concurrency": job.x if job.mode == "closed_loop" else None,
        "arrival_rate": job.x if job.mode == "poisson" else None,
        "num_requests": record["num_requests"],
        "prompt_tokens": None,
        "output_tokens": None,
        "acceptance": job.profile.name if job.profile else "",
        "acceptance_rate": s.acceptance_rate if s.enabled else None,
        "num_speculative_tokens": s.num_speculative_tokens,
        "k_schedule": json.dumps(to_vllm(s.k_schedule), separators=(",", ":")) if s.k_schedule else "",
        "attention": s.attention if s.enabled else "",
        "proposer": s.proposer if s.enabled else "",
        "seed": job.config.seed,
    }
    if isinstance(w, ClosedLoopWorkload):
        row.update(prompt_tokens=float(np.mean(w.prompt_tokens)), output_tokens=float(np.mean(w.output_tokens)), workload_seed=None)
    else:
        row.update(prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, workload_seed=w.seed)
    for key in PAYSOFF_COLUMNS:
        if key not in row and key in record:
            row[key] = record[key]
    return row


def _with_speedups(rows: list[dict]) -> list[dict]:
    baselines = {(r["mode"], x_of(r)): r for r in rows if r["num_speculative_tokens"] == 0}
    for r in rows:
        base = baselines[(r["mode"], x_of(r))]
        r["tpot_speedup"] = base["tpot_p50_s"] / r["tpot_p50_s"]
        r["throughput_speedup"] = r["throughput_tok_s"] / base["throughput_tok_s"]
    return rows


def _order(row: dict) -> tuple:
    return (row["mode"], x_of(row), row["acceptance"], row["attention"], row["k_schedule"] != "", row["num_speculative_tokens"])


def run_paysoff(spec: PaysoffSpec, executor, profile_dir: Optional[str] = None, run=None) -> PaysoffOutput:
    jobs = fixed_k_jobs(spec, profile_dir)
    rows = _with_speedups([_row(job, rec) for job, rec in zip(jobs, simulate_all([j.config for j in jobs], executor, run))])
    best = best_k(rows)
    schedules = {
        (p.name, attention): recommended_schedule(best, p.name, attention, spec.batch_size_cap)
        for p in spec.profiles
        for attention in spec.attention_modes
    }
    jobs2 = schedule_jobs(spec, schedules, profile_dir)
    records2 = simulate_all([j.config for j in jobs2], executor, run)
    baselines = [r for r in rows if r["num_speculative_tokens"] == 0]
    rows2 = _with_speedups(baselines + [_row(job, rec) for job, rec in zip(jobs2, records2)])[len(baselines) :]
    for r in rows:
        if r["acceptance"]:
            r["best_k"] = best[(r["mode"], r["acceptance"], r["attention"], x_of(r))][0] == r["num_speculative_tokens"]
        else:
            r["best_k"] = None
    for r in rows2:
        r["best_k"] = None
    all_rows = sorted(rows + rows2, key=_order)
    return PaysoffOutput(all_rows, crossover_rows(rows), schedule_document(spec, schedules, best, all_rows))


def schedule_document(spec: PaysoffSpec, schedules: dict, best: dict, rows: Sequence[dict]) -> dict:
    """``data/recommended_schedules.json``: per profile and bound, the schedule in vLLM's format,
    the exact ``--speculative-config``, and the comparison at every concurrency and load."""
    provenance = next((r for r in rows), {})
    entries = []
    by_name = {p.name: p for p in spec.profiles}
    for (name, attention), schedule in schedules.items():
        profile = by_name[name]
        k_max = max_k(schedule)
        config = {"method": profile.method}
        if profile.draft_model:
            config["model"] = profile.draft_model
        config["num_speculative_tokens"] = k_max
        config["num_speculative_tokens_per_batch_size"] = to_vllm(schedule)
        compared = []
        for r in rows:
            if r["acceptance"] != name or r["attention"] != attention or not r["k_schedule"]:
                continue
            x = x_of(r)
            k, s = best[(r["mode"], name, attention, x)]
            compared.append(
                {
                    "mode": r["mode"],
                    "x": x,
                    "schedule_tpot_speedup": round(r["tpot_speedup"], 4),
                    "schedule_mean_k": round(r["mean_scheduled_k"], 3),
                    "best_fixed_k": k,
                    "best_fixed_tpot_speedup": round(s, 4),
                    "no_speculation_tpot_speedup": 1.0,
                }
            )
        serve_model = profile.target_model or spec.model
        caveat = ""
        if profile.method != "ngram":
            caveat = (
                f"Simulated on {spec.model} with this acceptance profile and the n-gram proposer's cost (the {profile.method} "
                f"passes are not costed here): a starting point for {serve_model} with {profile.draft_model}, to be checked there."
            )
        entries.append(
            {
                "acceptance": name,
                "label": profile.label,
                "acceptance_source": profile.source or f"i.i.d. acceptance rate {profile.rate:g} per proposed token",
                "attention": attention,
                "num_speculative_tokens_per_batch_size": to_vllm(schedule),
                "speculative_config": config if k_max else None,
                "speculative_config_json": json.dumps(config, separators=(",", ":")) if k_max else None,
                "serve_command": f"vllm serve {serve_model} --max-num-seqs {spec.batch_size_cap} --max-num-batched-tokens {spec.chunk_size} "
                f"--speculative-config '{json.dumps(config, separators=(',', ':'))}'"
                if k_max
                else None,
                "caveat": caveat,
                "note": "" if k_max else "speculation never pays in this range: run without --speculative-config",
                "comparison": compared,
            }
        )
    return {
        "description": "Recommended num_speculative_tokens_per_batch_size per acceptance profile and verify-attention bound, "
        "from simulated closed-loop runs (best k per concurrency); each schedule re-simulated at every concurrency and load.",
        "model": spec.model,
        "device": spec.device,
        "batch_size_cap": spec.batch_size_cap,
        "chunk_size": spec.chunk_size,
        "workload": {
            "prompt_tokens": spec.prompt_tokens,
            "output_tokens": spec.output_tokens,
            "closed_loop_length_spread": spec.length_spread,
        },
        "tie_tolerance": 0.005,
        "vidur_version": provenance.get("vidur_version"),
        "simulator_source_hash": provenance.get("simulator_source_hash"),
        "schedules": entries,
    }


def schedules_json_text(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def csv_texts(output: PaysoffOutput) -> tuple[str, str]:
    return to_csv_text(output.rows, PAYSOFF_COLUMNS), to_csv_text(output.crossovers, CROSSOVER_COLUMNS)
