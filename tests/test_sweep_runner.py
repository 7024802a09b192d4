"""The sweep runner against the real simulator: rows, speedups, provenance, determinism."""

from __future__ import annotations

import io
from importlib import metadata

import numpy as np
import pandas as pd
import pytest

from simulator.util import versions
from simulator.util.errors import ConfigError
from repo import DATA_DIR
from simulator.speculative.progress import expected_progress
from simulator.sweep.executors import LocalExecutor, RayExecutor, make_executor
from simulator.sweep.metrics import queue_growth, with_speedups
from simulator.schemas import PROGRESS_COLUMNS, SWEEP_COLUMNS, SWEEP_METRIC_COLUMNS as METRIC_COLUMNS
from simulator.sweep.runner import run_sweep, to_csv_text
from simulator.specs.sweep import SweepSpec, load_spec, parse_spec

SMALL = """
[run]
model = "meta-llama/Llama-2-7b-hf"
device = "a100"
seed = 1

[workload]
num_requests = 12
prompt_tokens = 128
output_tokens = 32
seed = 5

[grid]
arrival_rate = [2.0, 4.0]
acceptance_rate = [0.7]
num_speculative_tokens = [2]
attention = ["kv_once", "per_token"]
proposer = ["ngram"]

[baseline]
arrival_rate = [2.0, 4.0]

[progress]
acceptance_rate = [0.7]
num_speculative_tokens = [2]
num_requests = 3
prompt_tokens = 64
output_tokens = 64
interarrival_s = 30.0
"""


@pytest.fixture(scope="module")
def small_output():
    return run_sweep(parse_spec(SMALL), LocalExecutor(jobs=2, progress=False))


@pytest.mark.simulation
def test_one_row_per_run_with_speedup_against_the_same_loads_baseline(small_output):
    frame = pd.read_csv(io.StringIO(to_csv_text(small_output.rows, SWEEP_COLUMNS)))
    assert list(frame.columns) == list(SWEEP_COLUMNS)
    assert len(frame) == 6
    assert list(zip(frame["arrival_rate"], frame["num_speculative_tokens"], frame["attention"].fillna(""))) == [
        (2.0, 0, ""), (2.0, 2, "kv_once"), (2.0, 2, "per_token"), (4.0, 0, ""), (4.0, 2, "kv_once"), (4.0, 2, "per_token")
    ]
    for row in small_output.rows:
        baseline = next(r for r in small_output.rows if r["arrival_rate"] == row["arrival_rate"] and r["num_speculative_tokens"] == 0)
        assert row["tpot_speedup"] == pytest.approx(baseline["tpot_p50_s"] / row["tpot_p50_s"], rel=1e-12)
    baselines = frame[frame["num_speculative_tokens"] == 0]
    assert (baselines["tpot_speedup"] == 1).all()
    assert baselines[["acceptance_rate", "attention", "proposer", "realized_acceptance_rate"]].isna().all().all()
    assert (baselines["proposed_tokens"] == 0).all()


@pytest.mark.simulation
def test_rows_carry_inputs_metrics_and_provenance(small_output):
    for row in small_output.rows:
        assert (row["model"], row["device"], row["num_requests"], row["prompt_tokens"], row["output_tokens"]) == ("meta-llama/Llama-2-7b-hf", "a100", 12, 128, 32)
        assert (row["seed"], row["workload_seed"]) == (1, 5)
        assert row["ttft_p50_s"] <= row["ttft_p90_s"] <= row["ttft_p99_s"]
        assert row["tpot_p50_s"] <= row["tpot_p90_s"] <= row["tpot_p99_s"]
        assert row["vidur_version"] == metadata.version("vidur")
        assert row["simulator_source_hash"] == versions.source_hash()
        assert row["profile_source"] == "builtin"
        if row["num_speculative_tokens"]:
            assert row["realized_acceptance_rate"] == pytest.approx(row["accepted_tokens"] / row["proposed_tokens"])
            assert row["mean_acceptance_length"] == pytest.approx(1 + row["accepted_tokens"] / row["verify_steps"])
    # Same acceptance draws whatever the attention assumption: only the cost differs.
    for load in (2.0, 4.0):
        pair = [r for r in small_output.rows if r["arrival_rate"] == load and r["num_speculative_tokens"]]
        assert pair[0]["accepted_tokens"] == pair[1]["accepted_tokens"]
        assert pair[0]["tpot_p50_s"] < pair[1]["tpot_p50_s"]  # KV read once is the lower bound


@pytest.mark.simulation
def test_progress_rows_pair_simulation_with_the_closed_form(small_output):
    (row,) = small_output.progress_rows
    assert set(row) == set(PROGRESS_COLUMNS)
    assert row["closed_form_progress_per_step"] == pytest.approx(expected_progress(0.7, 2))
    # about 90 verify steps: the mean is within ~4 standard errors (0.09 each) of the closed form,
    # a little below it because a request's last steps may propose fewer than k
    assert row["simulated_progress_per_step"] == pytest.approx(row["closed_form_progress_per_step"], abs=0.4)
    assert (row["interarrival_s"], row["num_requests"], row["output_tokens"]) == (30.0, 3, 64)


@pytest.mark.simulation
def test_csv_is_byte_identical_in_process_and_across_workers(small_output):
    again = run_sweep(parse_spec(SMALL), LocalExecutor(jobs=1, progress=False))
    assert to_csv_text(again.rows, SWEEP_COLUMNS) == to_csv_text(small_output.rows, SWEEP_COLUMNS)
    assert to_csv_text(again.progress_rows, PROGRESS_COLUMNS) == to_csv_text(small_output.progress_rows, PROGRESS_COLUMNS)


@pytest.mark.simulation
@pytest.mark.slow
def test_ray_executor_gives_the_same_rows(small_output):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'vidur-specdec[ray]'")
    by_ray = run_sweep(parse_spec(SMALL), RayExecutor(jobs=2, progress=False))
    assert to_csv_text(by_ray.rows, SWEEP_COLUMNS) == to_csv_text(small_output.rows, SWEEP_COLUMNS)
    assert to_csv_text(by_ray.progress_rows, PROGRESS_COLUMNS) == to_csv_text(small_output.progress_rows, PROGRESS_COLUMNS)


# Recorded values must be reproduced within this relative tolerance.  They are printed to six
# significant digits; 0.1% also absorbs floating-point summation order across platforms, and is
# far below any modelling change worth re-recording for.
RECORDED_RTOL = 1e-3


def _rerun_committed_subset():
    """The 2 req/s baseline, one speculative row and one progress point of the recorded sweep."""
    spec = load_spec(DATA_DIR / "sweep.toml")
    subset = SweepSpec(**{
        **spec.__dict__,
        "arrival_rates": (2.0,), "acceptance_rates": (0.7,), "speculative_tokens": (4,), "attention_modes": ("kv_once",),
        "baseline_rates": (2.0,),
        "progress": type(spec.progress)(**{**spec.progress.__dict__, "acceptance_rates": (0.9,), "speculative_tokens": (4,)}),
    })
    return run_sweep(subset, LocalExecutor(jobs=1, progress=False))


def _matching_row(committed: pd.DataFrame, row: dict, keys) -> pd.Series:
    mask = pd.Series(True, index=committed.index)
    for key in keys:
        value = row[key]
        mask &= committed[key].isna() if value is None else committed[key] == value
    (index,) = committed.index[mask]
    return committed.loc[index]


def _assert_values_match(recorded: pd.Series, fresh: dict, columns) -> None:
    for column in columns:
        value, expected = fresh[column], recorded[column]
        if isinstance(value, (bool, str)) or value is None:
            assert (expected if not pd.isna(expected) else None) == value, column
        elif pd.isna(expected):
            assert value is None or np.isnan(value), column
        else:
            assert value == pytest.approx(float(expected), rel=RECORDED_RTOL), column


@pytest.fixture(scope="module")
def committed_subset():
    return _rerun_committed_subset()


@pytest.mark.simulation
def test_committed_csv_values_are_reproduced(committed_csvs, committed_subset):
    """The simulator reproduces the recorded numbers (else data/results/ is stale: run build.py)."""
    sweep = pd.read_csv(committed_csvs[0])
    numeric = [c for c in METRIC_COLUMNS if c not in ("overloaded",)]
    for row in committed_subset.rows:
        recorded = _matching_row(sweep, row, ("arrival_rate", "num_speculative_tokens", "acceptance_rate", "attention"))
        _assert_values_match(recorded, row, numeric)
    progress = pd.read_csv(committed_csvs[1])
    (row,) = committed_subset.progress_rows
    recorded = _matching_row(progress, row, ("num_speculative_tokens", "acceptance_rate"))
    _assert_values_match(recorded, row, ("verify_steps", "realized_acceptance_rate", "simulated_progress_per_step"))


def test_queue_growth_compares_first_and_last_tenth():
    n = 40
    steady = pd.DataFrame({"request_id": range(n), "arrival_s": [i * 0.5 for i in range(n)], "ttft_s": [0.2] * n})
    growing = steady.assign(ttft_s=[0.2 + 0.5 * i for i in range(n)])
    assert queue_growth(steady) == {"ttft_first_tenth_p50_s": 0.2, "ttft_last_tenth_p50_s": 0.2, "ttft_growth": 1.0, "overloaded": False}
    grown = queue_growth(growing.sample(frac=1, random_state=0))  # order of rows must not matter
    assert grown["ttft_first_tenth_p50_s"] == pytest.approx(0.2 + 0.5 * 1.5)
    assert grown["ttft_last_tenth_p50_s"] == pytest.approx(0.2 + 0.5 * 37.5)
    assert grown["overloaded"] is True


def test_speedup_needs_a_baseline_at_the_same_load():
    rows = [{"arrival_rate": 2.0, "num_speculative_tokens": 0, "tpot_p50_s": 0.02}, {"arrival_rate": 4.0, "num_speculative_tokens": 2, "tpot_p50_s": 0.01}]
    with pytest.raises(ConfigError, match="4 req/s has no baseline"):
        with_speedups(rows)


def test_executor_choice_and_jobs_are_checked():
    with pytest.raises(ConfigError, match="executor = 'dask'"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="jobs = 0"):
        LocalExecutor(jobs=0)
    assert LocalExecutor(jobs=2, progress=False).map(abs, [-3, 1, -2]) == [3, 1, 2]


@pytest.mark.simulation
def test_mean_decode_batch_is_decode_time_over_makespan(small_output):
    from simulator.sweep.metrics import mean_decode_batch

    requests = pd.DataFrame({"ttft_s": [1.0, 0.5, 2.0], "e2e_s": [3.0, 4.5, 2.0]})
    assert mean_decode_batch(requests, makespan_s=4.0) == pytest.approx((2.0 + 4.0 + 0.0) / 4.0)
    for row in small_output.rows:
        assert 0 < row["mean_decode_batch"] <= row["num_requests"]
