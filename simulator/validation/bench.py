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
the flags and ``--seed`` fix), the server's URL and the model served: rerunning the same
command after Ctrl-C, a crash or failed requests resumes the replay (resending failures)
instead of starting over, and another server or model gets a directory of its own.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

from simulator.cli.argtypes import positive_int, request_rate, speculative_tokens
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, proposer_kind, require_draft_model
from simulator.util.errors import ConfigError

DEFAULT_PERCENTILE_METRICS = "ttft,tpot,itl"  # vllm bench serve's default for generative models
WORK_PREFIX = "vidur-bench-"


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
    b.add_argument("--random-input-len", type=_non_negative, default=1024, help="input tokens per request (default: 1024)")
    b.add_argument("--random-output-len", type=positive_int, default=128, help="output tokens per request (default: 128)")
    b.add_argument("--random-range-ratio", type=_ratio, default=0.0, help="lengths uniform in [L(1-r), L(1+r)] (default: 0.0)")
    b.add_argument("--random-prefix-len", type=_non_negative, default=0, help="a random prefix shared by every prompt (default: 0)")
    b.add_argument("--num-prompts", type=positive_int, default=1000, help="requests (default: 1000)")
    b.add_argument("--request-rate", type=request_rate, default=math.inf, help="requests per second, or inf: every request at once (default: inf)")
    b.add_argument("--burstiness", type=_burstiness, default=1.0, help="gamma shape of the arrival gaps: 1 Poisson, below 1 burstier (default: 1.0)")
    b.add_argument("--max-concurrency", type=positive_int, help="requests in flight at most (default: no limit)")
    b.add_argument("--seed", type=_non_negative, default=0, help="seeds lengths, prompts and arrivals (default: 0)")
    b.add_argument("--ignore-eos", action="store_true", help="accepted for vLLM's sake: every request ignores EOS here, as vLLM's random dataset forces")
    b.add_argument("--temperature", type=float, default=0.0, help="sampling temperature sent (default: 0, greedy; vLLM leaves it to the server)")
    b.add_argument("--percentile-metrics", default=DEFAULT_PERCENTILE_METRICS, help=f"metrics that get --metric-percentiles (default: {DEFAULT_PERCENTILE_METRICS})")
    b.add_argument("--metric-percentiles", default="99", help="comma-separated percentiles (default: 99)")
    b.add_argument("--goodput", nargs="+", metavar="KEY:VALUE", help="SLOs in ms for request goodput, e.g. ttft:500 tpot:50 (keys ttft, tpot, e2el)")
    b.add_argument("--save-result", action="store_true", help="write the result JSON")
    b.add_argument("--save-detailed", action="store_true", help="include the per-request arrays (input_lens, output_lens, ttfts, itls, start_times, errors)")
    b.add_argument("--result-dir", help="directory of the result JSON (default: the current directory)")
    b.add_argument("--result-filename", help="name of the result JSON (default: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json, as vLLM)")
    b.add_argument("--disable-tqdm", action="store_true", help="no progress bar")
    h = b.add_argument_group("this harness's own (not vllm bench serve's)")
    h.add_argument("--device", default="a100", help="GPU SKU the server runs on, for the simulation: a100, h100 or h200 (default: a100)")
    h.add_argument("--profile-dir", help="a Vidur-format profile measured on that GPU (default: the built-in profile)")
    add_proposer_flags(h, options=False)
    h.add_argument("--draft-model", help=draft_model_help())
    h.add_argument("--num-speculative-tokens", type=speculative_tokens, help="the server's k (default: read from its counters)")
    h.add_argument("--force", action="store_true", help="calibrate where k disagrees with the chunks or counters, and with flagged sessions")
    h.add_argument("--acceptance-seed", type=_non_negative, default=0, help="seeds the simulator's acceptance draws (default: 0)")
    h.add_argument("--timeout", type=float, default=300.0, help="seconds of silence on a stream before its request is a timeout (default: 300)")
    h.add_argument("--vocab-size", type=positive_int, default=32000, help="prompt token ids are drawn below this (there is no tokenizer; default: 32000)")
    h.add_argument("--min-token-id", type=_non_negative, default=1000, help="... and from this id up (default: 1000)")
    h.add_argument("--work-dir", help=f"where the steps' files go (default: RESULT_DIR/{WORK_PREFIX}HASH of the workload, server and model; rerun the same command to resume)")


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
    )
    return dataset, percentiles, metrics, slos


def _server_root(args) -> str:
    from simulator.validation.replay import ReplayOptions

    url = args.base_url or f"http://{args.host}:{args.port}"
    return ReplayOptions(url, endpoint=args.endpoint, timeout_s=args.timeout, temperature=args.temperature).root_url  # checks the URL and endpoint


def served_models(root: str, args) -> tuple[str, str]:
    """(the name requests go under, the model simulated), as vLLM resolves them: --model and
    --served-model-name, else the first model /v1/models lists (its id and its root)."""
    import httpx

    from simulator.models.catalog import model_config

    if args.model is not None:
        api, simulated = args.served_model_name or args.model, args.model
    else:
        try:
            first = httpx.get(f"{root}/v1/models", timeout=10.0).json()["data"][0]
            api, simulated = str(first["id"]), str(first.get("root") or first["id"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as err:
            raise ConfigError(f"cannot list models at {root}/v1/models ({type(err).__name__}: {err}); is {root} a vLLM server? pass --base-url, or --host and --port") from None
    try:
        model_config(simulated)
    except ConfigError as err:
        served = f" --served-model-name {api}" if args.model is None else ""
        raise ConfigError(f"--model {simulated}: the simulator cannot simulate it ({str(err).split(';')[0]}); pass --model NAME (a model it knows, or a local config.json){served}") from None
    return api, simulated


def run_bench(args) -> int:
    """The whole run; Ctrl-C at any stage is one line and exit 130 (outputs are written
    atomically and replay records one complete line at a time, so nothing is half-written)."""
    from simulator.validation.exits import EXIT_INTERRUPTED

    stage = {"name": "checking the flags", "work": None}
    try:
        return _bench(args, stage)
    except KeyboardInterrupt:
        where = f"; every finished step's files and every replay record are kept in {stage['work']}" if stage["work"] else ""
        print(f"interrupted: bench stopped while {stage['name']}{where}; nothing is half-written: rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


def _bench(args, stage: dict) -> int:
    from simulator.util.textio import atomic_write_text, check_creatable_dir
    from simulator.validation.calibrate import calibrate
    from simulator.validation.exits import EXIT_CLOSING_SCRAPE_FAILED, EXIT_OK, EXIT_REQUESTS_FAILED, unfinished_message
    from simulator.validation.files import atomic_write_json, check_output_dir, check_output_file
    from simulator.validation.random_dataset import generate_random
    from simulator.validation.replay import ReplayOptions, replay
    from simulator.validation.replay_files import read_results, unfinished_requests
    from simulator.validation.workload import read_workload, write_workload

    dataset, percentiles, metrics, slos = _checked_options(args)
    root = _server_root(args)
    result_dir = Path(args.result_dir) if args.result_dir else Path(".")
    if args.save_result:
        check_creatable_dir(result_dir, f"--result-dir {result_dir}")
        if args.result_filename:
            check_output_file(result_dir / args.result_filename, "--result-filename")
    workload = generate_random(dataset)
    stage["name"] = "listing the server's models"
    api_model, sim_model = served_models(root, args)
    work = Path(args.work_dir) if args.work_dir else result_dir / default_work_dir(workload.workload_hash, root, api_model)
    check_output_dir(work, "--work-dir", files=("workload.jsonl",), dirs=("replay", "simulated", "report"))
    workload_path = work / "workload.jsonl"
    if workload_path.is_file() and read_workload(workload_path).workload_hash != workload.workload_hash:
        raise ConfigError(f"--work-dir {work} holds another workload ({workload_path}); pass a new --work-dir for these flags")

    stage["name"], stage["work"] = "replaying", work
    if not workload_path.is_file():
        write_workload(workload_path, workload)
    print(f"bench: {len(workload)} requests (random dataset, workload {workload.workload_hash[:12]}) against {root} as {api_model!r}; files in {work}")
    options = ReplayOptions(
        base_url=root,
        endpoint=args.endpoint,
        model=api_model,
        concurrency=args.max_concurrency or len(workload),
        timeout_s=args.timeout,
        temperature=args.temperature,
        retry_failed=True,  # a rerun resends what failed
        progress=not args.disable_tqdm,
    )
    replay_dir = work / "replay"
    try:
        summary = replay(workload, replay_dir, options)
    except ConfigError as err:
        raise ConfigError(str(err).replace("pass a new --out", "pass a new --work-dir")) from None
    for warning in summary.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if summary.get("session") is None:
        print(f"replay: {summary['note']} (the records in {replay_dir} are used)")
    if summary.get("stall_tail_s"):
        print(f"warning: session {summary['session']}: {summary['statuses'].get('timeout', 0)} request(s) timed out; {summary['stall_tail_s']:.1f} s spent waiting only on them are left out of the duration", file=sys.stderr)
    if summary.get("unreported_speculation"):
        raise ConfigError(summary["unreported_speculation"])
    if summary.get("session") is not None and not summary["after_scrape"]:
        print(
            f"error: the closing /metrics scrape failed: {summary['after_scrape_error']}; every record is kept in {replay_dir}; "
            f"rerun the same command once the server is back (exit {EXIT_CLOSING_SCRAPE_FAILED})",
            file=sys.stderr,
        )
        return EXIT_CLOSING_SCRAPE_FAILED

    stage["name"] = "calibrating"
    calibration = calibrate(replay_dir, args.num_speculative_tokens, force=args.force)
    atomic_write_json(replay_dir / "calibration.json", calibration)
    for dropped in calibration["sessions_dropped"]:
        print(f"warning: replay session {dropped['session']} left out of the calibration: {dropped['reason']}", file=sys.stderr)
    for warning in calibration.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)

    stage["name"] = "simulating"
    report, result = _simulate_and_compare(args, work, workload, calibration, sim_model, percentiles, metrics, slos, api_model)
    date = datetime.now().strftime("%Y%m%d-%H%M%S")  # vLLM's own field: the one wall-clock value
    from simulator.validation.bench_result import header, render

    full = header(date, args.backend, args.label, sim_model, len(workload), args.request_rate, args.burstiness, args.max_concurrency) | result
    print(render(full, percentiles, metrics))
    print(f"simulated {sim_model} on {args.device}{' with ' + args.profile_dir if args.profile_dir else ''}; report in {work / 'report'}")
    if args.save_result:
        stage["name"] = "saving the result"
        name = args.result_filename or _result_filename(args, sim_model, date)
        atomic_write_text(result_dir / name, json.dumps(full, indent=2, allow_nan=False) + "\n")
        print(f"wrote {result_dir / name}")
    results = read_results(replay_dir, workload.workload_hash)
    unfinished = unfinished_requests(workload, results)
    if unfinished:
        print(f"error: {unfinished_message(workload, results, unfinished)}; every record is kept in {replay_dir}; rerun the same command to resend them (exit {EXIT_REQUESTS_FAILED})", file=sys.stderr)
        return EXIT_REQUESTS_FAILED
    return EXIT_OK


def _simulate_and_compare(args, work: Path, workload, calibration: dict, sim_model: str, percentiles, metrics, slos, api_model: str):
    from simulator.util.progress import quiet_vidur, restore_vidur
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
        "harness": {
            "served_model_name": api_model,
            "simulated_device": args.device,
            "work_dir": str(work),
            "workload_hash": workload.workload_hash,
            "replay_sessions": len(report.get("replay_sessions") or []),
            "wall_clock": "date is the only wall-clock value; the measured side is a measurement, the simulated side is byte-identical for the same flags and seeds",
        },
    }
    return report, result


def default_work_dir(workload_hash: str, root: str, api_model: str) -> str:
    """The work directory's name: the workload, the server and the model served, hashed, so
    the same command resumes its own replay and another server or model never reuses it."""
    from simulator.validation.files import sha256_hex

    return WORK_PREFIX + sha256_hex(f"{workload_hash}\n{root}\n{api_model}")[:12]


def _result_filename(args, model: str, date: str) -> str:
    """vLLM's default name: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json."""
    concurrency = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
    return f"{args.label or args.backend}-{args.request_rate}qps{concurrency}-{model.split('/')[-1]}-{date}.json"
