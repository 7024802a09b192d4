"""The fused-MoE kernels (simulator/profiles/moe_kernels.toml): hand-worked costs from the
published tables' cells, the tile rules, monotonicity, and refusals."""

import math

import numpy as np
import pytest

from simulator.models.shapes import Precision
from simulator.profiles import moe as moe_model
from simulator.profiles.hardware import get_device
from simulator.profiles.moe_kernels import MoEKernel, kernel_for, parse_kernels
from simulator.util.errors import ConfigError


def _touched(t, e, k):
    return e * (1 - (1 - k / e) ** t)


def test_hopper_bf16_decode_streams_the_touched_experts_at_the_interpolated_bandwidth():
    """Qwen3-30B-A3B gate/up GEMM at one token on an H200: 8 experts of 1536 x 2048 BF16 weights
    (6.29 MB each), one 16-row tile each; memory-bound, so the cost is bytes / (4.8 TB/s x eff)
    plus the fixed 9.90 us, and the eff is log-interpolated between 0.786 at 2.359 MB and 0.940
    at 88.08 MB (vLLM PR #24700's tables)."""
    dev, kernel = get_device("h200"), kernel_for("h200", "bf16", False)
    n, k = 1536, 2048
    eff = 0.786 + (math.log(n * k * 2 / 1e6) - math.log(2.359)) / (math.log(88.08) - math.log(2.359)) * (0.940 - 0.786)
    memory = (8 * n * k * 2 + 8 * k * 2 + 8 * n * 2) / (4.8e12 * eff)
    useful = 2 * 8 * n * k / (989e12 * 0.631)
    expected = (9.90e-6 + memory + 0.44 * useful) * 1e3
    assert float(moe_model.grouped_gemm_ms(8.0, 8.0, n, k, 16, dev, 2.0, 2.0, kernel)) == pytest.approx(expected, rel=1e-9)


def test_hopper_fp8_prefill_is_compute_bound_at_the_tables_efficiency():
    """Per-tensor FP8 at 4,096 tokens (256 rows per expert, 64-row tiles, no padding): compute at
    0.106 of the H100's 1,979 TFLOPS, the benchmark's measured slope."""
    dev, kernel = get_device("h100"), kernel_for("h100", "fp8", False)
    n, k, rows = 1536, 2048, 4096 * 8
    compute = 2 * rows * n * k / (1979e12 * 0.106)
    # one expert's gate/up weights are 3.15 MB: a little above the 2.359 MB anchor (0.721)
    eff = 0.721 + (math.log(n * k / 1e6) - math.log(2.359)) / (math.log(88.08) - math.log(2.359)) * (0.940 - 0.721)
    memory = (128 * n * k + rows * k + 2 * rows * n) / (3.35e12 * eff)
    expected = (11.30e-6 + compute + 0.38 * memory) * 1e3
    assert float(moe_model.grouped_gemm_ms(128.0, rows, n, k, 64, dev, 1.0, 1.0, kernel)) == pytest.approx(expected, rel=1e-9)


def test_the_table_reproduces_its_source_cells():
    """The whole benchmark_moe.py call (both GEMMs plus four small kernels at 1.574 us) at the cells
    the constants were read from lands on the published times."""
    def total(device, kernel, e, topk, h, f, w, t):
        dev, kern = get_device(device), kernel_for(device, *kernel)
        u, r = _touched(t, e, topk), t * topk
        b = moe_model.block_rows(t, e, topk, kern.block_rule)
        gemms = sum(moe_model.grouped_gemm_ms(u, r, n, kk, b, dev, w, w, kern) for n, kk in ((2 * f, h), (h, f)))
        return float(gemms) * 1e3 + 4 * 1.574
    # vLLM PR #24700, Qwen3-30B-A3B fp8_w8a8 'Main' on H100: 44.54 us at batch 1, 1,647.57 at 4,096
    assert total("h100", ("fp8", False), 128, 8, 2048, 768, 1.0, 1) == pytest.approx(44.54, rel=0.02)
    assert total("h100", ("fp8", False), 128, 8, 2048, 768, 1.0, 4096) == pytest.approx(1647.57, rel=0.02)
    # the same PR, Mixtral-8x7B BF16 TP 2 tuned: 434.98 us at batch 8, 1,122.93 at 1,536
    assert total("h100", ("bf16", False), 8, 2, 4096, 7168, 2.0, 8) == pytest.approx(434.98, rel=0.02)
    assert total("h100", ("bf16", False), 8, 2, 4096, 7168, 2.0, 1536) == pytest.approx(1122.93, rel=0.02)
    # vLLM PR #31448, Qwen3 BF16 on B200 (default config): 39.61 us at batch 1
    assert total("b200", ("bf16", False), 128, 8, 2048, 768, 2.0, 1) == pytest.approx(39.61, rel=0.02)


def test_tile_rules():
    """vLLM's tuned E=128,N=768 configs on H100/H200 (BLOCK_SIZE_M 16 to batch 128, 32 at 256, 64 at
    512, 128 from 1,024), triton_kernels' next power of two of m in 16..128, vLLM's default."""
    assert list(moe_model.block_rows([1, 128, 256, 512, 1024, 4096], 128, 8, "vllm_tuned")) == [16, 16, 32, 64, 128, 128]
    assert list(moe_model.block_rows([1, 512, 1024, 4096], 128, 4, "triton_kernels")) == [16, 16, 32, 128]
    assert list(moe_model.block_rows([128, 129], 128, 8, "vllm_default")) == [16, 64]
    assert list(moe_model.block_rows([1, 4096], 128, 8, "fixed_64")) == [64, 64]


def test_memory_efficiency_grows_with_the_expert_and_is_held_outside_the_anchors():
    kernel = kernel_for("h100", "bf16", False)
    eff = moe_model.memory_efficiency(np.array([0.1e6, 2.359e6, 10e6, 88.08e6, 1e9]), kernel)
    assert eff[0] == pytest.approx(0.786) and eff[1] == pytest.approx(0.786)
    assert eff[3] == pytest.approx(0.940) and eff[4] == pytest.approx(0.940)
    assert (np.diff(eff) >= 0).all() and 0.786 < eff[2] < 0.940


def test_cost_rises_with_rows_and_with_touched_experts():
    dev, kernel = get_device("h200"), kernel_for("h200", "bf16", False)
    t = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192], dtype=float)
    u, r = _touched(t, 128, 8), t * 8
    ms = moe_model.grouped_gemm_ms(u, r, 1536, 2048, moe_model.block_rows(t, 128, 8, kernel.block_rule), dev, 2.0, 2.0, kernel)
    assert (np.diff(ms) > 0).all()
    # a verify batch touches more experts than a decode batch of the same requests: it costs more
    decode, verify = (moe_model.grouped_gemm_ms(_touched(x, 128, 8), 8 * x, 1536, 2048, 16, dev, 2.0, 2.0, kernel) for x in (8, 32))
    assert verify > 1.5 * decode


def test_small_m_per_expert_costs_at_least_the_streamed_weights():
    """Physical floor: at small M the kernel cannot beat the touched experts' bytes at the full HBM
    bandwidth, and FP8 W8A8 prefill is slower per FLOP than BF16 (the table's 0.106 vs 0.631)."""
    dev = get_device("h100")
    for experts, w in (("bf16", 2.0), ("fp8", 1.0)):
        kernel = kernel_for("h100", experts, False)
        for t in (1, 8, 16):
            u = _touched(t, 128, 8)
            floor = u * 1536 * 2048 * w / 3.35e12 * 1e3
            assert float(moe_model.grouped_gemm_ms(u, 8 * t, 1536, 2048, 16, dev, w, w, kernel)) > floor
    bf16 = moe_model.grouped_gemm_ms(128.0, 32768, 1536, 2048, 128, dev, 2.0, 2.0, kernel_for("h100", "bf16", False))
    fp8 = moe_model.grouped_gemm_ms(128.0, 32768, 1536, 2048, 64, dev, 1.0, 1.0, kernel_for("h100", "fp8", False))
    assert fp8 > bf16


def test_kernel_choice_by_gpu_and_precision():
    assert kernel_for("h100", "bf16", False).name == "triton_bf16.hopper"
    assert kernel_for("h200", "fp8", True).name == "triton_fp8_block.hopper"
    assert kernel_for("h100", "mxfp4", False).compute_dtype == "bf16"  # W4A16 on Hopper
    assert kernel_for("b200", "mxfp4", False).name == "mxfp4.blackwell (carried from mxfp4.hopper)"
    assert kernel_for("a100", "bf16", False) is None and kernel_for("b200", "nvfp4", False) is None
    dense = moe_model.expert_kernel(get_device("a100"), Precision())
    assert "carried over" in dense.name and dense.fixed_us == get_device("a100").constants.gemm_launch_us


def test_a_precision_the_gpu_cannot_run_is_refused():
    with pytest.raises(ConfigError, match="a100.*fp8"):
        moe_model.expert_kernel(get_device("a100"), Precision(experts="fp8", ffn="fp8", attention="fp8", method="fp8"))
    with pytest.raises(ConfigError, match="h100.*fp4"):
        moe_model.expert_kernel(get_device("h100"), Precision(experts="nvfp4", ffn="nvfp4", method="nvfp4"))


def test_a_bad_table_is_refused_naming_the_entry():
    good = {"compute_dtype": "bf16", "block_rule": "vllm_tuned", "small_expert_mb": 1.0, "small_memory_eff": 0.7,
            "large_expert_mb": 10.0, "large_memory_eff": 0.9, "fixed_us": 10.0, "compute_eff": 0.6, "overlap_loss": 0.4}
    assert isinstance(parse_kernels({"kernel": {"a": {"hopper": good}}}, "t")[1][("a", "hopper")], MoEKernel)
    with pytest.raises(ConfigError, match="kernel.a.hopper.*compute_eff"):
        parse_kernels({"kernel": {"a": {"hopper": {**good, "compute_eff": 1.5}}}}, "t")
    with pytest.raises(ConfigError, match="kernel.a.hopper.*block_rule"):
        parse_kernels({"kernel": {"a": {"hopper": {**good, "block_rule": "guess"}}}}, "t")
    with pytest.raises(ConfigError, match="kernel.b.hopper.*carried_from"):
        parse_kernels({"kernel": {"a": {"hopper": good}, "b": {"hopper": {"carried_from": "c.hopper"}}}}, "t")
