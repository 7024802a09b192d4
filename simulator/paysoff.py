"""``python -m simulator.paysoff``: does speculation pay off for *your* deployment, with which k, and where does it stop?

One deployment (model, GPU, tensor parallelism, proposer, acceptance as vLLM reports it) over a
grid of concurrencies (and request rates) and k: prints median-TPOT speedup by concurrency x k,
the best k, where speculation stops paying, the recommended ``num_speculative_tokens_per_batch_size``
as a ``--speculative-config`` and a full ``vllm serve`` command.  The runs are the build's pays-off
sweep (:mod:`simulator.sweep.paysoff`) with one deployment, costed as ``python -m simulator``
costs them, and go through the result cache: a repeated question re-simulates nothing.

Exit codes: 0 answered; 2 bad input (one line on stderr naming the input and the fix; nothing written).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Optional

from simulator.argtypes import comma_floats
from simulator.config import KV_CACHE_DTYPES, QUANTIZATIONS
from simulator.errors import ConfigError
from simulator.proposer_flags import add_proposer_flags, check_acceptance_input, draft_model_help, options_from_args, proposer_kind, require_draft_model

PROG = "python -m simulator.paysoff"
DEFAULT_CONCURRENCY = "1-128"
DEFAULT_K = "1-5"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Does speculative decoding pay off for one deployment? Simulates every k at every concurrency (Vidur + this "
        "project's speculative model) and recommends vLLM's num_speculative_tokens_per_batch_size.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Acceptance: vLLM logs a 'mean acceptance length' L at your num_speculative_tokens k (tokens per verify step, bonus "
        "included, so 1 <= L <= k + 1). --acceptance-length L -k K converts it to the i.i.d. per-token rate a with "
        "1 + a + ... + a^K = L (simulator/speculative/acceptance_convert.py: iid_rate_from_length); the output states the rate used. "
        "From Prometheus, accepted_per_pos[i] / num_drafts are vLLM's per-position rates: pass them to --acceptance-per-position-vllm. "
        "Verify cost: the answer uses the simulator's default verify-attention setting and shows the kv_once and per_token bounds "
        "as a band around it.",
    )
    s = p.add_argument_group("the system (as you run vLLM)")
    s.add_argument("--model", default="meta-llama/Llama-2-7b-hf", help="target model")
    s.add_argument("--device", default="a100", help="GPU: a100, a100_40gb, h100 or h200 (any case)")
    s.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs the target is sharded over")
    s.add_argument("--quantization", choices=QUANTIZATIONS, default=None, help="vLLM's --quantization (default: the model config's own)")
    s.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto", help="vLLM's --kv-cache-dtype (auto: the model's 16-bit dtype)")
    add_proposer_flags(s)
    s.add_argument("--draft-model", default=None, help=draft_model_help())
    s.add_argument(
        "--draft-tensor-parallel-size", type=int, default=None,
        help="GPUs the draft runs on: 1 or --tensor-parallel-size (vLLM's draft_tensor_parallel_size; default: the target's)",
    )
    s.add_argument(
        "--max-num-seqs", type=int, default=None,
        help="vLLM's --max-num-seqs, the largest running batch (default: what vllm serve 0.10.1 picks on --device: 1024 on GPUs of 70 GiB "
        "or more other than the A100, else 256)",
    )
    s.add_argument(
        "--max-num-batched-tokens", type=int, default=None,
        help="vLLM's --max-num-batched-tokens, tokens per step (default: vllm serve 0.10.1's on --device: 8192 on GPUs of 70 GiB or more "
        "other than the A100, else 2048)",
    )
    a = p.add_argument_group("acceptance (exactly one)")
    a.add_argument("--acceptance-length", type=float, default=None, help="vLLM's mean acceptance length L (bonus included), measured at -k")
    a.add_argument("-k", "--at-k", type=int, default=None, help="the num_speculative_tokens your --acceptance-length was measured at")
    a.add_argument("--acceptance", type=float, default=None, help="i.i.d. acceptance rate per proposed token (accepted / draft tokens)")
    a.add_argument("--acceptance-per-position", default=None, help="comma-separated P(position i accepted | earlier accepted), i = 1..k")
    a.add_argument(
        "--acceptance-per-position-vllm", default=None,
        help="comma-separated vLLM per-position rates accepted_per_pos[i] / num_drafts (unconditional; converted to conditional rates)",
    )
    w = p.add_argument_group("the workload")
    w.add_argument("--concurrency", "--max-concurrency", default=DEFAULT_CONCURRENCY, help="closed loop: requests in flight, a list '1,4,16' or a range 'A-B' (powers of two from A, and B)")
    w.add_argument("--request-rate", default=None, help="open loop too: Poisson request rates (req/s), a list '2,4,8'")
    w.add_argument("--prompt-tokens", type=int, default=512, help="mean prompt length")
    w.add_argument("--output-tokens", type=int, default=256, help="mean output length")
    w.add_argument("--length-spread", "--random-range-ratio", type=float, default=0.5, help="closed-loop lengths uniform in [(1-s) mean, (1+s) mean]")
    w.add_argument("--trace", default=None, help="draw prompt/output lengths from a Vidur length trace CSV instead")
    w.add_argument("--requests-per-slot", type=int, default=2, help="closed-loop requests per run = max(--min-requests, this x concurrency)")
    w.add_argument("--min-requests", type=int, default=8)
    w.add_argument("--poisson-requests", type=int, default=64, help="requests per open-loop run")
    w.add_argument("--workload-seed", type=int, default=42)
    w.add_argument("--seed", "--acceptance-seed", type=int, default=0, help="acceptance draws")
    g = p.add_argument_group("k and output")
    g.add_argument("--k-range", default=DEFAULT_K, help="the k values to consider: a range '1-5' or a list '1,2,4'")
    g.add_argument("--json", default=None, help="write the answer (schedule, band, crossovers, inputs) as JSON here")
    g.add_argument("--csv", default=None, help="write every simulated run as CSV here")
    g.add_argument("--jobs", type=int, default=None, help="parallel runs (default: one per CPU core)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar (default: on a terminal)")
    return p


def _ints(text: str, flag: str, doubling: bool) -> tuple[int, ...]:
    """'1,2,4' or 'A-B' (doubling: powers of two from A, plus B; else consecutive)."""
    text = (text or "").strip()
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(v) for v in text.split("-", 1))
            if lo < 1 or hi < lo:
                raise ValueError
            if not doubling:
                return tuple(range(lo, hi + 1))
            values = []
            v = lo
            while v < hi:
                values.append(v)
                v *= 2
            return tuple(values + [hi])
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a list of positive integers ('1,4,16') or a range ('1-128')") from None
    if not values:
        raise ConfigError(f"{flag} {text!r}: the grid is empty; give at least one value, e.g. {flag} 1,4,16")
    bad = [v for v in values if v < 1]
    if bad:
        raise ConfigError(f"{flag} {text!r}: {bad} are not positive integers")
    return tuple(sorted(set(values)))


def _acceptance(args, deployment: dict):
    from simulator.speculative.acceptance_convert import conditional_from_unconditional
    from simulator.sweep.paysoff_spec import acceptance_profile

    flags = {"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length", "at_k": "-k/--at-k", "lengths": "--acceptance-per-position-vllm"}
    given = [f for f, v in (("--acceptance-length", args.acceptance_length), ("--acceptance", args.acceptance), ("--acceptance-per-position", args.acceptance_per_position),
                            ("--acceptance-per-position-vllm", args.acceptance_per_position_vllm)) if v is not None]
    if not given:
        raise ConfigError("no acceptance given: add --acceptance-length L -k K (vLLM's mean acceptance length at your k), --acceptance RATE, or --acceptance-per-position P1,P2,...")
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)}: give one acceptance input, not {len(given)}")
    check_acceptance_input(proposer_kind(args), {"--acceptance-length": "length", "--acceptance": "rate", "--acceptance-per-position": "per_position",
                                                 "--acceptance-per-position-vllm": "per_position"}[given[0]])
    if args.at_k is not None and args.acceptance_length is None:
        raise ConfigError(f"-k/--at-k {args.at_k}: only goes with --acceptance-length (the k that length was measured at); the k values to simulate are --k-range")
    if args.acceptance_length is not None and args.at_k is None:
        raise ConfigError(f"--acceptance-length {args.acceptance_length:g} needs -k K, the num_speculative_tokens it was measured at (vLLM logs both)")
    if args.at_k is not None and args.at_k < 1:
        raise ConfigError(f"-k {args.at_k}: must be the num_speculative_tokens (>= 1) your --acceptance-length was measured at")
    source = "given on the command line"
    name = "cli"
    label = f"{deployment['proposer']} on {deployment['model']}"
    common = dict(where=PROG, flags=flags, deployment="cli", deployment_label=label, **deployment)
    if args.acceptance_per_position_vllm is not None:
        unconditional = comma_floats(args.acceptance_per_position_vllm, "--acceptance-per-position-vllm", "rates in [0, 1]")
        try:
            conditional = conditional_from_unconditional(unconditional)
        except ConfigError as exc:
            raise ConfigError(f"--acceptance-per-position-vllm: {exc}") from None
        profile = acceptance_profile(name, label, source, per_position=conditional, **{**common, "flags": {**flags, "per_position": "--acceptance-per-position-vllm"}})
        import dataclasses

        return dataclasses.replace(
            profile,
            derivation=f"vLLM per-position rates {', '.join(f'{v:g}' for v in unconditional)} (accepted_per_pos[i] / num_drafts) -> conditional rates "
            f"{', '.join(f'{v:.4f}' for v in conditional)} (p_i = a_i / a_(i-1); acceptance_convert.conditional_from_unconditional)",
        )
    per_position = comma_floats(args.acceptance_per_position, "--acceptance-per-position", "probabilities") if args.acceptance_per_position is not None else None
    return acceptance_profile(name, label, source, rate=args.acceptance, per_position=per_position, length=args.acceptance_length, at_k=args.at_k, **common)


def _check_system(args) -> str:
    """Model, device, draft: named the way the user typed them; returns the device's canonical name."""
    from simulator.catalog import model_config
    from simulator.profiles.hardware import get_device, load_devices

    try:
        model_config(args.model)
    except ConfigError as exc:
        raise ConfigError(f"--model {args.model}: {exc}") from None
    device = args.device.lower()
    try:
        get_device(device)
    except ConfigError:
        raise ConfigError(f"--device {args.device}: unknown; use one of {', '.join(sorted(load_devices()))}") from None
    from simulator.config import vllm_serve_scheduler_defaults

    seqs, tokens = vllm_serve_scheduler_defaults(device)
    args.max_num_seqs = seqs if args.max_num_seqs is None else args.max_num_seqs
    args.max_num_batched_tokens = tokens if args.max_num_batched_tokens is None else args.max_num_batched_tokens
    kind = proposer_kind(args)
    args.proposer = kind.name
    if kind.tree(kind_settings(kind, args)) is not None:
        raise ConfigError(f"--proposer {kind.name}: drafts a tree at one depth and {kind.engine} has no k schedule to recommend; simulate it with python -m simulator")
    require_draft_model(kind, args.draft_model)
    if kind.needs_draft_model:
        try:
            model_config(args.draft_model)
        except ConfigError as exc:
            raise ConfigError(f"--draft-model {args.draft_model}: {exc}") from None
    for flag, value in (("--tensor-parallel-size", args.tensor_parallel_size), ("--max-num-seqs", args.max_num_seqs), ("--max-num-batched-tokens", args.max_num_batched_tokens),
                        ("--prompt-tokens", args.prompt_tokens), ("--requests-per-slot", args.requests_per_slot), ("--min-requests", args.min_requests),
                        ("--poisson-requests", args.poisson_requests)):
        if value < 1:
            raise ConfigError(f"{flag} {value}: must be a positive integer")
    if args.output_tokens < 2:
        raise ConfigError(f"--output-tokens {args.output_tokens}: must be at least 2 (a decode step needs a token after the first)")
    if not 0 <= args.length_spread < 1:
        raise ConfigError(f"--length-spread {args.length_spread:g}: must be in [0, 1)")
    for flag, value in (("--seed", args.seed), ("--workload-seed", args.workload_seed)):
        if value < 0:
            raise ConfigError(f"{flag} {value}: must be an integer >= 0")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: must be a positive integer")
    return device


def kind_settings(kind, args):
    from simulator.speculative.proposers.base import SpecSettings

    return SpecSettings(k=1, options=kind.resolve_options(dict(options_from_args(args, kind))))


def spec_from_args(args):
    """The one-deployment pays-off spec the flags describe (every input checked, nothing simulated)."""
    from simulator.sweep.paysoff_spec import single_deployment

    device = _check_system(args)
    ks = _ints(args.k_range, "--k-range", doubling=False)
    concurrency = _ints(args.concurrency, "--concurrency", doubling=True) if args.concurrency.strip() else ()
    rates = comma_floats(args.request_rate, "--request-rate", "request rates (req/s)") if args.request_rate is not None else ()
    bad_rates = [r for r in rates if not (math.isfinite(r) and r > 0)]
    if bad_rates:
        raise ConfigError(f"--request-rate {args.request_rate}: {bad_rates} are not positive request rates")
    if not concurrency and not rates:
        raise ConfigError("the grid is empty: give --concurrency (e.g. 1-128) and/or --request-rate (e.g. 2,4,8)")
    too_big = [c for c in concurrency if c > args.max_num_seqs]
    if too_big:
        raise ConfigError(
            f"--concurrency {args.concurrency}: {too_big} exceed --max-num-seqs {args.max_num_seqs}, so those requests would wait in the queue, "
            f"not run; raise --max-num-seqs to {max(too_big)} or lower --concurrency"
        )
    kind = proposer_kind(args)
    if args.draft_tensor_parallel_size is not None and (not kind.runs_network or args.draft_tensor_parallel_size not in (1, args.tensor_parallel_size)):
        raise ConfigError(
            f"--draft-tensor-parallel-size {args.draft_tensor_parallel_size}: must be 1 or --tensor-parallel-size ({args.tensor_parallel_size}), "
            "and only with a draft network (a draft model, a head, MTP layers, a drafter)"
        )
    deployment = dict(model=args.model, device=device, tensor_parallel_size=args.tensor_parallel_size, proposer=kind.name, draft_model=args.draft_model,
                      draft_tensor_parallel_size=args.draft_tensor_parallel_size, options=options_from_args(args, kind))
    profile = _acceptance(args, deployment)
    if profile.per_position is not None and len(profile.per_position) < max(ks):
        raise ConfigError(f"per-position acceptance has {len(profile.per_position)} rates but --k-range goes to {max(ks)}: give {max(ks)} rates or lower --k-range")
    if args.trace:
        from simulator.catalog import model_config
        from simulator.workloads import read_trace

        read_trace(args.trace, model_config(args.model).max_model_len)  # a bad trace fails now, naming the row
    return single_deployment(
        profile, ks=ks, concurrency=concurrency, arrival_rates=rates, max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
        prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, length_spread=args.length_spread, requests_per_slot=args.requests_per_slot,
        min_requests=args.min_requests, poisson_requests=args.poisson_requests, seed=args.seed, workload_seed=args.workload_seed, trace=args.trace, where=PROG,
        quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
    )


def check_runs(spec) -> None:
    """The simulator's own checks (head for this target, sharding, context) on the largest run,
    before anything is simulated: a bad combination fails in a second, not after the grid (memory
    is checked by each run, still before anything is written)."""
    from simulator.sweep.paysoff import closed_loop_workload, poisson_workload, run_config, speculation
    from simulator.sweep.runner import warm_predictor

    profile = spec.profiles[0]
    workload = closed_loop_workload(spec, max(spec.concurrency), profile.model) if spec.concurrency else poisson_workload(spec, max(spec.arrival_rates), profile.model)
    config = run_config(spec, profile.system, workload, speculation(spec, profile, spec.attention, max(spec.speculative_tokens)))
    warm_predictor(config)


def _band(entry: Optional[dict], primary: float, lows: list[float]) -> str:
    lo, hi = min(lows + [primary]), max(lows + [primary])
    return f"{primary:5.2f}× [{lo:.2f}–{hi:.2f}]"


def format_answer(spec, output) -> str:
    """The table and the recommendation, as printed."""
    from simulator.website import units

    doc = output.schedules
    entry = doc["schedules"][0]
    profile = spec.profiles[0]
    primary, bounds = spec.attention, [m for m in spec.attention_modes if m != spec.attention]
    tp = f"{profile.tensor_parallel_size} × " if profile.tensor_parallel_size > 1 else "1 × "
    lines = [
        f"Deployment: {profile.model} on {tp}{profile.device.upper()} (tensor parallel {profile.tensor_parallel_size}), proposer {profile.proposer}"
        + (f" ({profile.draft_model})" if profile.draft_model else "")
        + f", max_num_seqs {spec.batch_size_cap}, max_num_batched_tokens {spec.chunk_size}",
        f"Acceptance: {profile.derivation}.",
        "  Mean acceptance length this gives (what vLLM would log): " + ", ".join(f"k={k}: {v:.2f}" for k, v in entry["acceptance_length_at_k"].items()),
        f"Verify cost: {units.attention_label(primary)} ({primary}) — {doc['verify_cost']['why']}.",
        f"Workload: {'lengths from ' + spec.trace if spec.trace else f'prompts ~{spec.prompt_tokens}, outputs ~{spec.output_tokens} tokens (±{spec.length_spread:.0%})'}; "
        "speedup = median TPOT without speculation / with it, same workload.",
        "",
    ]
    rows = output.rows
    fixed = [r for r in rows if r["acceptance"] and not r["k_schedule"]]
    ks = spec.speculative_tokens
    for mode, xs, unit in (("closed_loop", spec.concurrency, "in flight"), ("poisson", spec.arrival_rates, "req/s")):
        if not xs:
            continue
        title = "Closed loop" if mode == "closed_loop" else "Open loop (Poisson)"
        lines.append(f"{title}: median TPOT speedup, {primary} [band: {' / '.join(bounds)}]")
        ks_here = ks if mode == "closed_loop" else spec.poisson_k
        header = f"{unit:>10} | " + " | ".join(f"{'k = ' + str(k):^21}" for k in ks_here) + " | best k | schedule"
        lines += [header, "-" * len(header)]
        by = {(r["mode"], r["attention"], r["num_speculative_tokens"], r["concurrency"] if mode == "closed_loop" else r["arrival_rate"]): r for r in fixed}
        comparison = {c["x"]: c for c in entry["comparison"] if c["mode"] == mode}
        for x in xs:
            cells = []
            for k in ks_here:
                main = by[(mode, primary, k, x)]["tpot_speedup"]
                cells.append(f"{_band(None, main, [by[(mode, b, k, x)]['tpot_speedup'] for b in bounds]):^21}")
            c = comparison.get(x)
            best = (str(c["best_fixed_k"]) if c["best_fixed_k"] else "off") if c else "–"
            sched = f"{c['schedule_tpot_speedup']:.2f}× [{c['band_low']:.2f}–{c['band_high']:.2f}]" if c else "–"
            lines.append(f"{units.number(x):>10} | " + " | ".join(cells) + f" | {best:^6} | {sched}")
        lines.append("")
    crossings = [c for c in output.crossovers if c["attention"] == primary and c["mode"] == "closed_loop"]
    if crossings:
        lines.append("Where each fixed k stops paying (closed loop, speedup crosses 1×; " + primary + "): "
                     + "; ".join(f"k={c['num_speculative_tokens']}: {c['crossover']}" for c in crossings))
    off = entry["stops_paying_from"]
    band = ", ".join(f"{b}: {('from ' + str(v) + ' in flight') if v else 'pays throughout'}" for b, v in entry["stops_paying_band"].items())
    lines.append(
        f"Speculation stops paying: {('from ' + str(off) + ' in flight') if off else 'it pays at every concurrency simulated'} ({primary}); band: {band}."
    )
    lines.append(f"Ties: {doc['tie_rule']}.")
    lines.append("")
    top = entry.get("simulated_up_to")
    if entry["speculative_config"] and top and top < spec.batch_size_cap:
        lines.append(
            f"Note: the schedule's last row runs to --max-num-seqs {spec.batch_size_cap}, but only up to {top} in flight was simulated; "
            f"above that it keeps the last measured k. Add larger values to --concurrency to check them."
        )
    if entry["speculative_config"]:
        lines += [
            "Recommended num_speculative_tokens_per_batch_size (rows [first batch size, last batch size, k]): "
            + json.dumps(entry["num_speculative_tokens_per_batch_size"], separators=(",", ":")),
            "--speculative-config '" + entry["speculative_config_json"] + "'",
            entry["serve_command"],
            f"Needs {doc['vllm']['text']} ({', '.join(doc['vllm']['sources'])})",
            f"Method {profile.kind.vllm_method} ({profile.kind.label}): {profile.kind.vllm_version}.",
        ]
    else:
        lines += [f"Recommendation: {entry['note']}.", entry["serve_command"]]
    return "\n".join(lines)


def answer_document(spec, output, argv) -> dict:
    entry = output.schedules["schedules"][0]
    return {
        "command": [PROG] + list(argv),
        "answer": entry,
        "verify_cost": output.schedules["verify_cost"],
        "tie_rule": output.schedules["tie_rule"],
        "vllm": output.schedules["vllm"],
        "max_num_seqs": spec.batch_size_cap,
        "max_num_batched_tokens": spec.chunk_size,
        "workload": output.schedules["workload"],
        "concurrency": list(spec.concurrency),
        "request_rates": list(spec.arrival_rates),
        "k_range": list(spec.speculative_tokens),
        "crossovers": output.crossovers,
        "vidur_version": output.schedules["vidur_version"],
        "simulator_source_hash": output.schedules["simulator_source_hash"],
    }


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from simulator.progress import quiet_vidur

    quiet_vidur()
    try:
        from simulator.textio import check_writable_file

        spec = spec_from_args(args)
        for flag, path in (("--json", args.json), ("--csv", args.csv)):
            if path is not None:
                check_writable_file(path, flag)
        check_runs(spec)
        from simulator.sweep.executors import LocalExecutor
        from simulator.sweep.paysoff import csv_texts, run_paysoff

        output = run_paysoff(spec, LocalExecutor(args.jobs, args.progress))
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    from simulator.textio import atomic_write_text

    print(format_answer(spec, output))
    if args.csv:
        atomic_write_text(args.csv, csv_texts(output)[0])
    if args.json:
        atomic_write_text(args.json, json.dumps(answer_document(spec, output, argv), indent=2, default=_json_default) + "\n")
    return 0


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
