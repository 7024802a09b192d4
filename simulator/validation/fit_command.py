"""``python -m simulator.validation fit``: measure a server for a few minutes, fit its step costs,
hold a level out, and write the fitted engine profile (:mod:`simulator.profiles.fitted`).

A plain server places the engine's terms (CPU time per step, GEMM and attention scales, the
all-reduce at TP > 1); a speculative server, fitted with the plain server's profile as
``--engine-profile``, places the drafter's scale on top of them with the acceptance its counters
measured (run it with vLLM's synthetic rejection sampling to fix the acceptance:
``"rejection_sample_method": "synthetic"`` and ``"synthetic_acceptance_length"`` in
``--speculative-config``, ``vllm/config/speculative.py``).  The flags follow ``vllm bench serve``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from dataclasses import replace
from pathlib import Path

from simulator.cli.argtypes import positive_int, speculative_tokens
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, proposer_kind
from simulator.cli.speculation_flags import require_draft_model
from simulator.profiles.hardware import DEFAULT_DEVICE, device_names
from simulator.runs.deployment import Deployment, Parallelism, SchedulerLimits, Speculation
from simulator.util.errors import ConfigError


def _levels(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give concurrencies separated by commas, e.g. 1,8,32,128") from None
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one concurrency")
    return values


def add_fit_parser(steps, epilog: str) -> None:
    f = steps.add_parser(
        "fit",
        help="measure a vLLM server at a few closed-loop levels, fit its step costs, and write an engine profile for --engine-profile",
        description="Measure a running vLLM server (vllm bench serve's random dataset, closed loop at each --levels concurrency), "
        "fit the built-in step model's free terms to the server's own request histograms, predict the held-out level, and write a "
        "fitted engine profile (TOML) that python -m simulator and python -m simulator.paysoff take as --engine-profile.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("--base-url", default="http://127.0.0.1:8000", help="server root (default: http://127.0.0.1:8000)")
    f.add_argument("--model", help="the model the server runs, which is also the model simulated (default: the first /v1/models lists, by its root)")
    f.add_argument("--served-model-name", help="the name the API serves it under, when it differs from --model")
    f.add_argument("--random-input-len", type=positive_int, default=512, help="input tokens per request (default: 512)")
    f.add_argument("--random-output-len", type=positive_int, default=128, help="output tokens per request (default: 128)")
    f.add_argument("--seed", type=int, default=0, help="seeds the prompts (default: 0)")
    h = f.add_argument_group("the fit's own")
    h.add_argument("--levels", type=_levels, default=(1, 8, 32, 128), help="closed-loop concurrencies to measure, each as vllm bench serve --max-concurrency C --request-rate inf (default: 1,8,32,128)")
    h.add_argument("--held-out", type=_levels, help="levels left out of the fit and predicted (default: the largest of --levels)")
    h.add_argument("--waves", type=positive_int, default=3, help="requests per level = waves x concurrency, at least 8 (default: 3)")
    h.add_argument("--device", default=DEFAULT_DEVICE, help=f"the GPU the server runs on: {', '.join(device_names())} (default: {DEFAULT_DEVICE})")
    h.add_argument("--tensor-parallel-size", type=positive_int, default=1, help="the server's --tensor-parallel-size (default: 1)")
    h.add_argument("--vllm-version", help="the server's vLLM release (default: what its /version says)")
    h.add_argument("--max-num-seqs", type=positive_int, help="the server's --max-num-seqs (default: vllm serve's for the version and GPU)")
    h.add_argument("--max-num-batched-tokens", type=positive_int, help="the server's --max-num-batched-tokens (default: vllm serve's)")
    add_proposer_flags(h, options=False)
    h.add_argument("--draft-model", help=draft_model_help())
    h.add_argument("--num-speculative-tokens", type=speculative_tokens, help="the server's k (default: read from its spec-decode counters)")
    h.add_argument("--engine-profile", help="a fitted profile of the same deployment without speculation: its terms are held, and only the CPU time and the drafter are fitted")
    h.add_argument("--out", required=True, help="the fitted profile to write (TOML)")
    h.add_argument("--work-dir", help="keep each level's replay records here (default: a temporary folder, removed afterwards)")


TERM_UNITS = {"cpu_ms": " ms", "gemm": "x", "attention": "x", "all_reduce": "x", "drafter": "x"}


def run_fit(args) -> int:
    """Check every input, measure each level, fit, print, write the profile (last, atomically)."""
    from simulator.cli import vllm_serve
    from simulator.cli.argtypes import given
    from simulator.profiles.fitted import read_fitted_profile
    from simulator.vidur.logs import quiet_vidur
    from simulator.validation.bench import served_models
    from simulator.validation.files import check_output_file
    from simulator.validation.fit import fit_with_holdout
    from simulator.validation.fit_measure import FitPlan, server_version
    from simulator.validation.replay_options import ReplayOptions

    out = Path(args.out)
    check_output_file(out, "--out")
    plan = FitPlan(levels=tuple(args.levels), held_out=tuple(args.held_out or (max(args.levels),)), input_len=args.random_input_len,
                   output_len=args.random_output_len, waves=args.waves, seed=args.seed)
    kind = proposer_kind(args)
    base = read_fitted_profile(Path(args.engine_profile)) if args.engine_profile else None
    root = ReplayOptions(args.base_url).root_url  # checks the URL
    api_model, sim_model = served_models(root, args)
    said = server_version(root)
    if args.vllm_version is None and said is None:
        raise ConfigError(f"{root}/version does not answer a vLLM version; pass the server's --vllm-version")
    version = vllm_serve.parse_version(args.vllm_version) if args.vllm_version else vllm_serve.parse_version(said, f"the server's version ({root}/version)")
    limits = vllm_serve.limits(args.device, version, args.max_num_seqs, args.max_num_batched_tokens)
    too_many = [c for c in plan.levels if c > limits.max_num_seqs]
    if too_many:
        raise ConfigError(f"--levels {','.join(map(str, too_many))}: above the server's --max-num-seqs {limits.max_num_seqs}; the rest would queue and the level would not be what it says")
    if base is not None:
        base.check_run(sim_model, limits.device, args.tensor_parallel_size, f"--engine-profile {args.engine_profile}")
    engine = vllm_serve.engine_name(version)
    print(f"fit: {sim_model} on {limits.device} at TP {args.tensor_parallel_size}, vLLM {version} (engine profile {engine}), against {root} as {api_model!r}")
    print(f"plan: {len(plan.levels)} closed-loop levels ({', '.join(map(str, plan.levels))} in flight), {plan.input_len} input / {plan.output_len} output tokens, {sum(plan.describe()['requests'])} requests")

    levels, server_s = _measure(root, api_model, plan, args)
    k = len(levels[0].acceptance_per_position)
    deployment = Deployment(
        model=sim_model, device=limits.device, engine=engine, parallelism=Parallelism(tensor=args.tensor_parallel_size),
        limits=SchedulerLimits(max_num_batched_tokens=limits.max_num_batched_tokens, max_num_seqs=limits.max_num_seqs),
    )
    if k:
        if not given(args, "proposer"):
            raise ConfigError(f"the server speculates (k = {k} by its spec-decode counters): name its method with --proposer (and --draft-model)")
        require_draft_model(kind, args.draft_model)
        deployment = replace(deployment, speculation=Speculation(proposer=kind.name, k=k, draft_model=args.draft_model))
    start, fixed = _start_and_fixed(base)
    quiet_vidur()
    began = time.perf_counter()
    result = fit_with_holdout(deployment, levels, plan.held_out, start, fixed)
    _print_fit(result, time.perf_counter() - began)
    _write(out, result, base, fixed, engine, said or version, sim_model, limits, args, plan, server_s, f"{kind.name}, k = {k}" if k else "off")
    print(f"wrote {out} ({server_s:.0f} s of server time); answer for this server with: python -m simulator.paysoff --engine-profile {out} --model {sim_model} --device {limits.device}")
    return 0


def _measure(root: str, api_model: str, plan, args) -> tuple[list, float]:
    """Each level of ``plan`` in turn, printed as it is read; the server seconds they took."""
    from simulator.validation.fit_measure import measure_level

    keep = args.work_dir is not None
    work = Path(args.work_dir) if keep else Path(tempfile.mkdtemp(prefix="vidur-fit-"))
    levels, server_s = [], 0.0
    try:
        for c in plan.levels:
            level, seconds = measure_level(root, api_model, c, plan, work, args.num_speculative_tokens)
            server_s += seconds
            k = len(level.acceptance_per_position)
            spec = f", acceptance length {level.acceptance_length:.2f} at k = {k}" if k else ""
            print(
                f"  {c:>4} in flight: {level.requests} requests, TPOT {level.tpot_ms:.2f} ms, TTFT {level.ttft_ms:.1f} ms, "
                f"{level.throughput_tok_s:.0f} output tok/s{spec}; ITL {level.itl_ms:.2f} ms over {level.server_steps} steps ({seconds:.1f} s)"
            )
            levels.append(level)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    ks = {len(level.acceptance_per_position) for level in levels}
    if len(ks) > 1:
        raise ConfigError(f"the server's k changed between levels ({sorted(ks)}): did it restart? fit again")
    return levels, server_s


def _start_and_fixed(base) -> tuple[dict, dict]:
    """Where the fit starts (the built-in profile, or a base fit's terms) and what it holds (a base
    fit's GEMM, attention and all-reduce: a speculative server places the CPU time and the drafter)."""
    from simulator.runs.config import DEFAULT_ENGINE_OVERHEAD_MS

    start = {"cpu_ms": DEFAULT_ENGINE_OVERHEAD_MS, "gemm": 1.0, "attention": 1.0, "all_reduce": 1.0, "drafter": 1.0}
    if base is None:
        return start, {}
    start.update({name: term.value for name, term in base.terms.items()})
    return start, {name: base.terms[name].value for name in ("gemm", "attention", "all_reduce")}


def _print_fit(result, fit_s: float) -> None:
    from simulator.validation.fit import error_pct

    print(f"\nfitted on {', '.join(str(l.concurrency) for l, _ in result.fitted)} in flight ({result.evaluations} simulations, {fit_s:.1f} s):")
    for name, unit in TERM_UNITS.items():
        value, sigma = result.terms[name], result.uncertainty[name]
        placed = f"+- {sigma:.3f}" if result.placed[name] else f"not placed: {result.notes.get(name, '')}"
        print(f"  {name:<11} {value:8.3f}{unit} {placed}")
    # measured, and the simulation's error; ITL and steps (the server's step histograms) are checks, not fitted
    print(f"  {'in flight':>9}  {'TPOT ms':>15}  {'output tok/s':>17}  {'ITL ms':>15}  {'steps':>13}")
    for tag, rows in (("fit", result.fitted), ("held out", result.held_out)):
        for level, sim in rows:
            m = level.measured()
            itl = f"{level.itl_ms:7.2f} {error_pct(sim['itl'], level.itl_ms):+6.1f}%" if level.itl_ms else f"{'-':>15}"
            steps = f"{level.server_steps:6d} {error_pct(sim['steps'], level.server_steps):+5.0f}%" if level.server_steps else f"{'-':>13}"
            print(
                f"  {level.concurrency:>9}  {m['tpot']:7.2f} {error_pct(sim['tpot'], m['tpot']):+6.1f}%  "
                f"{m['throughput']:9.0f} {error_pct(sim['throughput'], m['throughput']):+6.1f}%  {itl}  {steps}   {tag}"
            )
    fitted_on = ", ".join(str(l.concurrency) for l, _ in result.fitted)
    predicted = ", ".join(str(l.concurrency) for l, _ in result.held_out)
    print(f"\nfitted on {fitted_on}; predicts {predicted} in flight within {result.held_out_error_pct:.1f}% (TPOT and throughput)")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _write(out: Path, result, base, fixed: dict, engine: str, vllm_version: str, model: str, limits, args, plan, server_s: float, speculation: str) -> None:
    from simulator.profiles.fitted import FittedProfile, FittedTerm, profile_text
    from simulator.util.textio import atomic_write_text

    terms = {
        name: FittedTerm(float(result.terms[name]), result.uncertainty[name], bool(result.placed[name]), "" if result.placed[name] else result.notes.get(name, ""))
        for name in TERM_UNITS
    }
    terms.update({name: base.terms[name] for name in fixed})  # held: the base fit's, with its uncertainty
    provenance = plan.describe() | {
        "server_seconds": round(server_s, 1), "max_num_seqs": limits.max_num_seqs, "max_num_batched_tokens": limits.max_num_batched_tokens,
        "speculation": speculation, "base_profile": str(args.engine_profile or ""),
        # what each level measured, so the fit (and its held-out error) can be recomputed from the file
        "measured": [_level_record(level) for level, _ in result.fitted + result.held_out],
    }
    profile = FittedProfile(
        engine=engine, vllm_version=vllm_version, model=model, device=limits.device, tensor_parallel_size=args.tensor_parallel_size,
        terms=terms, held_out_error_pct=result.held_out_error_pct, plan=provenance,
        measured_on=datetime.now(timezone.utc).strftime("%Y-%m-%d"), warnings=tuple(result.warnings),
    )
    atomic_write_text(out, profile_text(profile))


def _level_record(level) -> dict:
    """A measured level as a TOML table (no None: TOML has no null)."""
    from dataclasses import asdict

    return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(level).items() if value is not None}
