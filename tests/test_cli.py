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

from simulator.cli import simulate as cli
from simulator.runs.config import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload
from simulator.runs.results import RunSummary, speedup
from simulator.runs.workloads import spread_closed_loop
from simulator.speculative.acceptance_convert import acceptance_length

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--num-prompts", "6", "--prompt-tokens", "64", "--output-tokens", "24"]


def _parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def _acceptance(*argv):
    """(the acceptance input, its note) the command line ``argv`` asks for, read as the command reads it."""
    from simulator.cli.simulate_args import read_flags

    speculation = read_flags(_parse(*argv)).speculation
    return speculation.acceptance_of(*speculation.checked_kind())


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
    """Speculation and system are the dataclasses' defaults; the workload's lengths are the commands'
    one default (simulator.cli.command.DEFAULT_WORKLOAD, shared with paysoff: issue 33)."""
    from dataclasses import replace

    from simulator.cli.command import DEFAULT_WORKLOAD

    config, note = cli.config_from_args(_parse())
    workload = replace(RunConfig().workload, prompt_tokens=DEFAULT_WORKLOAD.prompt_tokens, output_tokens=DEFAULT_WORKLOAD.output_tokens)
    assert config == RunConfig(workload=workload)
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
    assert "--vllm-version X.Y.Z" in text and "(default: 0.30.0)" in text  # the newest version modelled: its defaults are the scheduler limits


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


# vLLM's own numbers (vllm/engine/arg_utils.py, get_batch_defaults, OPENAI_API_SERVER), written out here
VLLM_DEFAULTS = [("a100", (256, 2048)), ("a100_40gb", (256, 2048)), ("h100", (1024, 8192)), ("H200", (1024, 8192))]


@pytest.mark.parametrize(("device", "limits"), VLLM_DEFAULTS)
@pytest.mark.parametrize("version", ["0.10.1", "0.14.0", "0.24.0", "0.30.0"])
def test_vllm_serve_defaults_by_gpu_and_version(device, limits, version, capsys):
    """Both commands take vllm serve's limits for the GPU and the version they name (python -m
    simulator used 256 / 2048 everywhere), and say where they came from."""
    from simulator.paysoff import command as paysoff

    config, _ = cli.config_from_args(_parse("--device", device, "--vllm-version", version))
    assert (config.batch_size_cap, config.chunk_size) == limits
    args = paysoff.build_parser().parse_args(["--device", device, "--vllm-version", version, "--acceptance", "0.7", "--concurrency", "1,4"])
    spec = paysoff.spec_from_args(args)
    assert (spec.batch_size_cap, spec.chunk_size) == limits
    described = args.limits.describe()
    assert f"--max-num-seqs {limits[0]} (vllm serve {version}'s default on {device.lower()})" in described
    assert f"--max-num-batched-tokens {limits[1]} (vllm serve {version}'s default" in described


def test_given_limits_are_said_to_be_given():
    inputs = cli.inputs_from_args(_parse("--device", "h100", "--max-num-seqs", "128"))
    assert (inputs.config.batch_size_cap, inputs.config.chunk_size) == (128, 8192)
    assert inputs.limits.describe() == (
        "--max-num-seqs 128 (given; vllm serve 0.30.0's default on h100 is 1024), --max-num-batched-tokens 8192 (vllm serve 0.30.0's default on h100)"
    )


@pytest.mark.parametrize(("version", "engine"), [("0.10.1", "vllm-0.10.1"), ("0.11.0", "vllm-0.11.0"), ("0.12.0", "vllm-0.11.0"), ("v0.23.0", "vllm-0.19.0"),
                                               ("v0.24.0", "vllm-0.24.0"), ("0.28.0", "vllm-0.24.0"), ("0.29.0", "vllm-0.29.0"), ("0.30.2", "vllm-0.30.0")])
def test_the_vllm_version_picks_the_engine_profile(version, engine):
    config, _ = cli.config_from_args(_parse("--vllm-version", version))
    assert config.engine == engine


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


def test_every_device_flag_takes_its_default_and_its_list_from_the_device_table(monkeypatch):
    """The default GPU and the GPUs --help lists come from simulator/profiles/devices.toml alone
    (simulator.profiles.hardware): a GPU added to the table is listed by every command, with no
    help string to edit; the printed default is still the A100."""
    from simulator.paysoff import command as paysoff
    from simulator.profiles import hardware
    from simulator.validation.cli import build_parser as validation_parser

    assert hardware.DEFAULT_DEVICE in hardware.device_names()
    table = {**hardware.known_devices(), "gpu_x": hardware.get_device("h100")}
    monkeypatch.setattr(hardware, "known_devices", lambda path=hardware.DEVICES_FILE: table)
    steps = validation_parser()._subparsers._group_actions[0].choices
    parsers = {"simulator": cli.build_parser(), "paysoff": paysoff.build_parser(), **{f"validation {n}": steps[n] for n in ("simulate", "bench", "fit")}}
    for name, parser in parsers.items():
        device = next(a for a in parser._actions if "--device" in a.option_strings)
        assert device.default == "a100", name
        assert all(gpu in device.help for gpu in table), (name, device.help)
    assert RunConfig().device == "a100"


def test_seed_sweep_keeps_its_scheduler_limits():
    """The simulator's defaults became vLLM's; the published sweep pins what it always ran with."""
    from simulator.sweep.runner import expand, expand_progress
    from simulator.specs.sweep import load_spec

    spec = load_spec(ROOT / "data" / "sweep.toml")
    configs = expand(spec) + expand_progress(spec)
    assert {(c.batch_size_cap, c.chunk_size) for c in configs} == {(128, 512)}


# --- acceptance input ---------------------------------------------------------------------


@pytest.mark.parametrize(("k", "length"), [(4, 2.6), (1, 1.5), (3, 4.0), (2, 1.0)])
def test_acceptance_length_becomes_the_iid_rate_with_that_length(k, length):
    acceptance, note = _acceptance("-k", str(k), "--acceptance-length", str(length))
    rate = acceptance.rate
    assert acceptance.per_position is None
    assert acceptance_length((rate,) * k) == pytest.approx(length, abs=1e-9)
    assert f"{rate:.4f}" in note and f"k = {k}" in note


@pytest.mark.simulation
def test_a_run_says_which_rate_it_ran_with(capsys):
    code, out, _ = _main(capsys, *SMALL, "-k", "4", "--acceptance-length", "2.6", "--max-num-seqs", "128", "--max-num-batched-tokens", "512")
    assert code == 0
    rate = _acceptance("-k", "4", "--acceptance-length", "2.6")[0].rate
    assert f"i.i.d. rate {rate:.4f}" in out and "mean acceptance length 2.6 at k = 4" in out
    assert "Acceptance rate (%):" in out and "Acceptance length:" in out


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--acceptance", "0.7"], ["--acceptance 0.7 without speculation (-k 0)", "add -k N"]),
        (["-k", "0", "--acceptance", "0.7"], ["without speculation (-k 0)"]),
        (["--acceptance-length", "2.5"], ["--acceptance-length 2.5 without speculation"]),
        (["-k", "3"], ["-k 3: speculation needs an acceptance", "--acceptance RATE", "--acceptance-length L", "--acceptance-per-position"]),
        (["-k", "4", "--acceptance-length", "6"], ["--acceptance-length 6 at -k 4 is outside [1, 5]", "counts the bonus token"]),
        (["-k", "4", "--acceptance-length", "0.5"], ["--acceptance-length 0.5 at -k 4"]),
        (["-k", "2", "--acceptance", "0.7", "--acceptance-length", "2"], ["--acceptance and --acceptance-length: give one acceptance"]),
        (["-k", "2", "--acceptance", "1.5"], ["--acceptance 1.5: must be a probability in [0, 1]"]),
        (["-k", "2", "--acceptance-per-position", "0.9,x"], ["--acceptance-per-position '0.9,x'"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle"], ["--proposer eagle needs --draft-model"]),
        (["-k", "-1", "--acceptance", "0.5"], ["-k", "-1 must be >= 0"]),
        (["--num-prompts", "0"], ["--num-prompts", "0 must be a positive integer"]),
        (["--max-num-seqs", "0"], ["--max-num-seqs", "0 must be a positive integer"]),
        (["--random-range-ratio", "1.2"], ["--random-range-ratio 1.2: must be in [0, 1)"]),
        (["--max-concurrency", "4", "--request-rate", "2"], ["--max-concurrency 4 and --request-rate 2: arrivals both paced and capped are not modelled"]),
        (["--k-schedule", "[[1,16,4],[17,128,2]]", "--acceptance", "0.7"], ["ends at batch size 128, below --max-num-seqs 256"]),
        (["--profile-dir", "no/such/folder"], ["--profile-dir no/such/folder: not a directory"]),
        (["-k", "3", "--acceptance-per-position", "0.8,0.7"], ["--acceptance-per-position 0.8,0.7: 2 rate(s), but k = 3"]),
        # one mistake (-k 2 where 4 was meant) trips two rules: the acceptance is judged before the schedule's rows
        (["-k", "2", "--k-schedule", "[[1,4096,4]]", "--acceptance-length", "4.5"], ["--acceptance-length 4.5 at -k 2 is outside [1, 3]"]),
        (["-k", "2", "--acceptance", "0.7", "--proposal-probability", "1.5"], ["--proposal-probability 1.5: must be in [0, 1]"]),
        (["--engine-overhead-ms", "-1"], ["--engine-overhead-ms -1: must be >= 0"]),
        (["--draft-pass-overhead-ms", "-0.1"], ["--draft-pass-overhead-ms -0.1: must be >= 0"]),
        (["-k", "2", "--acceptance", "0.7", "--attention", "exact"], ["--attention", "invalid choice: 'exact'"]),
        (["--model", "Qwen/Qwen3-30B-A3B", "--device", "h200", "--enable-expert-parallel", "--data-parallel-size", "2", "--proposer", "eagle3",
          "--draft-model", "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge", "-k", "3", "--k-schedule", "[[1,1024,3]]", "--acceptance", "0.7"],
         ["--k-schedule with --data-parallel-size 2", "runs the static -k 3"]),
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
    a = spread_closed_loop(8, 200, 1000, 100, 0.25, seed=3)
    assert a == spread_closed_loop(8, 200, 1000, 100, 0.25, seed=3)
    assert a != spread_closed_loop(8, 200, 1000, 100, 0.25, seed=4)
    prompts, outputs = np.array(a.prompt_tokens), np.array(a.output_tokens)
    assert prompts.min() >= 750 and prompts.max() <= 1250 and outputs.min() >= 75 and outputs.max() <= 125
    assert abs(prompts.mean() - 1000) < 25  # uniform around the given length
    assert spread_closed_loop(8, 20, 1000, 100, 0.0, seed=3) == ClosedLoopWorkload.fixed(8, 20, 1000, 100)


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


# --- issue 26 §3: the command as a vLLM user meets it -----------------------------------------


def test_request_rate_inf_is_every_request_at_once_and_with_max_concurrency_the_closed_loop():
    config, _ = cli.config_from_args(_parse("--request-rate", "inf", "--num-prompts", "12"))
    assert isinstance(config.workload, ClosedLoopWorkload) and config.workload.concurrency == 12  # all 12 released at t = 0
    config, _ = cli.config_from_args(_parse("--request-rate", "inf", "--max-concurrency", "4", "--num-prompts", "12"))
    assert isinstance(config.workload, ClosedLoopWorkload) and config.workload.concurrency == 4
    assert config == cli.config_from_args(_parse("--max-concurrency", "4", "--num-prompts", "12"))[0]


def test_dataset_name_random_is_the_default_dataset():
    assert cli.config_from_args(_parse("--dataset-name", "random"))[0] == cli.config_from_args(_parse())[0]


def test_the_max_concurrency_check_follows_the_gpus_max_num_seqs():
    config, _ = cli.config_from_args(_parse("--device", "h100", "--max-concurrency", "300"))  # vllm serve runs 1024 there
    assert config.workload.concurrency == 300 and config.batch_size_cap == 1024


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--max-concurrency", "300", "--max-num-seqs", "256"], ["--max-concurrency 300 exceeds --max-num-seqs 256:", "raise --max-num-seqs to 300 or lower --max-concurrency to 256"]),
        (["--max-concurrency", "300"], ["--max-concurrency 300 exceeds --max-num-seqs 256 (vllm serve 0.30.0's default on a100)"]),
        (["--dataset-name", "sharegpt"], ["--dataset-name sharegpt: the simulator draws vllm bench serve's random dataset", "--trace FILE"]),
        (["--vllm-version", "0.31.0"], ["--vllm-version 0.31.0: newer than vLLM 0.30.0, the newest release the simulator models", "give 0.30.0 or older"]),
        (["--request-rate", "0"], ["--request-rate", "0 must be > 0 requests per second, or inf"]),
        (["--tensor-parallel-size", "3"], ["--tensor-parallel-size 3: meta-llama/Llama-2-7b-hf cannot be tensor-parallel over 3 GPUs"]),
        (["--model", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"], ["--model yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: an EAGLE-3 head, a draft network", "--proposer eagle3 and --draft-model yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]),
        (["--prompt-tokens", "5", "--random-input-len", "6"], ["--prompt-tokens and --random-input-len both set --prompt-tokens"]),
        (["--seed", "3", "--acceptance-seed", "4"], ["--seed and --acceptance-seed both set --acceptance-seed"]),
        (["--vllm-version", "0.9.2"], ["--vllm-version 0.9.2: older than vLLM 0.10.1"]),
        (["--vllm-version", "latest"], ["--vllm-version latest: not a vLLM version"]),
        (["--device", "tpu9"], ["--device tpu9: unknown; use one of"]),
    ],
)
def test_more_bad_input_exits_2_with_one_line_naming_the_flags(argv, needles, capsys, tmp_path):
    out = tmp_path / "out.json"
    code, stdout, stderr = _main(capsys, *argv, "--num-prompts", "4", "--json", str(out))
    lines = [line for line in stderr.splitlines() if not line.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    for field in ("tensor_parallel_size =", "model =", "proposer =", "draft_model ="):
        assert field not in lines[0]
    assert stdout == "" and not out.exists()


@pytest.mark.parametrize("rows", ["100,-5\n", "100,20\n7,xyz\n"])
def test_a_trace_row_error_shows_the_files_values_not_numpys(rows, capsys, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + rows)
    code, _, stderr = _main(capsys, "--trace", str(trace), "--num-prompts", "4")
    bad = rows.strip().splitlines()[-1].split(",")
    assert code == 2 and f"num_prefill_tokens = {bad[0]}, num_decode_tokens = {bad[1]};" in stderr
    assert "np." not in stderr and "int64" not in stderr


def test_the_seed_alias_says_what_it_seeds(capsys):
    assert _parse("--seed", "3").acceptance_seed == 3
    assert "use --acceptance-seed (it seeds the acceptance draws; the workload's seed is --workload-seed)" in capsys.readouterr().err


LLAMA31_JSON = ROOT / "simulator" / "models" / "data" / "meta-llama--Llama-3.1-8B-Instruct.json"


def _local_model(tmp_path, name_or_path):
    folder = tmp_path / "my-llama"
    folder.mkdir()
    config = json.loads(LLAMA31_JSON.read_text())
    if name_or_path is None:
        config.pop("_name_or_path")
    else:
        config["_name_or_path"] = name_or_path
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.mark.parametrize(("name_or_path", "served", "expected"), [
    ("acme/Llama-3.1-8B-Finetune", None, "acme/Llama-3.1-8B-Finetune"),  # the config's _name_or_path
    ("acme/Llama-3.1-8B-Finetune", "my-llama", "my-llama"),  # --served-model-name wins
    (None, None, "LOCAL"),  # nothing better to name: the path as given
])
def test_the_printed_vllm_serve_line_names_the_model_as_vllm_loads_it(name_or_path, served, expected, tmp_path):
    model = _local_model(tmp_path, name_or_path)
    argv = ["--model", model, "--device", "h100", "-k", "2", "--acceptance", "0.7"] + (["--served-model-name", served] if served else [])
    line = cli.serve_command(cli.inputs_from_args(_parse(*argv)))
    assert line.startswith(f"vllm serve {model if expected == 'LOCAL' else expected} --max-num-seqs 1024 --max-num-batched-tokens 8192 --speculative-config ")
    assert json.loads(line.split("--speculative-config '", 1)[1].rstrip("'")) == {"method": "ngram", "prompt_lookup_max": 5, "num_speculative_tokens": 2}


def _fake_result(config):
    """A result with made-up numbers, as the cache would hold it: what a run from the cache prints
    must be these numbers, not a simulation's."""
    from simulator.runs.results import RunResult, RunSummary

    n = config.workload.num_requests
    frame = pd.DataFrame({
        "request_id": range(n), "arrival_s": [0.25 * i for i in range(n)], "prompt_tokens": [64] * n, "output_tokens": [24] * n,
        "ttft_s": [0.123] * n, "tpot_s": [0.0456] * n, "e2e_s": [1.5] * n, "restarts": [0] * n, "verify_steps": [0] * n,
        "proposed_tokens": [0] * n, "accepted_tokens": [0] * n,
    })
    values = {name: 0.5 for name in RunSummary.__dataclass_fields__}
    values.update(num_requests=n, total_input_tokens=64 * n, total_output_tokens=24 * n, proposed_tokens=0, accepted_tokens=0, verify_steps=0,
                  preemptions=0, peak_kv_blocks=3, kv_blocks_total=1000, forward_passes=10, ttft_mean_s=0.123, tpot_p50_s=0.0456,
                  realized_acceptance_rate=math.nan, mean_acceptance_length=math.nan)
    provenance = {"profile_source": "made-up", "simulator_source_hash": "0123456789abcdef"}
    return RunResult(config=config, requests=frame, summary=RunSummary(**values), provenance=provenance)


def test_a_single_run_comes_from_the_result_cache(capsys, tmp_path):
    """The unit tier refuses any simulation: the answer can only come from the cache, keyed by the
    resolved run (a run with another seed is a miss)."""
    from simulator.runs import cache

    argv = [*SMALL, "--request-rate", "8", "--cache-dir", str(tmp_path / "cache")]
    config, _ = cli.config_from_args(_parse(*argv))
    cache.store_result(config, _fake_result(config))
    code, out, err = _main(capsys, *argv, "--requests-csv", str(tmp_path / "r.csv"))
    assert code == 0 and "from the result cache" in err
    assert re.search(r"Mean TTFT \(ms\):\s+123\.00", out) and re.search(r"Median TPOT \(ms\):\s+45\.60", out)
    assert "profile_source=made-up" in out
    assert pd.read_csv(tmp_path / "r.csv")["tpot_s"].tolist() == [0.0456] * 6
    other, _ = cli.config_from_args(_parse(*argv, "--acceptance-seed", "7"))
    assert cache.load_result(other) is None


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "simulate_cached", interrupted)
    out = tmp_path / "out.json"
    code, stdout, stderr = _main(capsys, *SMALL, "--json", str(out), "--requests-csv", str(tmp_path / "r.csv"))
    assert code == 130 and len(stderr.strip().splitlines()) == 1 and stderr.startswith("interrupted: python -m simulator stopped")
    assert stdout == "" and not out.exists() and not (tmp_path / "r.csv").exists()


@pytest.mark.simulation
def test_a_repeated_run_is_byte_identical_and_cached(capsys, tmp_path):
    argv = [*SMALL, "--max-concurrency", "3", "--random-range-ratio", "0.3", "-k", "2", "--acceptance", "0.7", "--cache-dir", str(tmp_path / "cache")]
    outputs = []
    for i in (1, 2):
        code, out, err = _main(capsys, *argv, "--json", str(tmp_path / f"{i}.json"), "--requests-csv", str(tmp_path / f"{i}.csv"))
        assert code == 0
        outputs.append((out, (tmp_path / f"{i}.json").read_bytes(), (tmp_path / f"{i}.csv").read_bytes(), "from the result cache" in err))
    assert outputs[0][:3] == outputs[1][:3] and (outputs[0][3], outputs[1][3]) == (False, True)
