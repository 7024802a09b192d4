"""``python -m simulator.paysoff``: does speculation pay off for *your* deployment, with which k, and where does it stop?

One deployment (model, GPU, tensor parallelism, vLLM version, proposer or ``--speculative-config``,
acceptance as vLLM reports it) over a grid of concurrencies (and request rates) and k: prints median-
TPOT speedup by concurrency x k, with each row's no-speculation TPOT and TTFT and a mark where
that baseline is overloaded, the best k, where speculation stops paying, the recommended
``num_speculative_tokens_per_batch_size`` as a ``--speculative-config`` and a full ``vllm serve``
command, and the best fixed k for a vLLM without the key.  The runs are the build's pays-off sweep
(:mod:`simulator.paysoff.runner`) with one deployment, costed as ``python -m simulator`` costs them
(the same scheduler defaults, :mod:`simulator.cli.vllm_serve`), and go through the result cache: a
repeated question re-simulates nothing, and an interrupted one resumes.

Exit codes: 0 answered; 2 bad input (one line on stderr naming the input and the fix; nothing
written); 130 interrupted (one line; nothing written, finished runs kept in the result cache).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Optional

from simulator.cli import command

from simulator.cli import vllm_serve
from simulator.paysoff.text import format_answer
from simulator.cli.catalog_help import device_help, model_help
from simulator.cli.argtypes import DeprecatedAlias, Synonyms, comma_floats
from simulator.runs.config import KV_CACHE_DTYPES, QUANTIZATIONS, RunConfig
from simulator.runs.deployment import Deployment, Parallelism, Speculation
from simulator.util.errors import ConfigError
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, options_from_args, proposer_kind
from simulator.cli.speculation_flags import check_acceptance_input, require_draft_model

PROG = "python -m simulator.paysoff"
DEFAULT_MODEL, DEFAULT_DEVICE = RunConfig.model, RunConfig.device  # python -m simulator's defaults
DEFAULT_CONCURRENCY = "1-128"
DEFAULT_K = "1-5"
# the simulated k of a refusal is a --k-range value here; -k is the k an acceptance length was measured at
FLAGS = command.command_flags(num_speculative_tokens="--k-range")


DESCRIPTION = (
    "Does speculative decoding pay off for one deployment? Simulates every k at every concurrency (Vidur + this "
    "project's speculative model) and recommends vLLM's num_speculative_tokens_per_batch_size."
)
EPILOG = (
    "Acceptance: vLLM logs a 'mean acceptance length' L at your num_speculative_tokens k (tokens per verify step, bonus "
    "included, so 1 <= L <= k + 1). --acceptance-length L -k K converts it to the i.i.d. per-token rate a with "
    "1 + a + ... + a^K = L (simulator/speculative/acceptance_convert.py: iid_rate_from_length); the output states the rate used. "
    "From Prometheus, accepted_per_pos[i] / num_drafts are vLLM's per-position rates: pass them to --acceptance-per-position-vllm. "
    "Verify cost: the answer uses the simulator's default verify-attention setting and shows the kv_once and per_token bounds "
    "as a band around it. Overloaded: a row is marked when its no-speculation run's queue grew through the run (the median TTFT "
    "of its last tenth of requests above twice its first tenth's, simulator/sweep/metrics.py). Seeds: --workload-seed and "
    "--acceptance-seed, as in python -m simulator (--seed and --at-k are deprecated names). Exit codes: 0, 2 bad input, "
    "130 interrupted (finished runs are kept in the result cache: rerun to resume)."
)


def build_parser() -> argparse.ArgumentParser:
    """The command's flags, in four groups that follow how a user describes the question: the
    system as they run vLLM, the acceptance they measured, the workload, and what to print."""
    p = command.Parser(
        prog=PROG,
        error_prefix=f"{PROG}: error: ",
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=EPILOG,
    )
    s = p.add_argument_group("the system (as you run vLLM)")
    _add_target_flags(s)
    _add_drafter_flags(s)
    _add_scheduler_limit_flags(s)
    s.add_argument("--proposal-probability", type=float, default=1.0, help="P(the proposer drafts at a decode step); below 1 for n-gram misses (the validation harness measures it)")
    _add_acceptance_flags(p.add_argument_group("acceptance (exactly one)"))
    _add_workload_flags(p.add_argument_group("the workload (vllm bench serve's names)"))
    _add_output_flags(p.add_argument_group("k and output"))
    return p


def _add_target_flags(s) -> None:
    """The served target: model, GPU, engine version and profile, sharding and precision, named
    as vllm serve names them so a user copies their own command line."""
    s.add_argument("--model", default=DEFAULT_MODEL, help=model_help())
    s.add_argument("--served-model-name", metavar="NAME", help="the model the printed vllm serve line names (default: a local config.json's _name_or_path, else --model)")
    s.add_argument("--device", default=DEFAULT_DEVICE, help=device_help())
    s.add_argument("--engine-profile", metavar="FILE", help="a profile fitted to your own server (python -m simulator.validation fit): its vLLM version, CPU time "
                   "per step and kernel scales replace the built-in profile's, and its held-out error is the answer's error bar; --model, --device "
                   "and --tensor-parallel-size must be the deployment it measured")
    s.add_argument("--vllm-version", metavar="X.Y.Z", default=vllm_serve.default_version(),
                   help=f"the vLLM release you run (from {vllm_serve.OLDEST_VERSION}): its scheduler defaults, its engine profile, and whether "
                   f"the recommendation can be a k schedule (vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later) or the best fixed k")
    s.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs the target is sharded over")
    s.add_argument("--quantization", choices=QUANTIZATIONS, default=None, help="vLLM's --quantization (default: the model config's own)")
    s.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto", help="vLLM's --kv-cache-dtype (auto: the model's 16-bit dtype)")


def _add_drafter_flags(s) -> None:
    """What drafts: a whole ``--speculative-config``, or the proposer, draft model and draft
    sharding one flag at a time (the config replaces the flags, so both spellings are here)."""
    s.add_argument(
        "--speculative-config", metavar="JSON",
        help="your vllm serve --speculative-config: its method, model, draft_tensor_parallel_size and method keys set the deployment, and its "
        "num_speculative_tokens is the k --acceptance-length was measured at (it replaces --proposer, --draft-model, -k and the option flags)",
    )
    add_proposer_flags(s)
    s.add_argument("--draft-model", default=None, action=Synonyms, help=draft_model_help())
    s.add_argument(
        "--draft-tensor-parallel-size", type=int, default=None, action=Synonyms,
        help="GPUs the draft runs on: 1 or --tensor-parallel-size (vLLM's draft_tensor_parallel_size; default: the target's)",
    )


def _add_scheduler_limit_flags(s) -> None:
    """vLLM's two scheduler limits; left unset they are what vllm serve of the version picks on the
    device (:mod:`simulator.cli.vllm_serve`), so the help states those defaults."""
    s.add_argument(
        "--max-num-seqs", type=int, default=None,
        help="vLLM's --max-num-seqs, the largest running batch (default: what vllm serve of --vllm-version picks on --device: 1024 on GPUs of "
        "70 GiB or more other than the A100, else 256)",
    )
    s.add_argument(
        "--max-num-batched-tokens", type=int, default=None,
        help="vLLM's --max-num-batched-tokens, tokens per step (default: vllm serve's on --device: 8192 on GPUs of 70 GiB or more other than "
        "the A100 (16384 on 160 GiB or more from vLLM 0.28.0), else 2048)",
    )


def _add_acceptance_flags(a) -> None:
    """The acceptance inputs, of which exactly one is given (:func:`_acceptance` refuses none or two):
    vLLM's logged mean length at its k, an i.i.d. rate, or per-position rates in either convention."""
    a.add_argument("--acceptance-length", type=float, default=None, help="vLLM's mean acceptance length L (bonus included), measured at -k")
    a.add_argument("-k", "--num-speculative-tokens", dest="at_k", type=int, default=None, action=Synonyms,
                   help="your server's num_speculative_tokens: the k your --acceptance-length was measured at (the k values to simulate are --k-range)")
    a.add_argument("--at-k", dest="at_k", type=int, default=None, action=DeprecatedAlias, replacement="-k", help=argparse.SUPPRESS)
    a.add_argument("--acceptance", type=float, default=None, help="i.i.d. acceptance rate per proposed token (accepted / draft tokens)")
    a.add_argument("--acceptance-per-position", default=None, help="comma-separated P(position i accepted | earlier accepted), i = 1..k")
    a.add_argument(
        "--acceptance-per-position-vllm", default=None,
        help="comma-separated vLLM per-position rates accepted_per_pos[i] / num_drafts (unconditional; converted to conditional rates)",
    )


def _add_workload_flags(w) -> None:
    """The requests, under vllm bench serve's flag names (the longer names this command had are
    kept as synonyms), and how many runs each grid point gets: the answer's sampling error."""
    w.add_argument("--dataset-name", metavar="NAME", help="vllm bench serve's dataset: random (the default; lengths from the flags below) is the one drawn; others as a --trace")
    w.add_argument("--concurrency", "--max-concurrency", dest="concurrency", default=DEFAULT_CONCURRENCY, action=Synonyms,
                   help="closed loop: requests in flight, a list '1,4,16' or a range 'A-B' (powers of two from A, and B)")
    w.add_argument("--request-rate", default=None, help="open loop too: Poisson request rates (req/s), a list '2,4,8' (inf is the closed loop: --concurrency)")
    w.add_argument("--prompt-tokens", "--random-input-len", dest="prompt_tokens", type=int, default=command.DEFAULT_WORKLOAD.prompt_tokens, action=Synonyms, help="mean prompt length (python -m simulator's default too)")
    w.add_argument("--output-tokens", "--random-output-len", dest="output_tokens", type=int, default=command.DEFAULT_WORKLOAD.output_tokens, action=Synonyms, help="mean output length (python -m simulator's default too)")
    w.add_argument("--random-range-ratio", "--length-spread", dest="length_spread", type=float, default=command.DEFAULT_WORKLOAD.closed_loop_range_ratio, action=Synonyms,
                   help="closed-loop lengths uniform in [(1-r) mean, (1+r) mean]")
    w.add_argument("--trace", default=None, help="draw prompt/output lengths from a Vidur length trace CSV instead")
    w.add_argument("--requests-per-slot", type=int, default=2, help="closed-loop requests per run = max(--min-requests, this x concurrency)")
    w.add_argument("--min-requests", type=int, default=32,
                   help="closed-loop requests per run at least: a median over fewer moves by 10%% or more with another seed (the answer's Sampling line)")
    w.add_argument("--poisson-requests", type=int, default=64, help="requests per open-loop run")
    w.add_argument("--workload-seed", type=int, default=42, help="arrivals and drawn lengths")
    w.add_argument("--acceptance-seed", "--seed", dest="acceptance_seed", type=int, default=0, action=DeprecatedAlias,
                   note="it seeds the acceptance draws; the workload's seed is --workload-seed", help="acceptance draws")


def _add_output_flags(g) -> None:
    """The k values to consider, where the answer is written besides stdout, and how it runs."""
    g.add_argument("--k-range", default=DEFAULT_K, help="the k values to consider: a range '1-5' or a list '1,2,4'")
    g.add_argument("--json", default=None, help="write the answer (schedule, band, crossovers, inputs) as JSON here")
    g.add_argument("--csv", default=None, help="write every simulated run as CSV here")
    g.add_argument("--jobs", type=int, default=None, help="parallel runs (default: one per CPU core)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: a bar on a terminal, else a line at least every 10 s)")


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
    from simulator.paysoff.spec import acceptance_profile

    flags = {"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length", "at_k": "-k", "unconditional": "--acceptance-per-position-vllm"}
    given = [f for f, v in (("--acceptance-length", args.acceptance_length), ("--acceptance", args.acceptance), ("--acceptance-per-position", args.acceptance_per_position),
                            ("--acceptance-per-position-vllm", args.acceptance_per_position_vllm)) if v is not None]
    if not given:
        raise ConfigError("no acceptance given: add --acceptance-length L -k K (vLLM's mean acceptance length at your k), --acceptance RATE, or --acceptance-per-position P1,P2,...")
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)}: give one acceptance input, not {len(given)}")
    check_acceptance_input(proposer_kind(args), {"--acceptance-length": "length", "--acceptance": "rate", "--acceptance-per-position": "per_position",
                                                 "--acceptance-per-position-vllm": "per_position"}[given[0]])
    if args.at_k is not None and args.acceptance_length is None and not _k_from_config(args):
        raise ConfigError(f"-k {args.at_k}: only goes with --acceptance-length (the k that length was measured at); the k values to simulate are --k-range")
    if args.acceptance_length is not None and args.at_k is None:
        raise ConfigError(f"--acceptance-length {args.acceptance_length:g} needs -k K, the num_speculative_tokens it was measured at (vLLM logs both)")
    if args.at_k is not None and args.at_k < 1:
        raise ConfigError(f"-k {args.at_k}: must be the num_speculative_tokens (>= 1) your --acceptance-length was measured at")
    source = "given on the command line"
    name = "cli"
    label = f"{deployment['proposer']} on {deployment['model']}"
    common = dict(where="", flags=flags, deployment="cli", deployment_label=label, **deployment)
    unconditional = comma_floats(args.acceptance_per_position_vllm, "--acceptance-per-position-vllm", "rates in [0, 1]") if args.acceptance_per_position_vllm is not None else None
    per_position = comma_floats(args.acceptance_per_position, "--acceptance-per-position", "probabilities") if args.acceptance_per_position is not None else None
    at_k = args.at_k if args.acceptance_length is not None else None  # a config's k without a length is the user's k, not an input
    return acceptance_profile(name, label, source, rate=args.acceptance, per_position=per_position, length=args.acceptance_length, at_k=at_k, unconditional=unconditional, **common)


def _k_from_config(args) -> bool:
    return getattr(args, "_speculative_input", None) is not None


def prepare(args) -> None:
    """Once per parse: a ``--speculative-config`` becomes the flags it sets (a flag given as well is refused)."""
    if getattr(args, "_prepared", False):
        return
    args._speculative_input = None
    if args.speculative_config is not None:
        from simulator.cli.speculative_config import Destinations, apply

        destinations = Destinations(k=("at_k", "-k"), k_schedule=None, adaptive_verification=None)
        args._speculative_input = apply(
            args, args.speculative_config, destinations, target=args.model,
            schedule_refusal="is what this command recommends; drop it (python -m simulator --speculative-config simulates a given schedule)",
        )
    args._prepared = True


def _check_system(args) -> str:
    """Model, device, draft: named the way the user typed them; returns the device's canonical name."""
    from simulator.vidur.models import model_config

    prepare(args)
    try:
        model_config(args.model)
    except ConfigError as exc:
        raise ConfigError(f"--model {args.model}: {exc}") from None
    args.fitted = None
    if args.engine_profile:
        from simulator.profiles.engines import get_engine
        from simulator.profiles.fitted import read_fitted_profile

        args.fitted = read_fitted_profile(args.engine_profile)
        args.fitted.check_run(args.model, args.device, args.tensor_parallel_size, f"--engine-profile {args.engine_profile}")
        fitted_version = get_engine(args.fitted.engine).version
        if vllm_serve.parse_version(args.vllm_version) not in (fitted_version, vllm_serve.default_version()):  # the default yields to the fit
            raise ConfigError(f"--vllm-version {args.vllm_version}: --engine-profile {args.engine_profile} was fitted to vLLM {args.fitted.vllm_version} (engine profile {args.fitted.engine}); drop one")
        args.vllm_version = fitted_version
    version = vllm_serve.parse_version(args.vllm_version or vllm_serve.default_version())
    args.limits = vllm_serve.limits(args.device, version, args.max_num_seqs, args.max_num_batched_tokens)
    device = args.limits.device
    args.max_num_seqs, args.max_num_batched_tokens = args.limits.max_num_seqs, args.limits.max_num_batched_tokens
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
        raise ConfigError(f"--random-range-ratio {args.length_spread:g}: must be in [0, 1)")
    if not 0 <= args.proposal_probability <= 1:
        raise ConfigError(f"--proposal-probability {args.proposal_probability:g}: must be in [0, 1]")
    if args.dataset_name is not None and args.dataset_name != "random":
        raise ConfigError(
            f"--dataset-name {args.dataset_name}: the pays-off grid draws vllm bench serve's random dataset (--dataset-name random); "
            "for another dataset, give its requests' lengths as a Vidur trace (--trace FILE)"
        )
    if args.dataset_name is not None and args.trace:
        raise ConfigError(f"--dataset-name {args.dataset_name} and --trace: the trace gives the lengths; drop one")
    for flag, value in (("--acceptance-seed", args.acceptance_seed), ("--workload-seed", args.workload_seed)):
        if value < 0:
            raise ConfigError(f"{flag} {value}: must be an integer >= 0")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: must be a positive integer")
    return device


def kind_settings(kind, args):
    from simulator.speculative.proposers.base import SpeculationSettings

    return SpeculationSettings(k=1, options=kind.resolve_options(dict(options_from_args(args, kind))))


def spec_from_args(args):
    """The one-deployment pays-off spec the flags describe (every input checked, nothing simulated)."""
    from simulator.paysoff.spec import single_deployment

    device = _check_system(args)
    ks = _ints(args.k_range, "--k-range", doubling=False)
    concurrency = _ints(args.concurrency, "--concurrency", doubling=True) if args.concurrency.strip() else ()
    rates = comma_floats(args.request_rate, "--request-rate", "request rates (req/s)") if args.request_rate is not None else ()
    # inf sends every request at once under --max-concurrency: the closed loop the --concurrency grid already runs
    rates = tuple(r for r in rates if not math.isinf(r))
    bad_rates = [r for r in rates if not (math.isfinite(r) and r > 0)]
    if bad_rates:
        raise ConfigError(f"--request-rate {args.request_rate}: {bad_rates} are not positive request rates")
    if not concurrency:
        # the recommendation is a schedule over the running batch, which only a closed loop fixes: checked before anything runs
        raise ConfigError(
            f"--concurrency {args.concurrency!r}: the grid has no concurrency, and the recommended k schedule (and the best fixed k) is read "
            "from closed-loop runs, where the running batch is the concurrency; give --concurrency (e.g. 1-128), "
            + ("the --request-rate table is printed beside it" if rates else "and --request-rate for an open-loop table too")
        )
    vllm_serve.check_concurrency(concurrency, args.limits, "--concurrency")
    kind = proposer_kind(args)
    # the deployment's cross-field rules (the draft-TP rule) are the run configuration's; the refusal
    # names its fields, which guarded() writes as this command's flags
    Deployment(
        model=args.model, device=device, parallelism=Parallelism(tensor=args.tensor_parallel_size),
        speculation=Speculation(proposer=kind.name, draft_tensor_parallel_size=args.draft_tensor_parallel_size),
    ).checked()
    deployment = dict(model=args.model, device=device, tensor_parallel_size=args.tensor_parallel_size, proposer=kind.name, draft_model=args.draft_model,
                      draft_tensor_parallel_size=args.draft_tensor_parallel_size, options=options_from_args(args, kind),
                      proposal_probability=args.proposal_probability, served_model_name=args.served_model_name)
    profile = _acceptance(args, deployment)
    if profile.per_position is not None and len(profile.per_position) < max(ks):
        raise ConfigError(f"per-position acceptance has {len(profile.per_position)} rates but --k-range goes to {max(ks)}: give {max(ks)} rates or lower --k-range")
    if args.trace:
        from simulator.vidur.models import model_config
        from simulator.runs.workloads import read_trace

        read_trace(args.trace, model_config(args.model).max_model_len)  # a bad trace fails now, naming the row
    return single_deployment(
        profile, ks=ks, concurrency=concurrency, arrival_rates=rates, max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
        prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, length_spread=args.length_spread, requests_per_slot=args.requests_per_slot,
        min_requests=args.min_requests, poisson_requests=args.poisson_requests, seed=args.acceptance_seed, workload_seed=args.workload_seed, trace=args.trace,
        engine=vllm_serve.engine_name(args.limits.version), where=PROG, quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
        fitted=args.fitted,
    )


def check_runs(spec) -> None:
    """The simulator's own checks (head for this target, sharding, context) on the largest run,
    before anything is simulated: a bad combination fails in a second, not after the grid (memory
    is checked by each run, still before anything is written)."""
    from simulator.paysoff.runner import closed_loop_workload, run_config, speculation
    from simulator.sweep.runner import warm_predictor

    profile = spec.profiles[0]
    workload = closed_loop_workload(spec, max(spec.concurrency), profile.model)  # the grid always has a concurrency (spec_from_args)
    config = run_config(spec, profile.system, workload, speculation(spec, profile, spec.attention, max(spec.speculative_tokens)))
    warm_predictor(config)


def answer_document(spec, output, argv, limits: Optional[vllm_serve.Limits] = None) -> dict:
    entry = output.schedules["schedules"][0]
    return {
        "command": [PROG] + list(argv),
        "vllm_version": limits.version if limits else None,
        "engine": spec.engine,
        "scheduler_limits": limits.describe() if limits else None,
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
    from simulator.vidur.logs import quiet_vidur

    quiet_vidur()
    return command.guarded(
        lambda: _main(args, argv),
        error_prefix=f"{PROG}: error: ",
        flags=FLAGS,
        interrupted=f"interrupted: {PROG} stopped before writing anything (--json and --csv are written at the end); the runs that finished are "
        "kept in the result cache: rerun the same command to resume",
    )


def _main(args, argv) -> int:
    from simulator.sweep.executors import LocalExecutor
    from simulator.published import speedup_checks
    from simulator.paysoff.runner import csv_texts, run_paysoff
    from simulator.util.textio import atomic_write_text, check_writable_file

    spec = spec_from_args(args)
    for flag, path in (("--json", args.json), ("--csv", args.csv)):
        if path is not None:
            check_writable_file(path, flag, folder_must_exist=True)
    check_runs(spec)
    output = run_paysoff(spec, LocalExecutor(args.jobs, args.progress), checks=speedup_checks.read())
    print(format_answer(spec, output, args.limits, args._speculative_input))
    if args.csv:
        atomic_write_text(args.csv, csv_texts(output)[0])
    if args.json:
        atomic_write_text(args.json, json.dumps(answer_document(spec, output, argv, args.limits), indent=2, default=_json_default) + "\n")
    return 0


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")

