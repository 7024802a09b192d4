"""``python -m simulator.validation bench``: vllm bench serve's random benchmark against the fake
vLLM server, end to end (generate, replay, scrape, calibrate, simulate, compare), its result
JSON in vLLM's flat keys, its refusals and Ctrl-C.

Expected numbers come from the files the run wrote (replay.jsonl, workload.jsonl,
simulated_itls.json) recomputed here with vLLM's definitions, or from the fake server's
configuration, never from the code under test."""

import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import simulator
from fake_vllm import FakeServer, FakeServerConfig
from simulator.validation.cli import EXIT_INTERRUPTED, EXIT_REQUESTS_FAILED, main
from simulator.validation.random_dataset import RandomDataset, arrival_times, generate_random

MODEL = "meta-llama/Llama-2-7b-hf"  # served under the name the simulator knows
FAST = dict(model=MODEL, step_base_s=0.001, step_per_token_s=0.00001)
ALPHA, K = 0.7, 3


def bench_args(url, root, *extra):
    return ["bench", "--base-url", url, "--num-prompts", "40", "--random-input-len", "64", "--random-output-len", "32", "--request-rate", "80", "--disable-tqdm", "--timeout", "20", "--result-dir", str(root), *extra]


def one_line_error(capsys, *needles):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def records(work):
    return [json.loads(line) for line in (work / "replay" / "replay.jsonl").read_text().splitlines()[1:]]


# The random dataset and its arrivals ---------------------------------------------------------
def test_random_dataset_lengths_prompts_and_prefix_follow_vllm():
    dataset = RandomDataset(num_prompts=200, input_len=100, output_len=20, range_ratio=0.25, prefix_len=7, seed=3, vocab_size=5000, min_token_id=100)
    workload = generate_random(dataset)
    prompts = [r.prompt_token_ids for r in workload.requests]
    inputs = [r.prompt_tokens - 7 for r in workload.requests]
    outputs = [r.output_tokens for r in workload.requests]
    assert min(inputs) >= 75 and max(inputs) <= 125 and min(outputs) >= 15 and max(outputs) <= 25  # [floor(L(1-r)), ceil(L(1+r))]
    assert len(set(inputs)) > 20 and len(set(outputs)) > 5
    assert len({p[:7] for p in prompts}) == 1  # one shared prefix
    for ids in prompts:  # then consecutive ids, wrapping within [min_token_id, vocab_size)
        inner = ids[7:]
        assert all(100 <= t < 5000 for t in ids)
        assert all(b - 100 == (a - 100 + 1) % 4900 for a, b in zip(inner, inner[1:]))
    # vLLM's order of draws from one default_rng(seed): input lengths, output lengths, offsets, prefix
    rng = np.random.default_rng(3)
    assert inputs == list(rng.integers(75, 126, size=200))
    assert outputs == list(rng.integers(15, 26, size=200))
    offsets = rng.integers(0, 5000, size=200)
    assert list(prompts[0][:7]) == list(100 + rng.integers(0, 4900, size=7))
    assert prompts[5][7] == 100 + (offsets[5] + 5) % 4900
    assert generate_random(dataset).workload_hash == workload.workload_hash
    assert generate_random(RandomDataset(num_prompts=200, input_len=100, output_len=20, range_ratio=0.25, prefix_len=7, seed=4, vocab_size=5000, min_token_id=100)).workload_hash != workload.workload_hash


def test_arrivals_follow_vllms_get_request():
    assert not arrival_times(5, math.inf, 1.0, 0).any()  # --request-rate inf: every request at once
    assert arrival_times(4, 2.0, math.inf, 0).tolist() == [0.5, 1.0, 1.5, 2.0]  # infinite burstiness: even gaps
    # gamma gaps from numpy's legacy global generator, as np.random.seed(seed); np.random.gamma(...)
    np.random.seed(11)
    gaps = [np.random.gamma(shape=0.5, scale=1.0 / (10.0 * 0.5)) for _ in range(300)]
    expected = np.cumsum(gaps) * (300 / 10.0) / np.sum(gaps)  # rescaled: the last request at num_prompts / rate
    assert arrival_times(300, 10.0, 0.5, 11) == pytest.approx(np.round(expected, 6), abs=1e-6)
    many = np.diff(arrival_times(20000, 10.0, 0.25, 1))
    assert np.std(many) / np.mean(many) == pytest.approx(2.0, rel=0.1)  # burstiness b: gaps' CV 1/sqrt(b)


def test_the_work_directory_is_the_workloads_on_that_server_for_that_model():
    from simulator.validation.bench import default_work_dir

    name = default_work_dir("a" * 64, "http://h:8000", "m")
    assert name.startswith("vidur-bench-") and name == default_work_dir("a" * 64, "http://h:8000", "m")  # the same command resumes
    assert len({name, default_work_dir("b" * 64, "http://h:8000", "m"), default_work_dir("a" * 64, "http://g:8000", "m"), default_work_dir("a" * 64, "http://h:8000", "n")}) == 4


# Bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, needles",
    [
        (["--dataset-name", "sharegpt"], ("--dataset-name sharegpt: only random is supported",)),
        (["--dataset-path", "x.json"], ("--dataset-path x.json", "drop --dataset-path")),
        (["--goodput", "ttft=500"], ("--goodput ttft=500: expected KEY:VALUE",)),
        (["--goodput", "itl:5"], ("'itl' is not a request-level metric", "ttft, tpot, e2el")),
        (["--goodput", "ttft:-1"], ("an SLO must be >= 0",)),
        (["--percentile-metrics", "ttft,queue"], ("--percentile-metrics 'ttft,queue'",)),
        (["--metric-percentiles", "100"], ("--metric-percentiles '100'",)),
        (["--draft-model", "JackFram/llama-68m"], ("--draft-model JackFram/llama-68m: --proposer ngram uses no draft model",)),
        (["--proposer", "eagle"], ("--proposer eagle needs --draft-model",)),
        (["--device", "cuda"], ("unknown device 'cuda'",)),
        (["--random-input-len", "5000000"], ("--random-input-len 5000000", "bound of 1048576")),
        (["--random-input-len", "0"], ("--random-input-len 0", "a prompt could have no token")),
        (["--num-prompts", "100000", "--random-input-len", "1024"], ("--num-prompts 100000", "bound of 16777216")),
        (["--request-rate", "0"], ("--request-rate", "must be > 0 requests per second, or inf")),
        (["--burstiness", "0"], ("--burstiness", "must be > 0")),
        (["--random-range-ratio", "1"], ("--random-range-ratio", "must be in [0, 1)")),
        (["--max-concurrency", "0"], ("--max-concurrency", "must be a positive integer")),
        (["--endpoint", "/v1/chat/completions"], ("--endpoint '/v1/chat/completions'",)),
    ],
)
def test_bench_refuses_bad_input_in_one_line_writing_nothing(tmp_path, monkeypatch, capsys, extra, needles):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(bench_args("http://127.0.0.1:9", tmp_path, "--save-result", *extra))
    except SystemExit as exit_:  # argparse's own type checks
        code = exit_.code
    assert code == 2
    one_line_error(capsys, *needles)
    assert not any(tmp_path.iterdir())


def test_bench_refuses_an_unreachable_server_and_an_unknown_model_before_sending(tmp_path, capsys):
    assert main(bench_args("http://127.0.0.1:9", tmp_path)) == 2
    one_line_error(capsys, "http://127.0.0.1:9/v1/models")
    with FakeServer(FakeServerConfig(model="fake-model", step_base_s=0.001)) as server:
        assert main(bench_args(server.url, tmp_path)) == 2  # the served model is none the simulator knows
        one_line_error(capsys, "--model fake-model: the simulator cannot simulate it", "--served-model-name fake-model")
        assert main(bench_args(server.url, tmp_path, "--model", "no/such-model", "--served-model-name", "fake-model")) == 2
        one_line_error(capsys, "--model no/such-model")
        assert server.requests_received == 0
    assert not any(tmp_path.iterdir())


def test_bench_refuses_prompts_beyond_max_model_len_before_sending(tmp_path, capsys):
    with FakeServer(FakeServerConfig(max_model_len=64, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--save-result")) == 2
        assert server.requests_received == 0
    one_line_error(capsys, "max_model_len of 64", "prompt 64 + output 32")
    assert not list(tmp_path.rglob("replay.jsonl")) and not list(tmp_path.glob("*.json"))


# End to end ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    """One bench run against a fake server with k = 3 and acceptance 0.7, saved with every array;
    then the same command again (nothing left to send), saved under another name."""
    root = tmp_path_factory.mktemp("bench")
    extra = ("--save-result", "--save-detailed", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--goodput", "tpot:50", "--work-dir", str(root / "work"))
    config = FakeServerConfig(num_speculative_tokens=K, acceptance_rate=ALPHA, **FAST)
    with FakeServer(config) as server:
        first = main(bench_args(server.url, root, *extra, "--result-filename", "first.json"))
        workload_bytes = (root / "work" / "workload.jsonl").read_bytes()
        simulated_bytes = {p.name: p.read_bytes() for p in (root / "work" / "simulated").iterdir()}
        again = main(bench_args(server.url, root, *extra, "--result-filename", "again.json"))
        url = server.url
    return {"root": root, "work": root / "work", "codes": (first, again), "workload": workload_bytes, "simulated": simulated_bytes, "url": url}


@pytest.mark.simulation
def test_bench_writes_vllms_flat_keys_for_the_measured_and_simulated_runs(benched):
    root, work = benched["root"], benched["work"]
    assert benched["codes"] == (0, 0)
    result = json.loads((root / "first.json").read_text())
    assert list(result)[:10] == ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness", "max_concurrency"]
    assert re.fullmatch(r"\d{8}-\d{6}", result["date"])
    assert (result["backend"], result["model_id"], result["num_prompts"], result["request_rate"], result["burstiness"], result["max_concurrency"]) == ("openai", MODEL, 40, 80.0, 1.0, None)
    replayed = records(work)
    workload = [json.loads(line) for line in (work / "workload.jsonl").read_text().splitlines()[1:]]
    assert result["completed"] == 40 and result["failed"] == 0
    assert result["total_input_tokens"] == sum(r["prompt_tokens"] for r in workload)
    received = sum(c[1] for r in replayed for c in r["chunks"])
    assert result["total_output_tokens"] == received == sum(r["output_tokens"] for r in workload)
    assert result["output_throughput"] * result["duration"] == pytest.approx(received)
    assert result["request_throughput"] * result["duration"] == pytest.approx(40)
    # vLLM's statistics, recomputed from the records: ITL pools every chunk gap of every request
    gaps = np.array([later[0] - earlier[0] for r in replayed for earlier, later in zip(r["chunks"], r["chunks"][1:])]) * 1000
    assert result["mean_itl_ms"] == pytest.approx(gaps.mean()) and result["std_itl_ms"] == pytest.approx(gaps.std())
    assert result["p99_itl_ms"] == pytest.approx(np.percentile(gaps, 99)) and result["median_itl_ms"] == pytest.approx(np.median(gaps))
    ttft = np.array([r["ttft_s"] for r in replayed]) * 1000
    assert result["p50_ttft_ms"] == pytest.approx(np.percentile(ttft, 50))
    tpot = np.array([r["tpot_s"] for r in replayed])
    assert result["request_goodput"] == pytest.approx((tpot * 1000 <= 50).sum() / result["duration"])
    for key in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times", "errors"):
        assert len(result[key]) == 40, key
    assert result["errors"] == [""] * 40
    # acceptance as vllm bench serve reports it, from the fake server's configuration
    assert result["spec_decode_acceptance_length"] == pytest.approx(1 + ALPHA + ALPHA**2 + ALPHA**3, abs=0.25)
    assert len(result["spec_decode_per_position_acceptance_rates"]) == K
    # the simulated side: the same keys, from the simulator's own per-request files
    simulated = result["simulated"]
    assert {k for k in result if k.endswith("_ms")} == {k for k in simulated if k.endswith("_ms")}
    sim_itls = json.loads((work / "simulated" / "simulated_itls.json").read_text())["itls"]
    pooled = np.array([g for gaps in sim_itls for g in gaps]) * 1000
    assert simulated["mean_itl_ms"] == pytest.approx(pooled.mean()) and simulated["p99_itl_ms"] == pytest.approx(np.percentile(pooled, 99))
    for key in ("mean_ttft_ms", "p99_itl_ms", "request_throughput", "duration"):
        assert result["error_pct"][key] == pytest.approx((simulated[key] - result[key]) / result[key] * 100)
    # the step-by-step files are there, and compare reruns on them
    assert (work / "replay" / "calibration.json").is_file() and (work / "report" / "report.json").is_file()
    assert main(["compare", "--workload", str(work / "workload.jsonl"), "--replay", str(work / "replay"), "--calibration", str(work / "replay" / "calibration.json"), "--simulated", str(work / "simulated"), "--out", str(root / "report2")]) == 0


@pytest.mark.simulation
def test_bench_reruns_resume_and_its_deterministic_outputs_are_byte_identical(benched):
    root, work = benched["root"], benched["work"]
    first, again = (json.loads((root / name).read_text()) for name in ("first.json", "again.json"))
    summary = json.loads((work / "replay" / "replay-summary.json").read_text())
    assert [s["session"] for s in summary["sessions"]] == [0]  # the rerun had nothing to send
    assert (work / "workload.jsonl").read_bytes() == benched["workload"]
    assert {p.name: p.read_bytes() for p in (work / "simulated").iterdir()} == benched["simulated"]
    assert json.dumps(first["simulated"], sort_keys=True) == json.dumps(again["simulated"], sort_keys=True)
    assert "date is the only wall-clock value" in first["harness"]["wall_clock"]


@pytest.mark.simulation
def test_bench_default_result_name_is_vllms(benched, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeServer(FakeServerConfig(num_speculative_tokens=K, **FAST)) as server:
        assert main(["bench", "--base-url", server.url, "--num-prompts", "8", "--random-input-len", "16", "--random-output-len", "8", "--max-concurrency", "4", "--disable-tqdm", "--save-result"]) == 0
    names = [p.name for p in tmp_path.glob("*.json")]
    assert len(names) == 1 and re.fullmatch(r"openai-infqps-concurrency4-Llama-2-7b-hf-\d{8}-\d{6}\.json", names[0]), names
    assert len(list(tmp_path.glob("vidur-bench-*/replay/replay.jsonl"))) == 1  # the work directory beside it, named by the workload


@pytest.mark.simulation
def test_bench_with_failed_requests_exits_3_and_a_rerun_resends_them(tmp_path, capsys):
    with FakeServer(FakeServerConfig(fault_http_500=0.25, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(tmp_path / "w"))) == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["failed"] > 0 and result["completed"] == 40 - result["failed"]
    assert f"{result['failed']} of 40 requests have no successful record" in err and "rerun the same command" in err
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert main(bench_args(healthy.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(tmp_path / "w"))) == 0
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == 40


# Ctrl-C -----------------------------------------------------------------------------------------
def _no_partial_files(root: Path) -> None:
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    for path in root.rglob("*.jsonl"):
        text = path.read_text()
        assert text.endswith("\n") and all(json.loads(line) for line in text.splitlines())


@pytest.mark.simulation  # the resume simulates
def test_ctrl_c_during_the_replay_exits_130_in_one_line_and_the_same_command_resumes(tmp_path):
    work = tmp_path / "w"
    with FakeServer(FakeServerConfig(hold_after_requests=5, **FAST)) as server:
        args = bench_args(server.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(work))
        process = subprocess.Popen([sys.executable, "-m", "simulator.validation", *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        log = work / "replay" / "replay.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not (log.exists() and log.read_text().count("\n") >= 6):
            time.sleep(0.05)
        assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == EXIT_INTERRUPTED, stderr
        assert stderr.count("\n") == 1 and stderr.startswith("interrupted: bench stopped while replaying") and "rerun the same command" in stderr, stderr
        assert not (tmp_path / "r.json").exists() and not (work / "simulated").exists()
        _no_partial_files(tmp_path)
        server.release()
        assert main(args) == 0
    sessions = json.loads((work / "replay" / "replay-summary.json").read_text())["sessions"]
    assert [(s["session"], s["state"]) for s in sessions] == [(0, "interrupted"), (1, "closed")]
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == 40


def test_ctrl_c_during_the_simulation_exits_130_and_writes_nothing_more(tmp_path, capsys, monkeypatch):
    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulator, "run", interrupted)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(tmp_path / "w"))) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interrupted: bench stopped while simulating") and "Traceback" not in err
    assert not (tmp_path / "r.json").exists() and not any((tmp_path / "w" / "simulated").glob("*"))
    assert (tmp_path / "w" / "replay" / "calibration.json").is_file()  # the steps before it are kept
    _no_partial_files(tmp_path)
