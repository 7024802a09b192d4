"""``python -m simulator.paysoff``: one deployment's answer, and every bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from repo import REPO_ROOT
from simulator.paysoff import main
from simulator.speculative.acceptance_convert import acceptance_length

SMALL = ["--concurrency", "1,8", "--k-range", "1-2", "--prompt-tokens", "128", "--output-tokens", "32", "--min-requests", "4", "--jobs", "1", "--no-progress"]


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "acme/NoSuchModel-7B", "--acceptance", "0.7"], "--model acme/NoSuchModel-7B: unknown model"),
        (["--device", "tpu9", "--acceptance", "0.7"], "--device tpu9: unknown; use one of"),
        (["--acceptance-length", "4.5", "-k", "3"], "acceptance-length = 4.5 at -k/--at-k = 3 is outside \\[1, 4\\]"),
        (["--acceptance-length", "0.5", "-k", "3"], "is outside \\[1, 4\\]"),
        (["--acceptance-length", "2.0"], "--acceptance-length 2 needs -k K"),
        (["--acceptance", "0.7", "-k", "3"], "-k/--at-k 3: only goes with --acceptance-length"),
        ([], "no acceptance given: add --acceptance-length L -k K"),
        (["--acceptance", "0.7", "--acceptance-length", "2", "-k", "2"], "give one acceptance input"),
        (["--acceptance", "1.7"], "--acceptance = 1.7 must be a probability"),
        (["--acceptance", "0.7", "--concurrency", ","], "--concurrency ',': the grid is empty"),
        (["--acceptance", "0.7", "--concurrency", "", "--request-rate", ","], "--request-rate ',': empty"),
        (["--acceptance", "0.7", "--concurrency", ""], "the grid is empty: give --concurrency"),
        (["--acceptance", "0.7", "--k-range", "3-1"], "--k-range '3-1': not a list of positive integers"),
        (["--acceptance", "0.7", "--concurrency", "1-512"], "\\[512\\] exceed --max-num-seqs 256.*raise --max-num-seqs to 512"),
        (["--acceptance", "0.7", "--concurrency", "1-64", "--max-num-seqs", "32"], "\\[64\\] exceed --max-num-seqs 32"),
        (["--acceptance-per-position", "0.9,0.8", "--k-range", "1-4"], "has 2 rates but --k-range goes to 4"),
        (["--proposer", "eagle3", "--acceptance", "0.7"], "--proposer eagle3 needs --draft-model"),
        (["--acceptance", "0.7", "--draft-tensor-parallel-size", "1"], "--draft-tensor-parallel-size 1: must be 1 or --tensor-parallel-size \\(1\\), and only with a draft"),
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
    assert "k = 1" in out and "k = 2" in out and "best k" in out
    assert "stops paying" in out
    assert "only up to 8 in flight was simulated" in out  # the schedule's rows above the grid are not simulated, and it says so
    config = json.loads(out.split("--speculative-config '", 1)[1].split("'", 1)[0])
    assert config["num_speculative_tokens_per_batch_size"] == answer["num_speculative_tokens_per_batch_size"]
    assert "vllm serve meta-llama/Llama-2-7b-hf --max-num-seqs 256 --max-num-batched-tokens 2048 --speculative-config" in out
    assert "0.24.0" in out and "https://github.com/vllm-project/vllm/pull/32374" in out
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
    assert "iid_rate_from_length" in text and "vllm serve 0.10.1" in text
