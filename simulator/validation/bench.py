"""``python -m simulator.validation bench``: one command in ``vllm bench serve``'s terms.

It generates vLLM's random dataset (:mod:`random_dataset`), replays it against the server
(scraping ``/metrics`` before and after), calibrates acceptance and the KV budget from the
counters, simulates the same workload and compares, then prints vLLM's summary table with a
simulated and an error column, and with ``--save-result`` writes vLLM's result JSON
(:mod:`bench_result`).  The flags and defaults are vLLM's (:mod:`bench_flags`); the few it lacks
(what to simulate on, the stall timeout, the work directory) say so in ``--help``.

Each step writes its files under the work directory, as the step-by-step commands do
(``workload.jsonl``, ``replay/``, ``replay/calibration.json``, ``simulated/``, ``report/``), so
any step can be rerun on its own (:mod:`bench_work`).  The directory is named after a hash
of the workload (which the flags and ``--seed`` fix), the server's URL and the model served, so
another server or model gets a directory of its own.  Like ``vllm bench serve``, every run
measures anew: the previous run's files are set aside in ``previous/`` once the new run's checks
have passed (a server restarted with another k is never reported with the old numbers).
``--resume`` continues the run there instead, after Ctrl-C, a crash or failed requests
(resending failures), and refuses a server whose k has changed since.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

from simulator.cli.proposer_flags import proposer_kind
from simulator.util.errors import ConfigError
from simulator.validation.bench_flags import HEADER_EXAMPLE, METADATA_EXAMPLE, checked_options, parse_pairs, replay_options, server_root
from simulator.validation.bench_work import check_work_dir, default_work_dir, starter


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

    dataset, percentiles, metrics, slos = checked_options(args)
    root = server_root(args)
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
    check_work_dir(work, workload, resume)
    options = replay_options(args, root, api_model, args.max_concurrency or len(workload))
    stage["name"] = "warming up"
    _warm_up(args, workload, api_model, options)

    stage["name"], stage["work"] = "replaying", work
    how = "resuming the run" if resume else "measuring anew"
    print(f"bench: {len(workload)} requests (random dataset, workload {workload.workload_hash[:12]}) against {root} as {api_model!r}, {how}; files in {work}")
    try:
        summary = replay(workload, replay_dir, options, fresh=not resume, prepare=starter(work, workload, fresh=not resume))
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


def _result_filename(args, model: str, date: str) -> str:
    """vLLM's default name: LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json, or with a ramp-up
    LABEL-ramp-up-STRATEGY-STARTqps-ENDqps[-concurrencyN]-MODEL-DATE.json."""
    concurrency = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
    rate = f"ramp-up-{args.ramp_up_strategy}-{args.ramp_up_start_rps}qps-{args.ramp_up_end_rps}qps" if args.ramp_up_strategy else f"{args.request_rate}qps"
    return f"{args.label or args.backend}-{rate}{concurrency}-{model.split('/')[-1]}-{date}.json"
