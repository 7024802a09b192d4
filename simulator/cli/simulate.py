"""``python -m simulator``: run one configuration, print its summary, optionally write results.

Flags carry the names a vLLM user already knows: ``vllm serve``'s scheduler limits
(``--max-num-seqs``, ``--max-num-batched-tokens``, defaulting to what ``vllm serve`` of
``--vllm-version`` picks on ``--device``: :mod:`simulator.cli.vllm_serve`) and ``--speculative-config``
JSON (:mod:`simulator.cli.speculative_config`), and ``vllm bench serve``'s workload flags
(``--dataset-name random``, ``--num-prompts``, ``--request-rate``, inf included,
``--max-concurrency``, ``--random-range-ratio``); the summary uses ``vllm bench serve``'s metric
names, in milliseconds, and ends with the ``vllm serve`` line of what was simulated.  The other
defaults are read from the configuration dataclasses (:mod:`simulator.runs.config`), so the help cannot
drift from a run.  A run goes through the result cache (:mod:`simulator.runs.cache`): asking again
re-simulates nothing.  Older flag names still work, with a warning, for one release; bad input
and Ctrl-C fail in one line (:mod:`simulator.cli.command`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Optional

from simulator.cli import command

from simulator.cli import vllm_serve
from simulator.cli.argtypes import DeprecatedAlias, Synonyms, comma_floats, finite, non_negative_int, positive_int, request_rate
from simulator.runs.config import (
    ATTENTION_MODES,
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    SCHEDULERS,
    ClosedLoopWorkload,
    ExplicitWorkload,
    PoissonWorkload,
    RunConfig,
    SpeculationConfig,
)
from simulator.util.errors import ConfigError
from simulator.speculative.proposers.base import SpeculationSettings
from simulator.cli.proposer_flags import add_proposer_flags, check_acceptance_input, draft_model_help, max_acceptance_length, options_from_args, proposer_kind, require_draft_model
from simulator.cli.catalog_help import device_help, model_help
from simulator.util.textio import atomic_write_text, check_writable_file

PROG = "python -m simulator"
DATASETS = ("random",)  # vllm bench serve's --dataset-name values the simulator draws lengths for
FLAGS = command.command_flags()  # a refusal's config fields, as this command's flags


def _default(cls, name: str):
    """A dataclass field's default: the single place each default is written."""
    spec = next(f for f in fields(cls) if f.name == name)
    return spec.default if spec.default is not MISSING else spec.default_factory()


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
    p = command.Parser(
        prog=PROG,
        formatter_class=_Formatter,
        description="Simulate one (speculative) serving configuration with Vidur and print a `vllm bench serve`-style summary.",
        epilog="Seeds: --workload-seed seeds arrivals and drawn lengths, --acceptance-seed the acceptance draws (the same in "
        "python -m simulator.paysoff). Deprecated aliases (they warn, and go in the next release): --requests, --rate, --concurrency, "
        "--seed (= --acceptance-seed), --batch-size-cap, --chunk-size. Exit codes: 0 done, 2 bad input (one line, nothing written), "
        "130 interrupted (nothing written). Results are cached by content (VIDUR_SPECDEC_NO_RUN_CACHE=1 re-simulates).",
    )
    p.add_argument("--version", action="store_true", help="print the package version, the vidur version and the model hash, then exit")
    w = p.add_argument_group(f"workload (vllm bench serve's names; default: Poisson arrivals, {command.DEFAULT_WORKLOAD.describe()}, as paysoff draws)")
    w.add_argument("--num-prompts", "--requests", dest="num_prompts", metavar="N", type=positive_int, action=DeprecatedAlias, default=wl("num_requests"), help="requests to simulate")
    w.add_argument(
        "--dataset-name",
        metavar="NAME",
        help="vllm bench serve's dataset: random (the default) draws lengths from --random-input-len, --random-output-len and "
        "--random-range-ratio; for other datasets give their lengths as a Vidur trace (--trace)",
    )
    w.add_argument("--prompt-tokens", "--random-input-len", dest="prompt_tokens", metavar="TOKENS", type=positive_int, action=Synonyms, default=command.DEFAULT_WORKLOAD.prompt_tokens, help="prompt length, tokens")
    w.add_argument("--output-tokens", "--random-output-len", dest="output_tokens", metavar="TOKENS", type=positive_int, action=Synonyms, default=command.DEFAULT_WORKLOAD.output_tokens, help="output length, tokens")
    w.add_argument(
        "--random-range-ratio",
        metavar="R",
        type=finite,
        default=None,
        help=f"draw each length uniformly in [L(1-r), L(1+r)] (seeded by --workload-seed), as vllm bench serve does (default: "
        f"{command.DEFAULT_WORKLOAD.closed_loop_range_ratio:g} in a closed loop, 0 with Poisson arrivals or --trace, as paysoff draws); "
        "0 = fixed lengths, which a closed loop runs in lockstep waves. With Poisson arrivals, r > 0 draws uncapped exponential gaps",
    )
    w.add_argument(
        "--request-rate",
        "--rate",
        dest="request_rate",
        metavar="RATE",
        type=request_rate,
        action=DeprecatedAlias,
        default=None,
        help=f"Poisson arrivals, requests/s, or inf: every request at once at t = 0, as vllm bench serve sends them "
        f"(default {wl('arrival_rate'):g} unless --max-concurrency is given)",
    )
    w.add_argument(
        "--max-concurrency",
        "--concurrency",
        dest="max_concurrency",
        metavar="N",
        type=positive_int,
        action=DeprecatedAlias,
        default=None,
        help="closed loop: N requests in flight, each replaced when it finishes (vllm bench serve --max-concurrency N "
        "--request-rate inf; --request-rate may be left out or given as inf); the first N arrive together at t = 0, a start-up "
        "burst the summary marks. Refused above --max-num-seqs (the rest would queue at the server)",
    )
    w.add_argument("--trace", help="draw prompt/output lengths (seeded) from a Vidur trace CSV instead of the fixed lengths")
    w.add_argument("--workload-seed", metavar="SEED", type=non_negative_int, default=wl("seed"), help="seeds arrivals and drawn lengths")
    s = p.add_argument_group("speculative decoding (off unless --speculative-config, -k or --k-schedule is given)")
    s.add_argument(
        "--speculative-config",
        metavar="JSON",
        help="vLLM's --speculative-config, as you pass it to vllm serve: method, model, num_speculative_tokens, draft_tensor_parallel_size, "
        "num_speculative_tokens_per_batch_size and the method's keys (prompt_lookup_max/min, suffix_decoding_*, parallel_drafting); "
        'e.g. \'{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}\'. It sets --proposer, -k, --draft-model, '
        "--draft-tensor-parallel-size, --k-schedule and the option flags, so those are refused with it; the acceptance is still a flag",
    )
    s.add_argument("-k", "--num-speculative-tokens", metavar="K", type=non_negative_int, action=Synonyms, default=sp("num_speculative_tokens"),
                   help="num_speculative_tokens: proposals per verify step (0: off); --acceptance-length is the length measured at it")
    s.add_argument(
        "--k-schedule",
        metavar="JSON",
        action=Synonyms,
        help="dynamic speculation, vLLM's num_speculative_tokens_per_batch_size: JSON rows [start, end, k], k picked each "
        "step from the running batch size, k = 0 runs plain decode; e.g. '[[1,16,4],[17,64,2],[65,256,0]]'; the last row "
        "must reach --max-num-seqs (-k, if given, is the maximum; else the schedule's largest k)",
    )
    s.add_argument(
        "--adaptive-verification",
        action="store_true",
        help="vLLM's enable_adaptive_verification (0.30.0, Model Runner V2: EAGLE, EAGLE-3, MTP, DFlash): each step verifies the "
        "draft budget that start-up cost tables pick, the drafter still drafting -k; not with --k-schedule",
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
    s.add_argument(
        "--acceptance-seed", "--seed", dest="acceptance_seed", metavar="SEED", type=non_negative_int, action=DeprecatedAlias, default=rc("seed"),
        note="it seeds the acceptance draws; the workload's seed is --workload-seed", help="seeds the acceptance draws",
    )
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
    s.add_argument("--draft-model", action=Synonyms, help=draft_model_help())
    s.add_argument("--draft-profile-dir", help="Vidur-format profile of the draft model (default: built-in profile)")
    s.add_argument("--draft-tensor-parallel-size", type=positive_int, action=Synonyms, help="GPUs the draft runs on: 1 or the target's (default: the target's)")
    s.add_argument("--attention", choices=ATTENTION_MODES, default=sp("attention"), help="verify-attention cost: kv_once, per_token or interpolated")
    s.add_argument("--interpolation", type=finite, default=sp("interpolation"), help="lambda for --attention interpolated")
    m = p.add_argument_group("system (the server: vllm serve's flags, and the GPU it runs on)")
    m.add_argument("--model", default=rc("model"), help=model_help())
    m.add_argument("--served-model-name", metavar="NAME", help="the model the printed vllm serve line names (default: a local config.json's _name_or_path, else --model)")
    m.add_argument("--device", default=rc("device"), help=device_help())
    m.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        default=None,
        help=f"the vLLM release the server runs (from {vllm_serve.OLDEST_VERSION}; with --engine-profile, the one it fitted): "
        "its scheduler defaults and its engine profile (CUDA graphs, async scheduling; simulator/profiles/engines.toml: the newest at or below it) "
        f"(default: {vllm_serve.default_version()})",
    )
    m.add_argument(
        "--engine-profile",
        metavar="FILE",
        help="a profile fitted to your own server (python -m simulator.validation fit): its vLLM version, CPU time per step (it replaces "
        "--engine-overhead-ms) and kernel scales; --model, --device and --tensor-parallel-size must be the deployment it measured",
    )
    m.add_argument("--profile-dir", help="Vidur-format profile directory (default: built-in profile)")
    m.add_argument("--scheduler", choices=SCHEDULERS, default=rc("scheduler"), help="replica scheduler (Sarathi: chunked prefill, as vLLM V1)")
    m.add_argument(
        "--max-num-batched-tokens",
        "--chunk-size",
        dest="max_num_batched_tokens",
        metavar="TOKENS",
        type=positive_int,
        action=DeprecatedAlias,
        default=None,
        help="tokens per step: prompt chunks plus decode and verify tokens (default: what vllm serve of --vllm-version picks on "
        "--device: 8192 on GPUs of 70 GiB or more other than the A100 (16384 on 160 GiB or more from vLLM 0.28.0), else 2048; "
        "the summary says which)",
    )
    m.add_argument(
        "--max-num-seqs", "--batch-size-cap", dest="max_num_seqs", metavar="N", type=positive_int, action=DeprecatedAlias, default=None,
        help="most requests in the running batch (default: vllm serve's on --device: 1024 on GPUs of 70 GiB or more other than the A100, else 256)",
    )
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


def workload_from_args(args, limits: Optional[vllm_serve.Limits] = None):
    """The workload the flags describe, as vllm bench serve sends it: Poisson at --request-rate, every
    request at once (--request-rate inf), or a closed loop of --max-concurrency requests."""
    rate, concurrency, ratio = args.request_rate, args.max_concurrency, args.random_range_ratio
    if args.dataset_name is not None and args.dataset_name not in DATASETS:
        raise ConfigError(
            f"--dataset-name {args.dataset_name}: the simulator draws vllm bench serve's random dataset (--dataset-name random); "
            "for another dataset, give its requests' lengths as a Vidur trace (--trace FILE with num_prefill_tokens, num_decode_tokens)"
        )
    if args.dataset_name is not None and args.trace:
        raise ConfigError(f"--dataset-name {args.dataset_name} and --trace: the trace gives the lengths; drop one")
    if concurrency is not None and rate is not None and math.isfinite(rate):
        raise ConfigError(
            f"--max-concurrency {concurrency} and --request-rate {rate:g}: arrivals both paced and capped are not modelled; leave "
            "--request-rate out (or give inf) for the closed loop, or drop --max-concurrency for Poisson arrivals"
        )
    if concurrency is not None and limits is not None:
        vllm_serve.check_concurrency([concurrency], limits, "--max-concurrency")
    if concurrency is None and rate is not None and math.isinf(rate):
        concurrency = args.num_prompts  # every request at once: a closed loop that never refills
    if concurrency is None:
        rate = _default(PoissonWorkload, "arrival_rate") if rate is None else rate
    if ratio is None:  # the shared default: spread in a closed loop, fixed otherwise (a trace gives its own lengths)
        ratio = command.DEFAULT_WORKLOAD.closed_loop_range_ratio if concurrency is not None and not args.trace else 0.0
    if not 0 <= ratio < 1:
        raise ConfigError(f"--random-range-ratio {ratio:g}: must be in [0, 1), as in vllm bench serve")
    if args.trace:
        from simulator.vidur.models import model_config
        from simulator.runs.workloads import trace_workload

        if ratio:
            raise ConfigError("--random-range-ratio and --trace: the trace gives the lengths; drop one")
        context = model_config(args.model).max_model_len
        return trace_workload(args.trace, context, args.num_prompts, args.workload_seed, rate=None if concurrency else rate, concurrency=concurrency)
    n, prompt, output, seed = args.num_prompts, args.prompt_tokens, args.output_tokens, args.workload_seed
    if concurrency is not None:
        if ratio:
            from simulator.runs.workloads import spread_closed_loop

            return spread_closed_loop(concurrency, n, prompt, output, ratio, seed)
        return ClosedLoopWorkload.fixed(concurrency, n, prompt, output)
    if ratio:
        from simulator.runs.workloads import poisson_arrivals, random_lengths

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
    if args.adaptive_verification and not speculating:
        raise ConfigError(f"--adaptive-verification without speculation (-k {k}): add -k N, or drop it")
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
        if kind.tree(SpeculationSettings(k=k, options=kind.resolve_options(dict(options)))) is not None:  # its depth or its nodes bound a step
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


def _destinations():
    from simulator.cli.speculative_config import Destinations

    return Destinations(k=("num_speculative_tokens", "-k"))


def prepare(args) -> None:
    """Once per parse: a ``--speculative-config`` becomes the flags it sets (a flag given as well is
    refused), so every later check and message is the flags' own."""
    if getattr(args, "_prepared", False):
        return
    if args.speculative_config is not None:
        from simulator.cli.speculative_config import apply

        apply(args, args.speculative_config, _destinations(), target=args.model)
    args._prepared = True


@dataclass(frozen=True)
class Inputs:
    """A run as the flags give it: its configuration, the acceptance in words, the scheduler limits
    and where they came from, and the names a pasted ``vllm serve`` line uses."""

    config: RunConfig
    acceptance_note: Optional[str]
    limits: vllm_serve.Limits
    vllm_version: str
    served_model_name: str
    fitted: Optional[object] = None  # the --engine-profile (simulator.profiles.fitted.FittedProfile)
    bench_serve: Optional[str] = None  # the vllm bench serve line of the same workload (None for a trace)


def inputs_from_args(args) -> Inputs:
    prepare(args)
    fitted = None
    if args.engine_profile:
        from simulator.profiles.engines import get_engine
        from simulator.profiles.fitted import read_fitted_profile

        fitted = read_fitted_profile(args.engine_profile)
        fitted.check_run(args.model, args.device, args.tensor_parallel_size, f"--engine-profile {args.engine_profile}")
        fitted_version = get_engine(fitted.engine).version
        if args.vllm_version is not None and vllm_serve.parse_version(args.vllm_version) != fitted_version:
            raise ConfigError(f"--vllm-version {args.vllm_version}: --engine-profile {args.engine_profile} was fitted to vLLM {fitted.vllm_version} (engine profile {fitted.engine}); drop one")
        args.vllm_version = fitted_version
        args.engine_overhead_ms = fitted.engine_overhead_ms
    version = vllm_serve.parse_version(args.vllm_version or vllm_serve.default_version())
    limits = vllm_serve.limits(args.device, version, args.max_num_seqs, args.max_num_batched_tokens)
    config, note = _config(args, limits, version, fitted)
    served = vllm_serve.served_model_name(args.model, args.served_model_name)
    return Inputs(config, note, limits, version, served, fitted, bench_line(args, config, served))


def bench_line(args, config: RunConfig, served: str) -> Optional[str]:
    """The ``vllm bench serve`` line that sends the simulated workload to a real server (None when
    a trace gave the lengths: vLLM's random dataset cannot draw them)."""
    from simulator.cli.vllm_bench import bench_serve_command

    if args.trace:
        return None
    workload = config.workload
    closed = isinstance(workload, ClosedLoopWorkload)
    ratio = args.random_range_ratio if args.random_range_ratio is not None else command.DEFAULT_WORKLOAD.closed_loop_range_ratio if closed else 0.0
    rate = math.inf if closed else (args.request_rate if args.request_rate is not None else _default(PoissonWorkload, "arrival_rate"))
    return bench_serve_command(served, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, range_ratio=ratio,
                               num_prompts=args.num_prompts, seed=args.workload_seed, request_rate=rate,
                               max_concurrency=workload.concurrency if closed and args.max_concurrency is not None else None)


def config_from_args(args) -> tuple[RunConfig, Optional[str]]:
    """The run's configuration and, when speculating, the acceptance it uses in words."""
    inputs = inputs_from_args(args)
    return inputs.config, inputs.acceptance_note


def _config(args, limits: vllm_serve.Limits, version: str, fitted=None) -> tuple[RunConfig, Optional[str]]:
    prepare(args)
    kind = proposer_kind(args)
    options = options_from_args(args, kind)
    if args.num_speculative_tokens > 0 or args.k_schedule:
        require_draft_model(kind, args.draft_model)
        if args.k_schedule is not None and kind.tree(SpeculationSettings(k=1, options=kind.resolve_options(dict(options)))) is not None:
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
    seqs = limits.max_num_seqs
    if args.k_schedule is not None:
        from simulator.speculative.k_schedule import parse_schedule

        last = parse_schedule(args.k_schedule, None, "--k-schedule")[-1]
        if last[1] < seqs:
            origin = "" if limits.seqs_given else f" (vllm serve {version}'s default on {limits.device})"
            raise ConfigError(
                f"--k-schedule: its last row {list(last)} ends at batch size {last[1]}, below --max-num-seqs {seqs}{origin}; "
                f"extend it to {seqs} or pass --max-num-seqs {last[1]}"
            )
    config = RunConfig.from_deployment(
        workload=workload_from_args(args, limits),
        num_speculative_tokens=args.num_speculative_tokens,
        k_schedule=_schedule_from_args(args),
        adaptive_verification=args.adaptive_verification,
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
        model=args.model,
        device=args.device,
        profile_dir=args.profile_dir,
        scheduler=args.scheduler,
        chunk_size=limits.max_num_batched_tokens,
        batch_size_cap=seqs,
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
        engine=vllm_serve.engine_name(version),
        step_scales=fitted.scales if fitted is not None else None,
    )
    return config, acceptance_note


def serve_command(inputs: Inputs) -> Optional[str]:
    """The ``vllm serve`` line of what was simulated (None for an SGLang proposer): the model by the
    name vLLM loads, the limits, and the ``--speculative-config`` the run's proposer, k or schedule
    and options make (the registry's, as the pays-off recommendation writes it)."""
    from simulator.speculative.k_schedule import to_vllm

    config, spec = inputs.config, inputs.config.speculation
    kind = spec.kind
    if spec.enabled and kind.engine != "vllm":
        return None
    flags = ([f"--tensor-parallel-size {config.tensor_parallel_size}"] if config.tensor_parallel_size > 1 else []) + [inputs.limits.serve_flags]
    speculative = None
    if spec.enabled:
        settings = SpeculationSettings(k=spec.num_speculative_tokens, options=spec.option_values)
        draft = vllm_serve.served_model_name(spec.draft_model) if spec.draft_model else None
        speculative = kind.speculative_config(settings, draft, spec.draft_tensor_parallel_size)
        if spec.k_schedule:
            speculative["num_speculative_tokens_per_batch_size"] = to_vllm(spec.k_schedule)
        if spec.adaptive_verification:
            speculative["enable_adaptive_verification"] = True
    return kind.serve_command(inputs.served_model_name, flags, speculative)


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


def format_summary(result, acceptance_note: Optional[str] = None, inputs: Optional[Inputs] = None) -> str:
    """The summary in ``vllm bench serve``'s layout and names (latencies in ms), then the
    speculation, the simulator's own figures, the limits and where they came from, and the
    ``vllm serve`` line of what was simulated (``inputs``: a run from flags)."""
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
        if spec.adaptive_verification and s.verify_steps:
            lines.append(f"adaptive verification: {s.proposed_tokens / s.verify_steps:.2f} of {spec.num_speculative_tokens} drafts verified per step on average "
                         "(the drafter drafts all of them)")
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
    if inputs is None:
        lines.append(f"max_num_seqs {config.batch_size_cap}, max_num_batched_tokens {config.chunk_size}")
    else:
        lines.append(f"scheduler: {inputs.limits.describe()}")
        lines.append(f"vLLM {inputs.vllm_version}, engine profile {config.engine} (simulator/profiles/engines.toml)")
        if inputs.fitted is not None:
            lines.append(f"step costs {inputs.fitted.describe()} (--engine-profile)")
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
    if inputs is not None:
        serve = serve_command(inputs)
        if serve:
            lines.append(f"as vllm serve: {serve}")
            hint = vllm_serve.served_name_hint(inputs.served_model_name)
            if hint:
                lines.append(hint)
        if inputs.bench_serve:
            lines.append(f"the same workload as vllm bench serve: {inputs.bench_serve}")
            if spec.k_schedule and not vllm_serve.at_least(inputs.vllm_version, vllm_serve.DYNAMIC_SD_VERSION):
                lines.append(
                    f"note: num_speculative_tokens_per_batch_size needs vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later; this run "
                    f"names vLLM {inputs.vllm_version} (--vllm-version), which refuses the key"
                )
        else:
            lines.append(f"no vllm serve line: --proposer {spec.proposer} is {spec.kind.engine}'s")
    lines.append(_rule(fill="="))
    return "\n".join(lines)


def requests_table(result):
    """Per-request rows, with ``startup_burst`` marking a closed loop's first ``concurrency``."""
    frame = result.requests.copy()
    frame["startup_burst"] = frame["request_id"] < result.startup_burst
    return frame


def simulate_cached(config: RunConfig):
    """(result, from the cache): the run's result from the result cache, else simulated and kept."""
    from simulator.runs import cache

    if cache.enabled():
        result = cache.load_result(config)
        if result is not None:
            return result, True
    from simulator import run

    result = run(config)
    if cache.enabled():
        cache.store_result(config, result)
    return result, False


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from simulator.util.versions import version_text

        print(version_text())
        return 0
    if not args.verbose:
        from simulator.vidur.logs import quiet_vidur

        quiet_vidur()
    return command.guarded(
        lambda: _main(args),
        error_prefix="error: ",
        flags=FLAGS,
        interrupted=f"interrupted: {PROG} stopped before writing anything (--json and --requests-csv are written whole at the end); rerun the same command",
    )


def _main(args) -> int:
    inputs = inputs_from_args(args)
    config = inputs.config
    for option, path in (("--json", args.json), ("--requests-csv", args.requests_csv)):
        if path is not None:
            check_writable_file(path, option, folder_must_exist=True)
    result, cached = simulate_cached(config)
    if cached:
        print("note: from the result cache (the same run, simulated before); VIDUR_SPECDEC_NO_RUN_CACHE=1 simulates it again", file=sys.stderr)
    if args.json:
        payload = {
            "summary": {k: _json_safe(v) for k, v in result.summary.as_dict().items()},
            "acceptance_input": inputs.acceptance_note,
            "startup_burst_requests": result.startup_burst,
            "config": config.to_dict(),
            "scheduler_limits": inputs.limits.describe(),
            "vllm_version": inputs.vllm_version,
            "serve_command": serve_command(inputs),
            "provenance": result.provenance,
        }
        atomic_write_text(args.json, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    if args.requests_csv:
        atomic_write_text(args.requests_csv, requests_table(result).to_csv(index=False, float_format="%.9g"))
    print(format_summary(result, inputs.acceptance_note, inputs))  # after the files: a closed pipe on stdout loses no results
    return 0
