"""Compare and report: per-request errors, medians and MAPE, workload checks, file outputs."""

import json

import pandas as pd
import pytest

from simulator.util.errors import ConfigError
from simulator.validation.cli import main
from simulator.validation.compare import check_same_workload, error_summary, join, measured_frame, measured_itls, measured_metrics, simulated_metrics
from simulator.validation.files import DurableAppender, atomic_write_json
from simulator.validation.report import FILES, render_markdown
from simulator.validation.replay_files import SCHEMA as REPLAY_SCHEMA
from simulator.validation.replay_files import results_path
from simulator.validation.workload import WorkloadSpec, generate, write_workload

WORKLOAD = generate(WorkloadSpec(num_requests=4, arrival="fixed", rate=1.0, prompt_tokens=8, output_tokens=11))


def record(rid, ttft, e2e, status="ok", mismatch=False):
    """11 tokens in 6 chunks: the first, then 5 decode chunks of 2 tokens evenly spaced."""
    chunks = [[ttft + i * (e2e - ttft) / 5, 1 if i == 0 else 2] for i in range(6)] if status == "ok" else []
    return {
        "request_id": rid,
        "session": 0,
        "status": status,
        "length_mismatch": mismatch,
        "expected_output_tokens": 11,
        "completion_tokens": 11 if status == "ok" else None,
        "ttft_s": ttft if status == "ok" else None,
        "e2e_s": e2e if status == "ok" else None,
        "tpot_s": (e2e - ttft) / 10 if status == "ok" else None,
        "chunks": chunks,
        "error": None if status == "ok" else "boom",
    }


RECORDS = {0: record(0, 0.10, 1.10), 1: record(1, 0.20, 2.20), 2: record(2, 0.10, 1.10, status="timeout"), 3: record(3, 0.40, 4.40, mismatch=True)}
SIMULATED = pd.DataFrame(
    {
        "request_id": [0, 1, 2, 3],
        "arrival_s": [0.0, 1.0, 2.0, 3.0],
        "prompt_tokens": [8] * 4,
        "output_tokens": [11] * 4,
        "accepted_tokens": [5, 5, 5, 0],  # 5 decode steps of 2 tokens, or 10 of 1
        "ttft_s": [0.12, 0.18, 0.5, 0.5],
        "tpot_s": [0.1, 0.2, 0.5, 0.5],
        "e2e_s": [1.12, 2.18, 5.5, 5.5],
    }
)


# the gaps between the simulated requests' token emissions: 5 steps of 2 tokens evenly spaced, or 10 of 1
SIM_ITLS = {0: [0.2] * 5, 1: [0.4] * 5, 2: [0.5] * 10, 3: [0.5] * 10}


def test_signed_and_absolute_errors_per_request():
    frame = join(measured_frame(WORKLOAD, RECORDS), SIMULATED)
    assert list(frame["compared"]) == [True, True, False, False]  # a timeout and a length mismatch are left out
    assert frame.loc[0, "ttft_err_pct"] == pytest.approx(20.0)
    assert frame.loc[1, "ttft_err_pct"] == pytest.approx(-10.0)
    assert frame.loc[1, "ttft_abs_err_pct"] == pytest.approx(10.0)
    assert frame.loc[0, "tpot_err_pct"] == pytest.approx(0.0)
    assert frame[["ttft_err_pct"]].iloc[2:].isna().all().all()


def test_mean_median_and_percentiles_use_compared_requests_only():
    summary = error_summary(join(measured_frame(WORKLOAD, RECORDS), SIMULATED), measured_itls(RECORDS), SIM_ITLS, percentiles=(90.0, 99.0))
    ttft = summary["ttft"]
    assert ttft["label"] == "TTFT" and ttft["requests"] == 2
    assert ttft["measured"]["mean_ms"] == pytest.approx(150.0) and ttft["simulated"]["mean_ms"] == pytest.approx(150.0)
    assert ttft["measured"]["median_ms"] == pytest.approx(150.0)
    assert ttft["measured"]["p99_ms"] == pytest.approx(100 + 0.99 * 100) and ttft["simulated"]["p90_ms"] == pytest.approx(120 + 0.9 * 60)
    assert ttft["error_pct"]["mean"] == pytest.approx(0.0)
    assert ttft["mape_pct"] == pytest.approx(15.0) and ttft["median_signed_err_pct"] == pytest.approx(5.0)
    assert summary["e2el"]["label"] == "E2EL" and summary["e2el"]["mape_pct"] == pytest.approx((0.02 / 1.1 + 0.02 / 2.2) / 2 * 100)
    # ITL: the compared requests' gaps pooled, 5 of 200 ms and 5 of 400 ms on each side
    itl = summary["itl"]
    assert itl["measured"]["mean_ms"] == pytest.approx(300) and itl["simulated"]["mean_ms"] == pytest.approx(300)
    assert itl["mape_pct"] is None  # no per-request ITL under vLLM's definition
    assert set(summary) == {"ttft", "tpot", "itl", "e2el"}


# Two requests with uneven chunk gaps: A's chunks at 0.10, 0.15, 0.35 s (gaps 50 and 200 ms), B's at
# 0.20 and 0.30 s (one gap of 100 ms).  vLLM pools the gaps: [50, 100, 200] ms.
UNEVEN = {
    0: {"request_id": 0, "status": "ok", "chunks": [[0.10, 1], [0.15, 2], [0.35, 2]], "ttft_s": 0.10, "e2e_s": 0.35, "tpot_s": 0.0625, "streamed_tokens": 5, "expected_output_tokens": 5, "completion_tokens": 5, "length_mismatch": False},
    1: {"request_id": 1, "status": "ok", "chunks": [[0.20, 1], [0.30, 4]], "ttft_s": 0.20, "e2e_s": 0.30, "tpot_s": 0.025, "streamed_tokens": 5, "expected_output_tokens": 5, "completion_tokens": 5, "length_mismatch": False},
}
POOLED_MS = {"mean_ms": 350 / 3, "median_ms": 100.0, "std_ms": ((50 - 350 / 3) ** 2 + (100 - 350 / 3) ** 2 + (200 - 350 / 3) ** 2) ** 0.5 / 3**0.5, "p99_ms": 100 + 0.98 * 100}


def test_itl_is_vllms_pooled_gaps_in_replay_compare_and_simulate():
    """One definition everywhere, checked against hand-computed numbers: the per-request mean
    (125 and 100 ms, mean 112.5) is not it."""
    workload = generate(WorkloadSpec(num_requests=2, arrival="fixed", rate=1.0, prompt_tokens=8, output_tokens=5))
    replay_line = measured_metrics(list(UNEVEN.values()), 1.0, {0: 8, 1: 8})["latency"]["itl"]
    simulated = pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 1.0], "prompt_tokens": [8, 8], "output_tokens": [5, 5], "ttft_s": [0.1, 0.2], "tpot_s": [0.06, 0.03], "e2e_s": [0.34, 0.32]})
    sim_gaps = {0: [0.06, 0.18], 1: [0.12]}
    report = error_summary(join(measured_frame(workload, UNEVEN), simulated), measured_itls(UNEVEN), sim_gaps)["itl"]
    for stats in (replay_line, report["measured"]):
        assert stats == pytest.approx(POOLED_MS)
    # the simulated side pools the emission gaps the same way: [60, 120, 180] ms
    expected_sim = {"mean_ms": 120.0, "median_ms": 120.0, "std_ms": (2 * 60**2 / 3) ** 0.5, "p99_ms": 120 + 0.98 * 60}
    assert report["simulated"] == pytest.approx(expected_sim)
    assert simulated_metrics(simulated, sim_gaps)["latency"]["itl"] == pytest.approx(expected_sim)
    assert report["error_pct"]["p99"] == pytest.approx((178.8 - 198.0) / 198.0 * 100)


def test_percentiles_only_for_the_chosen_metrics_and_bad_choices_refused():
    from simulator.validation.compare import parse_percentile_metrics, parse_percentiles

    summary = error_summary(join(measured_frame(WORKLOAD, RECORDS), SIMULATED), measured_itls(RECORDS), SIM_ITLS, percentiles=(50.0, 99.9), percentile_metrics=("ttft",))
    assert set(summary["ttft"]["measured"]) == {"mean_ms", "median_ms", "std_ms", "p50_ms", "p99.9_ms"}
    assert set(summary["tpot"]["measured"]) == {"mean_ms", "median_ms", "std_ms"}
    assert parse_percentiles("99,50") == (50.0, 99.0)
    assert parse_percentiles("100,0") == (0.0, 100.0)  # vllm bench serve takes both ends (np.percentile: min and max)
    ends = error_summary(join(measured_frame(WORKLOAD, RECORDS), SIMULATED), measured_itls(RECORDS), SIM_ITLS, percentiles=(0.0, 100.0), percentile_metrics=("ttft",))
    ttfts = [r["ttft_s"] * 1000 for r in RECORDS.values() if r["status"] == "ok" and not r.get("length_mismatch")]
    assert (ends["ttft"]["measured"]["p0_ms"], ends["ttft"]["measured"]["p100_ms"]) == pytest.approx((min(ttfts), max(ttfts)))
    for bad in ("-1", "101", "nan", "x", "50,,90"):
        with pytest.raises(ConfigError, match="--metric-percentiles"):
            parse_percentiles(bad)
    assert parse_percentile_metrics("TTFT,e2el") == ("ttft", "e2el")
    with pytest.raises(ConfigError, match="--percentile-metrics 'e2e'"):
        parse_percentile_metrics("e2e")


def test_never_replayed_requests_are_listed_but_not_compared():
    frame = join(measured_frame(WORKLOAD, {0: RECORDS[0]}), SIMULATED)
    assert list(frame["status"]) == ["ok", "not_replayed", "not_replayed", "not_replayed"]
    assert frame["compared"].sum() == 1


def test_simulated_lengths_must_match_the_workload():
    with pytest.raises(ConfigError, match="output lengths"):
        join(measured_frame(WORKLOAD, RECORDS), SIMULATED.assign(output_tokens=[11, 11, 11, 12]))


def test_inputs_from_different_workloads_are_refused():
    assert check_same_workload({"a": "x", "b": "x"}) == "x"
    with pytest.raises(ConfigError, match="different workloads.*calibration"):
        check_same_workload({"workload": "aaa", "calibration": "bbb"})


def write_inputs(root, workload=WORKLOAD, simulated_hash=None):
    """A replay directory, calibration and simulated output as the earlier steps write them."""
    write_workload(root / "w.jsonl", workload)
    appender = DurableAppender(results_path(root / "replay"))
    appender.append({"schema": REPLAY_SCHEMA, "schema_version": 1, "workload_hash": workload.workload_hash, "num_requests": len(workload), "model": "served"})
    for rid in sorted(RECORDS):
        appender.append(RECORDS[rid])
    appender.close()
    calibration = {"schema": "vidur-specdec/validation-calibration", "schema_version": 1, "workload_hash": workload.workload_hash, "engine": "v1", "num_speculative_tokens": 2, "acceptance_per_position": [0.6, 0.5], "acceptance_rate": 0.6, "mean_acceptance_length": 2.1, "notes": []}
    atomic_write_json(root / "calibration.json", calibration)
    simulated = {"schema": "vidur-specdec/validation-simulated", "schema_version": 1, "workload_hash": simulated_hash or workload.workload_hash, "config": {"model": "m", "device": "a100"}, "summary": {"acceptance_rate": 0.58, "mean_acceptance_length": 2.05}, "provenance": {"seed": 0}}
    atomic_write_json(root / "sim" / "simulated.json", simulated)
    SIMULATED.to_csv(root / "sim" / "simulated.csv", index=False)
    atomic_write_json(root / "sim" / "simulated_itls.json", {"schema": "vidur-specdec/validation-simulated-itls", "schema_version": 1, "workload_hash": workload.workload_hash, "itls": [SIM_ITLS[i] for i in range(len(workload))]})


def compare_args(root, out):
    return ["compare", "--workload", str(root / "w.jsonl"), "--replay", str(root / "replay"), "--calibration", str(root / "calibration.json"), "--simulated", str(root / "sim"), "--out", str(out)]


def test_report_files_are_complete_and_byte_identical_on_rerun(tmp_path, capsys):
    write_inputs(tmp_path)
    assert main(compare_args(tmp_path, tmp_path / "a")) == 0
    assert main(compare_args(tmp_path, tmp_path / "b")) == 0
    for name in FILES.values():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["requests"]["compared"] == 2 and report["requests"]["by_status"] == {"ok": 3, "timeout": 1}
    assert report["acceptance"]["measured"]["acceptance_rate"] == 0.6 and report["acceptance"]["simulated"]["acceptance_rate"] == 0.58
    csv = pd.read_csv(tmp_path / "a" / "comparison.csv")
    assert list(csv["request_id"]) == [0, 1, 2, 3] and csv.loc[0, "ttft_err_pct"] == pytest.approx(20.0)
    html = (tmp_path / "a" / "scatter.html").read_text()
    assert 'src="plotly.min.js"' in html and "validation-scatter" in html
    figure = json.loads((tmp_path / "a" / "scatter.json").read_text())
    assert [len(trace["x"]) for trace in figure["data"] if trace["mode"] == "markers"] == [2, 2, 2]  # TTFT, TPOT, E2EL: ITL has no per-request value


def test_report_has_vllm_metrics_throughput_and_one_unit_policy(tmp_path, capsys):
    write_inputs(tmp_path)
    assert main(compare_args(tmp_path, tmp_path / "a") + ["--metric-percentiles", "50,99"]) == 0
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert set(report["metrics"]["ttft"]["measured"]) == {"mean_ms", "median_ms", "std_ms", "p50_ms", "p99_ms"}
    assert "milliseconds" in report["units"] and "seconds" in report["units"]
    throughput = report["throughput"]
    # simulated: 4 requests of 11 output and 8 prompt tokens from arrival 0 to the last finish at 3 + 5.5 s
    assert throughput["simulated"]["request_throughput"] == pytest.approx(4 / 8.5)
    assert throughput["simulated"]["output_throughput"] == pytest.approx(44 / 8.5)
    assert throughput["simulated"]["total_token_throughput"] == pytest.approx(76 / 8.5)
    assert throughput["measured"]["duration_s"] is None  # these inputs have no replay summary
    markdown = (tmp_path / "a" / "report.md").read_text()
    assert "| TTFT | mean | 150.00 | 150.00 | +0.0% |" in markdown
    assert "| E2EL | p99 |" in markdown and "| ITL | median |" in markdown
    assert "request throughput (req/s)" in markdown and "Latencies in milliseconds" in markdown
    out = capsys.readouterr().out
    assert "TTFT: 2 requests, mean 150.00 ms measured vs 150.00 ms simulated, MAPE 15.0%" in out


def test_markdown_shows_the_numbers():
    stats = {"mean_ms": 150.0, "median_ms": 150.0, "p99_ms": 199.0}
    write = render_markdown(
        {
            "workload_hash": "abcdef0123456789",
            "served_model": "served",
            "simulated_model": "m",
            "simulated_device": "a100",
            "requests": {"total": 4, "compared": 2, "length_mismatch": 1, "by_status": {"ok": 3, "timeout": 1}},
            "metrics": {m: {"requests": 2, "measured": stats, "simulated": {k: v * 1.1 for k, v in stats.items()}, "error_pct": {"mean": 10.0, "median": 10.0, "p99": 10.0}, "median_signed_err_pct": 5.0, "mape_pct": 15.0, "p90_abs_err_pct": 19.0} for m in ("ttft", "tpot", "itl", "e2el")},
            "acceptance": {"measured": {"acceptance_rate": 0.6, "mean_acceptance_length": 2.1}, "simulated": {"acceptance_rate": None, "mean_acceptance_length": None}, "num_speculative_tokens": 2, "engine": "v1"},
            "calibration": {"notes": ["a note"]},
        }
    )
    assert "| TTFT | p99 | 199.00 | 218.90 | +10.0% |" in write
    assert "| E2EL | 2 | +5.0% | 15.0% | 19.0% |" in write
    assert "| simulated | n/a | n/a |" in write and "- a note" in write


def test_compare_refuses_mixed_workloads_and_writes_nothing(tmp_path, capsys):
    write_inputs(tmp_path, simulated_hash="0" * 64)
    assert main(compare_args(tmp_path, tmp_path / "out")) == 2
    assert "different workloads" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
