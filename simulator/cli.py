"""``python -m simulator``: run one configuration, print its summary, optionally write results.

Flags carry the names a vLLM user already knows: ``vllm serve``'s scheduler limits
(``--max-num-seqs``, ``--max-num-batched-tokens``) and ``vllm bench serve``'s workload flags
(``--num-prompts``, ``--request-rate``, ``--max-concurrency``, ``--random-range-ratio``); the
summary uses ``vllm bench serve``'s metric names, in milliseconds.  Every default is read from
the configuration dataclasses (:mod:`simulator.config`), so the help cannot drift from a run.
Older flag names still work, with a warning, for one release.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Optional

from simulator.argtypes import DeprecatedAlias, comma_floats, finite, non_negative_int, positive_int
from simulator.config import (
    ATTENTION_MODES,
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    SCHEDULERS,
    VLLM_DEFAULTS_VERSION,
    ClosedLoopWorkload,
    ExplicitWorkload,
    PoissonWorkload,
    RunConfig,
    SpeculationConfig,
    vllm_serve_scheduler_defaults,
)
from simulator.errors import ConfigError
from simulator.speculative.proposers.base import SpecSettings
from simulator.proposer_flags import add_proposer_flags, check_acceptance_input, draft_model_help, max_acceptance_length, options_from_args, proposer_kind, require_draft_model
from simulator.textio import atomic_write_text, check_writable_file

PROG = "python -m simulator"


def _default(cls, name: str):
    """A dataclass field's default: the single place each default is written."""
    spec = next(f for f in fields(cls) if f.name == name)
    return spec.default if spec.default is not MISSING else spec.default_factory()


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (naming the flag and the fix) and exit 2."""

    def error(self, message: str):
        print(f"error: {message}; see {PROG} --help", file=sys.stderr)
        sys.exit(2)


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" after every flag that has one; flags whose absence means something
    else (None) say so in their own help."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    wl = lambda name: _default(PoissonWorkload, name)  # noqa: E731
    sp = lambda name: _default(SpeculationConfig, name)  # noqa: E731
    rc = lambda name: _default(RunConfig, name)  # noqa: E731
    p = _Parser(
        prog=PROG,
        formatter_class=_Formatter,
        description="Simulate one (speculative) serving configuration with Vidur and print a `vllm bench serve`-style summary.",
        epilog="Deprecated aliases (they warn, and go in the next release): --requests, --rate, --concurrency, --seed, "
        "--batch-size-cap, --chunk-size.",
    )
    p.add_argument("--version", action="store_true", help="print the package version, the vidur version and the model hash, then exit")
    w = p.add_argument_group("workload (vllm bench serve's names; default: Poisson arrivals, fixed lengths)")
    w.add_argument("--num-prompts", "--requests", dest="num_prompts", metavar="N", type=positive_int, action=DeprecatedAlias, default=wl("num_requests"), help="requests to simulate")
    w.add_argument("--prompt-tokens", "--random-input-len", dest="prompt_tokens", metavar="TOKENS", type=positive_int, default=wl("prompt_tokens"), help="prompt length, tokens")
    w.add_argument("--output-tokens", "--random-output-len", dest="output_tokens", metavar="TOKENS", type=positive_int, default=wl("output_tokens"), help="output length, tokens")
    w.add_argument(
        "--random-range-ratio",
        metavar="R",
        type=finite,
        default=0.0,
        help="draw each length uniformly in [L(1-r), L(1+r)] (seeded by --workload-seed), as vllm bench serve does; "
        "0 = fixed lengths, which a closed loop runs in lockstep waves. With Poisson arrivals, r > 0 draws uncapped exponential gaps",
    )
    w.add_argument(
        "--request-rate",
        "--rate",
        dest="request_rate",
        metavar="RATE",
        type=finite,
        action=DeprecatedAlias,
        default=None,
        help=f"Poisson arrivals, requests/s (default {wl('arrival_rate'):g} unless --max-concurrency is given)",
    )
    w.add_argument(
        "--max-concurrency",
        "--concurrency",
        dest="max_concurrency",
        metavar="N",
        type=int,
        action=DeprecatedAlias,
        default=None,
        help="closed loop: N requests in flight, each replaced when it finishes (vllm bench serve --max-concurrency N "
        "--request-rate inf); the first N arrive together at t = 0, a start-up burst the summary marks",
    )
    w.add_argument("--trace", help="draw prompt/output lengths (seeded) from a Vidur trace CSV instead of the fixed lengths")
    w.add_argument("--workload-seed", metavar="SEED", type=non_negative_int, default=wl("seed"), help="seeds arrivals and drawn lengths")
    s = p.add_argument_group("speculative decoding (off unless -k or --k-schedule is given)")
    s.add_argument("-k", "--num-speculative-tokens", metavar="K", type=non_negative_int, default=sp("num_speculative_tokens"), help="proposals per verify step (0: off)")
    s.add_argument(
        "--k-schedule",
        metavar="JSON",
        help="dynamic speculation, vLLM's num_speculative_tokens_per_batch_size: JSON rows [start, end, k], k picked each "
        "step from the running batch size, k = 0 runs plain decode; e.g. '[[1,16,4],[17,64,2],[65,256,0]]'; the last row "
        "must reach --max-num-seqs (-k, if given, is the maximum; else the schedule's largest k)",
    )
    s.add_argument("--acceptance", metavar="RATE", type=finite, help="per-token acceptance rate, i.i.d. over the k positions: P(position accepted | earlier ones accepted)")
    s.add_argument(
        "--acceptance-length",
        metavar="L",
        type=finite,
        help="vLLM's mean acceptance length at -k (tokens per verify step, bonus token included, 1..k+1), as its logs and "
        "Prometheus counters report it; converted to the i.i.d. per-token rate that gives this length, which the summary prints",
    )
    s.add_argument("--acceptance-per-position", metavar="P1,P2,...", help="comma-separated P(position i accepted | earlier ones accepted), at least k values")
    s.add_argument("--acceptance-seed", "--seed", dest="acceptance_seed", metavar="SEED", type=non_negative_int, action=DeprecatedAlias, default=rc("seed"), help="seeds the acceptance draws")
    add_proposer_flags(s, default=sp("proposer"))
    s.add_argument("--ngram-overhead-ms", type=finite, default=sp("ngram_overhead_ms"), help="CPU time of one n-gram lookup per step")
    s.add_argument(
        "--draft-pass-overhead-ms",
        type=finite,
        default=sp("draft_pass_overhead_ms"),
        help="fixed cost of each pass of a proposer's network beyond its profiled layers (launches, the loop's tensor updates; docs/model.md)",
    )
    s.add_argument(
        "--proposal-probability",
        type=finite,
        default=sp("proposal_probability"),
        help="P(the proposer drafts at a decode step); < 1 for n-gram misses (the validation harness measures it)",
    )
    s.add_argument("--draft-model", help=draft_model_help())
    s.add_argument("--draft-profile-dir", help="Vidur-format profile of the draft model (default: built-in profile)")
    s.add_argument("--draft-tensor-parallel-size", type=positive_int, help="GPUs the draft runs on: 1 or the target's (default: the target's)")
    s.add_argument("--attention", choices=ATTENTION_MODES, default=sp("attention"), help="verify-attention cost: kv_once, per_token or interpolated")
    s.add_argument("--interpolation", type=finite, default=sp("interpolation"), help="lambda for --attention interpolated")
    m = p.add_argument_group(
        f"system (scheduler limits: vLLM {VLLM_DEFAULTS_VERSION}'s `vllm serve` defaults on an A100 and GPUs under 70 GiB; "
        "on H100/H200 vLLM uses 1024 and 8192, and the summary says so)"
    )
    m.add_argument("--model", default=rc("model"), help="Hugging Face model name")
    m.add_argument("--device", default=rc("device"), help="GPU, case-insensitive: a100, a100_40gb, h100, h200, b200")
    m.add_argument("--profile-dir", help="Vidur-format profile directory (default: built-in profile)")
    m.add_argument("--scheduler", choices=SCHEDULERS, default=rc("scheduler"), help="replica scheduler (Sarathi: chunked prefill, as vLLM V1)")
    m.add_argument(
        "--max-num-batched-tokens",
        "--chunk-size",
        dest="max_num_batched_tokens",
        metavar="TOKENS",
        type=positive_int,
        action=DeprecatedAlias,
        default=rc("chunk_size"),
        help="tokens per step: prompt chunks plus decode and verify tokens",
    )
    m.add_argument("--max-num-seqs", "--batch-size-cap", dest="max_num_seqs", metavar="N", type=positive_int, action=DeprecatedAlias, default=rc("batch_size_cap"), help="most requests in the running batch")
    m.add_argument("--num-kv-blocks", type=positive_int, help="KV cache blocks (default: planned from the GPU's memory, as vLLM does)")
    m.add_argument("--tensor-parallel-size", type=positive_int, default=rc("tensor_parallel_size"), help="GPUs the target is sharded over (1, 2, 4 or 8 on one node)")
    m.add_argument("--network-profile-dir", help="Vidur-format network profile with all_reduce.csv (default: the profile's own, else built-in)")
    m.add_argument("--pipeline-stages", type=positive_int, default=rc("pipeline_stages"), help="pipeline-parallel stages (only 1 is modelled)")
    m.add_argument("--quantization", choices=QUANTIZATIONS, default=None, help="vLLM's --quantization: fp8 quantizes a 16-bit checkpoint online; mxfp4 / nvfp4 name a 4-bit checkpoint's method (default: the model config's quantization_config)")
    m.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default=rc("kv_cache_dtype"), help="vLLM's --kv-cache-dtype: auto keeps the model's 16-bit dtype; fp8 stores one byte per element")
    m.add_argument("--enable-expert-parallel", action="store_true", help="mixture of experts: place whole experts on the TP group's GPUs (E / TP each) instead of splitting every expert")
    m.add_argument("--data-parallel-size", type=positive_int, default=rc("data_parallel_size"), help="mixture of experts with --enable-expert-parallel at TP 1: simulate one of N data-parallel ranks (give it one rank's load), its experts serving all N ranks' tokens")
    m.add_argument("--moe-routing-skew", type=finite, default=rc("moe_routing_skew"), help="mixture of experts: Zipf exponent of the experts' popularity (0 = uniform routing; docs/model.md)")
    m.add_argument("--engine-overhead-ms", type=finite, default=rc("engine_overhead_ms"), help="the engine's CPU time per step (0 with --no-lm-head is stock Vidur)")
    m.add_argument("--no-lm-head", action="store_true", help="do not cost the LM head and sampler (Vidur's op set has neither)")
    m.add_argument("--cache-dir", help="where trained predictors are kept (default: the user cache folder)")
    o = p.add_argument_group("output")
    o.add_argument("--json", help="write summary, configuration and provenance as JSON here")
    o.add_argument("--requests-csv", help="write per-request results as CSV here")
    o.add_argument("-v", "--verbose", action="store_true", help="show Vidur's log")
    return p


def workload_from_args(args):
    rate, concurrency, ratio = args.request_rate, args.max_concurrency, args.random_range_ratio
    if concurrency is not None and rate is not None:
        raise ConfigError(f"--max-concurrency {concurrency} and --request-rate {rate:g}: give one (closed loop or Poisson arrivals), not both")
    if concurrency is not None and concurrency <= 0:
        raise ConfigError(f"--max-concurrency {concurrency}: must be a positive number of requests in flight")
    if concurrency is None:
        rate = _default(PoissonWorkload, "arrival_rate") if rate is None else rate
        if not rate > 0:
            raise ConfigError(f"--request-rate {rate:g}: must be a positive number of requests per second")
    if not 0 <= ratio < 1:
        raise ConfigError(f"--random-range-ratio {ratio:g}: must be in [0, 1), as in vllm bench serve")
    if args.trace:
        from simulator.catalog import model_config
        from simulator.workloads import trace_workload

        if ratio:
            raise ConfigError("--random-range-ratio and --trace: the trace gives the lengths; drop one")
        context = model_config(args.model).max_model_len
        return trace_workload(args.trace, context, args.num_prompts, args.workload_seed, rate=rate, concurrency=concurrency)
    n, prompt, output, seed = args.num_prompts, args.prompt_tokens, args.output_tokens, args.workload_seed
    if concurrency is not None:
        if ratio:
            return ClosedLoopWorkload.spread(concurrency, n, prompt, output, ratio, seed)
        return ClosedLoopWorkload.fixed(concurrency, n, prompt, output)
    if ratio:
        from simulator.workloads import poisson_arrivals, random_lengths

        return ExplicitWorkload(poisson_arrivals(n, rate, seed), *random_lengths(n, prompt, output, ratio, seed))
    return PoissonWorkload(n, prompt, output, rate, seed)


def _schedule_from_args(args):
    if args.k_schedule is None:
        return None
    from simulator.speculative.k_schedule import parse_schedule

    k = args.num_speculative_tokens
    return parse_schedule(args.k_schedule, k if k > 0 else None, "--k-schedule")


def acceptance_from_args(args) -> tuple[Optional[float], Optional[tuple], Optional[str]]:
    """(acceptance_rate, acceptance_per_position, what the run used in words), checked as flags.

    An acceptance without speculation, speculation without an acceptance, two acceptances, or a
    length outside [1, k + 1] is refused here, naming the flags rather than config fields.
    """
    k = args.num_speculative_tokens
    speculating = k > 0 or args.k_schedule is not None
    given = [
        (flag, value)
        for flag, value in (
            ("--acceptance", args.acceptance),
            ("--acceptance-length", args.acceptance_length),
            ("--acceptance-per-position", args.acceptance_per_position),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(flag for flag, _ in given)}: give one acceptance, not {len(given)}")
    if given and not speculating:
        flag, value = given[0]
        raise ConfigError(
            f"{flag} {value} without speculation (-k {k}): add -k N (N >= 1 proposals per step) or --k-schedule, "
            f"or drop {flag} to run without speculation"
        )
    if not speculating:
        return None, None, None
    if not given:
        shown = f"-k {k}" if k > 0 else "--k-schedule"
        raise ConfigError(
            f"{shown}: speculation needs an acceptance; give --acceptance RATE (per token), --acceptance-length L "
            f"(vLLM's mean acceptance length at -k) or --acceptance-per-position P1,P2,..."
        )
    flag, value = given[0]
    kind = proposer_kind(args)
    check_acceptance_input(kind, {"--acceptance": "rate", "--acceptance-per-position": "per_position", "--acceptance-length": "length"}[flag])
    if flag == "--acceptance":
        if not 0 <= value <= 1:
            raise ConfigError(f"--acceptance {value:g}: must be a per-token rate in [0, 1]; a mean acceptance length goes in --acceptance-length")
        return value, None, f"per-token rate {value:.4g}, i.i.d. over positions (--acceptance)"
    if flag == "--acceptance-per-position":
        vector = comma_floats(value, "--acceptance-per-position", example="0.8,0.7,0.6")
        bad = [x for x in vector if not 0 <= x <= 1]
        if bad:
            raise ConfigError(f"--acceptance-per-position {value}: {bad[0]:g} is not a rate in [0, 1]")
        needed = k if k > 0 else max(row[2] for row in _schedule_from_args(args))
        if len(vector) < needed:
            raise ConfigError(f"--acceptance-per-position {value}: {len(vector)} rate(s), but k = {needed} proposals need one per position")
        return None, vector, "per-position rates " + ", ".join(f"{x:.4g}" for x in vector) + " (--acceptance-per-position)"
    from simulator.speculative.acceptance_convert import iid_rate_from_length

    if k == 0:
        raise ConfigError(f"--acceptance-length {value:g}: give -k, the number of proposals it was measured at")
    options = options_from_args(args, kind)
    top = max_acceptance_length(kind, k, options)
    if not 1 <= value <= top:
        if kind.tree(SpecSettings(k=k, options=kind.resolve_options(dict(options)))) is not None:  # its depth or its nodes bound a step
            raise ConfigError(
                f"--acceptance-length {value:g}: a tree of depth {k} (-k) verifying {option_value(args, kind, 'num_draft_tokens')} tokens "
                f"(--speculative-num-draft-tokens, N + 1) advances at most {top} tokens a step; give an accept length in [1, {top}]"
            )
        raise ConfigError(
            f"--acceptance-length {value:g} at -k {k}: must be in [1, k + 1 = {k + 1}] (vLLM's mean acceptance length "
            f"counts the bonus token); a per-token rate goes in --acceptance"
        )
    rate = iid_rate_from_length(value, k)
    return rate, None, (
        f"per-token rate {rate:.4f}, i.i.d. over positions: the rate whose mean acceptance length at k = {k} is "
        f"{value:g} (--acceptance-length)"
    )


def option_value(args, kind, name: str):
    return kind.resolve_options(dict(options_from_args(args, kind)))[name]


def config_from_args(args) -> tuple[RunConfig, Optional[str]]:
    """The run's configuration and, when speculating, the acceptance it uses in words."""
    kind = proposer_kind(args)
    options = options_from_args(args, kind)
    if args.num_speculative_tokens > 0 or args.k_schedule:
        require_draft_model(kind, args.draft_model)
        if args.k_schedule is not None and kind.tree(SpecSettings(k=1, options=kind.resolve_options(dict(options)))) is not None:
            raise ConfigError(f"--k-schedule: --proposer {kind.name} drafts a tree at one depth ({kind.engine} has no k schedule); give -k")
    rate, vector, acceptance_note = acceptance_from_args(args)
    for flag, value in (("--proposal-probability", args.proposal_probability), ("--interpolation", args.interpolation)):
        if not 0 <= value <= 1:
            raise ConfigError(f"{flag} {value:g}: must be in [0, 1]")
    for flag, value in (("--engine-overhead-ms", args.engine_overhead_ms), ("--ngram-overhead-ms", args.ngram_overhead_ms), ("--draft-pass-overhead-ms", args.draft_pass_overhead_ms)):
        if value < 0:
            raise ConfigError(f"{flag} {value:g}: must be >= 0 milliseconds")
    for flag, path in (("--profile-dir", args.profile_dir), ("--draft-profile-dir", args.draft_profile_dir), ("--network-profile-dir", args.network_profile_dir)):
        if path is not None and not Path(path).is_dir():
            raise ConfigError(f"{flag} {path}: not a directory; give a Vidur-format profile folder, or drop the flag for the built-in profile")
    if args.k_schedule is not None:
        from simulator.speculative.k_schedule import parse_schedule

        last = parse_schedule(args.k_schedule, None, "--k-schedule")[-1]
        if last[1] < args.max_num_seqs:
            raise ConfigError(
                f"--k-schedule: its last row {list(last)} ends at batch size {last[1]}, below --max-num-seqs {args.max_num_seqs}; "
                f"extend it to {args.max_num_seqs} or pass --max-num-seqs {last[1]}"
            )
    config = RunConfig(
        workload=workload_from_args(args),
        speculation=SpeculationConfig(
            num_speculative_tokens=args.num_speculative_tokens,
            k_schedule=_schedule_from_args(args),
            acceptance_rate=rate,
            acceptance_per_position=vector,
            proposer=kind.name,
            options=options,
            ngram_overhead_ms=args.ngram_overhead_ms,
            draft_pass_overhead_ms=args.draft_pass_overhead_ms,
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
        chunk_size=args.max_num_batched_tokens,
        batch_size_cap=args.max_num_seqs,
        num_kv_blocks=args.num_kv_blocks,
        tensor_parallel_size=args.tensor_parallel_size,
        network_profile_dir=args.network_profile_dir,
        pipeline_stages=args.pipeline_stages,
        seed=args.acceptance_seed,
        cache_dir=args.cache_dir,
        engine_overhead_ms=args.engine_overhead_ms,
        lm_head=not args.no_lm_head,
        quantization=args.quantization,
        kv_cache_dtype=args.kv_cache_dtype,
        expert_parallel=args.enable_expert_parallel,
        moe_routing_skew=args.moe_routing_skew,
        data_parallel_size=args.data_parallel_size,
    )
    return config, acceptance_note


def _json_safe(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


WIDTH = 50


def _rule(title: str = "", fill: str = "-") -> str:
    return f"{' ' + title + ' ' if title else '':{fill}^{WIDTH}}"


def _line(label: str, value) -> str:
    if isinstance(value, float):
        value = "n/a" if math.isnan(value) else f"{value:.2f}"
    return f"{label:<40} {value}"


LATENCY_SECTIONS = (
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2e", "E2EL", "End-to-end Latency"),
)


def limits_note(config: RunConfig) -> Optional[str]:
    """A line when the run's scheduler limits are not what `vllm serve` would pick on its GPU."""
    seqs, tokens = vllm_serve_scheduler_defaults(config.device)
    if (config.batch_size_cap, config.chunk_size) == (seqs, tokens):
        return None
    from simulator.catalog import model_config

    note = f"note: vllm serve {VLLM_DEFAULTS_VERSION} on {config.device} defaults to --max-num-seqs {seqs} --max-num-batched-tokens {tokens}"
    context = model_config(config.model).max_model_len
    if seqs + tokens > context:
        return note + f", which the simulator cannot model for {config.model}: a step's tokens must fit its context of {context}"
    return note + "; pass those to simulate an untuned server"


def format_summary(result, acceptance_note: Optional[str] = None) -> str:
    """The summary in ``vllm bench serve``'s layout and names (latencies in ms), then the
    speculation and the simulator's own figures."""
    s, config = result.summary, result.config
    lines = [
        _rule("Simulated Serving Result", "="),
        _line("Successful requests:", s.num_requests),
        _line("Benchmark duration (s):", s.makespan_s),
        _line("Total input tokens:", s.total_input_tokens),
        _line("Total generated tokens:", s.total_output_tokens),
        _line("Request throughput (req/s):", s.request_throughput_req_s),
        _line("Output token throughput (tok/s):", s.throughput_tok_s),
        _line("Total Token throughput (tok/s):", s.total_token_throughput_tok_s),
    ]
    for key, short, title in LATENCY_SECTIONS:
        lines.append(_rule(title))
        for stat, label in (("mean", "Mean"), ("p50", "Median"), ("p90", "P90"), ("p99", "P99")):
            lines.append(_line(f"{label} {short} (ms):", s[f"{key}_{stat}_s"] * 1e3))
    lines.append(_rule("Speculative Decoding"))
    spec = config.speculation
    if not spec.enabled:
        lines.append("speculation off")
    else:
        k = f"k = {spec.num_speculative_tokens}" + (f" at most (schedule {[list(r) for r in spec.k_schedule]})" if spec.k_schedule else "")
        lines.append(f"{spec.proposer}, {k}, mean scheduled k {s.mean_scheduled_k:.2f}")
        if acceptance_note:
            lines.append(f"ran with: {acceptance_note}")
        if s.verify_steps == 0:
            lines.append("no drafts were proposed (the k schedule chose k = 0 at every step)")
        else:
            lines += [
                _line("Acceptance rate (%):", 100 * s.realized_acceptance_rate),
                _line("Acceptance length:", s.mean_acceptance_length),
                _line("Drafts:", s.verify_steps),
                _line("Draft tokens:", s.proposed_tokens),
                _line("Accepted tokens:", s.accepted_tokens),
                "(acceptance rate = accepted / draft tokens, as vLLM reports it: below the per-token rate, because a "
                "rejection ends the chain and the positions after it count as rejected)",
            ]
    lines.append(_rule("Simulator"))
    lines.append(f"peak KV {s.peak_kv_blocks} / {s.kv_blocks_total} blocks ({100 * s.peak_kv_fraction:.1f}%), preemptions {s.preemptions}")
    lines.append(f"max_num_seqs {config.batch_size_cap}, max_num_batched_tokens {config.chunk_size}")
    note = limits_note(config)
    if note:
        lines.append(note)
    burst = result.startup_burst
    if burst:
        frame = result.requests.sort_values("request_id")
        first, rest = frame["ttft_s"].iloc[:burst], frame["ttft_s"].iloc[burst:]
        rest_text = f"{rest.median() * 1e3:.2f} ms for the other {len(rest)}" if len(rest) else "no other requests"
        lines.append(
            f"start-up burst: the first {burst} requests arrive together at t = 0 and are included above (as in vllm bench serve); "
            f"their median TTFT is {first.median() * 1e3:.2f} ms, {rest_text} (column startup_burst in --requests-csv)"
        )
    lines.append("provenance: " + ", ".join(f"{k}={v}" for k, v in result.provenance.items() if k != "profile_sha256"))
    lines.append(_rule(fill="="))
    return "\n".join(lines)


def requests_table(result):
    """Per-request rows, with ``startup_burst`` marking a closed loop's first ``concurrency``."""
    frame = result.requests.copy()
    frame["startup_burst"] = frame["request_id"] < result.startup_burst
    return frame


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from simulator.versions import version_text

        print(version_text())
        return 0
    if not args.verbose:
        from simulator.progress import quiet_vidur

        quiet_vidur()
    try:
        config, acceptance_note = config_from_args(args)
        for option, path in (("--json", args.json), ("--requests-csv", args.requests_csv)):
            if path is not None:
                check_writable_file(path, option)
        from simulator import run

        result = run(config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        payload = {
            "summary": {k: _json_safe(v) for k, v in result.summary.as_dict().items()},
            "acceptance_input": acceptance_note,
            "startup_burst_requests": result.startup_burst,
            "config": config.to_dict(),
            "provenance": result.provenance,
        }
        atomic_write_text(args.json, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    if args.requests_csv:
        atomic_write_text(args.requests_csv, requests_table(result).to_csv(index=False, float_format="%.9g"))
    print(format_summary(result, acceptance_note))  # after the files: a closed pipe on stdout loses no results
    return 0
