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

The parsed command line is read once (:func:`~simulator.cli.simulate_args.read_flags`) into
values: the server (:mod:`simulator.cli.server_flags`), the speculation
(:mod:`simulator.cli.speculation_flags`) and the workload (:mod:`simulator.cli.bench_workload`),
each with its rules; this module puts them together into the run and prints or writes its result.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Optional

from simulator.cli import command, vllm_serve
from simulator.cli.server_flags import ServerFlags, with_engine_profile
from simulator.cli.simulate_args import SimulateFlags, read_flags
from simulator.cli.simulate_flags import PROG, build_parser  # noqa: F401  (build_parser: the command's parser, importable from here)
from simulator.cli.speculation_flags import SpeculationFlags
from simulator.cli.summary import format_summary
from simulator.runs.config import RunConfig
from simulator.runs.deployment import Deployment
from simulator.speculative.proposers.base import SpeculationSettings
from simulator.util.textio import atomic_write_text, check_writable_file

FLAGS = command.command_flags()  # a refusal's config fields, as this command's flags


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


def config_from_args(args) -> tuple[RunConfig, Optional[str]]:
    """The run's configuration and, when speculating, the acceptance it uses in words."""
    inputs = inputs_from_args(args)
    return inputs.config, inputs.acceptance_note


def inputs_from_args(args) -> Inputs:
    """The run a parsed command line asks for: the Namespace is read once (:func:`read_flags`), the rest takes values."""
    flags = read_flags(args)
    return inputs_from_flags(flags)


def inputs_from_flags(flags: SimulateFlags) -> Inputs:
    """The run ``flags`` ask for, checked in the flags' names: the server (as its engine profile
    measured it), its limits, the deployment, and the workload vllm bench serve would send."""
    server, fitted = with_engine_profile(flags.server)
    version = server.version()
    limits = server.limits(version)
    deployment, acceptance_note = deployment_from_flags(server, flags.speculation, limits, version)
    workload = flags.workload.workload(limits, server.model)
    config = deployment.run(workload, seed=flags.acceptance_seed, cache_dir=flags.cache_dir)
    served = server.served_name()
    return Inputs(config, acceptance_note, limits, version, served, fitted, flags.workload.bench_serve_line(served, config.workload))


def deployment_from_flags(server: ServerFlags, speculation: SpeculationFlags, limits: vllm_serve.Limits, version: str) -> tuple[Deployment, Optional[str]]:
    """The deployment the flags describe on a server of ``limits`` running vLLM ``version``, and
    the acceptance in words; every refusal names a flag (the server's ranges first, then the
    speculation's rules in their order: :meth:`SpeculationFlags.speculation`)."""
    scheduler_limits = server.scheduler_limits(limits)
    server.check_ranges()
    spec, acceptance_note = speculation.speculation(limits)
    deployment = Deployment(
        model=server.model,
        device=server.device,
        engine=vllm_serve.engine_name(version),
        parallelism=server.parallelism,
        limits=scheduler_limits,
        precision=server.precision,
        costs=server.costs,
        speculation=spec,
    )
    return deployment, acceptance_note


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
    flags = read_flags(args)
    inputs = inputs_from_flags(flags)
    config = inputs.config
    for option, path in (("--json", flags.json), ("--requests-csv", flags.requests_csv)):
        if path is not None:
            check_writable_file(path, option, folder_must_exist=True)
    result, cached = simulate_cached(config)
    if cached:
        print("note: from the result cache (the same run, simulated before); VIDUR_SPECDEC_NO_RUN_CACHE=1 simulates it again", file=sys.stderr)
    if flags.json:
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
        atomic_write_text(flags.json, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    if flags.requests_csv:
        atomic_write_text(flags.requests_csv, requests_table(result).to_csv(index=False, float_format="%.9g"))
    print(format_summary(result, inputs.acceptance_note, inputs, serve_command(inputs)))  # after the files: a closed pipe on stdout loses no results
    return 0
