"""The harness counts what it received (issue 26 section 1), each defect driven against the fake
vLLM server with the fault that exposed it: streams that close early without usage or
[DONE], an interrupted or killed session followed by a resume, another client's traffic, a
server that dies mid-session, a k the counters contradict, stalled streams, and prompts
longer than the server's max_model_len.

compare runs here on a stub simulation (hand-written simulated outputs), so these tests need
no simulator run: what they check is the measured side."""

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.cli import EXIT_CLOSING_SCRAPE_FAILED, EXIT_INTERRUPTED, EXIT_REQUESTS_FAILED, main
from simulator.validation.files import atomic_write_json
from simulator.validation.replay_files import read_results, read_summary, results_path
from simulator.validation.workload import read_workload

FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)


def generate(path, n=30, seed=3, rate="200", outputs=("40", "80"), prompts=("16", "48")):
    assert main(["generate", "--out", str(path), "--num-prompts", str(n), "--arrival", "fixed", "--request-rate", rate, "--prompt-range", *prompts, "--output-range", *outputs, "--workload-seed", str(seed)]) == 0


def replay(workload, url, out, *extra):
    return main(["replay", "--workload", str(workload), "--base-url", url, "--out", str(out), "--no-progress", "--timeout", "20", *extra])


def stub_simulation(root, workload_path):
    """simulated.csv, simulated.json and simulated_itls.json as simulate writes them, from the
    workload alone (1 ms per step), so compare can run without the simulator."""
    workload = read_workload(workload_path)
    sim = root / "sim"
    sim.mkdir(exist_ok=True)
    rows = ["request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,tpot_s,e2e_s,accepted_tokens"]
    for r in workload.requests:
        rows.append(f"{r.request_id},{r.arrival_s},{r.prompt_tokens},{r.output_tokens},0.01,0.001,{0.01 + 0.001 * (r.output_tokens - 1)},0")
    (sim / "simulated.csv").write_text("\n".join(rows) + "\n")
    atomic_write_json(sim / "simulated_itls.json", {"schema": "vidur-specdec/validation-simulated-itls", "schema_version": 1, "workload_hash": workload.workload_hash, "itls": [[0.001] * (r.output_tokens - 1) for r in workload.requests]})
    atomic_write_json(sim / "simulated.json", {"schema": "vidur-specdec/validation-simulated", "schema_version": 1, "workload_hash": workload.workload_hash, "config": {"model": "m", "device": "a100"}, "summary": {}, "provenance": {}})
    return sim


def compare(root, workload, out, calibration):
    sim = stub_simulation(root, workload)
    assert main(["compare", "--workload", str(workload), "--replay", str(out), "--calibration", str(calibration), "--simulated", str(sim), "--out", str(root / "report")]) == 0
    return json.loads((root / "report" / "report.json").read_text())


def received(record):
    return sum(c[1] for c in record["chunks"])


# Output throughput counts received tokens ----------------------------------------------------
def test_throughput_counts_the_tokens_received_and_short_streams_are_failures(tmp_path, capsys):
    """20% of streams close cleanly halfway, without usage or [DONE]: they are ``short``
    failures (exit 3), not successes counted at the length asked for; throughput x duration is
    the tokens the completed requests received, in replay's line and in report.json."""
    generate(tmp_path / "w.jsonl", n=40)
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(fault_early_close=0.2, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    records = read_results(out).records.values()
    short = [r for r in records if r["status"] == "short"]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(short) >= 4 and all(r["done_s"] is None and r["completion_tokens"] is None for r in short)
    assert all("ended cleanly after" in r["error"] and "without usage or data: [DONE]" in r["error"] for r in short)
    assert f"{len(short)} short: the stream ended cleanly before the asked length" in err and "--retry-failed" in err
    session = read_summary(out)["sessions"][0]
    throughput = session["metrics"]["throughput"]
    assert throughput["completed"] == len(ok)
    assert throughput["output_throughput"] * throughput["duration_s"] == pytest.approx(sum(received(r) for r in ok))
    # E2EL and the other latencies are over completed requests only, as vLLM's are over successful ones
    assert session["metrics"]["latency"]["e2el"]["mean_ms"] == pytest.approx(1000 * sum(r["e2e_s"] for r in ok) / len(ok))
    assert main(["calibrate", "--replay", str(out)]) == 0
    report = compare(tmp_path, tmp_path / "w.jsonl", out, out / "calibration.json")
    measured = report["throughput"]["measured"]
    assert measured["output_throughput"] * measured["duration_s"] == pytest.approx(sum(received(r) for r in ok))
    assert measured["failed"] == len(short) and report["requests"]["compared"] == len(ok)
    # --retry-failed resends the short ones; a healthy server completes them
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert replay(tmp_path / "w.jsonl", healthy.url, out, "--retry-failed") == 0
    assert all(r["status"] == "ok" for r in read_results(out).records.values())


# Interrupted sessions ------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_an_interrupted_session_is_listed_and_its_time_counted(tmp_path, capsys, how):
    """The replay is stopped mid-run (Ctrl-C or kill -9) and resumed: replay-summary.json and
    the report list both sessions, and throughput divides by both sessions' active time."""
    served = 6
    generate(tmp_path / "w.jsonl", n=24, rate="50")
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(hold_after_requests=served, **FAST)) as server:
        command = [sys.executable, "-m", "simulator.validation", "replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(out), "--no-progress"]
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a timing assumption
        while time.monotonic() < deadline and process.poll() is None:
            if results_path(out).exists() and results_path(out).read_text().count("\n") >= 1 + served:
                break
            time.sleep(0.05)
        assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
        if how == "sigint":
            assert process.returncode == EXIT_INTERRUPTED and stderr.count("\n") == 1 and stderr.startswith("interrupted: "), stderr
        else:
            assert process.returncode == -signal.SIGKILL
        server.release()
        assert replay(tmp_path / "w.jsonl", server.url, out) == 0
    sessions = read_summary(out)["sessions"]
    assert [s["session"] for s in sessions] == [0, 1]
    assert sessions[0]["state"] == ("interrupted" if how == "sigint" else "running")  # a killed session cannot close its entry
    assert main(["calibrate", "--replay", str(out)]) == 0
    report = compare(tmp_path, tmp_path / "w.jsonl", out, out / "calibration.json")
    listed = report["replay_sessions"]
    assert [s["session"] for s in listed] == [0, 1]
    assert listed[0]["state"] == ("interrupted" if how == "sigint" else "killed") and listed[0]["records"] == served
    assert listed[0]["duration_from"] == ("measured" if how == "sigint" else "records")
    first = [r for r in read_results(out).history if r["session"] == 0]
    assert listed[0]["active_s"] >= max(r["end_s"] for r in first) > 0
    assert listed[1]["state"] == "closed" and listed[1]["active_s"] == pytest.approx(sessions[1]["active_s"])
    measured = report["throughput"]["measured"]
    assert measured["duration_s"] == pytest.approx(window(tmp_path / "w.jsonl", out))  # the resumed requests at their arrivals, not a second span
    assert measured["sessions_active_s"] == pytest.approx(listed[0]["active_s"] + listed[1]["active_s"])
    assert measured["sessions_active_s"] >= measured["duration_s"] - 1e-6
    assert measured["request_throughput"] == pytest.approx(24 / measured["duration_s"])
    assert "| 0 | " in (tmp_path / "report" / "report.md").read_text()  # the sessions table


def window(workload_path, out):
    """The measured window, from the files: each completed request's finish placed at its arrival
    (its finish after its own scheduled send, added to its arrival), less the first arrival."""
    arrivals = {r.request_id: r.arrival_s for r in read_workload(workload_path).requests}
    ok = [r for r in read_results(out).records.values() if r["status"] == "ok"]
    return max(arrivals[r["request_id"]] + r["end_s"] - r["scheduled_s"] for r in ok) - min(arrivals.values())


def test_a_resend_session_does_not_add_its_span_to_the_throughputs_duration(tmp_path, capsys):
    """A third of the requests fail with HTTP 500 and are resent with --retry-failed: the resend
    session sends them at their original arrival times, so it spans about as long as the first
    run.  Adding the two spans doubled the duration (+93% throughput error in the report); the
    throughput divides by the measured window, which the resend overlays."""
    generate(tmp_path / "w.jsonl", n=40, rate="40", outputs=("8", "16"))  # arrivals over 1 s
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(fault_http_500=0.35, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == EXIT_REQUESTS_FAILED
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert replay(tmp_path / "w.jsonl", healthy.url, out, "--retry-failed") == 0
    sessions = read_summary(out)["sessions"]
    assert [s["session"] for s in sessions] == [0, 1] and sessions[1]["sent"] >= 8
    arrivals = {r.request_id: r.arrival_s for r in read_workload(tmp_path / "w.jsonl").requests}
    resent = [arrivals[r["request_id"]] for r in read_results(out).history if r["session"] == 1]
    assert max(resent) - min(resent) > 0.5  # the resend is spread over the first run's span
    assert main(["calibrate", "--replay", str(out)]) == 0
    report = compare(tmp_path, tmp_path / "w.jsonl", out, out / "calibration.json")
    measured = report["throughput"]["measured"]
    assert measured["duration_s"] == pytest.approx(window(tmp_path / "w.jsonl", out))
    assert measured["duration_s"] < 0.8 * (sessions[0]["active_s"] + sessions[1]["active_s"])
    assert measured["request_throughput"] == pytest.approx(40 / measured["duration_s"])
    assert "the measured window" in (tmp_path / "report" / "report.md").read_text()


# Counters beyond what the client received ----------------------------------------------------

def _replay_beside_another_client(tmp_path, config, out, args, requests, output_tokens) -> list:
    """Replay w.jsonl into ``out`` while another client sends ``requests`` of ``output_tokens`` once the
    session is under way (its opening scrape taken); the replay's exit codes."""
    with FakeServer(config) as server:
        codes = []
        thread = threading.Thread(target=lambda: codes.append(replay(tmp_path / "w.jsonl", server.url, out, *args)))
        thread.start()
        deadline = time.monotonic() + 60
        while server.requests_received < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        server.other_client(requests=requests, output_tokens=output_tokens)
        server.release()
        thread.join(timeout=120)
    return codes

def test_another_clients_traffic_is_flagged_named_and_left_out_unless_forced(tmp_path, capsys):
    """Session 0 is clean.  During session 1 (--retry-failed) another client runs 10 requests of
    50 tokens on the same server: its counters rose by 500 tokens more than its own requests
    could generate.  It is named with the excess and left out; --force includes it, saying so."""
    generate(tmp_path / "w.jsonl", n=30)
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(fault_http_500=0.3, proposal_probability=0.6, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == EXIT_REQUESTS_FAILED
    failed = sum(r["status"] != "ok" for r in read_results(out).records.values())
    codes = _replay_beside_another_client(tmp_path, FakeServerConfig(proposal_probability=0.6, hold_after_requests=1, **FAST), out, ("--retry-failed",), 10, 50)
    assert codes == [0] and failed > 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out)]) == 0
    err = capsys.readouterr().err
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [0]
    assert [(f["session"], f["excess_tokens"], f["included"]) for f in calibration["sessions_flagged"]] == [(1, 500.0, False)]
    assert "warning: session 1: its counters rose by" in err and "500 more than its requests could generate" in err and "another client's traffic" in err and "--force" in err
    assert main(["calibrate", "--replay", str(out), "--force", "--out", str(tmp_path / "forced.json")]) == 0
    forced = json.loads((tmp_path / "forced.json").read_text())
    assert forced["sessions_used"] == [0, 1] and forced["sessions_flagged"][0]["included"] is True
    assert "included anyway (--force)" in capsys.readouterr().err


@pytest.mark.parametrize("start_time", [True, False], ids=["start-time", "no-start-time"])
def test_a_session_whose_server_died_says_so_and_its_counts_stay_out(tmp_path, capsys, start_time):
    """The server dies at the first request of session 0 (nothing succeeds), comes back as a
    new process, serves another client, then session 1 replays everything.  Session 0 is not
    "(interrupted)": its server died, and its counters (another client's, on the new process)
    are left out, so the proposal probability is session 1's own."""
    generate(tmp_path / "w.jsonl", n=20)
    out = tmp_path / "r"
    missing = () if start_time else ("process_start_time_seconds",)
    with FakeServer(FakeServerConfig(die_after_requests=0, proposal_probability=0.6, metrics_missing=missing, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == EXIT_CLOSING_SCRAPE_FAILED
        assert not any(r["status"] == "ok" for r in read_results(out).records.values())
        server.restart()
        server.other_client(requests=10, output_tokens=50)
        assert replay(tmp_path / "w.jsonl", server.url, out, "--retry-failed") == 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out)]) == 0
    err = capsys.readouterr().err
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [1]
    reason = calibration["sessions_dropped"][0]["reason"]
    assert calibration["sessions_dropped"][0]["session"] == 0 and "closing /metrics scrape failed: the server died" in reason
    assert not any("session 0" in note and "(interrupted)" in note for note in calibration["notes"])
    assert "session 0 left out of the calibration" in err and "the server died" in err
    # only session 1's own drafts and chunks: the fake proposer drafts at 60% of decode steps
    assert calibration["proposal_probability"] == pytest.approx(0.6, abs=0.07)


def test_another_clients_traffic_cannot_hide_in_the_slack_of_http_errors(tmp_path, capsys):
    """Session 0's HTTP 500s generated nothing, but their output counted towards what its
    requests could generate, so another client's 80 tokens during it passed unflagged.  The
    bound counts a refused request as nothing: the 80 tokens are flagged, exactly."""
    generate(tmp_path / "w.jsonl", n=30)
    out = tmp_path / "r"
    codes = _replay_beside_another_client(tmp_path, FakeServerConfig(fault_http_500=0.3, hold_after_requests=1, **FAST), out, (), 4, 20)
    failed = [r for r in read_results(out).records.values() if r["status"] == "http_error"]
    assert codes == [EXIT_REQUESTS_FAILED] and sum(r["expected_output_tokens"] for r in failed) > 80  # the slack the 80 tokens hid in
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert replay(tmp_path / "w.jsonl", healthy.url, out, "--retry-failed") == 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out)]) == 0
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [1]
    assert [(f["session"], f["excess_tokens"]) for f in calibration["sessions_flagged"]] == [(0, 80.0)]


def test_a_session_closed_by_the_next_on_a_server_without_a_start_time_stays_out(tmp_path, capsys):
    """Session 0 was killed after 10 of its 30 requests finished (its closing scrape and the
    other records never written); the server, which exports no process_start_time_seconds,
    restarted and served another client's 1000 tokens before session 1 resumed.  Session 1's
    opening scrape would close session 0 with the other client's counts: more than session 0
    received, less than its 30 requests could generate, so only the start time could tell, and
    there is none.  Session 0 is left out."""
    generate(tmp_path / "w.jsonl", n=30)
    out = tmp_path / "r"
    config = FakeServerConfig(metrics_missing=("process_start_time_seconds",), **FAST)
    with FakeServer(config) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == 0
        _as_if_killed(out, keep=10)
        server.restart()
        server.other_client(requests=10, output_tokens=100)
        assert replay(tmp_path / "w.jsonl", server.url, out) == 0
    kept = [r for r in read_results(out).history if r["session"] == 0]
    assert sum(received(r) for r in kept) < 1000 < sum(r.output_tokens for r in read_workload(tmp_path / "w.jsonl").requests)
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out)]) == 0
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [1]
    assert calibration["sessions_dropped"][0]["session"] == 0 and "exports no process_start_time_seconds" in calibration["sessions_dropped"][0]["reason"]


def _as_if_killed(out, keep):
    """Make session 0 look killed mid-run: its first ``keep`` records only, no closing scrape,
    and its replay-summary entry still ``running``, as ``kill -9`` leaves them."""
    lines = results_path(out).read_text().splitlines()
    results_path(out).write_text("\n".join(lines[: 1 + keep]) + "\n")
    (out / "scrapes" / "s000-after.prom").unlink()
    summary = read_summary(out)
    summary["sessions"] = [{key: value for key, value in summary["sessions"][0].items() if key in ("session", "model", "options", "planned", "planned_output_tokens", "warnings")} | {"state": "running"}]
    atomic_write_json(out / "replay-summary.json", summary)


# --force and k --------------------------------------------------------------------------------
def test_force_overrides_a_per_position_k_mismatch(tmp_path, capsys):
    generate(tmp_path / "w.jsonl", n=12)
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out), "--num-speculative-tokens", "4"]) == 2
    assert "counts acceptance for 3 draft positions but k = 4" in capsys.readouterr().err
    assert main(["calibrate", "--replay", str(out), "--num-speculative-tokens", "4", "--force"]) == 0
    assert "calibrated with k = 4 anyway: --force" in capsys.readouterr().err
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["num_speculative_tokens"] == 4 and len(calibration["acceptance_per_position"]) == 4
    assert calibration["acceptance_per_position"][3] == 0.0 and calibration["warnings"]
    # the summary rates are the given k's, as the simulation runs it: 4 draft tokens per draft,
    # the 4th never accepted (they kept the server's k = 3: a -23% acceptance "error" in the report)
    counts = calibration["counts"]
    assert calibration["acceptance_rate"] == pytest.approx(counts["accepted_tokens"] / (counts["drafts"] * 4))
    assert calibration["acceptance_rate"] == pytest.approx(sum(calibration["acceptance_per_position_unconditional"]) / 4)
    assert calibration["mean_acceptance_length"] == pytest.approx(1 + counts["accepted_tokens"] / counts["drafts"])
    assert main(["calibrate", "--replay", str(out), "--num-speculative-tokens", "2", "--force", "--out", str(tmp_path / "k2.json")]) == 0
    fewer = json.loads((tmp_path / "k2.json").read_text())
    per_position = fewer["accepted_per_position_counts"]
    assert fewer["acceptance_rate"] == pytest.approx((per_position[0] + per_position[1]) / (counts["drafts"] * 2))
    assert fewer["mean_acceptance_length"] == pytest.approx(1 + (per_position[0] + per_position[1]) / counts["drafts"])


# Stalls -----------------------------------------------------------------------------------------
def test_time_lost_to_stalls_is_flagged_and_left_out_of_the_duration(tmp_path, capsys):
    """Arrivals span 1 s; a tenth of the streams stall until the client's 3 s timeout, so the
    session's wall time is over 3 s though the server was busy for about 1 s."""
    generate(tmp_path / "w.jsonl", n=40, rate="40", outputs=("8", "16"))
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(fault_stall=0.1, stall_s=3600.0, **FAST)) as server:
        assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(out), "--no-progress", "--timeout", "3"]) == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    session = read_summary(out)["sessions"][0]
    records = read_results(out).records.values()
    timeouts = sum(r["status"] == "timeout" for r in records)
    assert timeouts >= 2 and session["wall_s"] > 3.0
    assert session["stall_tail_s"] > 1.0 and session["active_s"] == pytest.approx(session["wall_s"] - session["stall_tail_s"])
    busy = max([r["end_s"] for r in records if r["status"] != "timeout"] + [r["send_s"] for r in records])
    assert session["active_s"] == pytest.approx(busy, abs=1e-6)
    assert f"warning: session 0: {timeouts} request(s) timed out (no data for --timeout 3 s)" in err and "left out of its duration" in err
    ok = sum(r["status"] == "ok" for r in records)
    assert session["metrics"]["throughput"]["request_throughput"] == pytest.approx(ok / session["active_s"])
    assert main(["calibrate", "--replay", str(out)]) == 0
    measured = compare(tmp_path, tmp_path / "w.jsonl", out, out / "calibration.json")["throughput"]["measured"]
    assert measured["duration_s"] == pytest.approx(session["active_s"]) and measured["stall_tail_s"] == pytest.approx(session["stall_tail_s"])


# max_model_len ----------------------------------------------------------------------------------
def test_prompts_beyond_the_servers_max_model_len_are_refused_before_sending(tmp_path, capsys):
    """They used to be sent, all fail with HTTP 400, and exit 3 advised --retry-failed."""
    generate(tmp_path / "w.jsonl", n=10, prompts=("40", "60"), outputs=("8", "16"))
    with FakeServer(FakeServerConfig(max_model_len=64, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r") == 2
        assert server.requests_received == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "beyond 'fake-model''s max_model_len of 64" in lines[0] and "(prompt " in lines[0] and "--max-model-len" in lines[0]
    assert not (tmp_path / "r").exists()


# Short streams without token ids ----------------------------------------------------------------
def test_without_token_ids_a_stream_that_stops_early_is_short(tmp_path, capsys):
    """replay --no-token-ids: a stream that closes cleanly halfway sends no usage and no token ids,
    so nothing counts its tokens.  It used to be ok (exit 0, never resent, in the throughput);
    without finish_reason 'length' it is short, and --retry-failed resends it."""
    generate(tmp_path / "w.jsonl", n=30)
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(fault_early_close=0.3, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out, "--no-token-ids") == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    records = read_results(out).records.values()
    short = [r for r in records if r["status"] == "short"]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(short) >= 4 and all(r["completion_tokens"] is None and r["streamed_tokens"] is None and r["finish_reason"] is None for r in short)
    assert all("without finish_reason 'length'" in r["error"] for r in short)
    assert all(r["finish_reason"] == "length" and r["completion_tokens"] == r["expected_output_tokens"] for r in ok)  # usage counts the complete ones
    assert f"{len(short)} short" in err
    session = read_summary(out)["sessions"][0]
    assert session["metrics"]["throughput"]["completed"] == len(ok)
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert replay(tmp_path / "w.jsonl", healthy.url, out, "--no-token-ids", "--retry-failed") == 0
    assert all(r["status"] == "ok" for r in read_results(out).records.values())
