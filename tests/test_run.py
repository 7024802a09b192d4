"""Stock (no speculation) runs: offline, deterministic, identical to Vidur's own Sarathi run."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from stock_vidur import direct_vidur_requests

import simulator
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError

SMALL = RunConfig(workload=PoissonWorkload(num_requests=60, arrival_rate=4.0, seed=7))
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_run():
    return simulator.run(SMALL)


@pytest.mark.simulation
def test_per_request_results_and_summary(small_run):
    frame = small_run.requests
    assert list(frame.request_id) == list(range(60))
    assert (frame.output_tokens == 256).all() and (frame.prompt_tokens == 1024).all()
    assert (frame.ttft_s > 0).all() and (frame.e2e_s > frame.ttft_s).all()
    pd.testing.assert_series_equal(frame.tpot_s, (frame.e2e_s - frame.ttft_s) / 255, check_names=False)
    assert small_run.summary["tpot_p50_s"] == pytest.approx(frame.tpot_s.median())
    assert small_run.summary["verify_steps"] == 0 and small_run.summary["proposed_tokens"] == 0
    assert small_run.provenance["vidur_version"] == "0.0.26"
    assert small_run.provenance["profile_source"] == "builtin"


@pytest.mark.simulation
def test_same_seed_same_results_in_one_process(small_run):
    again = simulator.run(SMALL)
    pd.testing.assert_frame_equal(small_run.requests, again.requests)


@pytest.mark.simulation
def test_same_seed_same_results_across_processes(small_run, tmp_path):
    out = tmp_path / "requests.csv"
    cmd = [sys.executable, "-m", "simulator", "--num-prompts", "60", "--request-rate", "4", "--workload-seed", "7", "--random-input-len", "1024",
           "--requests-csv", str(out)]  # the API's default lengths; the command's own default is 512
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path)
    other = pd.read_csv(out)
    assert not other.pop("startup_burst").any()  # Poisson arrivals: no closed-loop burst to mark
    mine = pd.read_csv(pd.io.common.StringIO(small_run.requests.to_csv(index=False, float_format="%.9g")))
    pd.testing.assert_frame_equal(mine, other)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requests.csv"]  # nothing else in the CWD


# Stock Vidur's costing: no LM head or sampler, no engine overhead.
STOCK = dataclasses.replace(SMALL, lm_head=False, engine_overhead_ms=0.0)


@pytest.mark.simulation
def test_matches_a_direct_vidur_sarathi_run():
    stock = simulator.run(STOCK)
    direct = direct_vidur_requests(STOCK)
    assert len(direct) == len(stock.requests)
    mine = stock.requests
    assert [r.arrived_at for r in direct] == list(mine.arrival_s)
    assert [r.prefill_completed_at - r.arrived_at for r in direct] == list(mine.ttft_s)
    assert [r.completed_at - r.arrived_at for r in direct] == list(mine.e2e_s)


@pytest.mark.simulation
def test_lm_head_and_engine_overhead_add_time_per_step(small_run):
    stock = simulator.run(STOCK)
    # synchronously scheduled (vLLM 0.10.1's engine), every decode step is one forward pass per token of each
    # request and pays the host time after it: TPOT grows by at least 1 ms
    synchronous = dataclasses.replace(STOCK, engine="vllm-0.10.1")
    overhead_only = simulator.run(dataclasses.replace(synchronous, engine_overhead_ms=1.0))
    assert overhead_only.summary["tpot_p50_s"] >= simulator.run(synchronous).summary["tpot_p50_s"] + 1e-3
    # asynchronously scheduled (the default, vLLM 0.30.0), 1 ms of host time hides behind a longer GPU step
    hidden = simulator.run(dataclasses.replace(STOCK, engine_overhead_ms=1.0))
    assert hidden.summary["tpot_p50_s"] < stock.summary["tpot_p50_s"] + 1e-3
    assert small_run.summary["tpot_p50_s"] > stock.summary["tpot_p50_s"]  # LM head, sampler, default overhead
    assert small_run.provenance["lm_head_source"] == "step-time model"  # the built-in step model costs it
    assert stock.provenance["lm_head_source"] == "not costed"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"model": "meta-llama/Llama-9"}, "unknown model"),
        ({"device": "mi300x"}, "unknown device"),
        ({"workload": PoissonWorkload(num_requests=10, prompt_tokens=4000, output_tokens=200)}, "exceeds meta-llama/Llama-2-7b-hf's context of 4096"),
        ({"num_kv_blocks": 10}, "cannot hold the workload's longest request"),
    ],
)
def test_bad_run_inputs(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        simulator.run(RunConfig(**kwargs))


def test_a_profile_directory_bounds_a_step_by_the_context(tmp_path):
    # a Vidur-format profile's tables stop at the model's context; the built-in step model costs any count
    with pytest.raises(ConfigError, match=r"chunk_size \+ batch_size_cap = 4352"):
        resolve_run(RunConfig(chunk_size=4096, profile_dir=str(tmp_path)))
    assert resolve_run(RunConfig(chunk_size=4096)).target.profile.builtin is not None  # resolved: the step model costs the 4,352-token step


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_requests": 0}, "num_requests = 0"),
        ({"num_requests": -5}, "num_requests = -5"),
        ({"arrival_rate": 0}, "arrival_rate = 0"),
        ({"arrival_rate": -1.0}, "arrival_rate = -1.0"),
        ({"prompt_tokens": 0}, "prompt_tokens = 0"),
    ],
)
def test_bad_workloads(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PoissonWorkload(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seed": -1}, "seed = -1"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size = 0"),
        ({"pipeline_stages": 2}, "only pipeline parallelism 1"),
        ({"scheduler": "orca"}, "only Vidur's Sarathi scheduler"),
    ],
)
def test_bad_run_configs(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**kwargs)


def test_cli_checks_output_paths_before_simulating(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "--json", str(blocker / "out.json")], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 2 and "--json" in result.stderr
    assert "TTFT" not in result.stdout  # failed before any simulation
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


@pytest.mark.simulation
def test_stock_decode_past_the_profiled_batch_is_extrapolated(tmp_path):
    from simulator.vidur.models import model_shape
    from simulator.profiles import builtin
    from simulator.profiles.hardware import get_device
    from simulator.profiles.vidur_format import write_profile

    shape, dev = model_shape("meta-llama/Llama-2-7b-hf"), get_device("a100")
    write_profile(tmp_path, builtin.mlp_table(shape, dev, 4096), builtin.attention_table(shape, dev, 4096, max_batch=8), {})
    result = simulator.run(RunConfig(workload=PoissonWorkload(num_requests=40, arrival_rate=20.0), profile_dir=str(tmp_path)))
    assert result.summary["num_requests"] == 40  # more than 8 sequences decoded at once without a missing table entry


def test_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cache directory"):
        simulator.run(RunConfig(cache_dir=str(blocker / "cache")))


def test_cli_bad_input_exits_nonzero_and_writes_nothing(tmp_path):
    out = tmp_path / "summary.json"
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "--request-rate", "0", "--json", str(out)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 2
    assert "--request-rate/--rate: 0 must be > 0 requests per second, or inf" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.simulation
def test_cli_writes_json_summary(tmp_path):
    out = tmp_path / "summary.json"
    subprocess.run([sys.executable, "-m", "simulator", "--num-prompts", "20", "--json", str(out)], check=True, capture_output=True, cwd=tmp_path)
    payload = json.loads(out.read_text())
    assert payload["summary"]["num_requests"] == 20
    assert payload["provenance"]["vidur_version"] == "0.0.26"
    assert payload["config"]["workload"]["num_requests"] == 20
