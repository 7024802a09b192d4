"""Compare and report: per-request errors, medians and MAPE, workload checks, file outputs."""

import json

import pandas as pd
import pytest

from simulator.errors import ConfigError
from simulator.validation.cli import main
from simulator.validation.compare import check_same_workload, error_summary, join, measured_frame
from simulator.validation.files import DurableAppender, atomic_write_json
from simulator.validation.report import FILES, render_markdown
from simulator.validation.replay_files import SCHEMA as REPLAY_SCHEMA
from simulator.validation.replay_files import results_path
from simulator.validation.workload import WorkloadSpec, generate, write_workload

WORKLOAD = generate(WorkloadSpec(num_requests=4, arrival="fixed", rate=1.0, prompt_tokens=8, output_tokens=11))


def record(rid, ttft, e2e, status="ok", mismatch=False):
    return {
        "request_id": rid,
        "status": status,
        "length_mismatch": mismatch,
        "ttft_s": ttft if status == "ok" else None,
        "e2e_s": e2e if status == "ok" else None,
        "tpot_s": (e2e - ttft) / 10 if status == "ok" else None,
        "chunks": [],
        "error": None if status == "ok" else "boom",
    }


RECORDS = {0: record(0, 0.10, 1.10), 1: record(1, 0.20, 2.20), 2: record(2, 0.10, 1.10, status="timeout"), 3: record(3, 0.40, 4.40, mismatch=True)}
SIMULATED = pd.DataFrame(
    {
        "request_id": [0, 1, 2, 3],
        "output_tokens": [11] * 4,
        "ttft_s": [0.12, 0.18, 0.5, 0.5],
        "tpot_s": [0.1, 0.2, 0.5, 0.5],
        "e2e_s": [1.12, 2.18, 5.5, 5.5],
    }
)


def test_signed_and_absolute_errors_per_request():
    frame = join(measured_frame(WORKLOAD, RECORDS), SIMULATED)
    assert list(frame["compared"]) == [True, True, False, False]  # a timeout and a length mismatch are left out
    assert frame.loc[0, "ttft_err_pct"] == pytest.approx(20.0)
    assert frame.loc[1, "ttft_err_pct"] == pytest.approx(-10.0)
    assert frame.loc[1, "ttft_abs_err_pct"] == pytest.approx(10.0)
    assert frame.loc[0, "tpot_err_pct"] == pytest.approx(0.0)
    assert frame[["ttft_err_pct"]].iloc[2:].isna().all().all()


def test_medians_and_mape_use_compared_requests_only():
    summary = error_summary(join(measured_frame(WORKLOAD, RECORDS), SIMULATED))
    ttft = summary["ttft"]
    assert ttft["requests"] == 2
    assert ttft["measured_p50_s"] == pytest.approx(0.15) and ttft["simulated_p50_s"] == pytest.approx(0.15)
    assert ttft["p50_err_pct"] == pytest.approx(0.0)
    assert ttft["mape_pct"] == pytest.approx(15.0) and ttft["median_signed_err_pct"] == pytest.approx(5.0)
    assert summary["e2e"]["mape_pct"] == pytest.approx((0.02 / 1.1 + 0.02 / 2.2) / 2 * 100)


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
    calibration = {"schema": "vidur-specdec/validation-calibration", "schema_version": 1, "workload_hash": workload.workload_hash, "engine": "v1", "num_speculative_tokens": 2, "acceptance_rate": 0.6, "mean_acceptance_length": 2.1, "notes": []}
    atomic_write_json(root / "calibration.json", calibration)
    simulated = {"schema": "vidur-specdec/validation-simulated", "schema_version": 1, "workload_hash": simulated_hash or workload.workload_hash, "config": {"model": "m", "device": "a100"}, "summary": {"acceptance_rate": 0.58, "mean_acceptance_length": 2.05}, "provenance": {"seed": 0}}
    atomic_write_json(root / "sim" / "simulated.json", simulated)
    SIMULATED.to_csv(root / "sim" / "simulated.csv", index=False)


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
    assert [len(trace["x"]) for trace in figure["data"] if trace["mode"] == "markers"] == [2, 2, 2]


def test_markdown_shows_the_numbers():
    write = render_markdown(
        {
            "workload_hash": "abcdef0123456789",
            "served_model": "served",
            "simulated_model": "m",
            "simulated_device": "a100",
            "requests": {"total": 4, "compared": 2, "length_mismatch": 1, "by_status": {"ok": 3, "timeout": 1}},
            "metrics": {m: {"requests": 2, "measured_p50_s": 0.15, "simulated_p50_s": 0.165, "p50_err_pct": 10.0, "median_signed_err_pct": 5.0, "mape_pct": 15.0, "p90_abs_err_pct": 19.0} for m in ("ttft", "tpot", "e2e")},
            "acceptance": {"measured": {"acceptance_rate": 0.6, "mean_acceptance_length": 2.1}, "simulated": {"acceptance_rate": None, "mean_acceptance_length": None}, "num_speculative_tokens": 2, "engine": "v1"},
            "calibration": {"notes": ["a note"]},
        }
    )
    assert "| TTFT | 2 | 150.0 ms | 165.0 ms | +10.0% | +5.0% | 15.0% | 19.0% |" in write
    assert "| simulated | n/a | n/a |" in write and "- a note" in write


def test_compare_refuses_mixed_workloads_and_writes_nothing(tmp_path, capsys):
    write_inputs(tmp_path, simulated_hash="0" * 64)
    assert main(compare_args(tmp_path, tmp_path / "out")) == 2
    assert "different workloads" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
