"""Today's models simulate end to end: MoE targets with EAGLE-3 heads, MLA at TP 8, MXFP4 and FP8
on Hopper and Blackwell, sliding windows; and what cannot run exits 2 naming both sides."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import simulator
from simulator import ClosedLoopWorkload, RunConfig, SpeculationConfig
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError

from repo import REPO_ROOT as ROOT

pytestmark = pytest.mark.simulation

QWEN = "Qwen/Qwen3-30B-A3B"
QWEN_HEAD = "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge"


def _run(model, device="h200", batch=4, requests=8, prompt=200, output=48, **kwargs):
    return simulator.run(RunConfig(workload=ClosedLoopWorkload.fixed(batch, requests, prompt, output), model=model, device=device, **kwargs))


def test_an_moe_target_with_an_eagle3_head_speculates():
    base = _run(QWEN)
    spec = _run(QWEN, speculation=SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.7, proposer="eagle3", draft_model=QWEN_HEAD))
    assert spec.summary.num_requests == base.summary.num_requests == 8
    assert spec.summary.proposed_tokens > 0 and spec.summary.tpot_p50_s < base.summary.tpot_p50_s


def test_expert_parallelism_and_skewed_routing_run_and_skew_streams_less():
    uniform = _run(QWEN, device="h100", tensor_parallel_size=2)
    ep = _run(QWEN, device="h100", tensor_parallel_size=2, expert_parallel=True)
    skewed = _run(QWEN, device="h100", tensor_parallel_size=2, moe_routing_skew=1.0)
    assert ep.summary.tpot_p50_s == pytest.approx(uniform.summary.tpot_p50_s, rel=0.15)
    assert skewed.summary.tpot_p50_s < uniform.summary.tpot_p50_s


def test_gpt_oss_on_b200_and_hopper_with_an_fp8_cache():
    h100 = _run("openai/gpt-oss-20b", device="h100")
    b200 = _run("openai/gpt-oss-20b", device="b200")
    assert b200.summary.tpot_p50_s < h100.summary.tpot_p50_s  # 7.7 against 3.35 TB/s, constants carried over
    bf16, fp8 = (resolve_run(RunConfig(model="openai/gpt-oss-20b", device="h100", kv_cache_dtype=d)).memory.num_kv_blocks for d in ("auto", "fp8"))
    assert fp8 >= 2 * bf16 - 100
    assert _run("openai/gpt-oss-20b", device="h100", kv_cache_dtype="fp8").summary.num_requests == 8


def test_deepseek_v3_runs_at_tp8_and_does_not_fit_tp4():
    result = _run("deepseek-ai/DeepSeek-V3", tensor_parallel_size=8, batch=2, requests=4)
    assert result.summary.num_requests == 4 and result.summary.tpot_p50_s > 0
    assert "carried" not in result.provenance["profile_id"]
    with pytest.raises(ConfigError, match="leaves no room"):
        resolve_run(RunConfig(model="deepseek-ai/DeepSeek-V3", device="h200", tensor_parallel_size=4))


def test_a_sliding_window_model_runs_past_its_window():
    result = _run("mistralai/Mistral-7B-v0.1", device="h100", batch=2, requests=2, prompt=6000, output=32)
    assert result.summary.num_requests == 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize(
    "args, named",
    [
        (["--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "a100", "--quantization", "fp8"], ("'fp8'", "'a100'")),
        (["--model", "openai/gpt-oss-20b", "--device", "h100", "--quantization", "nvfp4"], ("'nvfp4'", "'mxfp4'")),
        (["--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100", "--enable-expert-parallel"], ("expert_parallel",)),
    ],
)
def test_refusals_exit_2_with_one_line_and_write_nothing(args, named, tmp_path):
    out = tmp_path / "out.json"
    proc = _cli(*args, "--num-prompts", "4", "--json", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and all(n in lines[0] for n in named), proc.stderr
    assert not out.exists()


def test_fp4_compute_on_hopper_exits_2_naming_the_method_and_the_device(tmp_path):
    config = json.loads((ROOT / "simulator" / "models" / "data" / "Qwen--Qwen3-30B-A3B.json").read_text())
    config.pop("_name_or_path")
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out.json"
    proc = _cli("--model", str(tmp_path / "m"), "--device", "h100", "--num-prompts", "4", "--json", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "'nvfp4'" in lines[0] and "FP4" in lines[0] and "'h100'" in lines[0]
    assert not out.exists()
