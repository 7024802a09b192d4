"""A server that restarts or dies during a replay: replay's exit codes, and which sessions
calibrate can use (restarts told apart by process_start_time_seconds)."""

import json

import pytest

from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.cli import EXIT_CLOSING_SCRAPE_FAILED, EXIT_REQUESTS_FAILED, main
from simulator.validation.metrics import delta, parse_metrics
from simulator.validation.replay_files import list_scrapes, read_results, read_summary, scrape_path

FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)
N = 30


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "w.jsonl"
    assert main(["generate", "--out", str(path), "--num-prompts", str(N), "--arrival", "fixed", "--request-rate", "200", "--prompt-range", "16", "48", "--output-range", "16", "40", "--workload-seed", "3"]) == 0
    return path


def replay(workload, url, out, *extra):
    # a 20 s silence limit instead of the 300 s default: a request the fake server accepted as it
    # went down then costs the test 20 s, not five minutes (a test's own --timeout, later, wins)
    return main(["replay", "--workload", str(workload), "--base-url", url, "--out", str(out), "--no-progress", "--timeout", "20", *extra])


def session_delta(out, session):
    before = parse_metrics(scrape_path(out, session, "before").read_text(), "before")
    after = parse_metrics(scrape_path(out, session, "after").read_text(), "after")
    return delta(before, after, "session")


def test_failed_requests_exit_3_and_every_record_is_kept(tmp_path, workload, capsys):
    config = FakeServerConfig(fault_http_500=0.3, **FAST)
    with FakeServer(config) as server:
        assert replay(workload, server.url, tmp_path / "r") == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    records = read_results(tmp_path / "r").records
    failed = sum(r["status"] != "ok" for r in records.values())
    assert len(records) == N and failed > 0
    assert f"{failed} of {N} requests have no successful record" in err and "--retry-failed" in err


def test_a_server_that_dies_mid_replay_exits_4_keeping_every_record(tmp_path, workload, capsys):
    """The process dies when request 11 arrives: in-flight streams are cut, later requests
    are refused and the closing scrape fails."""
    out = tmp_path / "r"
    with FakeServer(FakeServerConfig(die_after_requests=10, **FAST)) as server:
        assert replay(workload, server.url, out) == EXIT_CLOSING_SCRAPE_FAILED
        err = capsys.readouterr().err
        assert "closing /metrics scrape failed" in err and "requests have no successful record" in err
        records = read_results(out).records
        assert len(records) == N  # a record for every request, failed or not
        assert sum(r["status"] != "ok" for r in records.values()) >= N - 10  # at least the requests after the death
        assert read_summary(out)["sessions"][0]["after_scrape"] is False
        assert set(list_scrapes(out)[0]) == {"before"}

        # The server comes back as a new process (counters from zero): the refused requests
        # are resent, and calibrate must not close session 0 with session 1's opening scrape.
        server.restart()
        assert replay(workload, server.url, out, "--retry-failed") == 0
    assert all(r["status"] == "ok" for r in read_results(out).records.values())
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out), "--num-speculative-tokens", "3"]) == 0
    err = capsys.readouterr().err
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [1]
    assert [d["session"] for d in calibration["sessions_dropped"]] == [0]
    assert "restarted" in calibration["sessions_dropped"][0]["reason"]
    assert "session 0 left out" in err and "restarted" in err
    assert any("session 0 left out" in note for note in calibration["notes"])
    assert calibration["counts"]["drafts"] == session_delta(out, 1).drafts > 0
    # Only session 1's requests are set against session 1's counters: one draft per decode chunk.
    assert calibration["drafts_per_decode_chunk"] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("start_time", [True, False], ids=["start-time", "no-start-time"])
def test_a_restart_inside_a_session_leaves_out_that_session_only(tmp_path, workload, capsys, start_time):
    """Session 0 completes; during session 1 the server restarts, so session 1's counters
    went down.  Told by process_start_time_seconds, or by the counters when it is absent."""
    out = tmp_path / "r"
    missing = () if start_time else ("process_start_time_seconds",)
    config = FakeServerConfig(fault_http_500=0.2, restart_after_requests=N + 2, metrics_missing=missing, **FAST)
    with FakeServer(config) as server:
        assert replay(workload, server.url, out) == EXIT_REQUESTS_FAILED
        assert replay(workload, server.url, out, "--retry-failed") == EXIT_REQUESTS_FAILED  # the same prompts fail again
        assert server.requests_received > N + 2  # the restart happened during session 1
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(out)]) == 0
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [0]
    assert [d["session"] for d in calibration["sessions_dropped"]] == [1]
    assert ("process_start_time_seconds" if start_time else "went down") in calibration["sessions_dropped"][0]["reason"]
    assert calibration["counts"]["drafts"] == session_delta(out, 0).drafts > 0
    assert "session 1 left out" in capsys.readouterr().err
    assert any("no process_start_time_seconds" in note for note in calibration["notes"]) is not start_time
