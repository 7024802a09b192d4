"""Inputs the harness used to accept and silently reinterpret (issue 26 section 1): each is now
refused with exit 2, one line naming the flag(s) and the fix, and nothing written.

The deprecated-alias check lives in the shared action (simulator/cli/argtypes.py), so it is tested
here on a bare parser and on ``python -m simulator``'s parser too."""

import argparse
import json

import pytest

from simulator.cli.argtypes import DeprecatedAlias
from simulator.validation.cli import main

GENERATE = ["generate", "--num-prompts", "3", "--request-rate", "100"]


def one_line_error(capsys, *needles):
    """Exactly one non-warning line on stderr, naming what it must name, and no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "np." not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def run(args, tmp_path, monkeypatch):
    """main(args) in tmp_path; argparse's own refusals exit through SystemExit."""
    monkeypatch.chdir(tmp_path)
    try:
        return main(args)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize(
    "args, names",
    [
        (["generate", "--out", "w.jsonl", "--num-prompts", "5", "--num-requests", "6"], ("--num-prompts", "--num-requests", "pass only --num-prompts")),
        (["generate", "--out", "w.jsonl", "--num-requests", "6", "--num-prompts", "5"], ("--num-prompts", "--num-requests", "pass only --num-prompts")),
        (["generate", "--out", "w.jsonl", "--seed", "3", "--workload-seed", "4"], ("--seed", "--workload-seed", "pass only --workload-seed")),
        (["generate", "--out", "w.jsonl", "--request-rate", "3", "--rate", "4"], ("--rate", "--request-rate", "pass only --request-rate")),
        (["simulate", "--workload", "w", "--calibration", "c", "--out", "o", "--seed", "1", "--acceptance-seed", "2"], ("--seed", "--acceptance-seed", "pass only --acceptance-seed")),
        (["replay", "--workload", "w", "--out", "o", "--base-url", "http://a", "--url", "http://b"], ("--url", "--base-url", "pass only --base-url")),
        (["replay", "--workload", "w", "--out", "o", "--base-url", "http://a", "--max-concurrency", "2", "--concurrency", "3"], ("--concurrency", "--max-concurrency")),
    ],
)
def test_a_deprecated_alias_with_its_new_flag_is_refused_naming_both(tmp_path, monkeypatch, capsys, args, names):
    assert run(args, tmp_path, monkeypatch) == 2
    one_line_error(capsys, *names)
    assert not any(tmp_path.iterdir())


def test_the_shared_action_refuses_an_alias_with_its_flag_in_any_parser(capsys):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--new", "--old", dest="value", action=DeprecatedAlias, type=int, default=0)
    assert parser.parse_args(["--old", "1"]).value == 1  # alone, the old name still works (with a warning)
    assert parser.parse_args(["--new", "1", "--new", "2"]).value == 2  # the same name twice: argparse's rule, the last wins
    assert parser.parse_args(["--new", "3"]).value == 3  # the parser is reusable: nothing carried over from earlier parses
    capsys.readouterr()
    with pytest.raises(SystemExit):
        parser.parse_args(["--new", "1", "--old", "2"])
    assert "--new and --old both set --new (--old is its deprecated name): pass only --new" in capsys.readouterr().err


def test_python_m_simulator_gets_the_same_refusal(capsys):
    from simulator.cli.simulate import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--num-prompts", "5", "--requests", "6"])
    assert exit_.value.code == 2
    assert "pass only --num-prompts" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, names",
    [
        (["--lengths", "fixed", "--prompt-range", "16", "32", "--output-range", "4", "8"], ("--lengths fixed", "--prompt-range and --output-range would be ignored", "--lengths uniform")),
        (["--lengths", "fixed", "--output-range", "4", "8"], ("--lengths fixed", "--output-range would be ignored")),
        (["--prompt-range", "16", "32", "--output-range", "4", "8", "--output-tokens", "9"], ("--lengths uniform", "--output-tokens would be ignored")),
        (["--trace", "TRACE", "--prompt-tokens", "64"], ("--trace takes both lengths", "--prompt-tokens would be ignored", "drop it")),
        (["--trace", "TRACE", "--prompt-range", "16", "32"], ("--trace takes both lengths", "--prompt-range")),
        (["--lengths", "uniform", "--trace", "TRACE", "--prompt-range", "16", "32", "--output-range", "4", "8"], ("--trace applies to --lengths trace",)),
        (["--prompt-tokens", "5000000"], ("--prompt-tokens 5000000", "beyond the harness's bound of 1048576 tokens per request")),
        (["--prompt-range", "1", "5000000", "--output-range", "1", "2"], ("--prompt-range", "bound of 1048576")),
        (["--num-prompts", "100000", "--prompt-tokens", "1024"], ("--num-prompts 100000", "bound of 16777216")),
        (["--trace", "TRACE", "--max-total-tokens", "5000000"], ("--max-total-tokens 5000000", "bound of 1048576")),
    ],
)
def test_generate_refuses_flags_it_would_ignore_and_unbounded_lengths(tmp_path, monkeypatch, capsys, extra, names):
    trace = tmp_path / "trace.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,20\n")
    args = GENERATE + ["--out", str(tmp_path / "w.jsonl")] + [str(trace) if a == "TRACE" else a for a in extra]
    assert run(args, tmp_path, monkeypatch) == 2
    one_line_error(capsys, *names)
    assert not (tmp_path / "w.jsonl").exists()


@pytest.mark.parametrize(
    "rows, message",
    [
        ("100,20\n100,-5\n", "data row 2 has num_prefill_tokens = 100, num_decode_tokens = -5; lengths must be integers >= 1"),
        ("100,20\n100,20.5\n300,4\n", "data row 2 has num_prefill_tokens = 100, num_decode_tokens = 20.5;"),
        ("100,20\n,7\n", "data row 2 has num_prefill_tokens = (empty), num_decode_tokens = 7;"),
    ],
    ids=["negative", "fraction", "missing"],
)
def test_a_broken_trace_row_is_an_error_naming_the_row(tmp_path, monkeypatch, capsys, rows, message):
    """It used to be dropped silently (the skip policy); a broken trace is not a row to leave out."""
    trace = tmp_path / "trace.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + rows)
    assert run(["generate", "--out", str(tmp_path / "w.jsonl"), "--trace", str(trace), "--max-total-tokens", "4096"], tmp_path, monkeypatch) == 2
    one_line_error(capsys, str(trace), message)
    assert not (tmp_path / "w.jsonl").exists()


def test_trace_rows_beyond_the_context_are_skipped_counted_and_reported(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,20\n4000,200\n200,10\n5000,1\n")
    out = tmp_path / "w.jsonl"
    assert run(["generate", "--out", str(out), "--num-prompts", "8", "--trace", str(trace), "--max-total-tokens", "4096"], tmp_path, monkeypatch) == 0
    err = capsys.readouterr().err
    assert f"warning: skipped 2 of 4 rows of {trace}: longer than --max-total-tokens 4096" in err
    header = json.loads(out.read_text().splitlines()[0])
    assert header["generator"]["trace_rows_skipped"] == 2 and header["generator"]["trace_rows"] == 2
    lengths = {(json.loads(line)["prompt_tokens"], json.loads(line)["output_tokens"]) for line in out.read_text().splitlines()[1:]}
    assert lengths <= {(100, 20), (200, 10)}


def test_a_trace_row_beyond_the_bound_without_a_context_names_the_row_and_the_flag(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,20\n2000000,5\n")
    assert run(["generate", "--out", str(tmp_path / "w.jsonl"), "--trace", str(trace)], tmp_path, monkeypatch) == 2
    one_line_error(capsys, "data row 2 needs 2000005 tokens", "--max-total-tokens")


@pytest.mark.parametrize("extra", [["--draft-model", "JackFram/llama-68m"], ["--proposer", "ngram", "--draft-model", "JackFram/llama-68m"]])
def test_an_ngram_proposer_with_a_draft_model_is_refused(tmp_path, monkeypatch, capsys, extra):
    assert run(["simulate", "--workload", "w.jsonl", "--calibration", "c.json", "--out", str(tmp_path / "sim")] + extra, tmp_path, monkeypatch) == 2
    one_line_error(capsys, "--draft-model JackFram/llama-68m: --proposer ngram uses no draft model", "drop it")
    assert not (tmp_path / "sim").exists()
