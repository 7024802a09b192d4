"""``python -m simulator.validation bench``: one command in ``vllm bench serve``'s terms.

It generates vLLM's random dataset (:mod:`random_dataset`), replays it against the server
(scraping ``/metrics`` before and after), calibrates acceptance and the KV budget from the
counters, simulates the same workload and compares, then prints vLLM's summary table with a
simulated and an error column, and with ``--save-result`` writes vLLM's result JSON
(:mod:`bench_result`).  The flags and defaults are vLLM's; the few it lacks (what to simulate
on, the stall timeout, the work directory) say so in ``--help``.

Each step writes its files under the work directory, as the step-by-step commands do
(``workload.jsonl``, ``replay/``, ``replay/calibration.json``, ``simulated/``, ``report/``), so
any step can be rerun on its own.  The directory is named after a hash of the workload (which
the flags and ``--seed`` fix), the server's URL and the model served, so another server or
model gets a directory of its own.  Like ``vllm bench serve``, every run measures anew: the
previous run's files are set aside in ``previous/`` once the new run's checks have passed (a
server restarted with another k is never reported with the old numbers).  ``--resume``
continues the run there instead, after Ctrl-C, a crash or failed requests (resending
failures), and refuses a server whose k has changed since.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

from simulator.cli.argtypes import Synonyms, positive_int, request_rate, speculative_tokens
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, proposer_kind, require_draft_model
from simulator.profiles.hardware import DEFAULT_DEVICE, device_names
from simulator.util.errors import ConfigError
from simulator.validation.random_dataset import RAMP_UP_STRATEGIES

DEFAULT_PERCENTILE_METRICS = "ttft,tpot,itl"  # vllm bench serve's default for generative models
WORK_PREFIX = "vidur-bench-"
WORKLOAD_FILE = "workload.jsonl"
RUN_FILES = (WORKLOAD_FILE, "replay", "simulated", "report")  # one run's files in the work directory
PREVIOUS = "previous"  # where a new run sets the last one's files aside
HEADER_EXAMPLE, METADATA_EXAMPLE = "x-additional-info=0.3.3", "version=0.3.3 tp=1"  # vLLM's help examples


def _burstiness(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0 (1: Poisson arrivals)")
    return value


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be in [0, 1)")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


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
    b.add_argument("--random-input-len", "--input-len", dest="random_input_len", type=_non_negative, default=1024, action=Synonyms, help="input tokens per request (default: 1024; --input-len is the same flag, as in newer vLLM)")
    b.add_argument("--random-output-len", "--output-len", dest="random_output_len", type=positive_int, default=128, action=Synonyms, help="output tokens per request (default: 128; --output-len is the same flag)")
    b.add_argument("--random-range-ratio", type=_ratio, default=0.0, help="lengths uniform in [L(1-r), L(1+r)] (default: 0.0)")
    b.add_argument("--random-prefix-len", type=_non_negative, default=0, help="a random prefix shared by every prompt (default: 0)")
    b.add_argument("--num-prompts", type=positive_int, default=1000, help="requests (default: 1000)")
    b.add_argument("--request-rate", type=request_rate, default=math.inf, help="requests per second, or inf: every request at once (default: inf)")
    b.add_argument("--burstiness", type=_burstiness, default=1.0, help="gamma shape of the arrival gaps: 1 Poisson, below 1 burstier, inf evenly spaced (default: 1.0)")
    b.add_argument("--ramp-up-strategy", choices=RAMP_UP_STRATEGIES, help="the request rate climbs from --ramp-up-start-rps to --ramp-up-end-rps over the run (no --request-rate then)")
    b.add_argument("--ramp-up-start-rps", type=positive_int, help="the first request's rate, with --ramp-up-strategy")
    b.add_argument("--ramp-up-end-rps", type=positive_int, help="the last request's rate, with --ramp-up-strategy")
    b.add_argument("--max-concurrency", type=positive_int, help="requests in flight at most (default: no limit)")
    b.add_argument("--num-warmups", type=_non_negative, default=0, help="copies of the first request sent before the measured run, outside its /metrics scrapes (default: 0)")
    b.add_argument("--seed", type=_non_negative, default=0, help="seeds lengths, prompts and arrivals (default: 0)")
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
    h.add_argument("--acceptance-seed", type=_non_negative, default=0, help="seeds the simulator's acceptance draws (default: 0)")
    h.add_argument("--timeout", type=float, default=300.0, help="seconds of silence on a stream before its request is a timeout (default: 300)")
    h.add_argument("--vocab-size", type=positive_int, default=32000, help="prompt token ids are drawn below this (there is no tokenizer; default: 32000)")
    h.add_argument("--min-token-id", type=_non_negative, default=1000, help="... and from this id up (default: 1000)")
    h.add_argument("--work-dir", help=f"where the steps' files go (default: RESULT_DIR/{WORK_PREFIX}HASH of the workload, server and model); a new run sets the last one's aside in {PREVIOUS}/")
    h.add_argument("--resume", action="store_true", help="continue the run in the work directory (after Ctrl-C, a crash or failed requests: failures are resent) instead of measuring anew")


def _checked_options(args):
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
    fields and their flags: :data:`replay.SAMPLING`)."""
    from simulator.validation.replay import SAMPLING

    return tuple((name, getattr(args, name)) for name in SAMPLING if getattr(args, name) is not None)


def replay_options(args, root: str, model: Optional[str] = None, concurrency: int = 256):
    """The replay's options from bench's flags (checks the URL, endpoint, timeout and sampling)."""
    from simulator.validation.replay import ReplayOptions

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


def _server_root(args) -> str:
    url = args.base_url or f"http://{args.host}:{args.port}"
    return replay_options(args, url).root_url


def list_models(root: str, headers: Optional[dict] = None) -> list:
    """The entries of the server's ``/v1/models``, in its order (asked with the ``--header``
    pairs, which a proxy in front of the server may need); a ConfigError naming the URL when
    there are none to read."""
    import httpx

    try:
        entries = httpx.get(f"{root}/v1/models", timeout=10.0, headers=headers).json()["data"]
        if not entries:
            raise IndexError("it lists no model")
        return [dict(entry) for entry in entries]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as err:
        raise ConfigError(f"cannot list models at {root}/v1/models ({type(err).__name__}: {err}); is {root} a vLLM server? pass --base-url, or --host and --port") from None


def served_models(root: str, args, listed: Optional[list] = None) -> tuple[str, str]:
    """(the name requests go under, the model simulated), as vLLM resolves them: --model and
    --served-model-name, else the first model /v1/models lists (its id and its root).
    ``listed``: the server's /v1/models entries, when the caller has them."""
    from simulator.vidur.models import model_config

    if args.model is not None:
        api, simulated = args.served_model_name or args.model, args.model
    else:
        first = (listed or list_models(root))[0]
        try:
            api, simulated = str(first["id"]), str(first.get("root") or first["id"])
        except KeyError as err:
            raise ConfigError(f"cannot list models at {root}/v1/models (an entry without {err}); is {root} a vLLM server? pass --base-url, or --host and --port") from None
    try:
        model_config(simulated)
    except ConfigError as err:
        served = f" --served-model-name {api}" if args.model is None else ""
        raise ConfigError(f"--model {simulated}: the simulator cannot simulate it ({str(err).split(';')[0]}); pass --model NAME (a model it knows, or a local config.json){served}") from None
    return api, simulated


def _served_limit(args, root: str, listed: list, api_model: str) -> Optional[int]:
    """The ``max_model_len`` the server lists for the name requests go under; a name it does not
    serve is refused naming the flag it came from (--served-model-name, else --model)."""
    from simulator.validation.replay import model_limits

    limits = model_limits({str(entry.get("id")): entry.get("max_model_len") for entry in listed})
    if api_model not in limits:
        flag = "--served-model-name" if args.served_model_name else "--model"
        raise ConfigError(f"{flag} {api_model}: not served by {root} (its /v1/models lists {', '.join(map(repr, limits))}); pass one of those")
    return limits[api_model]


def run_bench(args) -> int:
    """The whole run; Ctrl-C at any stage is one line and exit 130 (outputs are written
    atomically and replay records one complete line at a time, so nothing is half-written)."""
    from simulator.validation.exits import EXIT_INTERRUPTED

    stage = {"name": "checking the flags", "work": None}
    try:
        return _bench(args, stage)
    except KeyboardInterrupt:
        where = f"; every finished step's files and every replay record are kept in {stage['work']}" if stage["work"] else ""
        print(f"interrupted: bench stopped while {stage['name']}{where}; nothing is half-written: rerun the same command with --resume to continue it", file=sys.stderr)
        return EXIT_INTERRUPTED


def set_aside_previous_run(work: Path) -> Optional[Path]:
    """Move the last run's files in ``work`` (:data:`RUN_FILES`) into ``work/previous/``,
    replacing the run set aside before it, so a new run starts from nothing and the last one's
    measurements are not lost to a rerun without ``--resume``.  Returns where they went (None
    when there was nothing to set aside)."""
    import os
    import shutil

    present = [name for name in RUN_FILES if (work / name).exists()]
    if not present:
        return None
    previous = work / PREVIOUS
    if previous.exists():
        shutil.rmtree(previous)
    previous.mkdir(parents=True)
    for name in present:
        os.replace(work / name, previous / name)
    return previous


def _starter(work: Path, workload, fresh: bool):
    """What runs once the replay's checks have passed, before its first write: a fresh run sets
    the last one aside; either writes the workload (a resumed run only when it is missing)."""
    from simulator.validation.workload import write_workload

    def start() -> None:
        if fresh:
            previous = set_aside_previous_run(work)
            if previous is not None:
                print(f"bench: measuring anew; the last run's files in {work} are set aside in {previous} (pass --resume to continue a run instead)")
        if not (work / WORKLOAD_FILE).is_file():
            write_workload(work / WORKLOAD_FILE, workload)

    return start


def _check_work_dir(work: Path, workload, resume: bool) -> None:
    """The work directory can hold a run's files, and a run resumed there is of this workload."""
    from simulator.validation.files import check_output_dir
    from simulator.validation.workload import read_workload

    check_output_dir(work, "--work-dir", files=(WORKLOAD_FILE,), dirs=RUN_FILES[1:] + (PREVIOUS,))
    workload_path = work / WORKLOAD_FILE
    if resume and workload_path.is_file() and read_workload(workload_path).workload_hash != workload.workload_hash:
        raise ConfigError(f"--resume: --work-dir {work} holds another workload ({workload_path}); drop --resume to measure these flags anew, or pass a new --work-dir")


def _warm_up(args, workload, api_model: str, options) -> None:
    """--num-warmups: copies of the first request, before the replay takes its opening scrape."""
    from simulator.validation.replay import warm_up

    if not args.num_warmups:
        return
    statuses = warm_up(workload.requests[0], args.num_warmups, api_model, options)
    failed = sum(n for status, n in statuses.items() if status != "ok")
    print(f"bench: warmed up with {args.num_warmups} requests" + (f" ({failed} failed: {', '.join(f'{k} {v}' for k, v in statuses.items() if k != 'ok')})" if failed else ""))


def _bench(args, stage: dict) -> int:
    from simulator.util.textio import check_creatable_dir
    from simulator.validation.calibrate import calibrate
    from simulator.validation.bench_result import render
    from simulator.validation.exits import EXIT_CLOSING_SCRAPE_FAILED, EXIT_OK
    from simulator.validation.files import atomic_write_json, check_output_file
    from simulator.validation.random_dataset import generate_random
    from simulator.validation.replay import check_context, replay
    from simulator.validation.replay_files import read_results, results_path, unfinished_requests

    dataset, percentiles, metrics, slos = _checked_options(args)
    root = _server_root(args)
    result_dir = Path(args.result_dir) if args.result_dir else Path(".")
    if args.save_result:
        check_creatable_dir(result_dir, f"--result-dir {result_dir}")
        if args.result_filename:
            check_output_file(result_dir / args.result_filename, "--result-filename")
    workload = generate_random(dataset)
    stage["name"] = "listing the server's models"
    listed = list_models(root, parse_pairs(args.header, "--header", HEADER_EXAMPLE))
    api_model, sim_model = served_models(root, args, listed)
    check_context(list(workload.requests), _served_limit(args, root, listed, api_model), api_model, root, fix=BENCH_FIX)
    work = Path(args.work_dir) if args.work_dir else result_dir / default_work_dir(workload.workload_hash, root, api_model)
    replay_dir = work / "replay"
    resume = bool(args.resume) and results_path(replay_dir).is_file()  # --resume with no run there: a first run
    _check_work_dir(work, workload, resume)
    options = replay_options(args, root, api_model, args.max_concurrency or len(workload))
    stage["name"] = "warming up"
    _warm_up(args, workload, api_model, options)

    stage["name"], stage["work"] = "replaying", work
    how = "resuming the run" if resume else "measuring anew"
    print(f"bench: {len(workload)} requests (random dataset, workload {workload.workload_hash[:12]}) against {root} as {api_model!r}, {how}; files in {work}")
    try:
        summary = replay(workload, replay_dir, options, fresh=not resume, prepare=_starter(work, workload, fresh=not resume))
    except ConfigError as err:
        fix = "drop --resume to measure anew (or pass a new --work-dir)" if resume else "pass a new --work-dir"
        raise ConfigError(str(err).replace("pass a new --out", fix)) from None
    if not _replayed(summary, replay_dir):
        return EXIT_CLOSING_SCRAPE_FAILED

    results = read_results(replay_dir, workload.workload_hash)
    unfinished = unfinished_requests(workload, results)
    if len(unfinished) == len(workload):
        stage["name"] = "saving the result"
        date = _now()
        full = _result(args, workload, sim_model, date, _measured_only(args, workload, results, replay_dir, percentiles, metrics, slos, api_model, work))
        print(render(full, percentiles, metrics))
        print("bench: no request succeeded, so there is nothing to calibrate or simulate; the result holds the measured run only")
        _save(args, full, result_dir, sim_model, date, stage)
        return _unfinished(workload, results, unfinished, replay_dir)

    stage["name"] = "calibrating"
    calibration = calibrate(replay_dir, args.num_speculative_tokens, force=args.force)
    atomic_write_json(replay_dir / "calibration.json", calibration)
    for dropped in calibration["sessions_dropped"]:
        print(f"warning: replay session {dropped['session']} left out of the calibration: {dropped['reason']}", file=sys.stderr)
    for warning in calibration.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)

    stage["name"] = "simulating"
    report, result = _simulate_and_compare(args, work, workload, calibration, sim_model, percentiles, metrics, slos, api_model)
    date = _now()
    full = _result(args, workload, sim_model, date, result)
    print(render(full, percentiles, metrics))
    print(f"simulated {sim_model} on {args.device}{' with ' + args.profile_dir if args.profile_dir else ''}; report in {work / 'report'}")
    _save(args, full, result_dir, sim_model, date, stage)
    return _unfinished(workload, results, unfinished, replay_dir) if unfinished else EXIT_OK


def _replayed(summary: dict, replay_dir: Path) -> bool:
    """Say what the replay session left to say; False when its closing scrape failed (exit 4:
    the counters cannot be read until a resumed run closes the session)."""
    from simulator.validation.exits import EXIT_CLOSING_SCRAPE_FAILED

    for warning in summary.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if summary.get("session") is None:
        print(f"replay: {summary['note']} (--resume: the records in {replay_dir} are used)")
    if summary.get("stall_tail_s"):
        print(f"warning: session {summary['session']}: {summary['statuses'].get('timeout', 0)} request(s) timed out; {summary['stall_tail_s']:.1f} s spent waiting only on them are outside the measured window", file=sys.stderr)
    if summary.get("unreported_speculation"):
        raise ConfigError(summary["unreported_speculation"])
    if summary.get("session") is not None and not summary["after_scrape"]:
        print(
            f"error: the closing /metrics scrape failed: {summary['after_scrape_error']}; every record is kept in {replay_dir}; "
            f"rerun the same command with --resume once the server is back (exit {EXIT_CLOSING_SCRAPE_FAILED})",
            file=sys.stderr,
        )
        return False
    return True


def _unfinished(workload, results, unfinished: list, replay_dir: Path) -> int:
    """Exit 3, saying how many requests have no successful record and how to resend them."""
    from simulator.validation.exits import EXIT_REQUESTS_FAILED, unfinished_message

    print(f"error: {unfinished_message(workload, results, unfinished)}; every record is kept in {replay_dir}; rerun with --resume to resend them (exit {EXIT_REQUESTS_FAILED})", file=sys.stderr)
    return EXIT_REQUESTS_FAILED


# what shortens bench's requests, for the refusal of prompts beyond the server's max_model_len
BENCH_FIX = "lower --random-input-len/--random-output-len (or --random-range-ratio, --random-prefix-len) to fit within it"


def _now() -> str:
    """vLLM's ``date`` field: the one wall-clock value of the run's outputs."""
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def _result(args, workload, sim_model: str, date: str, result: dict) -> dict:
    """vLLM's leading keys (with --metadata after num_prompts, as vLLM places them: a pair may
    replace a setup key, and the run's own keys replace a pair), then the run's."""
    from simulator.validation.bench_result import header

    head = header(date, args.backend, args.label, sim_model, len(workload), args.request_rate, args.burstiness, args.max_concurrency, tokenizer=args.tokenizer,
                  metadata=parse_pairs(args.metadata, "--metadata", METADATA_EXAMPLE), ramp_up=_ramp_up(args))
    return head | result


def _ramp_up(args) -> Optional[tuple]:
    return (args.ramp_up_strategy, args.ramp_up_start_rps, args.ramp_up_end_rps) if args.ramp_up_strategy else None


def _save(args, full: dict, result_dir: Path, sim_model: str, date: str, stage: dict) -> None:
    from simulator.util.textio import atomic_write_text

    if not args.save_result:
        return
    stage["name"] = "saving the result"
    name = args.result_filename or _result_filename(args, sim_model, date)  # the run's date, whatever --metadata says
    atomic_write_text(result_dir / name, json.dumps(full, indent=2, allow_nan=False) + "\n")
    print(f"wrote {result_dir / name}")


def _measured_only(args, workload, results, replay_dir: Path, percentiles, metrics, slos, api_model: str, work: Path) -> dict:
    """The result when no request succeeded: the measured side (every request failed, with its
    error), no calibration (no counter moved for a completed request) and no simulation."""
    from simulator.validation.bench_result import measured_side
    from simulator.validation.compare import measured_throughput
    from simulator.validation.replay_files import read_summary
    from simulator.validation.sessions import describe

    sessions = describe(read_summary(replay_dir), results.history)
    throughput = measured_throughput(workload, results.records, sessions)
    measured = measured_side(workload, results.records, throughput, {}, [], slos, percentiles, metrics, args.save_detailed)
    return measured | {"simulated": None, "error_pct": {}, "harness": _harness(args, work, workload, api_model, len(sessions)) | {"note": "no request succeeded: nothing was calibrated or simulated"}}


def _harness(args, work: Path, workload, api_model: str, sessions: int) -> dict:
    return {
        "served_model_name": api_model,
        "simulated_device": args.device,
        "work_dir": str(work),
        "workload_hash": workload.workload_hash,
        "replay_sessions": sessions,
        "tokenizer": "none: prompts are sent as token ids" + (f" (--tokenizer {args.tokenizer} is recorded as tokenizer_id only)" if args.tokenizer else ""),
        "wall_clock": "date is the only wall-clock value; the measured side is a measurement, the simulated side is byte-identical for the same flags and seeds",
    }


def _simulate_and_compare(args, work: Path, workload, calibration: dict, sim_model: str, percentiles, metrics, slos, api_model: str):
    from simulator.vidur.logs import quiet_vidur, restore_vidur
    from simulator.validation.bench_result import error_pct, measured_side, simulated_side
    from simulator.validation.replay_files import read_results
    from simulator.validation.report import compare_files
    from simulator.validation.simulate import build_run_config, read_simulated, read_simulated_itls, simulate

    config = build_run_config(workload, calibration, model=sim_model, device=args.device, profile_dir=args.profile_dir, proposer=proposer_kind(args).name, draft_model=args.draft_model, seed=args.acceptance_seed)
    previous = quiet_vidur()
    try:
        simulate(config, workload, calibration, work / "simulated")
    finally:
        restore_vidur(previous)
    report = compare_files(work / "workload.jsonl", work / "replay", work / "replay" / "calibration.json", work / "simulated", work / "report", percentiles=percentiles, percentile_metrics=metrics)
    records = read_results(work / "replay", workload.workload_hash).records
    simulated, frame = read_simulated(work / "simulated")
    itls = read_simulated_itls(work / "simulated", len(workload))
    completed = [rid for rid in range(len(workload)) if (records.get(rid) or {}).get("status") == "ok"]
    measured = measured_side(workload, records, report["throughput"]["measured"], calibration, completed, slos, percentiles, metrics, args.save_detailed)
    simulated_keys = simulated_side(frame, itls, simulated.get("summary") or {}, completed, slos, percentiles, metrics, args.save_detailed, bool(calibration.get("num_speculative_tokens")))
    result = measured | {
        "simulated": simulated_keys,
        "error_pct": error_pct(measured, simulated_keys),
        "harness": _harness(args, work, workload, api_model, len(report.get("replay_sessions") or [])),
    }
    return report, result


def default_work_dir(workload_hash: str, root: str, api_model: str) -> str:
    """The work directory's name: the workload, the server and the model served, hashed, so
    the same command resumes its own replay and another server or model never reuses it."""
    from simulator.validation.files import sha256_hex

    return WORK_PREFIX + sha256_hex(f"{workload_hash}\n{root}\n{api_model}")[:12]


def _result_filename(args, model: str, date: str) -> str:
    """vLLM's default name: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json, or with a ramp-up
    LABEL-ramp-up-STRATEGY-STARTqps-ENDqps[-concurrencyN]-MODEL-DATE.json."""
    concurrency = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
    rate = f"ramp-up-{args.ramp_up_strategy}-{args.ramp_up_start_rps}qps-{args.ramp_up_end_rps}qps" if args.ramp_up_strategy else f"{args.request_rate}qps"
    return f"{args.label or args.backend}-{rate}{concurrency}-{model.split('/')[-1]}-{date}.json"
