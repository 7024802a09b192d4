"""``python -m simulator``'s flags: ``vllm bench serve``'s workload names, the speculation, ``vllm
serve``'s limits, the outputs.  Every default is read from the configuration dataclasses
(:mod:`simulator.runs.config`), so the help cannot drift from a run."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields

from simulator.cli import command, vllm_serve
from simulator.cli.argtypes import DeprecatedAlias, Synonyms, finite, non_negative_int, positive_int, request_rate
from simulator.cli.catalog_help import device_help, model_help
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help
from simulator.runs.config import KV_CACHE_DTYPES, QUANTIZATIONS, RunConfig, SCHEDULERS
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.speculative.verify_cost import ATTENTION_MODES

PROG = "python -m simulator"
DATASETS = ("random",)  # vllm bench serve's --dataset-name values the simulator draws lengths for


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


def wl(name: str):
    return _default(PoissonWorkload, name)


def sp(name: str):
    return _default(SpeculationConfig, name)


def rc(name: str):
    return _default(RunConfig, name)


def _workload_flags(p) -> None:
    """vllm bench serve's workload flags."""
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


def _speculation_flags(p) -> None:
    """The speculation: --speculative-config, k or schedule, acceptance, proposer options."""
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


def _system_flags(p) -> None:
    """The server: vllm serve's limits and the GPU, model and engine behind them."""
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


def _output_flags(p) -> None:
    """Where results go."""
    o = p.add_argument_group("output")
    o.add_argument("--json", help="write summary, configuration and provenance as JSON here")
    o.add_argument("--requests-csv", help="write per-request results as CSV here")
    o.add_argument("-v", "--verbose", action="store_true", help="show Vidur's log")


def build_parser() -> argparse.ArgumentParser:
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
    _workload_flags(p)
    _speculation_flags(p)
    _system_flags(p)
    _output_flags(p)
    return p
