"""What the pays-off answer tells a deployment to run: the vLLM command lines, the best fixed k for a
release without schedules, where the schedule stops paying, and the recommendation, never worse
than its fallback (the schedule, the fixed k, no speculation, or vLLM 0.30's adaptive
verification), each compared at every concurrency within the runs' sampling noise.

Pure: it reads the simulated rows and the comparison entries :mod:`simulator.paysoff.runner`
built, and returns values; the runner assembles them into ``recommended_schedules.json``.
"""

from __future__ import annotations

import json
import math
from typing import Optional, Sequence

from simulator.cli.vllm_serve import DYNAMIC_SD_VERSION
from simulator.paysoff.spec import AcceptanceProfile, PaysoffSpec, kind_settings
from simulator.speculative.k_schedule import Schedule, max_k, to_vllm
from simulator.sweep.crossover import best_fixed_k, recommended_schedule


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
