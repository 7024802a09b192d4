"""The harness's defects found by driving it against the fake vLLM server, one test each:
restarts without a start time, V0 counters, a wrong k, failed requests in the proposal
probability, exit codes of reruns, an unknown --model, damaged inputs, k = 0 against drafts,
and the messages; every bad input exits 2 with one line naming the input and the fix."""

import json

import numpy as np
import pytest

import simulator
from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.cli import EXIT_CLOSING_SCRAPE_FAILED, EXIT_INTERRUPTED, EXIT_REQUESTS_FAILED, main
from simulator.validation.replay_files import list_scrapes, read_results, results_path

FAST = dict(step_base_s=0.001, step_per_token_s=0.00001)
N = 30


def generate(path, n=N, seed=3, outputs=("40", "80")):
    assert main(["generate", "--out", str(path), "--num-prompts", str(n), "--arrival", "fixed", "--request-rate", "200", "--prompt-range", "16", "48", "--output-range", *outputs, "--workload-seed", str(seed)]) == 0


def replay(workload, url, out, *extra):
    # a 20 s silence limit instead of the 300 s default: a request the fake server accepted as it
    # went down then costs the test 20 s, not five minutes (a test's own --timeout, later, wins)
    return main(["replay", "--workload", str(workload), "--base-url", url, "--out", str(out), "--no-progress", "--timeout", "20", *extra])


def calibrate(out, *extra):
    return main(["calibrate", "--replay", str(out), *extra])


def one_line_error(capsys, *needles):
    """stderr holds exactly one line, an error naming what it must name, and no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def v0_replay(tmp_path_factory):
    """k = 4 on a server exporting V0's counters, drafting at 70% of decode steps."""
    root = tmp_path_factory.mktemp("v0")
    generate(root / "w.jsonl", seed=7)
    config = FakeServerConfig(engine="v0", num_speculative_tokens=4, acceptance_rate=0.7, proposal_probability=0.7, **FAST)
    with FakeServer(config) as server:
        assert replay(root / "w.jsonl", server.url, root / "r") == 0
    return root


# 1 -------------------------------------------------------------------------------------------
def test_a_restart_from_zero_counters_without_a_start_time_is_caught_by_the_records(tmp_path, capsys):
    """The server dies mid-session and comes back from zero; it exports no
    process_start_time_seconds, so session 0 looks like zero deltas.  Its records received
    tokens the counters never counted: it is left out, and the proposal probability stays 1."""
    generate(tmp_path / "w.jsonl")
    out = tmp_path / "r"
    config = FakeServerConfig(die_after_requests=10, metrics_missing=("process_start_time_seconds",), **FAST)
    with FakeServer(config) as server:
        assert replay(tmp_path / "w.jsonl", server.url, out) == EXIT_CLOSING_SCRAPE_FAILED
        server.restart()
        assert replay(tmp_path / "w.jsonl", server.url, out, "--retry-failed") == 0
    capsys.readouterr()
    assert calibrate(out, "--num-speculative-tokens", "3") == 0
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sessions_used"] == [1]
    assert [d["session"] for d in calibration["sessions_dropped"]] == [0]
    assert "restarted (counters from zero)" in calibration["sessions_dropped"][0]["reason"]
    assert calibration["proposal_probability"] == 1.0  # 0.831 when session 0's chunks stayed in


# 2 -------------------------------------------------------------------------------------------
def test_v0_counters_give_the_proposal_probability(v0_replay):
    assert calibrate(v0_replay / "r", "--num-speculative-tokens", "4", "--out", str(v0_replay / "c.json")) == 0
    calibration = json.loads((v0_replay / "c.json").read_text())
    assert calibration["engine"] == "v0" and calibration["num_speculative_tokens"] == 4
    # about 700 decode steps: a binomial standard error of 0.017; 0.07 is 4 of them
    assert calibration["proposal_probability"] == pytest.approx(0.7, abs=0.07)
    assert "V0 draft tokens / k = 4" in calibration["proposal_probability_method"]
    expected_length = 1 + sum(0.7**i for i in range(1, 5))
    assert calibration["mean_acceptance_length"] == pytest.approx(expected_length, abs=0.25)


# 3 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, message", [("3", "k = 3 is too small: the client received decode chunks of 5 tokens, which proves k >= 4"), ("6", "k = 6 looks too large")])
def test_a_wrong_k_is_refused_against_the_chunks(v0_replay, capsys, k, message):
    out = v0_replay / f"c{k}.json"
    assert calibrate(v0_replay / "r", "--num-speculative-tokens", k, "--out", str(out)) == 2
    one_line_error(capsys, message)
    assert not out.exists()


def test_a_negative_k_is_refused_by_the_cli_and_the_function(v0_replay, capsys):
    from simulator.util.errors import ConfigError
    from simulator.validation.calibrate import calibrate as calibrate_function

    with pytest.raises(SystemExit) as exit_:
        calibrate(v0_replay / "r", "--num-speculative-tokens", "-1")
    assert exit_.value.code == 2
    one_line_error(capsys, "argument --num-speculative-tokens: -1 must be >= 0")
    with pytest.raises(ConfigError, match="--num-speculative-tokens -1: must be an integer >= 0"):
        calibrate_function(v0_replay / "r", -1)


def test_a_negative_k_in_a_calibration_file_stops_simulate(tmp_path, capsys, v0_replay):
    assert calibrate(v0_replay / "r", "--num-speculative-tokens", "4", "--out", str(tmp_path / "c.json")) == 0
    data = json.loads((tmp_path / "c.json").read_text())
    (tmp_path / "c.json").write_text(json.dumps(data | {"num_speculative_tokens": -1}))
    capsys.readouterr()
    assert main(["simulate", "--workload", str(v0_replay / "w.jsonl"), "--calibration", str(tmp_path / "c.json"), "--out", str(tmp_path / "sim")]) == 2
    one_line_error(capsys, "num_speculative_tokens = -1", "an integer >= 0", "run calibrate again")
    assert not (tmp_path / "sim").exists()


# 4 -------------------------------------------------------------------------------------------
def test_timed_out_requests_do_not_inflate_the_proposal_probability(tmp_path, capsys):
    """10% of streams stall after their first chunk; the server goes on generating (and
    drafting) for them while the client has given up.  Their drafts are weighed out."""
    generate(tmp_path / "w.jsonl", n=40, seed=5)
    config = FakeServerConfig(num_speculative_tokens=3, proposal_probability=0.7, fault_stall=0.1, stall_s=3600.0, **FAST)
    with FakeServer(config) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r", "--timeout", "5") == EXIT_REQUESTS_FAILED
    statuses = [r["status"] for r in read_results(tmp_path / "r").records.values()]
    assert statuses.count("timeout") >= 2
    assert calibrate(tmp_path / "r") == 0
    calibration = json.loads((tmp_path / "r" / "calibration.json").read_text())
    assert calibration["proposal_probability"] == pytest.approx(0.7, abs=0.06)
    # what counting every record's chunks gave: the timed-out requests' drafts over too few chunks
    records = read_results(tmp_path / "r").history
    naive = calibration["counts"]["drafts"] / sum(max(0, len(r["chunks"]) - 1) for r in records)
    assert naive > calibration["proposal_probability"] + 0.05
    assert "share" in calibration["proposal_probability_method"]


# 5 -------------------------------------------------------------------------------------------
def test_a_rerun_exits_3_while_failures_remain(tmp_path, capsys):
    generate(tmp_path / "w.jsonl")
    with FakeServer(FakeServerConfig(fault_http_500=0.3, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r") == EXIT_REQUESTS_FAILED
        capsys.readouterr()
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r") == EXIT_REQUESTS_FAILED  # nothing sent, failures remain
    captured = capsys.readouterr()
    assert "nothing to send" in captured.out and "have no successful record" in captured.err and "--retry-failed" in captured.err
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert replay(tmp_path / "w.jsonl", healthy.url, tmp_path / "r", "--retry-failed") == 0


# 6 -------------------------------------------------------------------------------------------
def test_model_is_checked_against_v1_models_before_anything_is_sent(tmp_path, capsys):
    generate(tmp_path / "w.jsonl", n=3)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r", "--model", "fake-modle") == 2
        assert server.requests_received == 0
        one_line_error(capsys, "--model 'fake-modle' is not served", "'fake-model'")
        assert not (tmp_path / "r").exists()
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r", "--model", "fake-model") == 0
    with FakeServer(FakeServerConfig(model="other", **FAST)) as other:
        capsys.readouterr()
        assert replay(tmp_path / "w.jsonl", other.url, tmp_path / "r", "--model", "other", "--retry-failed") == 2
        one_line_error(capsys, "measured on model 'fake-model', not 'other'", "pass a new --out")


# 7 -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def v1_replay(tmp_path_factory):
    root = tmp_path_factory.mktemp("v1")
    generate(root / "w.jsonl", n=12, seed=2)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert replay(root / "w.jsonl", server.url, root / "r") == 0
    return root


def copy_replay(source, target):
    import shutil

    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("garbage, message", [("bytes", "not UTF-8 text"), ("text", "not valid Prometheus text")])
def test_a_damaged_scrape_file_is_named(tmp_path, capsys, v1_replay, garbage, message):
    out = copy_replay(v1_replay / "r", tmp_path / "r")
    scrape = list_scrapes(out)[0]["after"]
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=4096, dtype=np.uint8).tobytes()
    scrape.write_bytes(data if garbage == "bytes" else bytes(b % 94 + 33 for b in data))
    assert calibrate(out) == 2
    one_line_error(capsys, str(scrape), message)
    assert not (out / "calibration.json").exists()


@pytest.mark.parametrize(
    "field, value, message",
    [("chunks", None, "chunks = None has the wrong type"), ("expected_output_tokens", "40", "expected_output_tokens = '40' has the wrong type"), ("session", 1.5, "session = 1.5")],
)
def test_a_damaged_replay_record_is_named_by_line(tmp_path, capsys, v1_replay, field, value, message):
    out = copy_replay(v1_replay / "r", tmp_path / "r")
    lines = results_path(out).read_text().splitlines()
    record = json.loads(lines[3])
    lines[3] = json.dumps(record | {field: value})
    results_path(out).write_text("\n".join(lines) + "\n")
    assert calibrate(out) == 2
    one_line_error(capsys, f"{results_path(out)}:4: {message}", "replay into a new --out")


def test_a_header_with_a_string_count_says_the_type_is_wrong(tmp_path, capsys, v1_replay):
    out = copy_replay(v1_replay / "r", tmp_path / "r")
    lines = results_path(out).read_text().splitlines()
    lines[0] = json.dumps(json.loads(lines[0]) | {"num_requests": "12"})
    results_path(out).write_text("\n".join(lines) + "\n")
    assert calibrate(out) == 2
    one_line_error(capsys, "num_requests = '12' has the wrong type, expected a positive integer")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"num_speculative_tokens": "3"}, "num_speculative_tokens = '3'"),
        ({"acceptance_per_position": "0.7"}, "acceptance_per_position = '0.7'"),
        ({"proposal_probability": 0}, "proposal_probability = 0"),
        ({"kv_cache": {"num_gpu_blocks": 1.5, "block_size": 16}}, "kv_cache.num_gpu_blocks = 1.5"),
        ({"workload_hash": None}, "workload_hash = None"),
    ],
)
def test_a_calibration_file_with_wrong_types_is_named(tmp_path, capsys, v1_replay, change, message):
    assert calibrate(v1_replay / "r", "--out", str(tmp_path / "good.json")) == 0
    data = json.loads((tmp_path / "good.json").read_text())
    (tmp_path / "c.json").write_text(json.dumps(data | change))
    capsys.readouterr()
    assert main(["simulate", "--workload", str(v1_replay / "w.jsonl"), "--calibration", str(tmp_path / "c.json"), "--out", str(tmp_path / "sim")]) == 2
    one_line_error(capsys, str(tmp_path / "c.json"), message)
    assert not (tmp_path / "sim").exists()


def test_ctrl_c_during_simulate_exits_130_without_a_traceback_or_files(tmp_path, capsys, monkeypatch, v1_replay):
    assert calibrate(v1_replay / "r", "--out", str(tmp_path / "c.json")) == 0

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulator, "run", interrupted)
    capsys.readouterr()
    assert main(["simulate", "--workload", str(v1_replay / "w.jsonl"), "--calibration", str(tmp_path / "c.json"), "--out", str(tmp_path / "sim")]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.startswith("interrupted: simulate stopped before writing") and "Traceback" not in err
    assert not any((tmp_path / "sim").glob("*"))


def test_a_real_sigint_during_simulate_exits_130_without_a_traceback(tmp_path, v1_replay):
    """The same with a real signal: the process sends itself SIGINT from inside the simulation, so
    Python's own handler raises KeyboardInterrupt where a user's Ctrl-C would."""
    import subprocess
    import sys

    assert calibrate(v1_replay / "r", "--out", str(tmp_path / "c.json")) == 0
    argv = ["simulate", "--workload", str(v1_replay / "w.jsonl"), "--calibration", str(tmp_path / "c.json"), "--out", str(tmp_path / "sim")]
    script = (
        "import os, signal, sys, time, simulator\n"
        "def interrupted(config):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "simulator.run = interrupted\n"
        "from simulator.validation.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.startswith("interrupted: simulate stopped before writing") and "Traceback" not in done.stderr
    assert not any((tmp_path / "sim").glob("*"))


# 8 -------------------------------------------------------------------------------------------
def test_k_0_against_counters_showing_drafts_needs_force(tmp_path, capsys, v1_replay):
    assert calibrate(v1_replay / "r", "--num-speculative-tokens", "0", "--out", str(tmp_path / "c.json")) == 2
    one_line_error(capsys, "--num-speculative-tokens 0 says speculation was off, but the counters show", "--force")
    assert not (tmp_path / "c.json").exists()
    assert calibrate(v1_replay / "r", "--num-speculative-tokens", "0", "--force", "--out", str(tmp_path / "c.json")) == 0
    assert "calibrated as speculation off anyway" in capsys.readouterr().err
    assert json.loads((tmp_path / "c.json").read_text())["num_speculative_tokens"] == 0


# 9 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--base-url", "--url"])
def test_a_url_naming_the_endpoint_hints_at_the_server_root(tmp_path, capsys, flag):
    generate(tmp_path / "w.jsonl", n=2)
    assert main(["replay", "--workload", str(tmp_path / "w.jsonl"), flag, "http://127.0.0.1:8000/v1/completions", "--out", str(tmp_path / "r")]) == 2
    one_line_error(capsys, "pass the server root (http://127.0.0.1:8000) as --base-url", "--endpoint")
    assert not (tmp_path / "r").exists()


def test_replay_option_naming_a_file_names_the_input(tmp_path, capsys, v1_replay):
    assert calibrate(v1_replay / "r" / "replay.jsonl") == 2
    one_line_error(capsys, f"--replay {v1_replay / 'r' / 'replay.jsonl'}: is a file, expected the replay directory")


def test_a_server_with_only_v0_gauges_is_named_as_such(tmp_path, capsys):
    generate(tmp_path / "w.jsonl", n=8)
    with FakeServer(FakeServerConfig(engine="v0-gauges", num_speculative_tokens=3, **FAST)) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r") == 2  # detected at replay
    err = capsys.readouterr().err
    assert "only V0's spec-decode gauges (vllm:spec_decode_draft_acceptance_rate, vllm:spec_decode_efficiency)" in err
    assert calibrate(tmp_path / "r", "--num-speculative-tokens", "3") == 2
    line = one_line_error(capsys, "only V0's spec-decode gauges", "cannot be differenced")
    assert "vllm:spec_decode_num_drafts_total" not in line


# Also ----------------------------------------------------------------------------------------
def test_a_stream_without_done_that_delivered_every_token_is_a_success(tmp_path, capsys):
    """vllm bench serve marks a request successful once a content chunk arrived and the
    stream closed without an error, [DONE] or not; so does the harness."""
    generate(tmp_path / "w.jsonl", n=20)
    config = FakeServerConfig(fault_no_done=0.5, **FAST)
    with FakeServer(config) as server:
        assert replay(tmp_path / "w.jsonl", server.url, tmp_path / "r") == 0
    records = read_results(tmp_path / "r").records.values()
    without = [r for r in records if r.get("done_s") is None]
    assert without and all(r["status"] == "ok" and not r["length_mismatch"] and "without data: [DONE]" in r["note"] for r in without)


def test_deprecated_flags_warn_and_still_work(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "a.jsonl"), "--num-requests", "3", "--rate", "5", "--seed", "4"]) == 0
    err = capsys.readouterr().err
    for old, new in (("--num-requests", "--num-prompts"), ("--rate", "--request-rate"), ("--seed", "--workload-seed")):
        assert f"warning: {old} is deprecated and will be removed in the next release; use {new}" in err
    assert main(["generate", "--out", str(tmp_path / "b.jsonl"), "--num-prompts", "3", "--request-rate", "5", "--workload-seed", "4"]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert "deprecated" not in capsys.readouterr().err
    # simulate's --seed meant the acceptance draws, as python -m simulator's did: now --acceptance-seed
    from simulator.validation.cli import build_parser

    args = build_parser().parse_args(["simulate", "--workload", "w", "--calibration", "c", "--out", "o", "--seed", "7"])
    assert args.acceptance_seed == 7
    assert "warning: --seed is deprecated and will be removed in the next release; use --acceptance-seed" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--out", "w.jsonl", "--num-prompts", "x"], "argument --num-prompts/--num-requests: invalid int value: 'x'"),
        (["generate", "--out", "w.jsonl", "--request-rate", "inf"], "--request-rate inf: must be a finite number of requests per second > 0"),
        (["generate", "--out", "w.jsonl", "--num-prompts", "0"], "--num-prompts 0: must be a positive integer"),
        (["calibrate", "--replay", "r", "--num-speculative-tokens", "-1"], "-1 must be >= 0"),
        (["replay", "--workload", "w", "--base-url", "http://a", "--url", "http://b", "--out", "o"], "--base-url and --url both set --base-url (--url is its deprecated name): pass only --base-url"),
        (["simulate", "--workload", "w", "--calibration", "c", "--out", "o", "--proposer", "medusa"], "--proposer medusa: Medusa heads are not modelled"),
        (["replay", "--workload", "w", "--base-url", "http://[::1", "--out", "o"], "--base-url 'http://[::1': not a valid URL"),
        (["replay", "--workload", "w", "--base-url", "http://", "--out", "o"], "names no host"),
        (["replay", "--workload", "w", "--base-url", "http://a", "--temperature", "-1", "--out", "o"], "--temperature -1.0: must be a number >= 0"),
        (["replay", "--workload", "w", "--base-url", "http://a", "--endpoint", "/v1/chat/completions", "--out", "o"], "--endpoint '/v1/chat/completions': must be an OpenAI completions path"),
        (["replay", "--workload", "w", "--base-url", "http://a", "--timeout", "nan", "--out", "o"], "--timeout nan: must be > 0 seconds of silence"),
        (["generate", "--out", "w.jsonl", "--max-total-tokens", "100"], "--max-total-tokens 100: applies to --trace rows only"),
        (["generate", "--out", "w.jsonl", "--output-range", "1", "5"], "pass --prompt-range MIN MAX too"),
    ],
)
def test_usage_errors_are_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse's own checks
        code = exit_.code
        one_line_error(capsys, message, "--help")
    else:
        one_line_error(capsys, message)
    assert code == 2
    assert not (tmp_path / "w.jsonl").exists()


def test_eagle_proposers_need_a_draft_model(tmp_path, capsys, v1_replay):
    from simulator.validation.calibrate import read_calibration
    from simulator.validation.simulate import build_run_config
    from simulator.validation.workload import read_workload

    assert main(["simulate", "--workload", str(v1_replay / "w.jsonl"), "--calibration", "c.json", "--out", str(tmp_path / "s"), "--proposer", "eagle3"]) == 2
    one_line_error(capsys, "--proposer eagle3 needs --draft-model")
    assert calibrate(v1_replay / "r", "--out", str(tmp_path / "c.json")) == 0
    config = build_run_config(read_workload(v1_replay / "w.jsonl"), read_calibration(tmp_path / "c.json"), model="meta-llama/Llama-3.1-8B-Instruct", proposer="eagle", draft_model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B", seed=5)
    assert (config.speculation.proposer, config.speculation.draft_model, config.seed) == ("eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", 5)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("simulated_csv", "column ttft_s holds 'x', not a number; run simulate again"),
        ("simulated_json", "config has the wrong type, expected an object; run simulate again"),
        ("replay_summary", "sessions = 'x' has the wrong type, expected a list of objects"),
        ("calibration_notes", "notes = 5 is wrong, expected a list of strings; run calibrate again"),
    ],
)
def test_compare_refuses_damaged_inputs_naming_them(tmp_path, capsys, damage, message):
    import pandas as pd
    from test_validation_compare import compare_args, write_inputs

    write_inputs(tmp_path)
    if damage == "simulated_csv":
        frame = pd.read_csv(tmp_path / "sim" / "simulated.csv").astype({"ttft_s": object})
        frame.loc[1, "ttft_s"] = "x"
        frame.to_csv(tmp_path / "sim" / "simulated.csv", index=False)
    elif damage == "simulated_json":
        data = json.loads((tmp_path / "sim" / "simulated.json").read_text())
        (tmp_path / "sim" / "simulated.json").write_text(json.dumps(data | {"config": [1]}))
    elif damage == "replay_summary":
        (tmp_path / "replay" / "replay-summary.json").write_text(json.dumps({"sessions": "x"}))
    else:
        data = json.loads((tmp_path / "calibration.json").read_text())
        (tmp_path / "calibration.json").write_text(json.dumps(data | {"notes": 5}))
    assert main(compare_args(tmp_path, tmp_path / "out")) == 2
    one_line_error(capsys, message)
    assert not (tmp_path / "out").exists()
