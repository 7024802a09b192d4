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
    from simulator.validation.bench_work import default_work_dir

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
        (["--metric-percentiles", "101"], ("--metric-percentiles '101'", "from 0 to 100")),
        (["--metadata", "version"], ("--metadata version: expected KEY=VALUE",)),
        (["--header", "=x"], ("--header =x: expected KEY=VALUE",)),
        (["--input-len", "64"], ("--random-input-len and --input-len both set --random-input-len",)),  # bench_args gives --random-input-len
        (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"], ("--ramp-up-strategy linear needs both --ramp-up-start-rps and --ramp-up-end-rps",)),
        (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "5"], ("--request-rate 80: with --ramp-up-strategy the ramp sets the rate",)),
        (["--ramp-up-end-rps", "5"], ("--ramp-up-end-rps: applies to --ramp-up-strategy",)),
        (["--top-p", "0"], ("--top-p 0.0: must be a number in (0, 1]",)),
        (["--min-p", "2"], ("--min-p 2.0: must be a number in [0, 1]",)),
        (["--temperature", "-1"], ("--temperature -1.0: must be a number >= 0",)),
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
    then the same command with --resume (nothing left to send), saved under another name."""
    root = tmp_path_factory.mktemp("bench")
    extra = ("--save-result", "--save-detailed", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--goodput", "tpot:50", "--work-dir", str(root / "work"))
    config = FakeServerConfig(num_speculative_tokens=K, acceptance_rate=ALPHA, **FAST)
    with FakeServer(config) as server:
        first = main(bench_args(server.url, root, *extra, "--result-filename", "first.json"))
        workload_bytes = (root / "work" / "workload.jsonl").read_bytes()
        simulated_bytes = {p.name: p.read_bytes() for p in (root / "work" / "simulated").iterdir()}
        again = main(bench_args(server.url, root, *extra, "--resume", "--result-filename", "again.json"))
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
def test_bench_resume_reuses_the_run_and_its_deterministic_outputs_are_byte_identical(benched):
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
def test_bench_with_failed_requests_exits_3_and_resume_resends_them(tmp_path, capsys):
    """A quarter of the requests fail; --resume resends them at their arrival times.  The
    duration is the measured window (the resent requests overlaid on the first run's
    timeline), not both sessions' spans added up (+106% throughput error on the rerun)."""
    work = tmp_path / "w"
    with FakeServer(FakeServerConfig(fault_http_500=0.25, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(work))) == EXIT_REQUESTS_FAILED
    err = capsys.readouterr().err
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["failed"] > 0 and result["completed"] == 40 - result["failed"]
    assert f"{result['failed']} of 40 requests have no successful record" in err and "rerun with --resume" in err
    with FakeServer(FakeServerConfig(**FAST)) as healthy:
        assert main(bench_args(healthy.url, tmp_path, "--save-result", "--result-filename", "r.json", "--work-dir", str(work), "--resume")) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["completed"] == 40
    sessions = json.loads((work / "replay" / "replay-summary.json").read_text())["sessions"]
    assert [s["session"] for s in sessions] == [0, 1]
    arrivals = [json.loads(line)["arrival_s"] for line in (work / "workload.jsonl").read_text().splitlines()[1:]]
    last = {r["request_id"]: r for r in records(work)}
    window = max(arrivals[rid] + r["end_s"] - r["scheduled_s"] for rid, r in last.items()) - min(arrivals)
    assert result["duration"] == pytest.approx(window)
    assert result["duration"] < 0.8 * (sessions[0]["active_s"] + sessions[1]["active_s"])
    assert result["request_throughput"] == pytest.approx(40 / window)
    report = json.loads((work / "report" / "report.json").read_text())
    assert report["throughput"]["measured"]["duration_s"] == result["duration"]  # the report and bench agree


# Ctrl-C -----------------------------------------------------------------------------------------
def _no_partial_files(root: Path) -> None:
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    for path in root.rglob("*.jsonl"):
        text = path.read_text()
        assert text.endswith("\n") and all(json.loads(line) for line in text.splitlines())


@pytest.mark.simulation  # the resume simulates
def test_ctrl_c_during_the_replay_exits_130_in_one_line_and_resume_continues(tmp_path):
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
        assert stderr.count("\n") == 1 and stderr.startswith("interrupted: bench stopped while replaying") and "rerun the same command with --resume" in stderr, stderr
        assert not (tmp_path / "r.json").exists() and not (work / "simulated").exists()
        _no_partial_files(tmp_path)
        server.release()
        assert main(args + ["--resume"]) == 0
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


# A rerun measures anew; --resume continues -----------------------------------------------------
def per_position(root, name):
    return json.loads((root / name).read_text())["spec_decode_per_position_acceptance_rates"]


@pytest.mark.simulation
def test_a_rerun_measures_anew_and_resume_refuses_a_server_whose_k_changed(tmp_path, capsys):
    """The server restarts with k = 5 on the same port, and the same command runs again.  It
    used to find every request recorded, send nothing, exit 0 and write the k = 3 numbers; like
    vllm bench serve it measures anew (the last run set aside in previous/).  --resume on a
    server whose k changed since is refused, naming why, and writes nothing."""
    small = ("--num-prompts", "16", "--save-result")
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, **FAST)) as server:
        port = server.url.rsplit(":", 1)[1]
        assert main(bench_args(server.url, tmp_path, *small, "--result-filename", "k3.json")) == 0
    (work,) = tmp_path.glob("vidur-bench-*")
    first_records = records(work)
    with FakeServer(FakeServerConfig(num_speculative_tokens=5, **FAST), port=int(port)) as server:
        assert main(bench_args(server.url, tmp_path, *small, "--result-filename", "k5.json")) == 0
        assert server.requests_received == 16
    assert len(per_position(tmp_path, "k3.json")) == 3 and len(per_position(tmp_path, "k5.json")) == 5
    assert [s["session"] for s in json.loads((work / "replay" / "replay-summary.json").read_text())["sessions"]] == [0]
    assert [json.loads(line) for line in (work / "previous" / "replay" / "replay.jsonl").read_text().splitlines()[1:]] == first_records
    assert "measuring anew" in capsys.readouterr().out
    kept = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, **FAST), port=int(port)) as server:
        assert main(bench_args(server.url, tmp_path, *small, "--result-filename", "resumed.json", "--resume")) == 2
        assert server.requests_received == 0
    one_line_error(capsys, "with k = 5", "now runs with k = 3", "drop --resume to measure anew")
    assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == kept and not (tmp_path / "resumed.json").exists()


# --burstiness inf, every request failing, refusals that leave nothing --------------------------
@pytest.mark.simulation
def test_infinite_burstiness_saves_a_result_with_inf_spelt_as_vllm_spells_rates(tmp_path):
    """--burstiness inf --save-result used to end in a traceback (Infinity in strict JSON)
    after the whole run, with no result written."""
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--num-prompts", "8", "--burstiness", "inf", "--save-result", "--result-filename", "r.json")) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["burstiness"], result["request_rate"]) == ("inf", 80.0)
    (workload,) = tmp_path.glob("vidur-bench-*/workload.jsonl")
    arrivals = [json.loads(line)["arrival_s"] for line in workload.read_text().splitlines()[1:]]
    assert arrivals == pytest.approx([(i + 1) / 80 for i in range(8)])  # evenly spaced, as vLLM's constant delays


def test_bench_where_every_request_fails_exits_3_with_the_measured_result(tmp_path, capsys):
    """It used to stop with exit 2 and a message about draft tokens (nothing to calibrate);
    the docs promise exit 3 with a result, so the result holds the measured run only."""
    with FakeServer(FakeServerConfig(fault_http_500=1.0, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--num-prompts", "8", "--save-result", "--result-filename", "r.json")) == EXIT_REQUESTS_FAILED
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "draft tokens" not in captured.err
    assert "8 of 8 requests have no successful record" in captured.err and "nothing to calibrate or simulate" in captured.out
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["completed"], result["failed"], result["simulated"], result["duration"]) == (0, 8, None, None)
    assert result["max_output_tokens_per_s"] == 0.0 and result["max_concurrent_requests"] == 0


def test_a_refused_bench_leaves_nothing_and_names_the_flag_to_change(tmp_path, capsys):
    """Prompts beyond max_model_len used to leave workload.jsonl behind and suggest generate's
    --prompt-tokens; a --served-model-name the server does not list was called --model."""
    with FakeServer(FakeServerConfig(max_model_len=64, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--save-result")) == 2
        one_line_error(capsys, "max_model_len of 64", "--random-input-len/--random-output-len")
        assert main(bench_args(server.url, tmp_path, "--model", MODEL, "--served-model-name", "llama-typo")) == 2
        one_line_error(capsys, "--served-model-name llama-typo: not served by", repr(MODEL))
        assert server.requests_received == 0
    assert not any(tmp_path.iterdir())


def test_bench_help_says_what_reruns_and_sampling_do(capsys):
    from simulator.validation.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--resume" in text and "sets the last one's aside" in text
    assert "default: not sent; the server's default applies" in text  # --temperature, as vllm bench serve leaves it
    assert "vLLM leaves it to the server" not in text and "rerun the same command to resume" not in text


# vllm bench serve's other flags and keys -------------------------------------------------------
@pytest.mark.simulation
def test_bench_takes_vllms_other_flags_and_writes_its_peak_keys(tmp_path):
    """--input-len/--output-len, --num-warmups, --metadata, --header, --tokenizer, the sampling
    flags (sent only when given) and percentiles 0 and 100; max_output_tokens_per_s and
    max_concurrent_requests recomputed from the records as vLLM computes them."""
    args = ["bench", "--base-url", None, "--num-prompts", "12", "--input-len", "32", "--output-len", "24", "--request-rate", "40", "--disable-tqdm", "--timeout", "20",
            "--result-dir", str(tmp_path), "--work-dir", str(tmp_path / "w"), "--save-result", "--result-filename", "r.json", "--num-warmups", "3",
            "--metadata", "tp=1", "version=0.3.3", "--header", "x-run=abc", "--tokenizer", "hf/tok", "--top-p", "0.9", "--top-k", "5",
            "--metric-percentiles", "0,100", "--percentile-metrics", "ttft,e2el"]
    with FakeServer(FakeServerConfig(**FAST)) as server:
        args[2] = server.url
        assert main(args) == 0
        sent = server.last_request
        assert server.requests_received == 12 + 3
    assert sent["headers"].get("x-run") == "abc"
    summary = (tmp_path / "w" / "replay" / "replay-summary.json").read_text()
    assert json.loads(summary)["sessions"][0]["options"]["headers"] == ["x-run"] and "abc" not in summary  # a header may carry a credential
    assert (sent["body"]["top_p"], sent["body"]["top_k"]) == (0.9, 5) and "temperature" not in sent["body"] and "min_p" not in sent["body"]
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["tp"], result["version"], result["tokenizer_id"]) == ("1", "0.3.3", "hf/tok")
    assert list(result).index("version") < list(result).index("request_rate")  # after num_prompts, as vLLM places metadata
    workload = [json.loads(line) for line in (tmp_path / "w" / "workload.jsonl").read_text().splitlines()[1:]]
    assert {r["prompt_tokens"] for r in workload} == {32} and {r["output_tokens"] for r in workload} == {24}
    replayed = records(tmp_path / "w")
    assert len(replayed) == 12  # the warm-ups are not records
    calibration = json.loads((tmp_path / "w" / "replay" / "calibration.json").read_text())
    assert calibration["sessions_flagged"] == []  # nor in the counters: the opening scrape came after them
    ttft = [r["ttft_s"] * 1000 for r in replayed]
    assert (result["p0_ttft_ms"], result["p100_ttft_ms"]) == pytest.approx((min(ttft), max(ttft)))
    # vLLM's peaks: one-second buckets from the first start, one event per content chunk
    arrivals = {r["request_id"]: r["arrival_s"] for r in workload}
    starts = {r["request_id"]: arrivals[r["request_id"]] + r["send_lag_s"] for r in replayed}
    first = min(starts.values())
    events = [int(starts[r["request_id"]] + c[0] - first) for r in replayed for c in r["chunks"]]
    assert result["max_output_tokens_per_s"] == max(events.count(b) for b in set(events))
    spans = [range(int(starts[r["request_id"]] - first), int(starts[r["request_id"]] + r["e2e_s"] - first) + 1) for r in replayed]
    assert result["max_concurrent_requests"] == max(sum(b in span for span in spans) for b in range(max(s.stop for s in spans)))
    assert result["simulated"]["max_concurrent_requests"] >= 1 and "max_output_tokens_per_s" in result["error_pct"]


@pytest.mark.simulation
def test_ramp_up_arrivals_and_file_name_follow_vllm(tmp_path, monkeypatch):
    from simulator.validation.random_dataset import request_rates

    assert request_rates(5, math.inf, ("linear", 2, 10)).tolist() == [2, 4, 6, 8, 10]
    assert request_rates(3, math.inf, ("exponential", 1, 16)).tolist() == pytest.approx([1, 4, 16])
    np.random.seed(4)
    rates = [2 + 8 * i / 19 for i in range(20)]
    gaps = [np.random.gamma(shape=1.0, scale=1.0 / rate) for rate in rates]  # vLLM draws one gap per request at its rate, unscaled
    assert arrival_times(20, math.inf, 1.0, 4, ("linear", 2, 10)) == pytest.approx(np.round(np.cumsum(gaps), 6), abs=1e-6)
    monkeypatch.chdir(tmp_path)
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert main(["bench", "--base-url", server.url, "--num-prompts", "6", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
                     "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "20", "--ramp-up-end-rps", "60", "--save-result"]) == 0
    (name,) = [p.name for p in tmp_path.glob("*.json")]
    assert re.fullmatch(r"openai-ramp-up-linear-20qps-60qps-Llama-2-7b-hf-\d{8}-\d{6}\.json", name), name
    result = json.loads((tmp_path / name).read_text())
    assert (result["ramp_up_strategy"], result["ramp_up_start_rps"], result["ramp_up_end_rps"]) == ("linear", 20, 60)


@pytest.mark.simulation
def test_a_forced_k_gives_the_summary_rates_at_that_k(tmp_path):
    """--num-speculative-tokens 4 --force on a k = 3 server: the simulation drafts 4 tokens with
    the 4th never accepted, so the measured acceptance rate is the counters' accepted tokens over
    4 per draft.  At the server's 3 per draft it was a -23% acceptance "error" that is not real."""
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, acceptance_rate=ALPHA, **FAST)) as server:
        assert main(bench_args(server.url, tmp_path, "--num-speculative-tokens", "4", "--force", "--save-result", "--result-filename", "r.json", "--work-dir", str(tmp_path / "w"))) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    counts = json.loads((tmp_path / "w" / "replay" / "calibration.json").read_text())["counts"]
    assert result["spec_decode_acceptance_rate"] == pytest.approx(100 * counts["accepted_tokens"] / (4 * counts["drafts"]))
    assert result["spec_decode_draft_tokens"] == 4 * result["spec_decode_num_drafts"] and len(result["spec_decode_per_position_acceptance_rates"]) == 4
    assert abs(result["error_pct"]["spec_decode_acceptance_rate"]) < 10
