"""``python -m simulator.paysoff``: does speculation pay off for *your* deployment, with which k, and where does it stop?

One deployment (model, GPU, tensor parallelism, vLLM version, proposer or ``--speculative-config``,
acceptance as vLLM reports it) over a grid of concurrencies (and request rates) and k: prints median-
TPOT speedup by concurrency x k, with each row's no-speculation TPOT and TTFT and a mark where
that baseline is overloaded, the best k, where speculation stops paying, the recommended
``num_speculative_tokens_per_batch_size`` as a ``--speculative-config`` and a full ``vllm serve``
command, and the best fixed k for a vLLM without the key.  The runs are the build's pays-off sweep
(:mod:`simulator.sweep.paysoff_runner`) with one deployment, costed as ``python -m simulator`` costs them
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
from simulator.cli.argtypes import DeprecatedAlias, Synonyms, comma_floats
from simulator.runs.config import KV_CACHE_DTYPES, QUANTIZATIONS, RunConfig
from simulator.util.errors import ConfigError
from simulator.cli.proposer_flags import add_proposer_flags, check_acceptance_input, draft_model_help, options_from_args, proposer_kind, require_draft_model

PROG = "python -m simulator.paysoff"
DEFAULT_CONCURRENCY = "1-128"
DEFAULT_K = "1-5"
# the simulated k of a refusal is a --k-range value here; -k is the k an acceptance length was measured at
FLAGS = command.command_flags(num_speculative_tokens="--k-range")


def build_parser() -> argparse.ArgumentParser:
    p = command.Parser(
        prog=PROG,
        error_prefix=f"{PROG}: error: ",
        description="Does speculative decoding pay off for one deployment? Simulates every k at every concurrency (Vidur + this "
        "project's speculative model) and recommends vLLM's num_speculative_tokens_per_batch_size.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Acceptance: vLLM logs a 'mean acceptance length' L at your num_speculative_tokens k (tokens per verify step, bonus "
        "included, so 1 <= L <= k + 1). --acceptance-length L -k K converts it to the i.i.d. per-token rate a with "
        "1 + a + ... + a^K = L (simulator/speculative/acceptance_convert.py: iid_rate_from_length); the output states the rate used. "
        "From Prometheus, accepted_per_pos[i] / num_drafts are vLLM's per-position rates: pass them to --acceptance-per-position-vllm. "
        "Verify cost: the answer uses the simulator's default verify-attention setting and shows the kv_once and per_token bounds "
        "as a band around it. Overloaded: a row is marked when its no-speculation run's queue grew through the run (the median TTFT "
        "of its last tenth of requests above twice its first tenth's, simulator/sweep/metrics.py). Seeds: --workload-seed and "
        "--acceptance-seed, as in python -m simulator (--seed and --at-k are deprecated names). Exit codes: 0, 2 bad input, "
        "130 interrupted (finished runs are kept in the result cache: rerun to resume).",
    )
    s = p.add_argument_group("the system (as you run vLLM)")
    s.add_argument("--model", default="meta-llama/Llama-2-7b-hf", help="target model (a catalog name or a local config.json)")
    s.add_argument("--served-model-name", metavar="NAME", help="the model the printed vllm serve line names (default: a local config.json's _name_or_path, else --model)")
    s.add_argument("--device", default="a100", help="GPU: a100, a100_40gb, h100 or h200 (any case)")
    s.add_argument("--engine-profile", metavar="FILE", help="a profile fitted to your own server (python -m simulator.validation fit): its vLLM version, CPU time "
                   "per step and kernel scales replace the built-in profile's, and its held-out error is the answer's error bar; --model, --device "
                   "and --tensor-parallel-size must be the deployment it measured")
    s.add_argument("--vllm-version", metavar="X.Y.Z", default=vllm_serve.default_version(),
                   help=f"the vLLM release you run (from {vllm_serve.OLDEST_VERSION}): its scheduler defaults, its engine profile, and whether "
                   f"the recommendation can be a k schedule (vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later) or the best fixed k")
    s.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs the target is sharded over")
    s.add_argument("--quantization", choices=QUANTIZATIONS, default=None, help="vLLM's --quantization (default: the model config's own)")
    s.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto", help="vLLM's --kv-cache-dtype (auto: the model's 16-bit dtype)")
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
    s.add_argument("--proposal-probability", type=float, default=1.0, help="P(the proposer drafts at a decode step); below 1 for n-gram misses (the validation harness measures it)")
    a = p.add_argument_group("acceptance (exactly one)")
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
    w = p.add_argument_group("the workload (vllm bench serve's names)")
    w.add_argument("--dataset-name", metavar="NAME", help="vllm bench serve's dataset: random (the default; lengths from the flags below) is the one drawn; others as a --trace")
    w.add_argument("--concurrency", "--max-concurrency", dest="concurrency", default=DEFAULT_CONCURRENCY, action=Synonyms,
                   help="closed loop: requests in flight, a list '1,4,16' or a range 'A-B' (powers of two from A, and B)")
    w.add_argument("--request-rate", default=None, help="open loop too: Poisson request rates (req/s), a list '2,4,8' (inf is the closed loop: --concurrency)")
    w.add_argument("--prompt-tokens", "--random-input-len", dest="prompt_tokens", type=int, default=512, action=Synonyms, help="mean prompt length")
    w.add_argument("--output-tokens", "--random-output-len", dest="output_tokens", type=int, default=256, action=Synonyms, help="mean output length")
    w.add_argument("--random-range-ratio", "--length-spread", dest="length_spread", type=float, default=0.5, action=Synonyms,
                   help="closed-loop lengths uniform in [(1-r) mean, (1+r) mean]")
    w.add_argument("--trace", default=None, help="draw prompt/output lengths from a Vidur length trace CSV instead")
    w.add_argument("--requests-per-slot", type=int, default=2, help="closed-loop requests per run = max(--min-requests, this x concurrency)")
    w.add_argument("--min-requests", type=int, default=8)
    w.add_argument("--poisson-requests", type=int, default=64, help="requests per open-loop run")
    w.add_argument("--workload-seed", type=int, default=42, help="arrivals and drawn lengths")
    w.add_argument("--acceptance-seed", "--seed", dest="acceptance_seed", type=int, default=0, action=DeprecatedAlias,
                   note="it seeds the acceptance draws; the workload's seed is --workload-seed", help="acceptance draws")
    g = p.add_argument_group("k and output")
    g.add_argument("--k-range", default=DEFAULT_K, help="the k values to consider: a range '1-5' or a list '1,2,4'")
    g.add_argument("--json", default=None, help="write the answer (schedule, band, crossovers, inputs) as JSON here")
    g.add_argument("--csv", default=None, help="write every simulated run as CSV here")
    g.add_argument("--jobs", type=int, default=None, help="parallel runs (default: one per CPU core)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: a bar on a terminal, else a line at least every 10 s)")
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
    from simulator.specs.paysoff_sweep import acceptance_profile

    flags = {"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length", "at_k": "-k", "lengths": "--acceptance-per-position-vllm"}
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
    at_k = args.at_k if args.acceptance_length is not None else None  # a config's k without a length is the user's k, not an input
    return acceptance_profile(name, label, source, rate=args.acceptance, per_position=per_position, length=args.acceptance_length, at_k=at_k, **common)


def _k_from_config(args) -> bool:
    return getattr(args, "_speculative_input", None) is not None


def prepare(args) -> None:
    """Once per parse: a ``--speculative-config`` becomes the flags it sets (a flag given as well is refused)."""
    if getattr(args, "_prepared", False):
        return
    args._speculative_input = None
    if args.speculative_config is not None:
        from simulator.cli.speculative_config import Destinations, apply

        destinations = Destinations(k=("at_k", "-k"), k_schedule=None)
        args._speculative_input = apply(
            args, args.speculative_config, destinations, target=args.model,
            schedule_refusal="is what this command recommends; drop it (python -m simulator --speculative-config simulates a given schedule)",
        )
    args._prepared = True


def _check_system(args) -> str:
    """Model, device, draft: named the way the user typed them; returns the device's canonical name."""
    from simulator.models.catalog import model_config

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
    from simulator.specs.paysoff_sweep import single_deployment

    device = _check_system(args)
    ks = _ints(args.k_range, "--k-range", doubling=False)
    concurrency = _ints(args.concurrency, "--concurrency", doubling=True) if args.concurrency.strip() else ()
    rates = comma_floats(args.request_rate, "--request-rate", "request rates (req/s)") if args.request_rate is not None else ()
    if any(math.isinf(r) for r in rates):
        raise ConfigError(f"--request-rate {args.request_rate}: inf sends every request at once, which is the closed loop here; give it as --concurrency N")
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
    RunConfig.from_deployment(
        model=args.model, device=device, tensor_parallel_size=args.tensor_parallel_size, proposer=kind.name, draft_tensor_parallel_size=args.draft_tensor_parallel_size
    )
    deployment = dict(model=args.model, device=device, tensor_parallel_size=args.tensor_parallel_size, proposer=kind.name, draft_model=args.draft_model,
                      draft_tensor_parallel_size=args.draft_tensor_parallel_size, options=options_from_args(args, kind),
                      proposal_probability=args.proposal_probability, served_model_name=args.served_model_name)
    profile = _acceptance(args, deployment)
    if profile.per_position is not None and len(profile.per_position) < max(ks):
        raise ConfigError(f"per-position acceptance has {len(profile.per_position)} rates but --k-range goes to {max(ks)}: give {max(ks)} rates or lower --k-range")
    if args.trace:
        from simulator.models.catalog import model_config
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
    from simulator.sweep.paysoff_runner import closed_loop_workload, run_config, speculation
    from simulator.sweep.runner import warm_predictor

    profile = spec.profiles[0]
    workload = closed_loop_workload(spec, max(spec.concurrency), profile.model)  # the grid always has a concurrency (spec_from_args)
    config = run_config(spec, profile.system, workload, speculation(spec, profile, spec.attention, max(spec.speculative_tokens)))
    warm_predictor(config)


def _band(entry: Optional[dict], primary: float, lows: list[float]) -> str:
    lo, hi = min(lows + [primary]), max(lows + [primary])
    return f"{primary:5.2f}× [{lo:.2f}–{hi:.2f}]"


OVERLOAD_NOTE = (
    "overloaded: the no-speculation run's queue grew through the run (the median TTFT of its last tenth of requests above "
    "{growth:g}x its first tenth's; simulator/sweep/metrics.py): arrivals outpace service, so the speedups there compare runs "
    "that never reached a steady state, and waiting, not TPOT, is what requests feel"
)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if math.isfinite(seconds) else "n/a"


def _from(x: Optional[int], spec) -> str:
    """'from N in flight', saying so when N is the smallest concurrency simulated (it may stop earlier)."""
    if not x:
        return "pays throughout"
    smallest = min(spec.concurrency)
    if x == smallest and smallest > 1:
        return f"from {x} in flight, the smallest concurrency simulated (below {x} was not simulated)"
    return f"from {x} in flight"


def format_answer(spec, output, limits: Optional[vllm_serve.Limits] = None, speculative_input=None) -> str:
    """The table and the recommendation, as printed.  ``limits``: where the scheduler limits came
    from (the command's flags); ``speculative_input``: the user's --speculative-config, read."""
    from simulator.schemas import OVERLOAD_TTFT_GROWTH
    from simulator.website import units

    doc = output.schedules
    entry = doc["schedules"][0]
    profile = spec.profiles[0]
    primary, bounds = spec.attention, [m for m in spec.attention_modes if m != spec.attention]
    tp = f"{profile.tensor_parallel_size} × " if profile.tensor_parallel_size > 1 else "1 × "
    version = limits.version if limits else None
    lines = verdict_lines(spec, entry, version) + [
        "",
        f"Deployment: {profile.model} on {tp}{profile.device.upper()} (tensor parallel {profile.tensor_parallel_size}), proposer {profile.proposer}"
        + (f" ({profile.draft_model})" if profile.draft_model else "")
        + (f", proposal probability {profile.proposal_probability:g}" if profile.proposal_probability != 1 else ""),
        f"Scheduler: {limits.describe()}" if limits else f"Scheduler: max_num_seqs {spec.batch_size_cap}, max_num_batched_tokens {spec.chunk_size}",
    ]
    if version:
        lines.append(f"vLLM {version} (--vllm-version), engine profile {spec.engine} (simulator/profiles/engines.toml)")
        if spec.step_scales is not None:
            scales = spec.step_scales
            lines.append(
                f"step costs fitted to your server (--engine-profile): CPU {spec.engine_overhead_ms:.2f} ms per step, GEMM x{scales.gemm:.3g}, "
                f"attention x{scales.attention:.3g}, all-reduce x{scales.all_reduce:.3g}, drafter x{scales.drafter:.3g}"
            )
    if speculative_input is not None:
        k = speculative_input.k
        where = f"its speedups are the k = {k} column" if k in spec.speculative_tokens else f"k = {k} is outside --k-range: add it to compare"
        lines.append(f"Your --speculative-config runs k = {k} ({where})")
    lines += [
        f"Acceptance: {profile.derivation}.",
        "  Mean acceptance length this gives (what vLLM would log): " + ", ".join(f"k={k}: {v:.2f}" for k, v in entry["acceptance_length_at_k"].items()),
        f"Verify cost: {units.attention_label(primary)} ({primary}) — {doc['verify_cost']['why']}.",
        f"Workload: {'lengths from ' + spec.trace if spec.trace else f'prompts ~{spec.prompt_tokens}, outputs ~{spec.output_tokens} tokens (±{spec.length_spread:.0%})'}; "
        "speedup = median TPOT without speculation (the row's base TPOT) / with it, same workload.",
        "",
    ]
    rows = output.rows
    fixed = [r for r in rows if r["acceptance"] and not r["k_schedule"]]
    baselines = {(r["mode"], r["concurrency"] if r["mode"] == "closed_loop" else r["arrival_rate"]): r for r in rows if not r["acceptance"]}
    ks = spec.speculative_tokens
    marked = False
    for mode, xs, unit in (("closed_loop", spec.concurrency, "in flight"), ("poisson", spec.arrival_rates, "req/s")):
        if not xs:
            continue
        title = "Closed loop" if mode == "closed_loop" else "Open loop (Poisson)"
        lines.append(f"{title}: median TPOT speedup, {primary} [band: {' / '.join(bounds)}], against the row's no-speculation run (base)")
        ks_here = ks if mode == "closed_loop" else spec.poisson_k
        header = f"{unit:>10} | {'base TPOT':>10} | {'base TTFT':>11} | " + " | ".join(f"{'k = ' + str(k):^21}" for k in ks_here) + " | best k | schedule"
        lines += [header, "-" * len(header)]
        by = {(r["mode"], r["attention"], r["num_speculative_tokens"], r["concurrency"] if mode == "closed_loop" else r["arrival_rate"]): r for r in fixed}
        comparison = {c["x"]: c for c in entry["comparison"] if c["mode"] == mode}
        for x in xs:
            base = baselines[(mode, x)]
            cells = []
            for k in ks_here:
                main = by[(mode, primary, k, x)]["tpot_speedup"]
                cells.append(f"{_band(None, main, [by[(mode, b, k, x)]['tpot_speedup'] for b in bounds]):^21}")
            c = comparison.get(x)
            best = (str(c["best_fixed_k"]) if c["best_fixed_k"] else "off") if c else "–"
            sched = f"{c['schedule_tpot_speedup']:.2f}× [{c['band_low']:.2f}–{c['band_high']:.2f}]" if c else "–"
            overloaded = bool(base.get("overloaded"))
            marked |= overloaded
            lines.append(
                f"{units.number(x):>10} | {_ms(base['tpot_p50_s']):>10} | {_ms(base['ttft_p50_s']):>11} | " + " | ".join(cells)
                + f" | {best:^6} | {sched}" + ("  overloaded" if overloaded else "")
            )
        lines.append("")
    if marked:
        lines += [OVERLOAD_NOTE.format(growth=OVERLOAD_TTFT_GROWTH) + ".", ""]
    crossings = [c for c in output.crossovers if c["attention"] == primary and c["mode"] == "closed_loop"]
    if crossings:
        lines.append("Where each fixed k stops paying (closed loop, speedup crosses 1×; " + primary + "): "
                     + "; ".join(f"k={c['num_speculative_tokens']}: {c['crossover']}" for c in crossings))
    off = entry["stops_paying_from"]
    band = ", ".join(f"{b}: {_from(v, spec)}" for b, v in entry["stops_paying_band"].items())
    lines.append(
        f"The recommended schedule stops speculating: {_from(off, spec) if off else 'never: it pays at every concurrency simulated'} ({primary}); band: {band}."
    )
    lines.append(f"Ties: {doc['tie_rule']}.")
    lines.append("")
    lines += _recommendation(spec, entry, doc, profile, version)
    return "\n".join(lines)


def verdict_lines(spec, entry: dict, version: Optional[str]) -> list[str]:
    """The answer first: does it pay, with what, how much, and how far the check rows of the same
    regime say to trust it; then why speculation is off where the error bar switched it off."""
    from simulator.website.paysoff_answer import schedule_words

    dynamic = version is None or vllm_serve.at_least(version, vllm_serve.DYNAMIC_SD_VERSION)
    closed = sorted((c for c in entry["comparison"] if c["mode"] == "closed_loop"), key=lambda c: c["x"])
    if dynamic:
        from simulator.speculative.k_schedule import k_for_batch

        schedule = entry["num_speculative_tokens_per_batch_size"]
        speculating = [c for c in closed if k_for_batch(tuple(map(tuple, schedule)), int(c["x"])) > 0]
        what = schedule_words(schedule)
        figures = [(c["schedule_tpot_speedup"], c["guarded_band_low"]) for c in speculating]
    else:
        fallback = entry["fixed_k_fallback"]
        k = fallback["num_speculative_tokens"]
        speculating = closed if k else []
        what = f"the fixed k = {k}" if k else "speculation off"
        figures = []
    from simulator.sweep import error_bar

    bars = [c["error_bar"] for c in closed if c.get("error_bar")]
    # what the bar is made of, in the sentences that use it
    source = "the fitted profile's held-out error" if spec.fit_error_pct is not None else "the check rows' largest error"
    if spec.fit_error_pct is not None:  # a fitted profile: its own held-out error is the bar
        error = f"error ±{spec.fit_error_pct:.1f}% ({source})"
    else:
        error = f"error {error_bar.summary(bars)}" if bars else "no check rows of this regime: the error is not known"
    if speculating and figures:
        lo = min(f[0] for f in figures)
        hi = max(f[0] for f in figures)
        guarded = min(f[1] for f in figures)
        head = f"Yes: {what}; {lo:.2f}–{hi:.2f}× median TPOT speedup simulated, at least {guarded:.2f}× with the largest error; {error}."
    elif speculating:
        fallback = entry["fixed_k_fallback"]
        head = f"Yes: {what}, {fallback['geomean_tpot_speedup']:.2f}× on average over the concurrencies simulated; {error}."
    elif closed and not dynamic and any(c.get("guarded_best_k") for c in closed):
        safe = [c for c in closed if c.get("guarded_best_k")]
        head = (f"No fixed k stays at or above 1× at every concurrency from {closed[0]['x']:g} to {closed[-1]['x']:g} in flight once "
                f"{source} is taken off its band, so vLLM {version} (no k schedule) should run without speculation; if your load stays "
                f"where a k pays ({', '.join('k = %d at %g' % (c['guarded_best_k'], c['x']) for c in safe)} in flight), that k pays there; {error}.")
    else:
        head = f"No: do not speculate at {closed[0]['x']:g}–{closed[-1]['x']:g} in flight ({what}); {error}." if closed else "No: nothing simulated."
    lines = [head]
    switched = [c for c in closed if c.get("guarded_best_k") == 0 and c["best_fixed_k"] > 0]
    if switched:
        parts = [f"{c['x']:g} in flight (k = {c['best_fixed_k']}: {c['best_fixed_tpot_speedup']:.2f}× simulated)" for c in switched]
        why = (f"their band divided by (1 + {source}) falls below 1×" if any(c.get("error_bar") for c in switched)
               else "their band (the verify-cost bounds) reaches below 1×")
        lines.append("Off where it may lose: " + ", ".join(parts) + f" pay in simulation, but {why} (rule: simulator/sweep/error_bar.py).")
    idle = [c for c in closed if dynamic and c.get("guarded_best_k") == 0 and c["schedule_tpot_speedup"] < 1 and any(k for _, _, k in entry["num_speculative_tokens_per_batch_size"])]
    if idle:
        lo, hi = min(c["schedule_tpot_speedup"] for c in idle), max(c["schedule_tpot_speedup"] for c in idle)
        lines.append(
            f"Where the schedule runs k = 0 ({', '.join(format(c['x'], 'g') for c in idle)} in flight) it is {lo:.2f}–{hi:.2f}× against a server "
            "without speculation (vLLM >= 0.24 still drafts there: Model Runner V2 the full k, the V1 runner a drafter's first pass, "
            "and on the V1 runner a schedule runs piecewise CUDA graphs); if most of your load is there, serve without --speculative-config."
        )
    return lines


def _recommendation(spec, entry: dict, doc: dict, profile, version: Optional[str]) -> list[str]:
    """The schedule for a vLLM that takes one, the best fixed k for one that does not; the version
    the user named decides which comes first."""
    fallback = entry["fixed_k_fallback"]
    dynamic = version is None or vllm_serve.at_least(version, vllm_serve.DYNAMIC_SD_VERSION)
    schedule_lines: list[str] = []
    top = entry.get("simulated_up_to")
    if entry["speculative_config"] and top and top < spec.batch_size_cap:
        schedule_lines.append(
            f"Note: the schedule's last row runs to --max-num-seqs {spec.batch_size_cap}, but only up to {top} in flight was simulated; "
            f"above that it keeps the last measured k. Add larger values to --concurrency to check them."
        )
    if entry["speculative_config"]:
        schedule_lines += [
            ("Recommended" if dynamic else f"On vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later, the recommended") + " num_speculative_tokens_per_batch_size "
            "(rows [first batch size, last batch size, k]): " + json.dumps(entry["num_speculative_tokens_per_batch_size"], separators=(",", ":")),
            "--speculative-config '" + entry["speculative_config_json"] + "'",
            entry["serve_command"],
            f"Needs {doc['vllm']['text']} ({', '.join(doc['vllm']['sources'])})",
        ]
    else:
        schedule_lines += [f"Recommendation: {entry['note']}.", entry["serve_command"]]
    k = fallback["num_speculative_tokens"]
    if k:
        losing = fallback["below_1x_at"]
        fixed_lines = [
            ("Recommended for vLLM " + version + " (no num_speculative_tokens_per_batch_size before " + vllm_serve.DYNAMIC_SD_VERSION + ")" if not dynamic
             else f"On vLLM before {vllm_serve.DYNAMIC_SD_VERSION} (no k schedule)")
            + f": the best fixed k = {k}, {fallback['geomean_tpot_speedup']:.2f}× geometric-mean TPOT speedup over the concurrencies simulated"
            + (f"; below 1× at {', '.join(units_number(x) for x in losing)} in flight" if losing else "; at least 1× at every one"),
            "--speculative-config '" + fallback["speculative_config_json"] + "'",
            fallback["serve_command"],
        ]
    else:
        fixed_lines = [f"{'For vLLM ' + version if not dynamic else 'On vLLM before ' + vllm_serve.DYNAMIC_SD_VERSION}: no fixed k pays on average over the "
                       "concurrencies simulated: run without --speculative-config", fallback["serve_command"]]
    method = [f"Method {profile.kind.vllm_method} ({profile.kind.label}): {profile.kind.vllm_version}."]
    return (schedule_lines + [""] + fixed_lines if dynamic else fixed_lines + [""] + schedule_lines) + method


def units_number(x) -> str:
    from simulator.website import units

    return units.number(x)


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
    from simulator.util.progress import quiet_vidur

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
    from simulator.sweep.paysoff_runner import csv_texts, run_paysoff
    from simulator.util.textio import atomic_write_text, check_writable_file

    spec = spec_from_args(args)
    for flag, path in (("--json", args.json), ("--csv", args.csv)):
        if path is not None:
            check_writable_file(path, flag)
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


if __name__ == "__main__":
    sys.exit(main())
