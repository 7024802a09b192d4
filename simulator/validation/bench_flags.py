"""``bench``'s flags: the parser, in ``vllm bench serve``'s terms, and the checks that turn the
parsed flags into what the run needs (the random dataset, the percentiles and SLOs, the replay's
options) before anything is sent or written.  The run itself is :mod:`bench`.
"""

from __future__ import annotations

import argparse
import math
from typing import Optional

from simulator.cli.argtypes import Synonyms, burstiness, non_negative_int, positive_int, range_ratio, request_rate, speculative_tokens
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, proposer_kind
from simulator.cli.speculation_flags import require_draft_model
from simulator.profiles.hardware import DEFAULT_DEVICE, device_names
from simulator.util.errors import ConfigError
from simulator.validation.bench_work import PREVIOUS, WORK_PREFIX
from simulator.validation.random_dataset import RAMP_UP_STRATEGIES

DEFAULT_PERCENTILE_METRICS = "ttft,tpot,itl"  # vllm bench serve's default for generative models
HEADER_EXAMPLE, METADATA_EXAMPLE = "x-additional-info=0.3.3", "version=0.3.3 tp=1"  # vLLM's help examples


def parse_pairs(pairs: Optional[list], flag: str, example: str) -> dict:
    """``--metadata``/``--header`` ``KEY=VALUE ...``: split at the first ``=``, stripped, as vLLM splits them."""
    parsed: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = str(pair).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {pair}: expected KEY=VALUE pairs such as {example}")
        parsed[key.strip()] = value.strip()
    return parsed


def parse_goodput(pairs: Optional[list]) -> dict:
    """``--goodput ttft:500 tpot:50``: SLOs in milliseconds, keyed ttft, tpot or e2el, as vLLM's."""
    from simulator.validation.bench_result import GOODPUT_METRICS

    slos: dict[str, float] = {}
    for pair in pairs or ():
        name, sep, value = str(pair).partition(":")
        try:
            number = float(value) if sep and ":" not in value else None
        except ValueError:
            number = None
        if number is None or not math.isfinite(number):
            raise ConfigError(f"--goodput {pair}: expected KEY:VALUE pairs such as ttft:500 tpot:50 (a metric and its SLO in milliseconds)")
        if name not in GOODPUT_METRICS:
            raise ConfigError(f"--goodput {pair}: {name!r} is not a request-level metric; use {', '.join(GOODPUT_METRICS)}")
        if number < 0:
            raise ConfigError(f"--goodput {pair}: an SLO must be >= 0 milliseconds")
        slos[name] = number
    return slos


def add_bench_parser(steps, epilog: str) -> None:
    b = steps.add_parser(
        "bench",
        help="vllm bench serve's random benchmark, replayed, calibrated, simulated and compared in one go",
        description="Run vllm bench serve's random-dataset benchmark against a vLLM server and the simulator, and compare them. "
        "Flags and defaults are vllm bench serve's; the last group is this harness's own.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("--backend", default="openai", choices=("openai", "vllm"), help="an OpenAI-compatible completions backend (default: openai)")
    b.add_argument("--label", help="prefix of the result file name (default: the backend)")
    b.add_argument("--base-url", help="server root, e.g. http://127.0.0.1:8000 (default: http://HOST:PORT)")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--port", type=int, default=8000)
    b.add_argument("--endpoint", default="/v1/completions", help="the completions path (default: /v1/completions)")
    b.add_argument("--model", help="the model the server runs, which is also the model simulated (default: the first /v1/models lists, by its root)")
    b.add_argument("--served-model-name", help="the name the API serves it under, when it differs from --model")
    b.add_argument("--dataset-name", default="random", help="only random is supported (default: random)")
    b.add_argument("--dataset-path", help="not used by the random dataset (refused, as vllm bench serve refuses it)")
    b.add_argument("--random-input-len", "--input-len", dest="random_input_len", type=non_negative_int, default=1024, action=Synonyms, help="input tokens per request (default: 1024; --input-len is the same flag, as in newer vLLM)")
    b.add_argument("--random-output-len", "--output-len", dest="random_output_len", type=positive_int, default=128, action=Synonyms, help="output tokens per request (default: 128; --output-len is the same flag)")
    b.add_argument("--random-range-ratio", type=range_ratio, default=0.0, help="lengths uniform in [L(1-r), L(1+r)] (default: 0.0)")
    b.add_argument("--random-prefix-len", type=non_negative_int, default=0, help="a random prefix shared by every prompt (default: 0)")
    b.add_argument("--num-prompts", type=positive_int, default=1000, help="requests (default: 1000)")
    b.add_argument("--request-rate", type=request_rate, default=math.inf, help="requests per second, or inf: every request at once (default: inf)")
    b.add_argument("--burstiness", type=burstiness, default=1.0, help="gamma shape of the arrival gaps: 1 Poisson, below 1 burstier, inf evenly spaced (default: 1.0)")
    b.add_argument("--ramp-up-strategy", choices=RAMP_UP_STRATEGIES, help="the request rate climbs from --ramp-up-start-rps to --ramp-up-end-rps over the run (no --request-rate then)")
    b.add_argument("--ramp-up-start-rps", type=positive_int, help="the first request's rate, with --ramp-up-strategy")
    b.add_argument("--ramp-up-end-rps", type=positive_int, help="the last request's rate, with --ramp-up-strategy")
    b.add_argument("--max-concurrency", type=positive_int, help="requests in flight at most (default: no limit)")
    b.add_argument("--num-warmups", type=non_negative_int, default=0, help="copies of the first request sent before the measured run, outside its /metrics scrapes (default: 0)")
    b.add_argument("--seed", type=non_negative_int, default=0, help="seeds lengths, prompts and arrivals (default: 0)")
    b.add_argument("--ignore-eos", action="store_true", help="accepted for vLLM's sake: every request ignores EOS here, as vLLM's random dataset forces")
    b.add_argument("--tokenizer", help="recorded as tokenizer_id in the result only: prompts are sent as token ids, so no tokenizer is loaded")
    b.add_argument("--header", nargs="*", metavar="KEY=VALUE", help="HTTP headers sent with every request (and /metrics scrape); only their names are saved")
    b.add_argument("--metadata", nargs="*", metavar="KEY=VALUE", help="key-value pairs saved in the result JSON, e.g. --metadata version=0.3.3 tp=1")
    b.add_argument("--percentile-metrics", default=DEFAULT_PERCENTILE_METRICS, help=f"metrics that get --metric-percentiles (default: {DEFAULT_PERCENTILE_METRICS})")
    b.add_argument("--metric-percentiles", default="99", help="comma-separated percentiles from 0 to 100 (default: 99)")
    b.add_argument("--goodput", nargs="+", metavar="KEY:VALUE", help="SLOs in ms for request goodput, e.g. ttft:500 tpot:50 (keys ttft, tpot, e2el)")
    b.add_argument("--save-result", action="store_true", help="write the result JSON")
    b.add_argument("--save-detailed", action="store_true", help="include the per-request arrays (input_lens, output_lens, ttfts, itls, start_times, errors)")
    b.add_argument("--result-dir", help="directory of the result JSON (default: the current directory)")
    b.add_argument("--result-filename", help="name of the result JSON (default: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json, as vLLM)")
    b.add_argument("--disable-tqdm", action="store_true", help="no progress bar")
    sampling = b.add_argument_group("sampling parameters (sent only when given, as vllm bench serve sends them)")
    sampling.add_argument("--temperature", type=float, help="sampling temperature (default: not sent; the server's default applies)")
    sampling.add_argument("--top-p", type=float, help="top-p (default: not sent)")
    sampling.add_argument("--top-k", type=int, help="top-k (default: not sent)")
    sampling.add_argument("--min-p", type=float, help="min-p (default: not sent)")
    h = b.add_argument_group("this harness's own (not vllm bench serve's)")
    h.add_argument("--device", default=DEFAULT_DEVICE, help=f"GPU SKU the server runs on, for the simulation: {', '.join(device_names())} (default: {DEFAULT_DEVICE})")
    h.add_argument("--profile-dir", help="a Vidur-format profile measured on that GPU (default: the built-in profile)")
    add_proposer_flags(h, options=False)
    h.add_argument("--draft-model", help=draft_model_help())
    h.add_argument("--num-speculative-tokens", type=speculative_tokens, help="the server's k (default: read from its counters)")
    h.add_argument("--force", action="store_true", help="calibrate where k disagrees with the chunks or counters, and with flagged sessions")
    h.add_argument("--acceptance-seed", type=non_negative_int, default=0, help="seeds the simulator's acceptance draws (default: 0)")
    h.add_argument("--timeout", type=float, default=300.0, help="seconds of silence on a stream before its request is a timeout (default: 300)")
    h.add_argument("--vocab-size", type=positive_int, default=32000, help="prompt token ids are drawn below this (there is no tokenizer; default: 32000)")
    h.add_argument("--min-token-id", type=non_negative_int, default=1000, help="... and from this id up (default: 1000)")
    h.add_argument("--work-dir", help=f"where the steps' files go (default: RESULT_DIR/{WORK_PREFIX}HASH of the workload, server and model); a new run sets the last one's aside in {PREVIOUS}/")
    h.add_argument("--resume", action="store_true", help="continue the run in the work directory (after Ctrl-C, a crash or failed requests: failures are resent) instead of measuring anew")


def checked_options(args):
    """Every flag is checked before anything is sent or written."""
    from simulator.profiles.hardware import get_device
    from simulator.validation.compare import parse_percentile_metrics, parse_percentiles
    from simulator.validation.random_dataset import RandomDataset

    if args.dataset_name != "random":
        raise ConfigError(
            f"--dataset-name {args.dataset_name}: only random is supported here (the harness replays exact lengths as token ids); "
            "use --dataset-name random, or the step-by-step commands (generate --trace FILE for a length trace)"
        )
    if args.dataset_path is not None:
        raise ConfigError(f"--dataset-path {args.dataset_path}: the random dataset reads no file; drop --dataset-path")
    percentiles = parse_percentiles(args.metric_percentiles)
    metrics = parse_percentile_metrics(args.percentile_metrics)
    slos = parse_goodput(args.goodput)
    parse_pairs(args.metadata, "--metadata", METADATA_EXAMPLE)
    parse_pairs(args.header, "--header", HEADER_EXAMPLE)
    kind = proposer_kind(args)
    require_draft_model(kind, args.draft_model)
    get_device(args.device)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"--timeout {args.timeout!r}: must be > 0 seconds of silence")
    dataset = RandomDataset(
        num_prompts=args.num_prompts,
        input_len=args.random_input_len,
        output_len=args.random_output_len,
        range_ratio=args.random_range_ratio,
        prefix_len=args.random_prefix_len,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        seed=args.seed,
        vocab_size=args.vocab_size,
        min_token_id=args.min_token_id,
        ramp_up_strategy=args.ramp_up_strategy,
        ramp_up_start_rps=args.ramp_up_start_rps,
        ramp_up_end_rps=args.ramp_up_end_rps,
    )
    return dataset, percentiles, metrics, slos


def _sampling(args) -> tuple:
    """The sampling parameters given, as (request field, value) pairs; temperature apart (the
    fields and their flags: :data:`replay_options.SAMPLING`)."""
    from simulator.validation.replay_options import SAMPLING

    return tuple((name, getattr(args, name)) for name in SAMPLING if getattr(args, name) is not None)


def replay_options(args, root: str, model: Optional[str] = None, concurrency: int = 256):
    """The replay's options from bench's flags (checks the URL, endpoint, timeout and sampling)."""
    from simulator.validation.replay_options import ReplayOptions

    return ReplayOptions(
        base_url=root,
        endpoint=args.endpoint,
        model=model,
        concurrency=concurrency,
        timeout_s=args.timeout,
        temperature=args.temperature,
        sampling=_sampling(args),
        headers=tuple(parse_pairs(args.header, "--header", HEADER_EXAMPLE).items()),
        retry_failed=True,  # with --resume, failures are resent
        progress=not args.disable_tqdm,
    )


def server_root(args) -> str:
    url = args.base_url or f"http://{args.host}:{args.port}"
    return replay_options(args, url).root_url
