"""Replay: open-loop streaming, per-request records, faults recorded, resume after a kill."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from simulator.util.errors import ConfigError
from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.replay import pending_requests, replay
from simulator.validation.replay_options import ReplayOptions, request_body
from simulator.validation.replay_files import list_scrapes, read_results, read_summary, results_path
from simulator.validation.workload import WorkloadSpec, generate, write_workload

FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)
# A stalled stream stays silent until the server stops; the client gives up after CLIENT_TIMEOUT_S,
# a thousand times the longest gap between chunks of a healthy stream, even on a loaded machine.
ALL_FAULTS = dict(fault_http_500=0.1, fault_drop=0.1, fault_malformed=0.1, fault_stall=0.1, fault_short=0.1, stall_s=3600.0)
CLIENT_TIMEOUT_S = 5.0
EXPECTED_STATUS = {None: "ok", "short": "short", "http_500": "http_error", "drop": "dropped_stream", "malformed": "malformed_sse", "stall": "timeout"}


def small_workload(n=40, rate=100.0, seed=0):
    return generate(WorkloadSpec(num_requests=n, rate=rate, lengths="uniform", prompt_range=(16, 64), output_range=(8, 32), seed=seed))


def outcome(records):
    """What must not depend on timing: status, lengths and how tokens were chunked."""
    return {rid: (r["status"], r["completion_tokens"], r["length_mismatch"], [c[1] for c in r["chunks"]]) for rid, r in records.items()}


def test_request_body_asks_for_exact_lengths():
    request = small_workload(1).requests[0]
    body = request_body(request, "m", ReplayOptions("http://x"))
    assert body["prompt"] == list(request.prompt_token_ids)
    assert body["max_tokens"] == body["min_tokens"] == request.output_tokens
    assert body["ignore_eos"] is True and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and body["return_token_ids"] is True
    assert "return_token_ids" not in request_body(request, "m", ReplayOptions("http://x", request_token_ids=False))


@pytest.mark.slow
def test_every_fault_is_recorded_and_the_run_goes_on(tmp_path):
    workload = small_workload(60, seed=4)
    config = FakeServerConfig(**ALL_FAULTS, **FAST)
    with FakeServer(config) as server:
        summary = replay(workload, tmp_path, ReplayOptions(server.url, timeout_s=CLIENT_TIMEOUT_S))
    results = read_results(tmp_path, workload.workload_hash)
    assert sorted(results.records) == list(range(60))  # nothing lost, nothing doubled
    faults = {r.request_id: config.fault_for(list(r.prompt_token_ids)) for r in workload.requests}
    assert set(faults.values()) == {None, "http_500", "drop", "malformed", "stall", "short"}  # each one exercised
    for rid, record in results.records.items():
        fault = faults[rid]
        assert record["status"] == EXPECTED_STATUS[fault], (rid, fault, record["error"])
        if record["status"] != "ok":
            assert record["error"]
        if fault == "short":  # fewer tokens than asked, usage and [DONE] included: a failure to resend
            assert "the stream ended cleanly after" in record["error"] and "tokens asked for" in record["error"]
        if fault is None:
            request = workload.requests[rid]
            assert not record["length_mismatch"]
            assert record["completion_tokens"] == record["streamed_tokens"] == request.output_tokens
            assert 0 < record["ttft_s"] <= record["e2e_s"] <= record["done_s"]
            assert record["tpot_s"] == pytest.approx((record["e2e_s"] - record["ttft_s"]) / (request.output_tokens - 1), abs=1e-9)  # stored to the nanosecond
        if fault == "http_500":
            assert record["http_status"] == 500
    assert sum(summary["statuses"].values()) == 60 and summary["statuses"]["ok"] == sum(f is None for f in faults.values())
    overhead = summary["client_overhead"]
    assert overhead["send_lag_s"]["max"] >= 0 and overhead["chunk_handling_s_mean"] > 0
    assert read_summary(tmp_path)["sessions"][0]["client_overhead"] == overhead
    assert set(list_scrapes(tmp_path)[0]) == {"before", "after"}


def test_unreachable_server_fails_fast_naming_the_url(tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"http://127\.0\.0\.1:9/metrics"):
        replay(small_workload(3), out, ReplayOptions("http://127.0.0.1:9/v1", timeout_s=5))
    assert time.monotonic() - started < 5
    assert not out.exists()


def test_rerun_skips_finished_requests_and_retry_failed_resends_failures(tmp_path):
    workload = small_workload(30, seed=2)
    with FakeServer(FakeServerConfig(fault_http_500=0.3, **FAST)) as server:
        first = replay(workload, tmp_path, ReplayOptions(server.url))
        again = replay(workload, tmp_path, ReplayOptions(server.url))
    failed = first["statuses"]["http_error"]
    assert failed > 0 and again["sent"] == 0
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        retried = replay(workload, tmp_path, ReplayOptions(healthy.url, retry_failed=True))
    assert retried["sent"] == failed and retried["statuses"] == {"ok": failed}
    records = read_results(tmp_path).records
    assert all(r["status"] == "ok" for r in records.values()) and len(records) == 30
    assert list(list_scrapes(tmp_path)) == [0, 1]


def test_requests_that_never_reached_a_server_are_always_pending():
    workload = small_workload(3)
    records = {0: {"status": "ok"}, 1: {"status": "connection_error"}, 2: {"status": "timeout"}}
    assert [r.request_id for r in pending_requests(workload, records, retry_failed=False)] == [1]
    assert [r.request_id for r in pending_requests(workload, records, retry_failed=True)] == [1, 2]


def test_results_from_another_workload_are_refused(tmp_path):
    with FakeServer(FakeServerConfig(**FAST)) as server:
        replay(small_workload(3, seed=1), tmp_path, ReplayOptions(server.url))
        before = results_path(tmp_path).read_bytes()
        with pytest.raises(ConfigError, match="different workload"):
            replay(small_workload(3, seed=2), tmp_path, ReplayOptions(server.url))
    assert results_path(tmp_path).read_bytes() == before


def test_a_torn_last_line_is_not_a_record_and_is_cut_before_appending(tmp_path):
    workload = small_workload(4)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        replay(workload, tmp_path, ReplayOptions(server.url))
        lines = results_path(tmp_path).read_text().splitlines(keepends=True)
        # as if the process died while writing request 3's record
        results_path(tmp_path).write_text("".join(lines[:-1]) + lines[-1][:25])
        assert len(read_results(tmp_path).records) == 3
        replay(workload, tmp_path, ReplayOptions(server.url))
    assert sorted(read_results(tmp_path).records) == [0, 1, 2, 3]
    assert all(line.endswith("}\n") for line in results_path(tmp_path).read_text().splitlines(keepends=True))


def test_resume_after_the_replay_process_is_killed(tmp_path):
    """Kill the replay mid-run; the rerun finishes it with the same result as one clean run.

    The server answers the first SERVED requests and holds the others until released, so the
    kill lands mid-run however slow the machine: no sleep decides it."""
    served = 6
    workload = generate(WorkloadSpec(num_requests=24, arrival="fixed", rate=50.0, lengths="uniform", prompt_range=(16, 64), output_range=(8, 32), seed=6))
    path = tmp_path / "w.jsonl"
    write_workload(path, workload)
    config = FakeServerConfig(fault_http_500=0.1, fault_drop=0.1, hold_after_requests=served, **FAST)
    with FakeServer(config) as server:
        command = [sys.executable, "-m", "simulator.validation", "replay", "--workload", str(path), "--base-url", server.url, "--out", str(tmp_path / "killed"), "--no-progress"]
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        log = results_path(tmp_path / "killed")
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a timing assumption
        while time.monotonic() < deadline and process.poll() is None:
            if log.exists() and log.read_text().count("\n") >= 1 + served:
                break
            time.sleep(0.05)
        assert process.poll() is None, process.stderr.read().decode()  # the held requests keep it running
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        survived = read_results(tmp_path / "killed").records
        kept_bytes = log.read_bytes()
        assert len(survived) == served
        server.release()
        replay(workload, tmp_path / "killed", ReplayOptions(server.url))
        replay(workload, tmp_path / "clean", ReplayOptions(server.url))
    resumed = read_results(tmp_path / "killed").records
    assert log.read_bytes().startswith(kept_bytes)  # nothing recorded was rewritten
    assert {rid: resumed[rid] for rid in survived} == survived
    assert outcome(resumed) == outcome(read_results(tmp_path / "clean").records)
    assert len(log.read_text().splitlines()) == 1 + 24  # every request exactly once
    # the directory still holds the injected failures: a CLI rerun says so with exit 3, not 0
    from simulator.validation.cli import EXIT_REQUESTS_FAILED, main

    assert any(r["status"] != "ok" for r in resumed.values())
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert main(["replay", "--workload", str(path), "--base-url", healthy.url, "--out", str(tmp_path / "killed"), "--no-progress"]) == EXIT_REQUESTS_FAILED


def test_latencies_follow_vllm_bench_serve():
    from simulator.validation.replay_stream import _derive_latencies, _take_chunk

    record = {"chunks": [], "completion_tokens": None, "expected_output_tokens": 5, "error": None}
    for since_send, ids in ((0.1, [7]), (0.2, [8, 9]), (0.35, [10, 11])):
        assert _take_chunk(record, f'{{"choices": [{{"text": "x", "token_ids": {ids}}}]}}', since_send) is None
    assert _take_chunk(record, '{"choices": [], "usage": {"completion_tokens": 5}}', 0.36) is None
    _derive_latencies(record)
    assert (record["ttft_s"], record["e2e_s"]) == (0.1, 0.35)
    assert record["tpot_s"] == pytest.approx(0.25 / 4)
    assert record["streamed_tokens"] == 5 and record["length_mismatch"] is False
    assert _take_chunk(record, '{"error": {"message": "engine died"}}', 0.4)[0] == "stream_error"
    assert _take_chunk(record, "[1, 2]", 0.4)[0] == "malformed_sse"

    short = {"chunks": [[0.1, 1], [0.2, 1]], "completion_tokens": 3, "expected_output_tokens": 4, "error": None, "status": "ok"}
    _derive_latencies(short)
    assert short["status"] == "short" and short["length_mismatch"] is True
    assert "ended cleanly after 2 of the 4 tokens asked for" in short["error"] and "usage says 3 tokens but the chunks carried 2" in short["error"]


def test_concurrency_bound_holds_requests_back(tmp_path):
    workload = generate(WorkloadSpec(num_requests=6, arrival="fixed", rate=10000.0, prompt_tokens=16, output_tokens=8, seed=1))
    with FakeServer(FakeServerConfig(**FAST)) as server:
        summary = replay(workload, tmp_path, ReplayOptions(server.url, concurrency=1))
    records = sorted(read_results(tmp_path).records.values(), key=lambda r: r["send_s"])
    for earlier, later in zip(records, records[1:]):
        assert later["send_s"] >= earlier["send_s"] + earlier["done_s"]  # one in flight at a time
    assert summary["client_overhead"]["send_lag_s"]["max"] >= records[-1]["send_s"] - 0.01


def test_a_rerun_against_another_model_is_refused(tmp_path):
    workload = small_workload(2)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        replay(workload, tmp_path, ReplayOptions(server.url))
    with FakeServer(FakeServerConfig(model="another-model", **FAST)) as other:
        with pytest.raises(ConfigError, match="measured on model 'fake-model', not 'another-model'"):
            replay(workload, tmp_path, ReplayOptions(other.url, retry_failed=True))


def test_replay_runs_inside_an_already_running_event_loop():
    # e.g. a notebook, or a test session whose browser driver holds the thread's loop
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from simulator.validation.replay import run_async

    async def answer():
        return 42

    async def caller():
        asyncio.get_running_loop()  # the situation under test: a loop is running here
        return run_async(answer())

    # a thread of its own, so the test holds whatever loop this session's thread runs
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(asyncio.run, caller()).result() == 42


def test_a_connect_timeout_is_a_connection_error_and_is_resent():
    """A server that never completes the TCP handshake: the connect times out, nothing was
    sent, so the record is a connection_error, which every rerun resends."""
    import httpx

    from fake_vllm import BlackHole
    from simulator.validation.replay import run_async
    from simulator.validation.replay_stream import stream_one as _stream_one

    request = small_workload(1).requests[0]

    async def one(url):
        timeout = httpx.Timeout(30.0, connect=1.0)  # the connect can never succeed, so its length is only the test's duration
        async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
            return await _stream_one(client, request, request_body(request, "fake-model", ReplayOptions(url)), time.perf_counter, 0.0, time.perf_counter())

    with BlackHole() as url:
        record = run_async(one(url))  # not asyncio.run: a browser test may have left this thread a running loop
    assert record["status"] == "connection_error", record["error"]
    assert record["error"].startswith("ConnectTimeout")
    assert [r.request_id for r in pending_requests(small_workload(1), {0: record}, retry_failed=False)] == [0]


@pytest.mark.parametrize(
    "config, message",
    [
        (FakeServerConfig(metrics_html=True, **FAST), "not valid Prometheus text.*<!DOCTYPE html>.*vLLM server"),
        (FakeServerConfig(metrics_missing=("vllm:generation_tokens",), **FAST), "holds no vllm:generation_tokens_total.*--disable-log-stats"),
    ],
    ids=["html", "not-vllm"],
)
def test_a_metrics_endpoint_that_is_not_vllms_stops_the_replay_before_it_starts(tmp_path, capsys, config, message):
    from simulator.validation.cli import main

    workload = tmp_path / "w.jsonl"
    write_workload(workload, small_workload(5))
    with FakeServer(config) as server:
        assert main(["replay", "--workload", str(workload), "--base-url", server.url, "--out", str(tmp_path / "r"), "--no-progress"]) == 2
        assert server.requests_received == 0  # nothing was sent
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert f"{server.url}/metrics" in err
    assert not (tmp_path / "r").exists()
