"""The sweep's result cache: a rebuild re-simulates only the runs whose inputs changed."""

from __future__ import annotations

import shutil

import pytest

from repo import DATA_DIR
from simulator.util import versions
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.runs import cache
from simulator.sweep import runner
from simulator.sweep.executors import LocalExecutor
from simulator.schemas import SWEEP_COLUMNS
from simulator.sweep.runner import run_sweep, to_csv_text
from simulator.specs.sweep import parse_spec

SPEC = """
[run]
model = "meta-llama/Llama-2-7b-hf"
device = "a100"
seed = 1

[workload]
num_requests = 8
prompt_tokens = 128
output_tokens = 32
seed = 5

[grid]
arrival_rate = [4.0]
acceptance_rate = [{alpha}]
num_speculative_tokens = [2]
attention = ["kv_once"]
proposer = ["ngram"]

[baseline]
arrival_rate = [4.0]
"""


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """Runs simulated (not loaded from the cache), in a fresh cache dir."""
    # a fresh result cache; the predictor's (expensive) forest stays in the session's cache dir
    monkeypatch.setattr(cache, "cache_root", lambda config, kind="runs": tmp_path / kind)
    monkeypatch.delenv(cache.DISABLE_ENV, raising=False)
    simulated = []
    real = runner.simulate

    def spy(job):
        simulated.append(job[1])
        return real(job)

    monkeypatch.setattr(runner, "simulate", spy)
    return simulated


def _sweep(alpha: float):
    return run_sweep(parse_spec(SPEC.format(alpha=alpha)), LocalExecutor(jobs=1, progress=False))


@pytest.mark.simulation
def test_a_warm_rebuild_simulates_nothing_and_writes_the_same_bytes(counted):
    first = to_csv_text(_sweep(0.7).rows, SWEEP_COLUMNS)
    assert len(counted) == 2
    second = to_csv_text(_sweep(0.7).rows, SWEEP_COLUMNS)
    assert len(counted) == 2 and second == first
    # one input changed: only that run is simulated again, the baseline comes from the cache
    _sweep(0.8)
    assert len(counted) == 3 and counted[-1].speculation.acceptance_rate == 0.8


def test_the_key_covers_config_model_hash_profile_and_vidur(monkeypatch, tmp_path):
    base = RunConfig(workload=PoissonWorkload(num_requests=8), speculation=SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.7))
    key = cache.run_key(base)
    assert cache.run_key(RunConfig(workload=PoissonWorkload(num_requests=8), speculation=base.speculation)) == key
    assert cache.run_key(RunConfig(workload=base.workload, speculation=base.speculation, cache_dir=str(tmp_path))) == key
    assert cache.run_key(RunConfig(workload=base.workload, speculation=base.speculation, engine_overhead_ms=1.0)) != key
    assert cache.run_key(RunConfig(workload=PoissonWorkload(num_requests=9), speculation=base.speculation)) != key
    monkeypatch.setattr(versions, "source_hash", lambda: "0" * 16)
    assert cache.run_key(base) != key
    monkeypatch.undo()
    monkeypatch.setattr(versions, "vidur_version", lambda: "0.0.0")
    assert cache.run_key(base) != key
    monkeypatch.undo()
    # a profile directory is keyed by what it holds, not by where it is
    profile = DATA_DIR / "profiles" / "h200" / "meta-llama" / "Llama-2-7b-hf"
    if not profile.is_dir():
        pytest.skip("data/profiles/h200 is absent")
    root = tmp_path / "p1"
    shutil.copytree(DATA_DIR / "profiles" / "h200", root)
    copy = root / "meta-llama" / "Llama-2-7b-hf"
    other = tmp_path / "p2"
    shutil.copytree(root, other)
    a = RunConfig(profile_dir=str(root), device="h200")
    b = RunConfig(profile_dir=str(other), device="h200")
    assert cache.run_key(a) == cache.run_key(b)
    (other / "meta-llama" / "Llama-2-7b-hf" / "metadata.json").write_text((copy / "metadata.json").read_text() + " ")
    assert cache.run_key(a) != cache.run_key(b)


@pytest.mark.simulation
def test_bad_entries_are_misses_and_the_cache_can_be_switched_off(counted, monkeypatch, tmp_path):
    _sweep(0.7)
    entries = list((tmp_path / "runs").rglob("*.json"))
    assert len(entries) == 2
    for entry in entries:
        entry.write_text("{not json")
    _sweep(0.7)
    assert len(counted) == 4
    monkeypatch.setenv(cache.DISABLE_ENV, "1")
    _sweep(0.7)
    assert len(counted) == 6
