"""``python -m simulator`` as a vLLM user meets it: flag names, defaults, acceptance input, summary, bad input.

Most checks parse flags without simulating; the few runs are a handful of short requests.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator import cli
from simulator.config import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    ClosedLoopWorkload,
    ExplicitWorkload,
    RunConfig,
    SpeculationConfig,
)
from simulator.results import RunSummary, speedup
from simulator.speculative.acceptance_convert import acceptance_length

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--num-prompts", "6", "--prompt-tokens", "64", "--output-tokens", "24"]


def _parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def _main(capsys, *argv):
    """(exit code, stdout, stderr) of the CLI run in this process."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


# --- defaults and names -------------------------------------------------------------------


def test_defaults_are_the_dataclasses_defaults():
    config, note = cli.config_from_args(_parse())
    assert config == RunConfig()  # workload, speculation and system: nothing repeated in the CLI
    assert note is None
    assert (config.batch_size_cap, config.chunk_size) == (DEFAULT_MAX_NUM_SEQS, DEFAULT_MAX_NUM_BATCHED_TOKENS) == (256, 2048)


def test_help_shows_every_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside a default such as a model name
    parser = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for action in parser._actions:
        if not (action.default is None or action.default is False or action.default == "==SUPPRESS=="):
            assert f"(default: {action.default})" in text, action.option_strings
    for flag in ("--max-num-seqs", "--max-num-batched-tokens", "--num-prompts", "--acceptance-seed", "--workload-seed", "--acceptance-length"):
        assert flag in text
    assert "vLLM 0.10.1" in text  # the version whose defaults the scheduler limits are


@pytest.mark.parametrize(
    ("old", "new", "dest", "value"),
    [
        ("--requests", "--num-prompts", "num_prompts", 7),
        ("--rate", "--request-rate", "request_rate", 3.0),
        ("--concurrency", "--max-concurrency", "max_concurrency", 5),
        ("--seed", "--acceptance-seed", "acceptance_seed", 9),
        ("--batch-size-cap", "--max-num-seqs", "max_num_seqs", 64),
        ("--chunk-size", "--max-num-batched-tokens", "max_num_batched_tokens", 1024),
    ],
)
def test_old_flag_names_still_work_and_warn(old, new, dest, value, capsys):
    assert getattr(_parse(old, str(value)), dest) == value
    assert f"{old} is deprecated" in capsys.readouterr().err
    assert getattr(_parse(new, str(value)), dest) == value
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("device", "limits"), [("a100", (256, 2048)), ("a100_40gb", (256, 2048)), ("h100", (1024, 8192)), ("H200", (1024, 8192))])
def test_vllm_serve_defaults_by_gpu(device, limits):
    from simulator.config import vllm_serve_scheduler_defaults

    assert vllm_serve_scheduler_defaults(device) == limits
    config, _ = cli.config_from_args(_parse("--device", device))
    note = cli.limits_note(config)
    assert (note is None) == (limits == (256, 2048))
    if note:
        assert f"--max-num-seqs {limits[0]} --max-num-batched-tokens {limits[1]}" in note


def test_draft_pass_overhead_reaches_the_config():
    config, _ = cli.config_from_args(_parse("-k", "2", "--acceptance", "0.7", "--proposer", "eagle", "--draft-model", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
                                            "--model", "meta-llama/Llama-3.1-8B-Instruct", "--draft-pass-overhead-ms", "0.5"))
    assert config.speculation.draft_pass_overhead_ms == 0.5
    assert cli.config_from_args(_parse())[0].speculation.draft_pass_overhead_ms == SpeculationConfig().draft_pass_overhead_ms


def test_scheduler_flags_reach_the_config():
    config, _ = cli.config_from_args(_parse("--max-num-seqs", "64", "--max-num-batched-tokens", "1024"))
    assert (config.batch_size_cap, config.chunk_size) == (64, 1024)


@pytest.mark.parametrize("name", ["A100", "h100", "H200", " a100 "])
def test_device_names_match_case_insensitively(name):
    config, _ = cli.config_from_args(_parse("--device", name))
    assert config.device == name.strip().lower()


def test_seed_sweep_keeps_its_scheduler_limits():
    """The simulator's defaults became vLLM's; the published sweep pins what it always ran with."""
    from simulator.sweep.runner import expand, expand_progress
    from simulator.sweep.spec import load_spec

    spec = load_spec(ROOT / "data" / "sweep.toml")
    configs = expand(spec) + expand_progress(spec)
    assert {(c.batch_size_cap, c.chunk_size) for c in configs} == {(128, 512)}


# --- acceptance input ---------------------------------------------------------------------


@pytest.mark.parametrize(("k", "length"), [(4, 2.6), (1, 1.5), (3, 4.0), (2, 1.0)])
def test_acceptance_length_becomes_the_iid_rate_with_that_length(k, length):
    rate, vector, note = cli.acceptance_from_args(_parse("-k", str(k), "--acceptance-length", str(length)))
    assert vector is None
    assert acceptance_length((rate,) * k) == pytest.approx(length, abs=1e-9)
    assert f"{rate:.4f}" in note and f"k = {k}" in note


@pytest.mark.simulation
def test_a_run_says_which_rate_it_ran_with(capsys):
    code, out, _ = _main(capsys, *SMALL, "-k", "4", "--acceptance-length", "2.6", "--max-num-seqs", "128", "--max-num-batched-tokens", "512")
    assert code == 0
    rate, _, _ = cli.acceptance_from_args(_parse("-k", "4", "--acceptance-length", "2.6"))
    assert f"ran with: per-token rate {rate:.4f}" in out and "mean acceptance length at k = 4 is 2.6" in out
    assert "Acceptance rate (%):" in out and "Acceptance length:" in out


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--acceptance", "0.7"], ["--acceptance 0.7 without speculation (-k 0)", "add -k N"]),
        (["-k", "0", "--acceptance", "0.7"], ["without speculation (-k 0)"]),
        (["--acceptance-length", "2.5"], ["--acceptance-length 2.5 without speculation"]),
        (["-k", "3"], ["-k 3: speculation needs an acceptance", "--acceptance RATE", "--acceptance-length L", "--acceptance-per-position"]),
        (["-k", "4", "--acceptance-length", "6"], ["--acceptance-length 6 at -k 4: must be in [1, k + 1 = 5]"]),
        (["-k", "4", "--acceptance-length", "0.5"], ["--acceptance-length 0.5 at -k 4"]),
        (["-k", "2", "--acceptance", "0.7", "--acceptance-length", "2"], ["--acceptance and --acceptance-length: give one acceptance"]),
        (["-k", "2", "--acceptance", "1.5"], ["--acceptance 1.5: must be a per-token rate in [0, 1]"]),
        (["-k", "2", "--acceptance-per-position", "0.9,x"], ["--acceptance-per-position '0.9,x'"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle"], ["--proposer eagle needs --draft-model"]),
        (["-k", "-1", "--acceptance", "0.5"], ["-k", "-1 must be >= 0"]),
        (["--num-prompts", "0"], ["--num-prompts", "0 must be a positive integer"]),
        (["--max-num-seqs", "0"], ["--max-num-seqs", "0 must be a positive integer"]),
        (["--random-range-ratio", "1.2"], ["--random-range-ratio 1.2: must be in [0, 1)"]),
        (["--max-concurrency", "4", "--request-rate", "2"], ["give one"]),
        (["--k-schedule", "[[1,16,4],[17,128,2]]", "--acceptance", "0.7"], ["ends at batch size 128, below --max-num-seqs 256"]),
        (["--profile-dir", "no/such/folder"], ["--profile-dir no/such/folder: not a directory"]),
        (["-k", "3", "--acceptance-per-position", "0.8,0.7"], ["--acceptance-per-position 0.8,0.7: 2 rate(s), but k = 3"]),
        (["-k", "2", "--acceptance", "0.7", "--proposal-probability", "1.5"], ["--proposal-probability 1.5: must be in [0, 1]"]),
        (["--engine-overhead-ms", "-1"], ["--engine-overhead-ms -1: must be >= 0"]),
        (["--draft-pass-overhead-ms", "-0.1"], ["--draft-pass-overhead-ms -0.1: must be >= 0"]),
        (["-k", "2", "--acceptance", "0.7", "--attention", "exact"], ["--attention", "invalid choice: 'exact'"]),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_flags(argv, needles, capsys, tmp_path):
    out = tmp_path / "out.json"
    code, stdout, stderr = _main(capsys, *argv, "--json", str(out))
    assert code == 2
    lines = [line for line in stderr.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    for field in ("acceptance_rate =", "num_speculative_tokens =", "batch_size_cap =", "profile_dir ="):
        assert field not in lines[0]  # flags, not the code's field names
    assert stdout == "" and not out.exists()


# --- the summary --------------------------------------------------------------------------


@pytest.mark.simulation
def test_summary_without_speculation_says_so(capsys, tmp_path):
    out = tmp_path / "run.json"
    code, stdout, _ = _main(capsys, *SMALL, "--request-rate", "8", "--json", str(out))
    assert code == 0
    assert "speculation off" in stdout and not re.search(r"\bnan\b", stdout, re.IGNORECASE)
    for name in ("Mean TTFT (ms):", "Median TPOT (ms):", "P99 ITL (ms):", "Mean E2EL (ms):", "Request throughput (req/s):", "Total Token throughput (tok/s):"):
        assert name in stdout
    summary = json.loads(out.read_text())["summary"]
    assert summary["realized_acceptance_rate"] is None and "acceptance_rate" not in summary and "restarts" not in summary
    assert summary["request_throughput_req_s"] == pytest.approx(6 / summary["makespan_s"])
    assert summary["total_token_throughput_tok_s"] == pytest.approx(6 * (64 + 24) / summary["makespan_s"])
    # one token per decode step: every request's gaps average to its TPOT, and the lengths are equal
    assert summary["itl_mean_s"] == pytest.approx(summary["tpot_mean_s"], rel=1e-9)
    median_ms = float(next(line for line in stdout.splitlines() if line.startswith("Median TTFT (ms):")).split()[-1])
    assert median_ms == pytest.approx(summary["ttft_p50_s"] * 1e3, abs=0.01)  # printed in ms, as vLLM does


@pytest.mark.simulation
def test_speculative_itl_has_one_gap_per_verify_step():
    """A verify step emits its accepted tokens and the bonus token at once: one ITL gap, as a
    streaming client sees it.  The gaps of a request add up to its E2E - TTFT."""
    import simulator

    workload = ExplicitWorkload(arrival_s=(0.0, 100.0, 200.0), prompt_tokens=(64, 64, 64), output_tokens=(200, 150, 100))
    result = simulator.run(RunConfig(workload=workload, speculation=SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.8)))
    s, frame = result.summary, result.requests
    gaps = (frame.e2e_s - frame.ttft_s).sum() / s.itl_mean_s
    assert gaps == pytest.approx(round(gaps), abs=1e-6)
    # one gap per verify step, plus at most one plain step per request: with one token left
    # there is nothing to propose
    assert s.verify_steps <= round(gaps) <= s.verify_steps + len(frame)
    assert s.itl_mean_s > 2 * s.tpot_mean_s  # mean acceptance length about 3.4 tokens per gap


@pytest.mark.simulation
def test_closed_loop_spread_and_start_up_burst(capsys, tmp_path):
    csv = tmp_path / "requests.csv"
    code, stdout, _ = _main(capsys, *SMALL, "--num-prompts", "10", "--max-concurrency", "4", "--random-range-ratio", "0.5", "--requests-csv", str(csv))
    assert code == 0
    assert "start-up burst: the first 4 requests arrive together at t = 0" in stdout
    frame = pd.read_csv(csv).sort_values("request_id")
    assert frame["startup_burst"].tolist() == [True] * 4 + [False] * 6
    assert (frame.loc[frame.startup_burst, "arrival_s"] == 0).all()
    assert frame["prompt_tokens"].between(32, 96).all() and frame["prompt_tokens"].nunique() > 1
    assert frame["output_tokens"].between(12, 36).all() and frame["output_tokens"].nunique() > 1


def test_closed_loop_spread_is_seeded_and_bounded():
    a = ClosedLoopWorkload.spread(8, 200, 1000, 100, 0.25, seed=3)
    assert a == ClosedLoopWorkload.spread(8, 200, 1000, 100, 0.25, seed=3)
    assert a != ClosedLoopWorkload.spread(8, 200, 1000, 100, 0.25, seed=4)
    prompts, outputs = np.array(a.prompt_tokens), np.array(a.output_tokens)
    assert prompts.min() >= 750 and prompts.max() <= 1250 and outputs.min() >= 75 and outputs.max() <= 125
    assert abs(prompts.mean() - 1000) < 25  # uniform around the given length
    assert ClosedLoopWorkload.spread(8, 20, 1000, 100, 0.0, seed=3) == ClosedLoopWorkload.fixed(8, 20, 1000, 100)


# --- typed results and the one speedup ----------------------------------------------------


def test_summary_has_one_name_per_quantity():
    names = list(RunSummary.__dataclass_fields__)
    assert len(names) == len(set(names))
    assert "acceptance_rate" not in names and "restarts" not in names  # the input rate and the duplicate count
    assert {"realized_acceptance_rate", "preemptions", "itl_p99_s", "ttft_mean_s", "request_throughput_req_s"} <= set(names)


def test_speedup_direction_follows_the_metric():
    base = {"tpot_p50_s": 0.02, "throughput_tok_s": 100.0, "e2e_p50_s": 4.0}
    run = {"tpot_p50_s": 0.01, "throughput_tok_s": 150.0, "e2e_p50_s": 5.0}
    assert speedup(base, run, "tpot_p50_s") == pytest.approx(2.0)
    assert speedup(base, run, "throughput_tok_s") == pytest.approx(1.5)
    assert speedup(base, run, "e2e_p50_s") == pytest.approx(0.8)
    with pytest.raises(ValueError, match="neither a latency"):
        speedup(base, run, "num_requests")


def test_the_sweep_uses_the_speedup_function():
    from simulator.sweep.metrics import with_speedups

    records = [
        {"arrival_rate": 2.0, "num_speculative_tokens": 0, "tpot_p50_s": 0.03},
        {"arrival_rate": 2.0, "num_speculative_tokens": 4, "tpot_p50_s": 0.012},
    ]
    assert [r["tpot_speedup"] for r in with_speedups(records)] == [1.0, speedup(records[0], records[1])]
    assert math.isclose(with_speedups(records)[1]["tpot_speedup"], 2.5)
