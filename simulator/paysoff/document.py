"""``recommended_schedules.json``: one entry per deployment, with the schedule in vLLM's format,
its comparison with every fixed k, no speculation and adaptive verification at each concurrency
and load, the fallback and the recommendation (:mod:`simulator.paysoff.choice`), and the
rules they follow in words.  Pure: built from the simulated rows
(:mod:`simulator.paysoff.runner`), written by the build.
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

from simulator.cli.vllm_serve import DYNAMIC_SD_VERSION
from simulator.paysoff.spec import PaysoffSpec, profile_length, verify_settings
from simulator.speculative.k_schedule import to_vllm
from simulator.sweep.crossover import TIE, fixed_k, noise, value, x_of
from simulator.paysoff.choice import (
    adaptive_choice, fixed_k_fallback, recommendation, serve_command, speculative_config, stops_paying, with_adaptive,
)


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


def _comparison(spec: PaysoffSpec, acceptance: str, best: dict, rows: Sequence[dict], bounds: list, baseline_noise: dict,
                guarded: Optional[dict], bars) -> list[dict]:
    """One deployment's comparison entries, per mode and load: the re-simulated schedule (and its
    band under the bounds, widened by the error bar), its k = 0 server, the best fixed k."""
    scheduled = {(r["mode"], x_of(r), r["attention"]): r for r in rows if r["acceptance"] == acceptance and r["k_schedule"] and not r["drafter_idle"]}
    idle = {x_of(r): r for r in rows if r["acceptance"] == acceptance and r["drafter_idle"]}
    compared = []
    for (mode, name, att, x), (k, s) in sorted(best.items(), key=lambda item: (item[0][0], item[0][3])):
        if name != acceptance or att != spec.attention:
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
    return compared


def _add_alternatives(spec: PaysoffSpec, acceptance: str, compared: list[dict], rows: Sequence[dict], k: int, baseline_noise: dict, bars) -> dict:
    """Beside each closed-loop entry, what the recommendation weighs the schedule against: the
    fallback's fixed ``k`` (or no speculation) and adaptive verification where it ran (its speedup
    widened by the error bar); returns the adaptive runs by concurrency."""
    closed = [r for r in rows if r["acceptance"] == acceptance and r["mode"] == "closed_loop"]
    fixed = {x_of(r): r for r in closed if fixed_k(r) and r["attention"] == spec.attention and r["num_speculative_tokens"] == k}
    adaptive = {x_of(r): r for r in closed if r["adaptive_verification"]}
    for c in compared:
        r = fixed.get(c["x"]) if c["mode"] == "closed_loop" else None
        c["fallback_tpot_speedup"] = round(value(r), 4) if r else 1.0
        c["fallback_noise"] = round(noise(r), 5) if r else baseline_noise.get((c["mode"], c["x"]), 0.0)
        a = adaptive.get(c["x"]) if c["mode"] == "closed_loop" else None
        if a is not None:
            bar = bars(c["mode"], acceptance, c["x"]) if bars is not None else None
            c["adaptive_tpot_speedup"], c["adaptive_noise"] = round(value(a), 4), round(noise(a), 5)
            c["adaptive_guarded_low"] = round(bar.guarded(value(a), value(a))[0] if bar is not None else value(a), 4)
    return adaptive


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
        compared = _comparison(spec, profile.name, best, rows, bounds, baseline_noise, guarded, bars)
        fallback = fixed_k_fallback(spec, profile, rows, bars)
        adaptive = _add_alternatives(spec, profile.name, compared, rows, fallback["num_speculative_tokens"], baseline_noise, bars)
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
