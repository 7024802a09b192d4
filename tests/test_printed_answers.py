"""What the two commands print beside their figures (issue 33, section 1): commands that fit 100
columns and still paste, the vllm bench serve line of the simulated workload, model names vLLM can
load, help that lists the catalog, and output paths checked before anything runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from simulator.cli import simulate as cli
from simulator.cli.terminal import WIDTH, shell_lines, wrap

pytestmark = pytest.mark.unit

LONG_SERVE = ("vllm serve openai/gpt-oss-120b --tensor-parallel-size 2 --max-num-seqs 1024 --max-num-batched-tokens 16384 --speculative-config "
              "'{\"method\":\"eagle3\",\"model\":\"Dogacel/specdrift-gpt-oss-120b-eagle3\",\"num_speculative_tokens\":3,"
              "\"num_speculative_tokens_per_batch_size\":[[1,63,0],[64,127,3],[128,1024,0]]}'")


def _shell_argv(lines: list[str]) -> list[str]:
    """The words bash reads from the printed lines, indented as the answer prints them."""
    script = "printf '%s\\0' " + "\n".join("  " + line for line in lines).strip()
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return out.split("\0")[:-1]


def test_a_long_command_is_broken_at_its_flags_and_pastes_as_the_same_command():
    lines = shell_lines(LONG_SERVE)
    assert len(lines) > 1 and max(len("  " + line) for line in lines) <= WIDTH
    words, argv = shlex.split(LONG_SERVE), _shell_argv(lines)
    at = words.index("--speculative-config") + 1
    assert argv[:at] == words[:at] and argv[at + 1:] == words[at + 1:]
    assert json.loads(argv[at]) == json.loads(words[at])  # the JSON broken after commas reads the same


def test_prose_wraps_at_100_columns_without_breaking_a_word():
    text = "Off where it may lose: " + ", ".join(f"{x} in flight (k = 3: 1.27× simulated)" for x in (8, 16, 32, 128)) + " simulator/sweep/error_bar.py"
    lines = wrap(text)
    assert max(len(line) for line in lines) <= WIDTH and " ".join(" ".join(lines).split()) == text


def _inputs(*argv):
    return cli.inputs_from_args(cli.build_parser().parse_args(list(argv)))


def test_the_simulated_workload_is_printed_as_a_vllm_bench_serve_line():
    closed = _inputs("--max-concurrency", "8", "--num-prompts", "16").bench_serve
    argv = shlex.split(closed)
    assert argv[:3] == ["vllm", "bench", "serve"]
    flags = dict(zip(argv[3::2], argv[4::2])) if "--ignore-eos" not in argv else dict(zip([a for a in argv if a.startswith("--")], [None] * 99))
    for pair in (("--max-concurrency", "8"), ("--num-prompts", "16"), ("--request-rate", "inf"), ("--random-input-len", "512"), ("--random-output-len", "256"),
                 ("--random-range-ratio", "0.5"), ("--dataset-name", "random")):
        assert f"{pair[0]} {pair[1]}" in closed, pair
    poisson = _inputs("--request-rate", "3", "--num-prompts", "40", "--random-range-ratio", "0").bench_serve
    assert "--request-rate 3 " in poisson and "--max-concurrency" not in poisson and "--random-range-ratio" not in poisson
    assert flags


def test_vidurs_pseudo_names_are_printed_as_the_repository_vllm_loads():
    from simulator.cli.vllm_serve import served_model_name

    assert served_model_name("meta-llama/Llama-3-8B") == "meta-llama/Meta-Llama-3-8B"
    assert served_model_name("meta-llama/Llama-3-70B") == "meta-llama/Meta-Llama-3-70B"
    assert served_model_name("meta-llama/Llama-2-7b-hf") == "meta-llama/Llama-2-7b-hf"


def test_a_local_config_without_its_name_gets_a_hint(tmp_path):
    from simulator.cli.vllm_serve import served_name_hint
    from test_cli import _local_model

    model = _local_model(tmp_path, None)
    inputs = _inputs("--model", model, "--device", "h100")
    assert inputs.served_model_name == model
    assert "--served-model-name" in served_name_hint(inputs.served_model_name)
    assert served_name_hint("meta-llama/Llama-2-7b-hf") == ""


def test_help_lists_the_catalog_and_every_gpu():
    from simulator.vidur.models import known_models
    from simulator.profiles.hardware import known_devices

    for module in ("simulator", "simulator.paysoff"):
        text = " ".join(subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True).stdout.split())
        for name in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"):
            assert name in text.replace("- ", "-"), (module, name)
        assert all(device in text for device in known_devices()), module
    assert len(known_models()) > 20


@pytest.mark.parametrize("module", ["simulator", "simulator.paysoff"])
def test_an_output_file_in_a_missing_folder_is_refused_naming_it(module, tmp_path):
    target = tmp_path / "no-such-dir" / "out.json"
    run = subprocess.run([sys.executable, "-m", module, "--acceptance", "0.7", "-k" if module == "simulator" else "--k-range", "2", "--json", str(target)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert f"folder {target.parent} does not exist" in run.stderr and not target.parent.exists()


def test_a_drafter_without_a_model_name_is_named_by_its_kind():
    from simulator.runs.deployment import Deployment, Speculation
    from simulator.speculative.acceptance_convert import AcceptanceInput
    from simulator.sweep.runner import preparing_message

    config = Deployment(model="XiaomiMiMo/MiMo-7B-Base", speculation=Speculation(proposer="mtp", k=1, acceptance=AcceptanceInput.given(rate=0.7))).run()
    message = preparing_message(config)
    assert "None" not in message and "MTP" in message


def test_the_docs_state_the_draft_pass_constant_the_code_runs():
    """Issue 33: docs/model.md said 0.35 ms where --help (and the code) said 0.37."""
    import re

    from repo import REPO_ROOT
    from simulator.speculative.proposers.base import DEFAULT_DRAFT_PASS_OVERHEAD_MS

    text = (REPO_ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    stated = re.search(r"draft_pass_overhead_ms`, default \*\*([0-9.]+) ms\*\*", text)
    assert stated and float(stated.group(1)) == DEFAULT_DRAFT_PASS_OVERHEAD_MS
    assert f"{DEFAULT_DRAFT_PASS_OVERHEAD_MS:g} ms per" in " ".join(text.split())


def test_deepseek_v3s_mtp_runs_and_the_docs_say_so():
    """Issue 33: docs/model.md said DeepSeek-V3's MTP is refused; it resolves (an MLA-with-experts MTP layer)."""
    from repo import REPO_ROOT
    from simulator.engine.resolve import resolve_run
    from simulator.runs.deployment import Deployment, Parallelism, Speculation
    from simulator.speculative.acceptance_convert import AcceptanceInput

    mtp = Speculation(proposer="mtp", k=1, acceptance=AcceptanceInput.given(rate=0.8))
    config = Deployment(model="deepseek-ai/DeepSeek-V3", device="h200", parallelism=Parallelism(tensor=8), speculation=mtp).run()
    assert resolve_run(config) is not None
    text = " ".join((REPO_ROOT / "docs" / "model.md").read_text(encoding="utf-8").split())
    assert "(DeepSeek-V3) is refused" not in text and "`deepseek-ai/DeepSeek-V3` (one MTP layer)" in text
