"""Output paths are checked before any work: the wrong kind of thing at a path, or a place
that cannot be written (probed by creating a file, which holds for root too), stops the step
with exit code 2 and a message naming the path, and nothing is written or run."""

import json
import os
from pathlib import Path

import pytest

import simulator
from simulator.validation.cli import main
from simulator.validation.workload import WorkloadSpec, generate, write_workload

UNREACHABLE = "http://127.0.0.1:9"  # a replay that got past the output check would fail on this instead
PROC = Path("/proc")  # nobody can create files here, root included, although os.access says root may


@pytest.fixture
def inputs(tmp_path):
    """A workload and a matching calibration (speculation off), as the earlier steps write them."""
    workload = generate(WorkloadSpec(num_requests=3, arrival="fixed", rate=1.0, prompt_tokens=8, output_tokens=4))
    write_workload(tmp_path / "w.jsonl", workload)
    calibration = {"schema": "vidur-specdec/validation-calibration", "schema_version": 1, "workload_hash": workload.workload_hash, "num_speculative_tokens": 0, "acceptance_per_position": [], "kv_cache": {}}
    (tmp_path / "calibration.json").write_text(json.dumps(calibration))
    (tmp_path / "replay").mkdir()
    header = {"schema": "vidur-specdec/validation-replay", "schema_version": 1, "workload_hash": workload.workload_hash, "num_requests": 3, "model": "m"}
    (tmp_path / "replay" / "replay.jsonl").write_text(json.dumps(header) + "\n")
    return tmp_path


def step_args(step, root, out):
    return {
        "generate": ["generate", "--out", str(out), "--num-prompts", "2", "--prompt-tokens", "4", "--output-tokens", "2"],
        "replay": ["replay", "--workload", str(root / "w.jsonl"), "--base-url", UNREACHABLE, "--out", str(out)],
        "calibrate": ["calibrate", "--replay", str(root / "replay"), "--out", str(out)],
        "simulate": ["simulate", "--workload", str(root / "w.jsonl"), "--calibration", str(root / "calibration.json"), "--out", str(out)],
        "compare": ["compare", "--workload", str(root / "w.jsonl"), "--replay", str(root / "replay"), "--calibration", str(root / "calibration.json"), "--simulated", str(root / "sim"), "--out", str(out)],
    }[step]


FILE_STEPS = ("generate", "calibrate")  # --out is a file
DIR_STEPS = {"replay": "replay.jsonl", "simulate": "simulated.csv", "compare": "report.json"}  # --out is a directory, and a file in it


@pytest.fixture
def no_simulation(monkeypatch):
    """simulate must check its outputs before it runs anything."""

    def refuse(config):
        raise AssertionError("the simulation ran before the output path was checked")

    monkeypatch.setattr(simulator, "run", refuse)


def snapshot(root):
    return sorted((str(p.relative_to(root)), p.is_dir()) for p in root.rglob("*"))


def expect_exit_2(args, root, capsys, message):
    before = snapshot(root)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err
    assert snapshot(root) == before  # nothing written, not even a directory
    return err


@pytest.mark.parametrize("step", FILE_STEPS)
def test_a_directory_where_a_file_is_expected(inputs, capsys, step, no_simulation):
    out = inputs / "out"
    out.mkdir()
    expect_exit_2(step_args(step, inputs, out), inputs, capsys, f"{out} is a directory, expected a file")


@pytest.mark.parametrize("step", list(DIR_STEPS))
def test_a_file_where_a_directory_is_expected(inputs, capsys, step, no_simulation):
    out = inputs / "out"
    out.write_text("a file\n")
    expect_exit_2(step_args(step, inputs, out), inputs, capsys, f"{out} exists and is not a directory")


@pytest.mark.parametrize("step", list(DIR_STEPS))
def test_a_directory_where_an_output_file_goes(inputs, capsys, step, no_simulation):
    out = inputs / "out"
    (out / DIR_STEPS[step]).mkdir(parents=True)
    expect_exit_2(step_args(step, inputs, out), inputs, capsys, f"{out / DIR_STEPS[step]} is a directory, expected a file")


@pytest.mark.parametrize("step", FILE_STEPS + tuple(DIR_STEPS))
def test_a_file_on_the_way_to_the_output(inputs, capsys, step, no_simulation):
    blocker = inputs / "blocker"
    blocker.write_text("a file\n")
    out = blocker / "deeper" / ("out.json" if step in FILE_STEPS else "out")
    expect_exit_2(step_args(step, inputs, out), inputs, capsys, f"{blocker} is a file, not a directory")


@pytest.mark.skipif(not PROC.is_dir(), reason="needs Linux's /proc, a directory nobody can create files in")
@pytest.mark.parametrize("step", FILE_STEPS + tuple(DIR_STEPS))
def test_an_unwritable_output_is_found_by_probing_even_as_root(inputs, capsys, step, no_simulation):
    out = PROC / "vidur-specdec-validation" / ("out.json" if step in FILE_STEPS else "out")
    err = expect_exit_2(step_args(step, inputs, out), inputs, capsys, "cannot write there")
    assert str(PROC) in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a mode-0555 directory; the /proc test covers root")
def test_a_read_only_directory(inputs, capsys):
    locked = inputs / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        expect_exit_2(step_args("calibrate", inputs, locked / "c.json"), inputs, capsys, "cannot write there")
    finally:
        locked.chmod(0o755)
