"""All steps through the CLI against the fake vLLM server: generate, replay, calibrate,
simulate, compare; and the bad-input paths that stop a step with exit code 2."""

import json

import pandas as pd
import pytest

from simulator.validation.cli import EXIT_REQUESTS_FAILED, main
from fake_vllm import FakeServer, FakeServerConfig

ALPHA, K = 0.7, 3
# Calibration tolerance: the run counts about 800 drafts, so the deepest conditional rate
# rests on about 390 trials, a binomial standard error of about 0.023; 0.08 is over 3 of them.
RATE_TOLERANCE = 0.08
FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Workload, replay and calibration against a fake server with k = 3 and acceptance 0.7."""
    root = tmp_path_factory.mktemp("e2e")
    assert main(["generate", "--out", str(root / "w.jsonl"), "--num-prompts", "40", "--request-rate", "80", "--prompt-range", "32", "96", "--output-range", "40", "80", "--repeat-fraction", "0.3", "--workload-seed", "11"]) == 0
    config = FakeServerConfig(num_speculative_tokens=K, acceptance_rate=ALPHA, fault_http_500=0.05, fault_drop=0.05, **FAST)
    with FakeServer(config) as server:
        assert main(["replay", "--workload", str(root / "w.jsonl"), "--base-url", server.url, "--out", str(root / "replay"), "--no-progress", "--timeout", "20"]) == EXIT_REQUESTS_FAILED
    assert main(["calibrate", "--replay", str(root / "replay"), "--num-speculative-tokens", str(K)]) == 0
    return root


def test_calibration_recovers_the_configured_acceptance(measured):
    calibration = json.loads((measured / "replay" / "calibration.json").read_text())
    assert calibration["engine"] == "v1" and calibration["num_speculative_tokens"] == K
    assert calibration["counts"]["drafts"] > 700
    for rate in calibration["acceptance_per_position"]:
        assert rate == pytest.approx(ALPHA, abs=RATE_TOLERANCE)
    expected_accepted = sum(ALPHA**i for i in range(1, K + 1))
    assert calibration["acceptance_rate"] == pytest.approx(expected_accepted / K, abs=RATE_TOLERANCE / 2)
    assert calibration["mean_acceptance_length"] == pytest.approx(1 + expected_accepted, abs=2 * RATE_TOLERANCE)
    assert calibration["kv_cache"] == {"num_gpu_blocks": 2048, "block_size": 16}
    assert calibration["drafts_per_decode_chunk"] == pytest.approx(1.0, abs=0.1)  # every decode step drafted


def test_faults_are_recorded_and_the_others_complete(measured):
    lines = (measured / "replay" / "replay.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    statuses = {r["status"] for r in records}
    assert len(records) == 40 and "ok" in statuses and statuses <= {"ok", "http_error", "dropped_stream"}
    assert len(statuses) > 1


@pytest.mark.slow  # the first simulation fits Vidur's random forest
@pytest.mark.simulation
def test_simulate_and_compare(measured, capsys):
    root = measured
    assert main(["simulate", "--workload", str(root / "w.jsonl"), "--calibration", str(root / "replay" / "calibration.json"), "--out", str(root / "sim")]) == 0
    simulated = pd.read_csv(root / "sim" / "simulated.csv")
    workload_lines = [json.loads(line) for line in (root / "w.jsonl").read_text().splitlines()[1:]]
    assert list(simulated["output_tokens"]) == [r["output_tokens"] for r in workload_lines]
    assert list(simulated["arrival_s"]) == pytest.approx([r["arrival_s"] for r in workload_lines])
    sim_record = json.loads((root / "sim" / "simulated.json").read_text())
    assert sim_record["config"]["num_kv_blocks"] == 2048
    assert sim_record["config"]["speculation"]["num_speculative_tokens"] == K

    assert main(["compare", "--workload", str(root / "w.jsonl"), "--replay", str(root / "replay"), "--calibration", str(root / "replay" / "calibration.json"), "--simulated", str(root / "sim"), "--out", str(root / "report")]) == 0
    report = json.loads((root / "report" / "report.json").read_text())
    records = [json.loads(line) for line in (root / "replay" / "replay.jsonl").read_text().splitlines()[1:]]
    assert report["requests"]["compared"] == sum(r["status"] == "ok" and not r["length_mismatch"] for r in records)
    comparison = pd.read_csv(root / "report" / "comparison.csv")
    for metric in ("ttft", "tpot", "itl", "e2el"):
        assert report["metrics"][metric]["requests"] == report["requests"]["compared"]
    for metric in ("ttft", "tpot", "e2el"):  # ITL has no per-request value (vLLM pools its gaps)
        assert report["metrics"][metric]["mape_pct"] == pytest.approx(comparison.loc[comparison["compared"], f"{metric}_abs_err_pct"].mean())
    # ITL is vLLM's pooled gaps on both sides: the simulated side from the simulator's own emissions
    itls = json.loads((root / "sim" / "simulated_itls.json").read_text())["itls"]
    compared = comparison.loc[comparison["compared"], "request_id"].tolist()
    pooled = [gap * 1000 for rid in compared for gap in itls[rid]]
    assert report["metrics"]["itl"]["simulated"]["mean_ms"] == pytest.approx(sum(pooled) / len(pooled))
    # ... the same definition as the simulator's own summary (every request's gaps, pooled)
    every = [gap for gaps in itls for gap in gaps]
    assert sim_record["summary"]["itl_mean_s"] == pytest.approx(sum(every) / len(every), rel=1e-6)
    # the simulator draws acceptance from the calibrated per-position rates
    assert report["acceptance"]["simulated"]["acceptance_rate"] == pytest.approx(report["acceptance"]["measured"]["acceptance_rate"], abs=0.05)
    assert "| TTFT | mean |" in (root / "report" / "report.md").read_text()
    assert report["throughput"]["measured"]["request_throughput"] > 0 and report["throughput"]["simulated"]["request_throughput"] > 0
    # simulate's printed summary: vllm bench serve's metrics in ms, never raw seconds
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("simulated "))
    assert "TTFT mean" in line and " ms" in line and "E2EL" in line and "ITL" in line and "req/s" in line


def test_missing_counter_stops_calibration_with_a_clear_message(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "w.jsonl"), "--num-prompts", "5", "--request-rate", "100", "--prompt-tokens", "16", "--output-tokens", "8"]) == 0
    config = FakeServerConfig(metrics_missing=("vllm:spec_decode_num_drafts",), **FAST)
    with FakeServer(config) as server:
        assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(tmp_path / "r"), "--num-speculative-tokens", "3"]) == 2
    assert "missing vllm:spec_decode_num_drafts_total" in capsys.readouterr().err
    assert not (tmp_path / "r" / "calibration.json").exists()


def test_speculation_expected_but_the_server_has_none(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "w.jsonl"), "--num-prompts", "3", "--request-rate", "100", "--prompt-tokens", "16", "--output-tokens", "4"]) == 0
    with FakeServer(FakeServerConfig(num_speculative_tokens=0, **FAST)) as server:
        assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["calibrate", "--replay", str(tmp_path / "r"), "--num-speculative-tokens", "2"]) == 2
    assert "--speculative-config" in capsys.readouterr().err
    assert main(["calibrate", "--replay", str(tmp_path / "r")]) == 0  # k not given: speculation off
    assert json.loads((tmp_path / "r" / "calibration.json").read_text())["num_speculative_tokens"] == 0


def test_unreachable_url_exits_2_naming_it(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "w.jsonl"), "--num-prompts", "2", "--prompt-tokens", "4", "--output-tokens", "2"]) == 0
    assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r")]) == 2
    assert "http://127.0.0.1:9" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_speculation_without_counters_is_not_taken_for_speculation_off(tmp_path, capsys):
    """k = 3 on the server but no spec-decode counters in /metrics: the client saw several
    tokens per chunk, so calibrate without k stops and says what to do."""
    from fake_vllm import SPEC_COUNTERS

    assert main(["generate", "--out", str(tmp_path / "w.jsonl"), "--num-prompts", "6", "--request-rate", "100", "--prompt-tokens", "16", "--output-tokens", "24"]) == 0
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, metrics_missing=SPEC_COUNTERS, **FAST)) as server:
        # detected at replay already: a warning before sending, an error (exit 2) once chunks show speculation
        assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.startswith("warning: ") and "exports no spec-decode counters" in err
    assert "so it speculates: acceptance cannot be calibrated from this server" in err and "new --out" in err
    assert main(["calibrate", "--replay", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "tokens per decode chunk" in err and "no spec-decode counters" in err
    assert "--disable-log-stats" in err and "--num-speculative-tokens 0" in err
    assert not (tmp_path / "r" / "calibration.json").exists()
    # the user says speculation was off: that is taken as given
    assert main(["calibrate", "--replay", str(tmp_path / "r"), "--num-speculative-tokens", "0"]) == 0
    assert json.loads((tmp_path / "r" / "calibration.json").read_text())["num_speculative_tokens"] == 0


@pytest.mark.slow
@pytest.mark.simulation
def test_ngram_misses_are_measured_and_simulated(tmp_path, capsys):
    """The fake proposer drafts at 60% of decode steps: calibrate measures it, simulate runs
    with it (the simulated share of steps with a draft matches), and report.md shows it."""
    root = tmp_path
    assert main(["generate", "--out", str(root / "w.jsonl"), "--num-prompts", "30", "--request-rate", "60", "--prompt-range", "32", "64", "--output-range", "48", "80", "--workload-seed", "5"]) == 0
    with FakeServer(FakeServerConfig(num_speculative_tokens=K, acceptance_rate=ALPHA, proposal_probability=0.6, **FAST)) as server:
        assert main(["replay", "--workload", str(root / "w.jsonl"), "--base-url", server.url, "--out", str(root / "replay"), "--no-progress"]) == 0
    assert main(["calibrate", "--replay", str(root / "replay")]) == 0
    calibration = json.loads((root / "replay" / "calibration.json").read_text())
    # about 1000 decode steps: a binomial standard error of 0.016; 0.06 is almost 4 of them
    assert calibration["proposal_probability"] == pytest.approx(0.6, abs=0.06)
    assert calibration["proposal_probability"] == calibration["drafts_per_decode_chunk"]
    assert any("drafted at" in note for note in calibration["notes"])

    assert main(["simulate", "--workload", str(root / "w.jsonl"), "--calibration", str(root / "replay" / "calibration.json"), "--out", str(root / "sim")]) == 0
    sim_record = json.loads((root / "sim" / "simulated.json").read_text())
    assert sim_record["config"]["speculation"]["proposal_probability"] == calibration["proposal_probability"]
    assert main(["compare", "--workload", str(root / "w.jsonl"), "--replay", str(root / "replay"), "--calibration", str(root / "replay" / "calibration.json"), "--simulated", str(root / "sim"), "--out", str(root / "report")]) == 0
    acceptance = json.loads((root / "report" / "report.json").read_text())["acceptance"]
    # the simulator's own share of decode steps with a draft, from its counts (not its input);
    # its last step of a request proposes nothing, which lowers it by a step in ~30
    assert acceptance["simulated"]["draft_probability"] == pytest.approx(acceptance["measured"]["draft_probability"], abs=0.08)
    markdown = (root / "report" / "report.md").read_text()
    assert "draft probability per decode step" in markdown
    assert f"proposal probability {calibration['proposal_probability']:.3f}" in markdown
