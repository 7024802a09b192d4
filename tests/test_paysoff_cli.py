"""``python -m simulator.paysoff``: one deployment's answer, and every bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys

import pandas as pd
import pytest

from repo import REPO_ROOT
from simulator.paysoff.command import main
from simulator.speculative.acceptance_convert import acceptance_length

SMALL = ["--concurrency", "1,8", "--k-range", "1-2", "--prompt-tokens", "128", "--output-tokens", "32", "--min-requests", "4", "--jobs", "1", "--no-progress"]


def printed_commands(text: str, prefix: str) -> list[list[str]]:
    """Every command of the answer starting with ``prefix``, read as a shell reads the printed lines
    (a backslash continues a line; a single-quoted JSON value may span lines)."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if not line.strip().startswith(prefix) and f"; do {prefix}" not in line:
            continue
        block = line
        while (block.endswith("\\") or block.count("'") % 2) and i + 1 < len(lines):
            i += 1
            block = block[:-1] + " " + lines[i].strip() if block.endswith("\\") else block + "\n" + lines[i]
        found.append([json.dumps(json.loads(word), separators=(",", ":")) if word.startswith("{") else word for word in shlex.split(block.strip())])
    return found


def flat(text: str) -> str:
    """The answer's prose with its wrapping undone (lines are wrapped at 100 columns)."""
    return " ".join(text.split())


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "acme/NoSuchModel-7B", "--acceptance", "0.7"], "--model acme/NoSuchModel-7B: unknown model"),
        (["--device", "tpu9", "--acceptance", "0.7"], "--device tpu9: unknown; use one of"),
        (["--acceptance-length", "4.5", "-k", "3"], "--acceptance-length 4.5 at -k 3 is outside \\[1, 4\\]"),
        (["--acceptance-length", "0.5", "-k", "3"], "is outside \\[1, 4\\]"),
        (["--acceptance-length", "2.0"], "--acceptance-length 2 needs -k K"),
        (["--acceptance", "0.7", "-k", "3"], "-k 3: only goes with --acceptance-length"),
        ([], "no acceptance given: add --acceptance-length L -k K"),
        (["--acceptance", "0.7", "--acceptance-length", "2", "-k", "2"], "give one acceptance input"),
        (["--acceptance", "1.7"], "--acceptance 1.7: must be a probability"),
        (["--acceptance", "0.7", "--concurrency", ","], "--concurrency ',': the grid is empty"),
        (["--acceptance", "0.7", "--concurrency", "", "--request-rate", ","], "--request-rate ',': empty"),
        (["--acceptance", "0.7", "--concurrency", ""], "--concurrency '': the grid has no concurrency"),
        (["--acceptance", "0.7", "--k-range", "3-1"], "--k-range '3-1': not a list of positive integers"),
        (["--acceptance", "0.7", "--concurrency", "1-512"], "--concurrency 512 exceeds --max-num-seqs 256 \\(vllm serve 0.30.0's default on a100\\).*raise --max-num-seqs to 512"),
        (["--acceptance", "0.7", "--concurrency", "1-64", "--max-num-seqs", "32"], "--concurrency 64 exceeds --max-num-seqs 32: "),
        (["--acceptance-per-position", "0.9,0.8", "--k-range", "1-4"], "has 2 rates but --k-range goes to 4"),
        (["--proposer", "eagle3", "--acceptance", "0.7"], "--proposer eagle3 needs --draft-model"),
        # the draft-TP rule is the run configuration's (RunConfig), refused here in this command's flags
        (["--acceptance", "0.7", "--draft-tensor-parallel-size", "1"], "--draft-tensor-parallel-size 1: --proposer ngram runs no draft network"),
        (
            ["--proposer", "draft", "--draft-model", "JackFram/llama-68m", "--acceptance", "0.7", "--tensor-parallel-size", "4", "--draft-tensor-parallel-size", "2"],
            "--draft-tensor-parallel-size 2: must be 1 or the target's --tensor-parallel-size \\(4\\)$",
        ),
        (["--draft-model", "JackFram/llama-68m", "--acceptance", "0.7"], "--proposer ngram uses no draft model"),
        (
            ["--model", "meta-llama/Llama-2-7b-hf", "--proposer", "eagle3", "--draft-model", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "--acceptance", "0.7"],
            "trained for another target",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(argv, message, capsys, tmp_path):
    outputs = [tmp_path / "a.json", tmp_path / "a.csv"]
    code, out, err = _run(SMALL + argv + ["--json", str(outputs[0]), "--csv", str(outputs[1])], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("python -m simulator.paysoff: error: ")
    assert pytest.importorskip("re").search(message, err), err
    assert out == ""
    assert not any(p.exists() for p in outputs)


@pytest.mark.parametrize("option", ["--json", "--csv"])
def test_an_unwritable_output_path_is_refused_before_simulating(option, capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = _run(["--acceptance", "0.7", *SMALL, option, str(blocker / "sub" / "out")], capsys)
    assert code == 2 and option in err and "file" in err and out == ""
    assert blocker.read_text() == "x"


@pytest.mark.simulation
def test_one_deployment_answer_from_vllm_s_acceptance_length(capsys, tmp_path):
    json_path, csv_path = tmp_path / "answer.json", tmp_path / "runs.csv"
    argv = ["--acceptance-length", "2.2", "-k", "3", *SMALL, "--request-rate", "4", "--json", str(json_path), "--csv", str(csv_path)]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    document = json.loads(json_path.read_text())
    answer = document["answer"]
    rate = answer["acceptance_rate"]
    assert acceptance_length((rate,) * 3) == pytest.approx(2.2)
    # the output says which rate it ran with and how it was converted
    assert f"{rate:.4f}" in out and "mean acceptance length 2.2 at k = 3" in out and "iid_rate_from_length" in out
    # one verify setting named with its reason, the bounds as a band
    assert "Verify cost: " in out and document["verify_cost"]["attention"] in out and "band" in out
    # the table: one line per concurrency (and load), a cell per k, best k, the schedule
    for x in ("1 |", "8 |", "4 |"):
        assert any(line.strip().startswith(x) for line in out.splitlines()), x
    assert "k=1" in out and "k=2" in out and "| best |" in out
    assert "stops paying" in out
    assert "only up to 8 in flight was simulated" in out  # the schedule's rows above the grid are not simulated, and it says so
    assert "only from 1 in flight was simulated" not in out  # the grid starts at 1: the first row is simulated
    serves = printed_commands(out, "vllm serve")
    # the first command printed is the recommendation, as the JSON answer records it, and it pastes as one command
    assert serves[0] == shlex.split(answer["recommended"]["serve_command"])
    configs = [json.loads(argv[argv.index("--speculative-config") + 1]) for argv in serves if "--speculative-config" in argv]
    scheduled = [c for c in configs if "num_speculative_tokens_per_batch_size" in c]
    assert scheduled and all(c["num_speculative_tokens_per_batch_size"] == answer["num_speculative_tokens_per_batch_size"] for c in scheduled)
    assert ["vllm", "serve", "meta-llama/Llama-2-7b-hf", "--max-num-seqs", "256", "--max-num-batched-tokens", "2048"] == serves[0][:7]
    assert "0.24.0" in out and "https://github.com/vllm-project/vllm/pull/32374" in out
    # the vllm bench serve loop that measures the same grid, and every line fits 100 columns
    assert any(line.strip().startswith("for c in 1 8; do vllm bench serve --model meta-llama/Llama-2-7b-hf") for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) <= 100
    runs = pd.read_csv(csv_path)
    assert set(runs["concurrency"].dropna()) == {1, 8} and set(runs["arrival_rate"].dropna()) == {4.0}
    assert set(runs[runs["num_speculative_tokens"] > 0]["attention"]) >= {"kv_once", "per_token"}
    # the same question again comes from the result cache and prints the same answer
    code, again, _ = _run(argv, capsys)
    assert code == 0 and again == out


@pytest.mark.simulation
def test_vllm_per_position_rates_are_converted_to_conditional(capsys):
    code, out, err = _run(["--acceptance-per-position-vllm", "0.8,0.6", *SMALL], capsys)
    assert code == 0, err
    assert "0.8000, 0.7500" in out  # p_2 = a_2 / a_1


def test_help_names_every_flag_of_the_issue_and_the_conversion():
    text = subprocess.run([sys.executable, "-m", "simulator.paysoff", "--help"], capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    for flag in ("--model", "--device", "--tensor-parallel-size", "--proposer", "--draft-model", "--max-num-seqs", "--max-num-batched-tokens",
                 "--acceptance-length", "--at-k", "--acceptance", "--acceptance-per-position", "--trace", "--concurrency", "--request-rate",
                 "--k-range", "--json", "--csv"):
        assert flag in text
    assert "iid_rate_from_length" in text and "--vllm-version" in text and "(default: 0.30.0)" in text


# --- issue 26 §3 --------------------------------------------------------------------------------


def _spec(*argv):
    from simulator.paysoff import command as paysoff

    args = paysoff.build_parser().parse_args(list(argv))
    return paysoff.spec_from_args(args), args


def test_k_means_num_speculative_tokens_and_at_k_is_its_deprecated_name(capsys):
    spec, _ = _spec("--acceptance-length", "2.2", "-k", "3", *SMALL[:4])
    assert _spec("--acceptance-length", "2.2", "--num-speculative-tokens", "3", *SMALL[:4])[0] == spec
    assert _spec("--acceptance-length", "2.2", "--at-k", "3", *SMALL[:4])[0] == spec
    assert "--at-k is deprecated and will be removed in the next release; use -k" in capsys.readouterr().err


def test_seeds_mean_what_they_mean_in_python_m_simulator(capsys):
    spec, _ = _spec("--acceptance", "0.7", "--acceptance-seed", "5", "--workload-seed", "9", *SMALL[:4])
    assert (spec.seed, spec.workload_seed) == (5, 9)
    assert _spec("--acceptance", "0.7", "--seed", "5", "--workload-seed", "9", *SMALL[:4])[0] == spec
    assert "--seed is deprecated" in capsys.readouterr().err


def test_proposal_probability_reaches_every_speculative_run():
    from simulator.paysoff.runner import speculation

    spec, _ = _spec("--acceptance", "0.7", "--proposal-probability", "0.6", *SMALL[:4])
    assert speculation(spec, spec.profiles[0], "kv_once", 2).proposal_probability == 0.6
    default, _ = _spec("--acceptance", "0.7", *SMALL[:4])
    assert speculation(default, default.profiles[0], "kv_once", 2).proposal_probability == 1.0


def test_the_vllm_version_picks_the_engine_of_every_run():
    from simulator.paysoff.runner import fixed_k_jobs

    spec, _ = _spec("--acceptance", "0.7", "--vllm-version", "0.14.0", *SMALL[:4])
    assert {job.config.engine for job in fixed_k_jobs(spec)} == {"vllm-0.14.0"}


def test_request_rate_inf_under_a_concurrency_is_the_closed_loop_as_python_m_simulator_takes_it():
    """vllm bench serve's --request-rate inf --max-concurrency 32 is the closed loop at 32 (issue 33: it was refused here)."""
    from simulator.paysoff import command as paysoff
    from simulator.cli import simulate

    def spec(*argv):
        return paysoff.spec_from_args(paysoff.build_parser().parse_args(["--acceptance", "0.7", *argv]))

    assert spec("--request-rate", "inf", "--max-concurrency", "32") == spec("--concurrency", "32")
    assert spec("--request-rate", "inf,4", "--max-concurrency", "32").arrival_rates == (4.0,)
    config, _ = simulate.config_from_args(simulate.build_parser().parse_args(["--request-rate", "inf", "--max-concurrency", "32"]))
    assert config.workload.concurrency == 32


def test_the_two_commands_draw_one_default_workload():
    """python -m simulator and paysoff share their default lengths and spread (issue 33: 1024/256 fixed against
    512/256 +-50% gave one deployment two TPOTs)."""
    from simulator.paysoff import command as paysoff
    from simulator.cli import simulate
    from simulator.cli.command import DEFAULT_WORKLOAD

    one = paysoff.spec_from_args(paysoff.build_parser().parse_args(["--acceptance", "0.7"]))
    assert (one.prompt_tokens, one.output_tokens, one.length_spread) == (DEFAULT_WORKLOAD.prompt_tokens, DEFAULT_WORKLOAD.output_tokens, DEFAULT_WORKLOAD.closed_loop_range_ratio)
    args = simulate.build_parser().parse_args(["--max-concurrency", "8", "--num-prompts", "64"])
    config, _ = simulate.config_from_args(args)
    prompts, outputs = config.workload.prompt_tokens, config.workload.output_tokens
    low, high = DEFAULT_WORKLOAD.prompt_tokens * (1 - DEFAULT_WORKLOAD.closed_loop_range_ratio), DEFAULT_WORKLOAD.prompt_tokens * (1 + DEFAULT_WORKLOAD.closed_loop_range_ratio)
    assert min(prompts) >= low - 1 and max(prompts) <= high + 1 and len(set(prompts)) > 1
    assert abs(sum(outputs) / len(outputs) - DEFAULT_WORKLOAD.output_tokens) < 0.15 * DEFAULT_WORKLOAD.output_tokens


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--acceptance", "1.5"], "--acceptance 1.5: must be a probability"),
        (["--acceptance", "0.7", "--concurrency", "", "--request-rate", "2,4"], "--concurrency '': the grid has no concurrency.*the --request-rate table is printed beside it"),
        (["--acceptance", "0.7", "--proposal-probability", "1.5"], "--proposal-probability 1.5: must be in \\[0, 1\\]"),
        (["--acceptance", "0.7", "--tensor-parallel-size", "3"], "--tensor-parallel-size 3: meta-llama/Llama-2-7b-hf cannot be tensor-parallel over 3 GPUs"),
        (["--acceptance", "0.7", "--dataset-name", "sonnet"], "--dataset-name sonnet: the pays-off grid draws vllm bench serve's random dataset"),
        (["--acceptance", "0.7", "--vllm-version", "0.9.0"], "--vllm-version 0.9.0: older than vLLM 0.10.1"),
        (["--acceptance-length", "2", "-k", "2", "--at-k", "3"], "-k and --at-k both set -k"),
    ],
)
def test_more_bad_input_is_one_line_with_one_prefix(argv, message, capsys, tmp_path):
    code, out, err = _run(SMALL + argv + ["--json", str(tmp_path / "a.json")], capsys)
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and lines[0].count("python -m simulator.paysoff") == 1, err
    assert pytest.importorskip("re").search(message, lines[0]), lines[0]
    assert "tensor_parallel_size =" not in lines[0]
    assert out == "" and not (tmp_path / "a.json").exists()


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    from simulator.paysoff import runner as sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_paysoff", interrupted)
    monkeypatch.setattr("simulator.paysoff.command.check_runs", lambda spec: None)
    outputs = [tmp_path / "a.json", tmp_path / "a.csv"]
    code, out, err = _run(["--acceptance", "0.7", *SMALL, "--json", str(outputs[0]), "--csv", str(outputs[1])], capsys)
    assert code == 130 and len(err.strip().splitlines()) == 1 and err.startswith("interrupted: python -m simulator.paysoff stopped")
    assert "rerun the same command to resume" in err and out == "" and not any(p.exists() for p in outputs)


# A made-up model of the runs, so the table's marks are checked against numbers the test chose:
# base TPOT 10 ms + 0.5 ms per request in flight (or per req/s); speedups by (concurrency, k); the
# baseline at 16 req/s has a queue that grows (each request waits 10 ms longer than the one before).
SPEEDUPS = {(8, 1): 1.3, (8, 2): 1.8, (32, 1): 1.1, (32, 2): 0.9}
OFF_AT_8 = {(8, 1): 0.97, (8, 2): 0.95, (32, 1): 0.9, (32, 2): 0.8}


def _fake_runs(speedups, idle=1.0):
    """``idle``: the speedup of a speculative server's k = 0 steps (below 1: it still drafts)."""
    from simulator.runs.workload_kinds import ClosedLoopWorkload
    from simulator.runs.results import RunResult, summarize
    from simulator.speculative.k_schedule import k_for_batch

    def run(config):
        w, spec = config.workload, config.speculation
        closed = isinstance(w, ClosedLoopWorkload)
        x = w.concurrency if closed else w.arrival_rate
        k = (k_for_batch(spec.k_schedule, x) if spec.k_schedule else spec.num_speculative_tokens) if spec.enabled else 0
        speed = (idle if spec.enabled else 1.0) if k == 0 else speedups[(x, k)] if closed else 1.5
        n = w.num_requests
        ttft = [0.01 * (i + 1) if x == 16 and not closed else 0.02 for i in range(n)]
        tpot = (0.010 + 0.0005 * x) / speed
        frame = pd.DataFrame({"request_id": range(n), "arrival_s": [0.1 * i for i in range(n)], "prompt_tokens": [128] * n, "output_tokens": [32] * n,
                              "ttft_s": ttft, "tpot_s": [tpot] * n, "e2e_s": [t + 31 * tpot for t in ttft], "restarts": [0] * n, "verify_steps": [0] * n,
                              "proposed_tokens": [0] * n, "accepted_tokens": [0] * n})
        provenance = {"profile_source": "fake", "profile_id": "fake", "vidur_version": "0", "simulator_version": "0", "simulator_source_hash": "0"}
        return RunResult(config, frame, summarize(frame, 10.0, {}), provenance)

    return run


def _answer(speedups, *argv):
    from simulator.paysoff import command as paysoff
    from simulator.sweep.executors import LocalExecutor
    from simulator.paysoff.runner import run_paysoff

    args = paysoff.build_parser().parse_args(["--acceptance", "0.7", "--concurrency", "8,32", "--request-rate", "2,16", "--k-range", "1-2",
                                              "--max-num-seqs", "64", *argv])
    spec = paysoff.spec_from_args(args)
    output = run_paysoff(spec, LocalExecutor(jobs=1, progress=False), run=_fake_runs(speedups))
    return paysoff.format_answer(spec, output, args.limits, args._speculative_input), output


def test_the_table_prints_each_rows_baseline_and_marks_an_overloaded_one():
    text, _ = _answer(SPEEDUPS)
    assert "base TPOT" in text and "base TTFT" in text
    rows = [line for line in text.splitlines() if line.strip().startswith(("8 |", "32 |", "2 |", "16 |"))]
    by_x = {line.split("|")[0].strip(): line for line in rows}
    assert "14.0 ms" in by_x["8"] and "26.0 ms" in by_x["32"] and "11.0 ms" in by_x["2"] and "18.0 ms" in by_x["16"]  # 10 + 0.5 x
    assert "ms!" in by_x["16"] and not any("ms!" in by_x[x] for x in ("8", "32", "2"))  # the base TTFT marked
    assert "! overloaded: the no-speculation run's queue grew through the run" in flat(text)


def test_a_grid_from_8_never_claims_from_1_in_flight():
    text, output = _answer(OFF_AT_8)
    assert "from 1 in flight" not in text
    assert "stops speculating: from 8 in flight, the smallest concurrency simulated (below 8 was not simulated)" in flat(text)
    assert output.schedules["schedules"][0]["stops_paying_from"] == 8


def test_the_best_fixed_k_for_an_older_vllm_leads_and_the_schedule_follows():
    # geometric means: k = 1: sqrt(1.3 x 1.1) = 1.196, k = 2: sqrt(1.8 x 0.9) = 1.273, but k = 2 is below 1x at 32:
    # the recommended fixed k is the best of those at or above 1x everywhere (k = 1); k = 2 is the best on average
    text, output = _answer(SPEEDUPS, "--vllm-version", "0.10.1")
    fallback = output.schedules["schedules"][0]["fixed_k_fallback"]
    assert fallback["num_speculative_tokens"] == 1 and fallback["geomean_tpot_speedup"] == pytest.approx(math.sqrt(1.3 * 1.1), abs=1e-4)
    assert fallback["below_1x_at"] == [] and json.loads(fallback["speculative_config_json"])["num_speculative_tokens"] == 1
    assert fallback["best_on_average"] == {"num_speculative_tokens": 2, "geomean_tpot_speedup": pytest.approx(math.sqrt(1.8 * 0.9), abs=1e-4), "below_1x_at": [32]}
    assert "num_speculative_tokens_per_batch_size" not in fallback["speculative_config_json"]
    # vLLM 0.10.1 takes no schedule: the answer leads with the fixed k, and the schedule is the alternative
    assert output.schedules["schedules"][0]["recommended"]["kind"] == "fixed_k"
    assert text.startswith("Yes: the fixed k = 1 at every load")
    details = flat(text.split("Ties:", 1)[1])
    assert details.index("For vLLM 0.10.1 (no num_speculative_tokens_per_batch_size before 0.24.0)") < details.index("On vLLM 0.24.0 or later, the k schedule")
    assert "the best fixed k = 1, 1.20× geometric-mean TPOT speedup" in flat(text) and "at least 1× at every one" in flat(text)
    newer, newer_output = _answer(SPEEDUPS, "--vllm-version", "0.24.0")
    assert newer_output.schedules["schedules"][0]["recommended"]["kind"] == "schedule" and newer.startswith("Yes: k = 2 up to 31 in flight, 1 from 32")
    details = flat(newer.split("Ties:", 1)[1])
    assert details.index("The k schedule (rows") < details.index("On vLLM before 0.24.0 (no k schedule)")
    assert "https://github.com/vllm-project/vllm/blob/v0.24.0/vllm/config/speculative.py" in flat(text) and "vllm-metal" not in text


def test_no_fixed_k_that_never_pays_is_recommended():
    text, output = _answer(OFF_AT_8)
    assert output.schedules["schedules"][0]["fixed_k_fallback"]["num_speculative_tokens"] == 0
    assert "no fixed k pays on average over the concurrencies simulated: run without --speculative-config" in flat(text)
    assert text.startswith("No: serve without speculation at 8–32 in flight")


@pytest.mark.simulation
def test_a_real_sigint_exits_130_with_one_line_and_no_traceback(tmp_path):
    """Over a pipe the command prints progress lines; SIGINT once it simulates: the workers stop,
    one interrupt line, nothing written; rerunning resumes from what finished."""
    import os
    import signal
    import time

    out = tmp_path / "a.json"
    env = {**os.environ, "VIDUR_SPECDEC_CACHE": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "simulator.paysoff", "--acceptance", "0.7", "--concurrency", "1-64", "--k-range", "1-3", "--jobs", "2", "--json", str(out)]
    process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        if "to simulate" in line:
            break
    time.sleep(3)
    process.send_signal(signal.SIGINT)
    stdout, rest = process.communicate(timeout=60)
    err = "".join(lines) + rest
    assert process.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted: python -m simulator.paysoff stopped")
    assert stdout == "" and not out.exists()


def _checks_up_to_40_pct_high():
    """Check rows at 1 and 32 in flight whose speedups were simulated -5% to +40% off."""
    from simulator.sweep.error_bar import Regime, SpeedupCheck

    checks = []
    for load in (1, 32):
        regime = Regime.of(proposer="ngram", engine="vllm", version="0.30.0", tensor_parallel_size=1, in_flight=load)
        checks += [SpeedupCheck(f"s{i}-{load}", f"s{i}", regime, error) for i, error in enumerate((40.0, 10.0, -5.0))]
    return checks


def test_the_answer_says_no_where_the_error_bar_reaches_below_one():
    """Issue 30 item 5: with check rows whose speedups were simulated up to 40% too high, k = 2's 1.8x at 8
    in flight (band low 1.8 / 1.4 = 1.29) stays, and at 32 in flight no k does (k = 1: 1.1 / 1.4 = 0.79): the
    schedule runs k = 0 from 32, the printed schedule is that, and the first lines say so and why."""
    from simulator.paysoff import command as paysoff
    from simulator.sweep.executors import LocalExecutor
    from simulator.paysoff.runner import run_paysoff

    checks = _checks_up_to_40_pct_high()
    args = paysoff.build_parser().parse_args(["--acceptance", "0.7", "--concurrency", "8,32", "--k-range", "1-2", "--max-num-seqs", "64"])
    spec = paysoff.spec_from_args(args)
    output = run_paysoff(spec, LocalExecutor(jobs=1, progress=False), run=_fake_runs(SPEEDUPS), checks=checks)
    entry = output.schedules["schedules"][0]
    assert entry["num_speculative_tokens_per_batch_size"] == [[1, 31, 2], [32, 64, 0]]
    by_x = {c["x"]: c for c in entry["comparison"] if c["mode"] == "closed_loop"}
    assert by_x[32]["guarded_best_k"] == 0 and by_x[32]["error_bar"]["high_pct"] == 40.0
    assert by_x[8]["guarded_band_low"] == pytest.approx(1.8 / 1.4, abs=1e-3)
    text = paysoff.format_answer(spec, output, args.limits, args._speculative_input)
    first, second = (flat(paragraph) for paragraph in re.split(r"\n(?=\S)", text)[:2])
    assert first.startswith("Yes: k = 2 up to 31 in flight, off from 32") and "error -5% to +40% from up to 3 check rows" in first
    assert second.startswith("Off where it may lose: 32 in flight (k = 1: 1.10× simulated)")
    # the vllm serve line carries the schedule that was simulated, and the simulated runs ran that table
    assert '"num_speculative_tokens_per_batch_size":[[1,31,2],[32,64,0]]' in text
    assert {r["k_schedule"] for r in output.rows if r["k_schedule"] and not r["drafter_idle"]} == {"[[1,31,2],[32,64,0]]"}
    # the fixed k for a vLLM without a schedule: none stays at or above 1x at 32 in flight
    assert entry["fixed_k_fallback"]["num_speculative_tokens"] == 0


def test_the_recommendation_is_never_worse_than_its_fallback():
    """Issue 33: a schedule whose k = 0 rows still draft (0.8x here) loses to serving without speculation where the
    error bar switched it off.  Gaining at 8 and losing at 32, the answer is the schedule below 32 in flight and no
    speculation from there, with both serve lines; losing at the smallest load, it is no speculation, saying why."""
    from simulator.paysoff import command as paysoff
    from simulator.sweep.executors import LocalExecutor
    from simulator.paysoff.runner import run_paysoff

    checks = _checks_up_to_40_pct_high()
    args = paysoff.build_parser().parse_args(["--acceptance", "0.7", "--concurrency", "8,32", "--k-range", "1-2", "--max-num-seqs", "64"])
    spec = paysoff.spec_from_args(args)
    results = {}
    for idle in (1.0, 0.8):
        output = run_paysoff(spec, LocalExecutor(jobs=1, progress=False), run=_fake_runs(SPEEDUPS, idle=idle), checks=checks)
        results[idle] = output, paysoff.format_answer(spec, output, args.limits, args._speculative_input)
    # a free k = 0: the schedule is at least no speculation everywhere and better at 8, so it is the answer
    assert results[1.0][0].schedules["schedules"][0]["recommended"]["kind"] == "schedule"
    output, text = results[0.8]
    entry = output.schedules["schedules"][0]
    recommended = entry["recommended"]
    assert recommended["kind"] == "schedule_up_to" and recommended["schedule_loses_at"] == [32] and (recommended["up_to"], recommended["from"]) == (8, 32)
    by_x = {c["x"]: c for c in entry["comparison"] if c["mode"] == "closed_loop"}
    assert by_x[32]["schedule_tpot_speedup"] == pytest.approx(0.8) and by_x[32]["fallback_tpot_speedup"] == 1.0
    assert by_x[32]["idle_tpot_speedup"] == pytest.approx(0.8)  # the server at k = 0 everywhere, simulated beside the fixed k
    assert text.startswith("Yes below 32 in flight, no from there: k = 2 up to 31 in flight, off from 32")
    serves = printed_commands(text, "vllm serve")
    assert serves[0] == shlex.split(recommended["serve_command"]) and "--speculative-config" in serves[0]
    assert serves[1] == shlex.split(recommended["plain_serve_command"]) and "--speculative-config" not in serves[1]
    # losing at the smallest load too, no speculation is the answer
    loses_at_8 = {(8, 1): 1.1, (8, 2): 1.05, (32, 1): 1.8, (32, 2): 1.9}
    output = run_paysoff(spec, LocalExecutor(jobs=1, progress=False), run=_fake_runs(loses_at_8, idle=0.8), checks=checks)
    text = paysoff.format_answer(spec, output, args.limits, args._speculative_input)
    recommended = output.schedules["schedules"][0]["recommended"]
    assert recommended["kind"] == "none" and recommended["schedule_loses_at"] == [8]
    assert text.startswith("No: serve without speculation at 8–32 in flight")
    assert "Not the k schedule: the schedule loses to no speculation at 8 in flight (0.80× against 1.00×)" in flat(text)
    assert printed_commands(text, "vllm serve")[0] == shlex.split(recommended["serve_command"]) and "--speculative-config" not in recommended["serve_command"]
    # every figure the answer prints fits 100 columns
    assert max(len(line) for line in text.splitlines()) <= 100
