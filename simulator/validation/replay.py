"""Open-loop replay of a workload against an OpenAI-compatible ``/v1/completions`` server.

Each request is sent at its recorded arrival time (relative to the first request still to
send), streamed, and timed on the client's monotonic clock the way ``vllm bench serve``
times it (:mod:`replay_stream`; what is sent: :mod:`replay_options`).  The record is appended
to ``replay.jsonl`` the moment the request finishes, so a crash or a dead server loses only
requests in flight; rerunning the same command resumes with the requests that have no record yet.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import httpx
import numpy as np
from tqdm import tqdm

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_text
from simulator.validation.compare import measured_metrics
from simulator.util.textio import atomic_write_text
from simulator.validation.files import DurableAppender, atomic_write_json, check_output_dir
from simulator.validation.metrics import check_vllm_metrics, draft_positions, parse_metrics, scrape, spec_counter_problem
from simulator.validation.replay_files import (
    NOT_SENT,
    RESULTS_FILE,
    SCHEMA,
    SCHEMA_VERSION,
    SCRAPES_DIR,
    SUMMARY_FILE,
    list_scrapes,
    read_results,
    read_summary,
    results_path,
    scrape_path,
)
from simulator.validation.replay_options import ReplayOptions, request_body
from simulator.validation.replay_stream import stream_one
from simulator.validation.sessions import describe
from simulator.validation.workload import Request, Workload

LOOP_PROBE_S = 0.005  # how often the event-loop lag probe wakes


def pending_requests(workload: Workload, records: dict, retry_failed: bool) -> list[Request]:
    """Requests still to send: no record, a record of a request that never reached the
    server, or (with ``retry_failed``) any failure."""

    def done(record: Optional[dict]) -> bool:
        if record is None or record["status"] in NOT_SENT:
            return False
        return record["status"] == "ok" or not retry_failed

    return [r for r in workload.requests if not done(records.get(r.request_id))]


def replay(workload: Workload, out_dir: Path, options: ReplayOptions, fresh: bool = False, prepare: Optional[Callable[[], None]] = None) -> dict:
    """Replay what is still pending; returns this session's summary (also saved to disk).

    Raises ConfigError before writing anything if the output directory is unusable, the
    server cannot be reached, or the directory holds results for another workload or model,
    or from a server that has since changed its k.  ``fresh``: ignore what ``out_dir`` holds
    and replay every request (``prepare`` must clear it).  ``prepare`` runs once every check
    has passed, right before the first file is written (bench sets its previous run aside and
    writes the workload there, so a refused run leaves nothing behind).
    """
    out_dir = check_output_dir(out_dir, "replay directory", files=(RESULTS_FILE, SUMMARY_FILE), dirs=(SCRAPES_DIR,))
    existing = None if fresh else read_results(out_dir, workload.workload_hash)
    if not fresh:
        read_summary(out_dir)  # a damaged summary stops the replay before it sends anything
    records = existing.records if existing else {}
    pending = pending_requests(workload, records, options.retry_failed)
    progress: dict = {}
    try:
        return run_async(_session(workload, out_dir, options, existing, pending, progress, prepare))
    except KeyboardInterrupt:
        # Python 3.11+ cancels the session, which saves itself; before 3.11 Ctrl-C stops the
        # event loop under it, so its entry is closed here
        if "t0" in progress and not progress.get("saved"):
            _save_entry(out_dir, workload, progress["entry"] | {"state": "interrupted", "wall_s": options.clock() - progress["t0"]})
        raise


def warm_up(request: Request, count: int, model: str, options: ReplayOptions) -> dict:
    """vllm bench serve's ``--num-warmups``: ``count`` copies of ``request`` (its first), sent at
    once with at most ``--max-concurrency`` in flight, before the measured run.  Nothing of them
    is kept; the replay's opening ``/metrics`` scrape, taken after they finished, keeps their
    tokens and drafts out of the calibration.  Returns their statuses, counted."""
    return run_async(_warm_up(request, count, model, options))


async def _warm_up(request: Request, count: int, model: str, options: ReplayOptions) -> dict:
    gate = asyncio.Semaphore(options.concurrency)
    body = request_body(request, model, options)
    async with _client(options) as client:

        async def one() -> dict:
            async with gate:
                start = time.perf_counter()
                return await stream_one(client, request, body, time.perf_counter, 0.0, start, options.endpoint)

        records = await asyncio.gather(*(one() for _ in range(count)))
    return _tally(records)["statuses"]


def run_async(coroutine):
    """``asyncio.run``, also from code that already runs an event loop in this thread (a
    notebook, a test session driving a browser): then the replay gets a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _run(coroutine):
    """``asyncio.run`` with Python 3.11's Ctrl-C: the main task is cancelled, unwinds (a session
    saves itself), and KeyboardInterrupt is raised once it has.  Python 3.10's ``asyncio.run``
    raises KeyboardInterrupt inside whichever task is running, where an HTTP client's task group
    can leave it unretrieved for asyncio to print at shutdown: a second, garbled line after the
    one-line refusal."""
    if sys.version_info >= (3, 11) or threading.current_thread() is not threading.main_thread():
        return asyncio.run(coroutine)
    loop = asyncio.new_event_loop()
    interrupted = []
    try:
        asyncio.set_event_loop(loop)
        main = loop.create_task(coroutine)
        loop.add_signal_handler(signal.SIGINT, lambda: (interrupted.append(True), main.cancel()))
        try:
            return loop.run_until_complete(main)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()


def _client(options: ReplayOptions) -> httpx.AsyncClient:
    """The one HTTP client of a session (and of its warm-up): the server root, the stall
    timeout, a connection per request in flight, and the ``--header`` pairs."""
    timeout = httpx.Timeout(options.timeout_s, connect=min(10.0, options.timeout_s))
    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    return httpx.AsyncClient(base_url=options.root_url, timeout=timeout, limits=limits, headers=dict(options.headers))


async def _session(workload: Workload, out_dir: Path, options: ReplayOptions, existing, pending: list[Request], progress: Optional[dict] = None, prepare: Optional[Callable[[], None]] = None) -> dict:
    url = options.root_url
    async with _client(options) as client:
        before = await scrape(client, url)  # fails fast, before anything is written
        opening = check_vllm_metrics(before, f"{url}/metrics")  # an HTML page or another program's metrics: stop now, not at calibrate
        limits = await _served_models(client, url)
        served = list(limits)
        if options.model is not None and options.model not in served:
            raise ConfigError(f"--model {options.model!r} is not served by {url} (its /v1/models lists {', '.join(map(repr, served))}); pass one of those")
        model = existing.header.get("model") if existing else (options.model or served[0])
        if model not in served or (options.model is not None and options.model != model):  # resuming against another model would mix two measurements
            now = repr(options.model) if options.model is not None else ", ".join(map(repr, served))
            raise ConfigError(
                f"{results_path(out_dir)}: results were measured on model {model!r}, not {now}; to measure another model, pass a new --out"
            )
        check_context(pending, limits[model], model, url)
        if existing is not None:
            check_same_speculation(out_dir, opening, url)
        no_counters = spec_counter_problem(opening, f"{url}/metrics")
        warnings = [no_counters + "; if the server speculates, calibrate cannot measure acceptance"] if no_counters else []
        if not pending:
            return {"session": None, "sent": 0, "note": "every request already has a record; nothing to send", "warnings": warnings}
        if prepare is not None:
            prepare()
        session = max(list_scrapes(out_dir), default=-1) + 1
        out_dir.mkdir(parents=True, exist_ok=True)
        appender = DurableAppender(results_path(out_dir))
        if existing is None:
            appender.append({"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "workload_hash": workload.workload_hash, "num_requests": len(workload), "model": model})
        atomic_write_text(scrape_path(out_dir, session, "before"), before)
        # Listed before anything is sent, so a session killed mid-run is still in the summary.
        entry = {
            "session": session,
            "state": "running",
            "model": model,
            "options": options.saved(url),
            "planned": len(pending),
            "planned_output_tokens": sum(r.output_tokens for r in pending),
            "warnings": warnings,
        }
        _save_entry(out_dir, workload, entry)
        started = progress if progress is not None else {}
        started["entry"] = entry
        try:
            stats = await _send_all(client, pending, model, options, appender, session, started)
        except BaseException:  # Ctrl-C (asyncio cancels the session), or anything else: the session's time so far is kept
            if "t0" in started:
                _save_entry(out_dir, workload, entry | {"state": "interrupted", "wall_s": options.clock() - started["t0"]})
                started["saved"] = True
            raise
        finally:
            appender.close()
        try:
            after = await scrape(client, url)
            check_vllm_metrics(after, f"{url}/metrics")  # not kept when unusable: the next session's opening scrape can close this one
            atomic_write_text(scrape_path(out_dir, session, "after"), after)
            stats["after_scrape"] = True
        except ConfigError as err:
            stats["after_scrape"] = False
            stats["after_scrape_error"] = str(err)
    summary = entry | stats | {"state": "closed" if stats["after_scrape"] else "closing_scrape_failed"}
    if no_counters and stats["largest_decode_chunk"] > 1:
        summary["unreported_speculation"] = (
            f"{no_counters}, yet the server streamed up to {stats['largest_decode_chunk']} tokens in one decode chunk, so it speculates: "
            "acceptance cannot be calibrated from this server. Restart it with statistics logging on (no --disable-log-stats) on a vLLM "
            f"that exports spec-decode counters, and replay into a new --out (the records are kept in {out_dir})"
        )
    _save_entry(out_dir, workload, summary)
    return summary


def _save_entry(out_dir: Path, workload: Workload, entry: dict) -> None:
    """Write (or replace) one session's entry in replay-summary.json, atomically."""
    saved = read_summary(out_dir)
    sessions = [s for s in saved.get("sessions", []) if s.get("session") != entry["session"]]
    saved["sessions"] = sorted(sessions + [entry], key=lambda s: s.get("session", 0))
    saved["workload_hash"] = workload.workload_hash
    atomic_write_json(out_dir / SUMMARY_FILE, saved)


async def _served_models(client: httpx.AsyncClient, url: str) -> dict:
    """Served model name -> its ``max_model_len`` (None where the server does not list one), in
    the order ``/v1/models`` lists them (vLLM's OpenAI server lists ``max_model_len``)."""
    try:
        response = await client.get("/v1/models")
        entries = response.json()["data"]
        models = {str(entry["id"]): entry.get("max_model_len") for entry in entries}
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ConfigError(f"cannot list models at {url}/v1/models ({type(err).__name__}: {err}); is {url} a vLLM server's root? --base-url takes the root, e.g. http://127.0.0.1:8000") from None
    if not models:
        raise ConfigError(f"{url}/v1/models lists no model")
    return model_limits(models)


def model_limits(models: dict) -> dict:
    """Served name -> its ``max_model_len`` as ``/v1/models`` lists it, None where it lists no
    positive integer (a server that does not say)."""
    return {name: (limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None) for name, limit in models.items()}


GENERATE_FIX = "generate a workload within it (shorter --prompt-tokens/--output-tokens, or --max-total-tokens {limit} with --trace)"


def check_context(requests: list[Request], max_model_len: Optional[int], model: str, url: str, fix: str = GENERATE_FIX) -> None:
    """Refuse, before anything is sent, requests the server would answer with HTTP 400: prompt +
    output beyond its ``max_model_len``.  Resending cannot help them, so they are an input
    error (exit 2), not failures to retry.  ``fix`` names the flags that shorten the workload
    (``{limit}`` is the server's limit): generate's here, bench's there."""
    if max_model_len is None:
        return
    beyond = [r for r in requests if r.prompt_tokens + r.output_tokens > max_model_len]
    if not beyond:
        return
    first = beyond[0]
    longest = max(beyond, key=lambda r: r.prompt_tokens + r.output_tokens)
    raise ConfigError(
        f"request {first.request_id} needs {first.prompt_tokens + first.output_tokens} tokens (prompt {first.prompt_tokens} + output {first.output_tokens}), "
        f"beyond {model!r}'s max_model_len of {max_model_len} at {url}/v1/models; {len(beyond)} of {len(requests)} requests to send do "
        f"(the longest {longest.prompt_tokens + longest.output_tokens}): {fix.format(limit=max_model_len)}, or serve the model with a longer --max-model-len"
    )


def check_same_speculation(out_dir: Path, opening, url: str) -> None:
    """Refuse to resume a replay directory on a server that now speculates with another k:
    the records and scrapes there were measured at the old k, and mixing them with new ones (or
    reporting them as this server's) would give the old k's numbers for the new server.  k is
    read from the draft positions vLLM V1 counts (its per-position counter, exported for every
    position from the start); where either scrape cannot tell (V0 counters), nothing is refused."""
    sessions = list_scrapes(out_dir)
    if not sessions:
        return
    last = sessions[max(sessions)]
    path = last.get("after") or last.get("before")
    then = draft_positions(parse_metrics(read_text(path, "scrape file"), str(path)))
    now = draft_positions(opening)
    if then is None or now is None or then == now:
        return

    def words(k: int) -> str:
        return f"k = {k}" if k else "speculation off"

    raise ConfigError(
        f"{out_dir}: its records were measured on a server with {words(then)} (by {path.name}), but {url} now runs with {words(now)} "
        f"(by its /metrics): the server restarted with another k, and resuming would report the old k's numbers for it; to measure it, pass a new --out"
    )


async def _send_all(client, pending: list[Request], model: str, options: ReplayOptions, appender: DurableAppender, session: int, started: dict) -> dict:
    clock = options.clock
    origin = pending[0].arrival_s
    gate = asyncio.Semaphore(options.concurrency)
    written: asyncio.Queue = asyncio.Queue()
    lags: list[float] = []
    bar = tqdm(total=len(pending), desc="replay", unit="req", disable=not options.progress)

    async def writer():
        while (record := await written.get()) is not None:
            await asyncio.to_thread(appender.append, record)  # fsync off the event loop
            bar.update(1)

    async def one(request: Request, t0: float) -> dict:
        scheduled = t0 + (request.arrival_s - origin)
        await asyncio.sleep(max(0.0, scheduled - clock()))
        async with gate:
            record = await stream_one(client, request, request_body(request, model, options), clock, scheduled - t0, t0, options.endpoint)
        record["end_s"] = round(clock() - t0, 6)
        record["session"] = session
        written.put_nowait(record)
        return record

    async def probe_loop(stop: asyncio.Event):
        while not stop.is_set():
            expected = time.perf_counter() + LOOP_PROBE_S  # the event loop's lag, in real seconds whatever the clock
            await asyncio.sleep(LOOP_PROBE_S)
            lags.append(time.perf_counter() - expected)

    stop = asyncio.Event()
    writer_task = asyncio.create_task(writer())
    probe_task = asyncio.create_task(probe_loop(stop))
    t0 = started["t0"] = clock()
    try:
        finished = await asyncio.gather(*(one(r, t0) for r in pending))
    finally:
        stop.set()
        written.put_nowait(None)
        try:
            await writer_task
        except asyncio.CancelledError:
            while not written.empty():  # interrupted: keep whatever finished
                record = written.get_nowait()
                if record is not None:
                    appender.append(record)
        await probe_task
        bar.close()
    wall = clock() - t0
    largest = max((c[1] for r in finished if r["status"] == "ok" for c in r["chunks"][1:] if c[1] is not None), default=0)
    prompts = {r.request_id: r.prompt_tokens for r in pending}
    timing = describe({"sessions": [{"session": session, "state": "closed", "wall_s": wall}]}, finished)[0]
    return {
        "sent": len(pending),
        "wall_s": wall,
        "stall_tail_s": timing["stall_tail_s"],
        "active_s": timing["active_s"],
        **_tally(finished),
        "largest_decode_chunk": largest,
        "metrics": measured_metrics(finished, timing["active_s"], prompts),  # vllm bench serve's summary of this session
        "client_overhead": _overhead(finished, lags),
    }


def _tally(records: list[dict]) -> dict:
    statuses: dict[str, int] = {}
    for record in records:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    return {"statuses": dict(sorted(statuses.items())), "length_mismatches": sum(bool(r.get("length_mismatch")) for r in records)}


def _overhead(records: list[dict], lags: list[float]) -> dict:
    """The client's own cost: lateness of sends, time spent handling chunks, event-loop lag."""
    send_lag = np.array([r["send_lag_s"] for r in records])
    handling = np.array([r["client_handling_s"] for r in records])
    chunks = sum(len(r["chunks"]) for r in records)
    loop = np.array(lags) if lags else np.zeros(1)

    def spread(values: np.ndarray) -> dict:
        return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)), "max": float(values.max())}

    return {
        "send_lag_s": spread(send_lag),
        "chunk_handling_s_total": float(handling.sum()),
        "chunk_handling_s_mean": float(handling.sum() / chunks) if chunks else 0.0,
        "event_loop_lag_s": spread(loop),
    }
