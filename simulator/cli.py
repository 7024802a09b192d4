"""``python -m simulator``: run one configuration, print its summary, optionally write results."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from pathlib import Path

from simulator.config import ClosedLoopWorkload, PoissonWorkload, RunConfig, SpeculationConfig
from simulator.errors import ConfigError
from simulator.textio import atomic_write_text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m simulator", description="Simulate one (speculative) serving configuration with Vidur.")
    p.add_argument("--version", action="store_true", help="print the package version, the vidur version and the model hash, then exit")
    w = p.add_argument_group("workload (default: Vidur's Poisson generator at 4 req/s, fixed lengths)")
    w.add_argument("--requests", type=int, default=300)
    w.add_argument("--prompt-tokens", type=int, default=1024)
    w.add_argument("--output-tokens", type=int, default=256)
    w.add_argument("--rate", type=float, default=None, help="Poisson arrival rate, requests/s (default 4)")
    w.add_argument("--concurrency", type=int, default=None, help="closed loop: N requests in flight, each replaced when it finishes")
    w.add_argument("--trace", help="draw prompt/output lengths (seeded) from a Vidur trace CSV instead of the fixed lengths")
    w.add_argument("--workload-seed", type=int, default=42)
    s = p.add_argument_group("speculative decoding (k = 0: off)")
    s.add_argument("-k", "--num-speculative-tokens", type=int, default=0)
    s.add_argument(
        "--k-schedule",
        help="dynamic speculation, vLLM's num_speculative_tokens_per_batch_size: JSON rows [start, end, k], k picked each "
        "step from the running batch size, k = 0 runs plain decode; e.g. '[[1,16,4],[17,64,2],[65,512,0]]' "
        "(-k, if given, is the maximum; default: the schedule's largest k)",
    )
    s.add_argument("--acceptance", type=float, help="i.i.d. per-position acceptance rate")
    s.add_argument("--acceptance-per-position", help="comma-separated P(pos i accepted | earlier accepted)")
    s.add_argument("--proposer", default="ngram", help="ngram, draft (a draft model), eagle or eagle3 (an EAGLE head named by --draft-model)")
    s.add_argument("--ngram-overhead-ms", type=float, default=SpeculationConfig.ngram_overhead_ms)
    s.add_argument(
        "--proposal-probability",
        type=float,
        default=1.0,
        help="P(the proposer drafts at a decode step); < 1 for n-gram misses (the validation harness measures it)",
    )
    s.add_argument("--draft-model", help="e.g. JackFram/llama-68m, or an EAGLE head such as yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
    s.add_argument("--draft-profile-dir", help="Vidur-format profile of the draft model (default: built-in profile)")
    s.add_argument("--draft-tensor-parallel-size", type=int, help="GPUs the draft runs on: 1 or the target's (default: the target's)")
    s.add_argument("--attention", default="kv_once", help="kv_once, per_token or interpolated")
    s.add_argument("--interpolation", type=float, default=0.5, help="lambda for --attention interpolated")
    m = p.add_argument_group("system")
    m.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    m.add_argument("--device", default="a100")
    m.add_argument("--profile-dir", help="Vidur-format profile directory (default: built-in profile)")
    m.add_argument("--scheduler", default="sarathi")
    m.add_argument("--chunk-size", type=int, default=512)
    m.add_argument("--batch-size-cap", type=int, default=128)
    m.add_argument("--num-kv-blocks", type=int)
    m.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs the target is sharded over (1, 2, 4 or 8 on one node)")
    m.add_argument("--network-profile-dir", help="Vidur-format network profile with all_reduce.csv (default: the profile's own, else built-in)")
    m.add_argument("--pipeline-stages", type=int, default=1)
    m.add_argument("--seed", type=int, default=0, help="acceptance draws")
    m.add_argument(
        "--engine-overhead-ms",
        type=float,
        default=RunConfig.engine_overhead_ms,
        help=f"the engine's CPU time per step (default {RunConfig.engine_overhead_ms:g}; 0 with --no-lm-head is stock Vidur)",
    )
    m.add_argument("--no-lm-head", action="store_true", help="do not cost the LM head and sampler (Vidur's op set has neither)")
    m.add_argument("--cache-dir")
    o = p.add_argument_group("output")
    o.add_argument("--json", help="write summary, configuration and provenance as JSON here")
    o.add_argument("--requests-csv", help="write per-request results as CSV here")
    o.add_argument("-v", "--verbose", action="store_true", help="show Vidur's log")
    return p


def _parse_vector(text):
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ConfigError(f"--acceptance-per-position {text!r}: not a comma-separated list of numbers") from exc


def workload_from_args(args):
    if args.concurrency is not None and args.rate is not None:
        raise ConfigError(f"--concurrency {args.concurrency} and --rate {args.rate:g}: give one (closed loop or Poisson arrivals), not both")
    if args.concurrency is not None and args.concurrency <= 0:
        raise ConfigError(f"--concurrency {args.concurrency}: must be a positive number of requests in flight")
    if args.trace:
        from simulator.catalog import model_config
        from simulator.workloads import trace_workload

        rate = None if args.concurrency is not None else (4.0 if args.rate is None else args.rate)
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise ConfigError(f"--rate {rate}: must be a positive number of requests per second")
        context = model_config(args.model).max_model_len
        return trace_workload(args.trace, context, args.requests, args.workload_seed, rate=rate, concurrency=args.concurrency)
    if args.concurrency is not None:
        return ClosedLoopWorkload.fixed(args.concurrency, args.requests, args.prompt_tokens, args.output_tokens)
    rate = 4.0 if args.rate is None else args.rate
    return PoissonWorkload(args.requests, args.prompt_tokens, args.output_tokens, rate, args.workload_seed)


def _schedule_from_args(args):
    if args.k_schedule is None:
        return None
    from simulator.speculative.k_schedule import parse_schedule

    k = args.num_speculative_tokens
    return parse_schedule(args.k_schedule, k if isinstance(k, int) and k > 0 else None, "--k-schedule")


def config_from_args(args) -> RunConfig:
    return RunConfig(
        workload=workload_from_args(args),
        speculation=SpeculationConfig(
            num_speculative_tokens=args.num_speculative_tokens,
            k_schedule=_schedule_from_args(args),
            acceptance_rate=args.acceptance,
            acceptance_per_position=_parse_vector(args.acceptance_per_position),
            proposer=args.proposer,
            ngram_overhead_ms=args.ngram_overhead_ms,
            proposal_probability=args.proposal_probability,
            draft_model=args.draft_model,
            draft_profile_dir=args.draft_profile_dir,
            draft_tensor_parallel_size=args.draft_tensor_parallel_size,
            attention=args.attention,
            interpolation=args.interpolation,
        ),
        model=args.model,
        device=args.device,
        profile_dir=args.profile_dir,
        scheduler=args.scheduler,
        chunk_size=args.chunk_size,
        batch_size_cap=args.batch_size_cap,
        num_kv_blocks=args.num_kv_blocks,
        tensor_parallel_size=args.tensor_parallel_size,
        network_profile_dir=args.network_profile_dir,
        pipeline_stages=args.pipeline_stages,
        seed=args.seed,
        cache_dir=args.cache_dir,
        engine_overhead_ms=args.engine_overhead_ms,
        lm_head=not args.no_lm_head,
    )


def _json_safe(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def format_summary(result) -> str:
    s = result.summary
    ms = lambda key: f"{s[key] * 1e3:9.2f} ms"  # noqa: E731
    lines = [f"{'metric':<8}{'p50':>13}{'p90':>13}{'p99':>13}"]
    for name in ("ttft", "tpot", "e2e"):
        lines.append(f"{name.upper():<8}" + "".join(f"{ms(f'{name}_p{p}_s'):>13}" for p in (50, 90, 99)))
    lines += [
        f"throughput          {s['throughput_tok_s']:.1f} output tokens/s over {s['makespan_s']:.2f} s",
        f"acceptance rate     {s['acceptance_rate']:.4f}  (accepted {s['accepted_tokens']} / proposed {s['proposed_tokens']})",
        f"mean accept length  {s['mean_acceptance_length']:.4f}  over {s['verify_steps']} verify steps",
        f"peak KV             {s['peak_kv_blocks']} / {s['kv_blocks_total']} blocks ({100 * s['peak_kv_fraction']:.1f}%), preemptions {s['preemptions']}",
        "provenance          " + ", ".join(f"{k}={v}" for k, v in result.provenance.items() if k != "profile_sha256"),
    ]
    return "\n".join(lines)


def _check_writable(option: str, path) -> None:
    """Fail before simulating, not after, when an output cannot be written."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{option} {path}: is a directory")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise ConfigError(f"{option} {path}: directory {parent} does not exist or is not writable")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from simulator.versions import version_text

        print(version_text())
        return 0
    if not args.verbose:
        logging.disable(logging.INFO)
    try:
        config = config_from_args(args)
        for option, path in (("--json", args.json), ("--requests-csv", args.requests_csv)):
            _check_writable(option, path)
        from simulator import run

        result = run(config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_summary(result))
    if args.json:
        payload = {"summary": {k: _json_safe(v) for k, v in result.summary.items()}, "config": config.to_dict(), "provenance": result.provenance}
        atomic_write_text(args.json, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    if args.requests_csv:
        atomic_write_text(args.requests_csv, result.requests.to_csv(index=False, float_format="%.9g"))
    return 0
