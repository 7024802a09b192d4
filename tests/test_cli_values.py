"""``python -m simulator`` reads its command line once into values, and the rules work on the values.

No simulation: the workload, the server and the speculation are checked as values, against numbers
worked out by hand or read back from the printed ``vllm bench serve`` line.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

from simulator.cli import simulate as cli
from simulator.cli import vllm_serve
from simulator.cli.command import DEFAULT_WORKLOAD
from simulator.cli.server_flags import with_engine_profile
from simulator.cli.simulate_args import read_flags

CLI = Path(cli.__file__).parent
# the modules that turn python -m simulator's flags into a run, and the functions there that may hold the Namespace
COMMAND_MODULES = ("simulate.py", "simulate_args.py", "server_flags.py", "speculation_flags.py", "bench_workload.py")
NAMESPACE_READERS = {("simulate.py", "config_from_args"), ("simulate.py", "inputs_from_args"), ("simulate.py", "_main"),
                     ("simulate_args.py", "read_flags"), ("simulate_args.py", "expand_speculative_config")}


def _flags(*argv):
    return read_flags(cli.build_parser().parse_args(list(argv)))


def test_only_the_reader_holds_the_namespace():
    """Below the entry points and the reader, every function takes values: a rule that asks for
    ``args`` again would thread the Namespace back through the command."""
    holders = set()
    for name in COMMAND_MODULES:
        for node in ast.walk(ast.parse((CLI / name).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "args" in [a.arg for a in node.args.args + node.args.kwonlyargs]:
                holders.add((name, node.name))
    assert holders == NAMESPACE_READERS


def test_the_flags_are_read_as_typed():
    flags = _flags("--device", "h100", "--no-lm-head", "--tensor-parallel-size", "2", "--prompt-lookup-max", "3", "-k", "2", "--acceptance", "0.7")
    assert (flags.server.max_num_seqs, flags.server.max_num_batched_tokens, flags.server.vllm_version) == (None, None, None)  # left to vllm serve
    assert flags.server.costs.lm_head is False and flags.server.parallelism.tensor == 2
    assert flags.speculation.options == (("prompt_lookup_max", 3),)
    assert (flags.speculation.k, flags.speculation.acceptance, flags.speculation.acceptance_length) == (2, 0.7, None)


def test_a_speculative_config_is_read_as_the_flags_it_sets():
    config = '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}'
    speculation = _flags("--model", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", config, "--acceptance", "0.7").speculation
    assert (speculation.proposer, speculation.k, speculation.draft_model) == ("eagle3", 3, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")


def _bench_flags(line: str) -> dict:
    words = shlex.split(line)
    return {word: words[i + 1] for i, word in enumerate(words) if word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--")}


SPREAD = f"{DEFAULT_WORKLOAD.closed_loop_range_ratio:g}"  # a closed loop's lengths unless --random-range-ratio says otherwise


@pytest.mark.parametrize(("argv", "line", "concurrency", "spread"), [
    ([], {"--request-rate": "the run's"}, None, False),  # Poisson arrivals at the default rate, fixed lengths
    (["--request-rate", "3", "--random-range-ratio", "0.2"], {"--request-rate": "3", "--random-range-ratio": "0.2"}, None, True),
    (["--max-concurrency", "4"], {"--request-rate": "inf", "--max-concurrency": "4", "--random-range-ratio": SPREAD}, 4, True),
    (["--max-concurrency", "4", "--random-range-ratio", "0"], {"--request-rate": "inf", "--max-concurrency": "4"}, 4, False),
    (["--request-rate", "inf"], {"--request-rate": "inf", "--random-range-ratio": SPREAD}, 12, True),  # every request at once
])
def test_the_printed_bench_line_sends_the_simulated_workload(argv, line, concurrency, spread):
    """The line a user pastes draws what was simulated: the same count, arrivals and spread."""
    model = "meta-llama/Llama-2-7b-hf"
    bench = _flags("--num-prompts", "12", *argv).workload
    workload = bench.workload(vllm_serve.limits("a100", "0.30.0", None, None), model)
    said = _bench_flags(bench.bench_serve_line(model, workload))
    if line["--request-rate"] == "the run's":
        line = {**line, "--request-rate": f"{workload.arrival_rate:g}"}
    assert {flag: said[flag] for flag in ("--request-rate", "--max-concurrency", "--random-range-ratio") if flag in said} == line
    assert said["--num-prompts"] == "12" and getattr(workload, "concurrency", None) == concurrency
    lengths = workload.prompt_tokens
    assert (isinstance(lengths, tuple) and len(set(lengths)) > 1) == spread  # a spread line draws varied lengths, a fixed one equal ones


def test_an_engine_profile_replaces_the_version_and_the_cpu_time(tmp_path):
    from simulator.profiles.fitted import TERMS, FittedProfile, FittedTerm, profile_text
    from simulator.profiles.step_scales import StepScales

    terms = {name: FittedTerm(2.5 if name == "cpu_ms" else 1.25 if name == "gemm" else 1.0, 0.1, True, "") for name in TERMS}
    profile = FittedProfile(engine="vllm-0.10.1", vllm_version="0.10.1", model="meta-llama/Llama-3.1-8B-Instruct", device="h100", tensor_parallel_size=1,
                            terms=terms, held_out_error_pct=2.0, plan={}, measured_on="2026-12-03")
    path = tmp_path / "p.toml"
    path.write_text(profile_text(profile))
    server, fitted = with_engine_profile(_flags("--engine-profile", str(path), "--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100").server)
    assert fitted is not None and server.vllm_version == "0.10.1"
    assert server.costs.engine_overhead_ms == 2.5 and server.costs.step_scales.gemm == 1.25 and server.costs.step_scales != StepScales()
    assert with_engine_profile(_flags().server) == (_flags().server, None)  # no profile: the flags as given
