"""Dynamic speculation (vLLM's num_speculative_tokens_per_batch_size): the schedule, its checks,
and runs that pick k per step from the running batch size."""

import json
import subprocess
import sys

import pandas as pd
import pytest

import simulator
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload, PoissonWorkload
from simulator.speculative import step as step_module
from simulator.util.errors import ConfigError
from simulator.speculative.k_schedule import check_schedule, from_best_k, k_for_batch, k_table, parse_schedule, to_vllm

TIMING = ["request_id", "arrival_s", "ttft_s", "e2e_s", "tpot_s", "restarts", "verify_steps", "proposed_tokens", "accepted_tokens"]


def _closed(concurrency: int, n: int = 12) -> ClosedLoopWorkload:
    return ClosedLoopWorkload.fixed(concurrency, n, 128, 64)


# The schedule's own behaviour is checked on vLLM 0.10.1's engine profile, which issues a speculative and a
# plain run alike (synchronous, one capture grid).  From vLLM 0.24 a schedule on the V1 runner (the n-gram
# proposer's) runs piecewise graphs, and from 0.19 a plain run keeps async scheduling where n-gram does not:
# tests/test_engine_versions.py checks those rules.
ENGINE = "vllm-0.10.1"


def _run(workload, **speculation) -> pd.DataFrame:
    return simulator.run(RunConfig(workload=workload, speculation=SpeculationConfig(**speculation), seed=3, batch_size_cap=128, chunk_size=512, engine=ENGINE))


# --- the schedule itself (pure) ----------------------------------------------------------


def test_lookup_follows_the_rows():
    schedule = check_schedule([[1, 16, 4], [17, 64, 2], [65, 512, 0]])
    assert [k_for_batch(schedule, b) for b in (1, 16, 17, 64, 65, 512)] == [4, 4, 2, 2, 0, 0]
    table = k_table(schedule)
    assert all(table[b] == k_for_batch(schedule, b) for b in range(1, 513))
    assert to_vllm(schedule) == [[1, 16, 4], [17, 64, 2], [65, 512, 0]]


def test_schedule_from_best_k_merges_equal_neighbours():
    schedule = from_best_k([(1, 5), (2, 5), (4, 3), (8, 3), (16, 1), (64, 0)], up_to=128)
    assert schedule == ((1, 3, 5), (4, 15, 3), (16, 63, 1), (64, 128, 0))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1, 16, 4], [10, 64, 2]], "row 1 \\[10, 64, 2\\]: overlaps row 0"),
        ([[1, 16, 4], [40, 64, 2], [17, 39, 1]], "row 2 \\[17, 39, 1\\]: rows are not sorted"),
        ([[17, 64, 2], [1, 16, 4]], "row 1 \\[1, 16, 4\\]: rows are not sorted"),
        ([[1, 16, 4], [18, 64, 2]], "row 1 \\[18, 64, 2\\]: batch size 17 is missing"),
        ([[2, 16, 4]], "row 0 \\[2, 16, 4\\]: the first row must start at batch size 1"),
        ([[1, 16, -1]], "row 0 \\[1, 16, -1\\]: k = -1 is negative"),
        ([[1, 16, 9]], "row 0 \\[1, 16, 9\\]: k = 9 is above the proposer's maximum num_speculative_tokens = 8"),
        ([[1, 16.0, 4]], "row 0 \\[1, 16.0, 4\\]: end = 16.0 is not an integer"),
        ([[1, "16", 4]], "end = '16' is not an integer"),
        ([[1, True, 4]], "end = True is not an integer"),
        ([[1, 16]], "row 0 \\[1, 16\\]: must be \\[start, end, k\\]"),
        ([[16, 1, 4]], "end = 1 is below start = 16"),
        ([], "non-empty list"),
    ],
)
def test_bad_schedules_name_the_row(rows, message):
    with pytest.raises(ConfigError, match=message):
        check_schedule(rows, max_k=8)


def test_the_maximum_and_coverage_are_checked_in_the_run_config():
    assert SpeculationConfig(k_schedule=((1, 4, 3), (5, 128, 1)), acceptance_rate=0.7).num_speculative_tokens == 3
    with pytest.raises(ConfigError, match="k = 3 is above the proposer's maximum num_speculative_tokens = 2"):
        SpeculationConfig(num_speculative_tokens=2, k_schedule=((1, 4, 3), (5, 128, 1)), acceptance_rate=0.7)
    with pytest.raises(ConfigError, match="needs at least k = 3 entries"):
        SpeculationConfig(k_schedule=((1, 128, 3),), acceptance_per_position=(0.8, 0.7))
    with pytest.raises(ConfigError, match="row 1 \\[5, 64, 1\\]: ends at batch size 64.*65..128 have no k"):
        RunConfig(speculation=SpeculationConfig(k_schedule=((1, 4, 3), (5, 64, 1)), acceptance_rate=0.7), batch_size_cap=128)
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_schedule("[[1, 16, 4]")


# --- runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("proposer_kwargs", [{"acceptance_rate": 0.7}, {"acceptance_per_position": (0.9, 0.8, 0.6, 0.5)}])
@pytest.mark.simulation
def test_a_one_row_schedule_is_the_fixed_k_run(proposer_kwargs):
    workload = _closed(4)
    fixed = _run(workload, num_speculative_tokens=3, **proposer_kwargs)
    scheduled = _run(workload, k_schedule=((1, 128, 3),), **proposer_kwargs)
    pd.testing.assert_frame_equal(fixed.requests[TIMING], scheduled.requests[TIMING])
    assert fixed.summary["proposed_tokens"] > 0 and scheduled.summary["mean_scheduled_k"] == 3


@pytest.mark.simulation
def test_k_zero_everywhere_is_the_stock_run():
    workload = PoissonWorkload(num_requests=20, prompt_tokens=128, output_tokens=64, arrival_rate=30.0)
    stock = _run(workload)
    # the speculative scheduler runs (k up to 4 above batch size 64), but no step reaches it
    scheduled = _run(workload, k_schedule=((1, 64, 0), (65, 128, 4)), acceptance_rate=0.7)
    assert scheduled.config.speculation.enabled
    pd.testing.assert_frame_equal(stock.requests[TIMING], scheduled.requests[TIMING])
    assert scheduled.summary["forward_passes"] == stock.summary["forward_passes"]
    assert scheduled.summary["proposed_tokens"] == 0 and scheduled.summary["mean_scheduled_k"] == 0
    # and a schedule of zeros only is no speculation at all
    assert not SpeculationConfig(k_schedule=((1, 128, 0),)).enabled


@pytest.mark.simulation
def test_per_step_k_follows_the_running_batch(monkeypatch):
    schedule = ((1, 2, 4), (3, 5, 2), (6, 128, 0))
    picked, planned = [], []
    real_pick, real_plan = step_module.StepPlanner.pick_k, step_module.plan_row

    def spy_pick(self, running):
        k = real_pick(self, running)
        picked.append((running, k))
        return k

    def spy_plan(**kwargs):
        planned.append((len(picked), kwargs["k"]))
        return real_plan(**kwargs)

    monkeypatch.setattr(step_module.StepPlanner, "pick_k", spy_pick)
    monkeypatch.setattr(step_module, "plan_row", spy_plan)
    result = _run(_closed(8, n=24), k_schedule=schedule, acceptance_rate=0.8)
    assert all(k == k_for_batch(schedule, max(running, 1)) for running, k in picked)
    # every decode row is planned with the k of its own step's batch size
    assert all(k == picked[step - 1][1] for step, k in planned)
    seen = {k for _, k in picked}
    assert seen == {0, 2, 4}  # full batch (8): plain decode; the drain passes through 5..1
    steps = [pair for log in result.acceptance_logs.values() for pair in log]
    assert 0 < max(p for p, _ in steps) <= 4 and 0 < result.summary["mean_scheduled_k"] < 4


@pytest.mark.simulation
def test_dynamic_run_sits_between_its_fixed_ends():
    """At 8 in flight a schedule that turns speculation off above 5 runs like plain decode
    while the batch is full, so its TPOT lies at or above the fixed-k run's."""
    workload = _closed(8, n=24)
    fixed = _run(workload, num_speculative_tokens=4, acceptance_rate=0.8).summary["tpot_p50_s"]
    stock = _run(workload).summary["tpot_p50_s"]
    dynamic = _run(workload, k_schedule=((1, 5, 4), (6, 128, 0)), acceptance_rate=0.8).summary["tpot_p50_s"]
    assert fixed < dynamic <= stock * 1.001


def _cli(*args, tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "simulator", "--num-prompts", "4", "--prompt-tokens", "64", "--output-tokens", "16", "--max-num-seqs", "128", "--json", str(out), *args],
        capture_output=True,
        text=True,
    )
    return proc, out


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("[[1,16,4],[12,128,2]]", "--k-schedule row 1 [12, 128, 2]: overlaps row 0"),
        ("[[1,16,4],[20,128,2]]", "batch sizes 17..19 are missing"),
        ("[[1,16,-2],[17,128,2]]", "k = -2 is negative"),
        ("[[1,16,1.5],[17,128,2]]", "k = 1.5 is not an integer"),
        ("[[1,16,4],[17,128,2]", "not valid JSON"),
    ],
)
def test_cli_bad_schedule_exits_2_and_writes_nothing(schedule, message, tmp_path):
    proc, out = _cli("--k-schedule", schedule, "--acceptance", "0.7", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and not out.exists()


def test_cli_k_above_the_maximum_exits_2(tmp_path):
    proc, out = _cli("-k", "2", "--k-schedule", "[[1,16,4],[17,128,2]]", "--acceptance", "0.7", tmp_path=tmp_path)
    assert proc.returncode == 2 and "k = 4 is above the proposer's maximum num_speculative_tokens = 2" in proc.stderr
    assert not out.exists()


@pytest.mark.simulation
def test_cli_runs_a_schedule_and_records_it(tmp_path):
    proc, out = _cli("--k-schedule", "[[1,2,3],[3,128,1]]", "--acceptance", "0.7", "--request-rate", "50", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    config = json.loads(out.read_text())["config"]["speculation"]
    assert config["k_schedule"] == [[1, 2, 3], [3, 128, 1]] and config["num_speculative_tokens"] == 3
