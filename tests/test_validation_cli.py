"""The validation CLI as a user meets it: its steps, its help, and what it says when the
``validation`` extra is not installed."""

import subprocess
import sys

import pytest

from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.cli import build_parser, main

FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)
# Runs the CLI in a fresh interpreter where the validation extra's modules cannot be imported.
WITHOUT_EXTRA = (
    "import sys\n"
    "for name in ('httpx', 'httpx_sse', 'prometheus_client'):\n"
    "    sys.modules[name] = None\n"
    "from simulator.validation.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run_without_extra(*args, cwd):
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRA, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_steps_and_no_fake_server_in_the_package():
    steps = build_parser()._subparsers._group_actions[0].choices
    assert list(steps) == ["generate", "replay", "calibrate", "simulate", "compare", "bench", "fit"]
    with pytest.raises(ModuleNotFoundError):
        __import__("simulator.validation.fake_server")


def test_help_names_each_step(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for step in ("generate", "replay", "calibrate", "simulate", "compare"):
        assert step in text
    assert "fake-server" not in text


def test_steps_that_need_the_validation_extra_say_so(tmp_path):
    assert main(["generate", "--out", str(tmp_path / "w.jsonl"), "--num-prompts", "3", "--request-rate", "100", "--prompt-tokens", "8", "--output-tokens", "4"]) == 0
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", server.url, "--out", str(tmp_path / "r"), "--no-progress", "--timeout", "20"]) == 0

    replay = run_without_extra("replay", "--workload", str(tmp_path / "w.jsonl"), "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r2"), cwd=tmp_path)
    assert replay.returncode == 2, replay.stderr
    assert "validation extra" in replay.stderr and "pip install 'vidur-specdec[validation]'" in replay.stderr
    assert "Traceback" not in replay.stderr
    calibrate = run_without_extra("calibrate", "--replay", str(tmp_path / "r"), "--out", str(tmp_path / "c.json"), cwd=tmp_path)
    assert calibrate.returncode == 2 and "prometheus-client" in calibrate.stderr, calibrate.stderr
    assert not (tmp_path / "c.json").exists()
    # a step that needs none of it still runs
    generate = run_without_extra("generate", "--out", str(tmp_path / "w2.jsonl"), "--num-prompts", "2", "--prompt-tokens", "4", "--output-tokens", "2", cwd=tmp_path)
    assert generate.returncode == 0, generate.stderr


def test_simulate_device_is_a_gpu_sku(tmp_path, capsys):
    parser = build_parser()
    simulate = parser._subparsers._group_actions[0].choices["simulate"]
    device = next(a for a in simulate._actions if "--device" in a.option_strings)
    assert "SKU" in device.help and "h200" in device.help
    assert main(["simulate", "--workload", str(tmp_path / "w.jsonl"), "--calibration", str(tmp_path / "c.json"), "--out", str(tmp_path / "s"), "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "unknown device 'cuda'" in err and "a100" in err and "h200" in err
