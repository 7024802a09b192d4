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

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from simulator.cli import command, vllm_serve
from simulator.cli.argtypes import comma_floats
from simulator.cli.proposer_flags import check_acceptance_input, max_acceptance_length, options_from_args, proposer_kind, require_draft_model
from simulator.cli.simulate_flags import DATASETS, PROG, _default, build_parser  # noqa: F401  (build_parser: the command's parser, importable from here)
from simulator.cli.summary import format_summary
from simulator.runs.config import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload, RunConfig
from simulator.runs.deployment import Deployment, Parallelism, Precision, SchedulerLimits, Speculation, StepCosts
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.proposers.base import SpeculationSettings
from simulator.util.errors import ConfigError
from simulator.util.textio import atomic_write_text, check_writable_file

FLAGS = command.command_flags()  # a refusal's config fields, as this command's flags


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


def acceptance_from_args(args) -> tuple[Optional[AcceptanceInput], Optional[str]]:
    """(the acceptance input, what the run used in words), checked as flags; (None, None) without speculation.

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
        return None, None
    if not given:
        shown = f"-k {k}" if k > 0 else "--k-schedule"
        raise ConfigError(
            f"{shown}: speculation needs an acceptance; give --acceptance RATE (per token), --acceptance-length L "
            f"(vLLM's mean acceptance length at -k) or --acceptance-per-position P1,P2,..."
        )
    flag, value = given[0]
    kind = proposer_kind(args)
    check_acceptance_input(kind, {"--acceptance": "rate", "--acceptance-per-position": "per_position", "--acceptance-length": "length"}[flag])
    if flag == "--acceptance-length":
        if k == 0:
            raise ConfigError(f"--acceptance-length {value:g}: give -k, the number of proposals it was measured at")
        options = options_from_args(args, kind)
        top = max_acceptance_length(kind, k, options)
        if kind.tree(SpeculationSettings(k=k, options=kind.resolve_options(dict(options)))) is not None and not 1 <= value <= top:
            raise ConfigError(  # its depth or its nodes bound a step
                f"--acceptance-length {value:g}: a tree of depth {k} (-k) verifying {option_value(args, kind, 'num_draft_tokens')} tokens "
                f"(--speculative-num-draft-tokens, N + 1) advances at most {top} tokens a step; give an accept length in [1, {top}]"
            )
    per_position = comma_floats(value, flag, example="0.8,0.7,0.6") if flag == "--acceptance-per-position" else None
    acceptance = AcceptanceInput.given(
        rate=value if flag == "--acceptance" else None, per_position=per_position, length=value if flag == "--acceptance-length" else None,
        at_k=k, names={"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length", "at_k": "-k"},
    )
    if per_position is not None:
        needed = k if k > 0 else max(row[2] for row in _schedule_from_args(args))
        if len(per_position) < needed:
            raise ConfigError(f"--acceptance-per-position {value}: {len(per_position)} rate(s), but k = {needed} proposals need one per position")
    return acceptance, f"{acceptance.derivation} ({flag})"


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
    acceptance, acceptance_note = acceptance_from_args(args)
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
    deployment = Deployment(
        model=args.model,
        device=args.device,
        engine=vllm_serve.engine_name(version),
        parallelism=Parallelism(tensor=args.tensor_parallel_size, pipeline=args.pipeline_stages, data=args.data_parallel_size, expert=args.enable_expert_parallel),
        limits=SchedulerLimits(
            max_num_batched_tokens=limits.max_num_batched_tokens, max_num_seqs=seqs, num_kv_blocks=args.num_kv_blocks, scheduler=args.scheduler,
        ),
        precision=Precision(quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype),
        costs=StepCosts(
            engine_overhead_ms=args.engine_overhead_ms, lm_head=not args.no_lm_head, step_scales=fitted.scales if fitted is not None else None,
            profile_dir=args.profile_dir, network_profile_dir=args.network_profile_dir, moe_routing_skew=args.moe_routing_skew,
        ),
        speculation=Speculation(
            proposer=kind.name,
            k=args.num_speculative_tokens,
            schedule=_schedule_from_args(args),
            acceptance=acceptance,
            options=options,
            draft_model=args.draft_model,
            draft_tensor_parallel_size=args.draft_tensor_parallel_size,
            draft_profile_dir=args.draft_profile_dir,
            adaptive_verification=args.adaptive_verification,
            proposal_probability=args.proposal_probability,
            attention=args.attention,
            interpolation=args.interpolation,
            ngram_overhead_ms=args.ngram_overhead_ms,
            draft_pass_overhead_ms=args.draft_pass_overhead_ms,
        ),
    )
    config = deployment.run(workload_from_args(args, limits), seed=args.acceptance_seed, cache_dir=args.cache_dir)
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
    print(format_summary(result, inputs.acceptance_note, inputs, serve_command(inputs)))  # after the files: a closed pipe on stdout loses no results
    return 0
