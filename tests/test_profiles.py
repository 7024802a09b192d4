"""The built-in profile: its physics, its Vidur format, and directory validation."""

import numpy as np
import pytest

from simulator.vidur.models import model_shape
from simulator.util.errors import ConfigError
from simulator.profiles import builtin, roofline
from simulator.profiles.hardware import get_device
from simulator.profiles.vidur_format import MLP_REQUIRED, ATTENTION_REQUIRED, validate_profile_dir, write_profile

LLAMA = model_shape("meta-llama/Llama-2-7b-hf")
A100 = get_device("a100")


def test_decode_attention_steps_up_at_sm_wave_boundaries():
    # 32 heads x batch CTAs, two per SM on 108 SMs: a new wave starts at batch 7 and 14.
    batch = np.arange(1, 17)
    t = roofline.decode_attention_ms(batch, 2048, LLAMA, A100)
    growth = dict(zip(batch[1:].tolist(), (t[1:] / t[:-1]).tolist()))
    inside_waves = [g for b, g in growth.items() if 8 <= b <= 16 and b != 14]
    assert growth[7] > 1.3 and growth[7] > max(inside_waves)
    assert growth[14] > max(inside_waves)
    assert min(g for b, g in growth.items() if b > 3) > 1.0  # past KV splitting, more sequences cost more


def test_gemm_is_memory_bound_small_and_compute_bound_large():
    n, k = LLAMA.qkv_dim, LLAMA.embedding_dim
    t = roofline.gemm_ms(np.array([1, 8, 4096]), n, k, A100)
    assert t[1] / t[0] < 1.05  # weights dominate: 8 tokens cost what 1 does
    flops = 2 * 4096 * n * k
    achieved_tflops = flops / (t[2] * 1e-3) / 1e12
    assert 0.5 * A100.datasheet.peak_fp16_tflops < achieved_tflops < A100.datasheet.peak_fp16_tflops


def test_generated_profile_is_vidur_format_and_covers_per_token_batches(tmp_path):
    mlp = builtin.mlp_table(LLAMA, A100, max_tokens=512)
    attention = builtin.attention_table(LLAMA, A100, max_seq_len=512)
    assert set(MLP_REQUIRED) <= set(mlp.columns) and set(ATTENTION_REQUIRED) <= set(attention.columns)
    assert mlp.num_tokens.max() == 512 and (mlp.filter(like=".median") > 0).all().all()
    decode = attention[attention.prefill_chunk_size == 0]
    assert decode.batch_size.max() == builtin.MAX_DECODE_BATCH
    assert (decode["time_stats.attn_decode.median"] > 0).all()
    files = write_profile(tmp_path, mlp, attention, {"source": "test"})
    assert validate_profile_dir(tmp_path, LLAMA) == files


def _profile_dir(tmp_path, mlp=None, attention=None):
    mlp = builtin.mlp_table(LLAMA, A100, max_tokens=64) if mlp is None else mlp
    attention = builtin.attention_table(LLAMA, A100, max_seq_len=256, max_batch=8) if attention is None else attention
    write_profile(tmp_path, mlp, attention, {})
    return tmp_path


def test_missing_file_is_named(tmp_path):
    _profile_dir(tmp_path)
    (tmp_path / "attention.csv").unlink()
    with pytest.raises(ConfigError, match="missing attention.csv"):
        validate_profile_dir(tmp_path, LLAMA)


def test_missing_column_is_named(tmp_path):
    mlp = builtin.mlp_table(LLAMA, A100, max_tokens=64).drop(columns=["time_stats.mlp_act.median"])
    _profile_dir(tmp_path, mlp=mlp)
    with pytest.raises(ConfigError, match=r"mlp.csv: missing columns \['time_stats.mlp_act.median'\]"):
        validate_profile_dir(tmp_path, LLAMA)


def test_rows_for_another_model_are_rejected(tmp_path):
    _profile_dir(tmp_path)
    with pytest.raises(ConfigError, match="no rows for this model"):
        validate_profile_dir(tmp_path, model_shape("JackFram/llama-68m"))


def test_unreadable_csv_is_rejected(tmp_path):
    _profile_dir(tmp_path)
    (tmp_path / "mlp.csv").write_text("")
    with pytest.raises(ConfigError, match="mlp.csv"):
        validate_profile_dir(tmp_path, LLAMA)


def test_unknown_device_and_model():
    with pytest.raises(ConfigError, match="unknown device 'mi300x'"):
        get_device("mi300x")
    with pytest.raises(ConfigError, match="unknown model 'meta-llama/Llama-9'"):
        model_shape("meta-llama/Llama-9")


def test_kernel_shapes_default_to_what_the_a100_was_fitted_with_and_hopper_sets_its_own():
    from dataclasses import replace

    from simulator.profiles.hardware import KernelShapes

    assert A100.kernels == KernelShapes()  # 64x64 tiles, two CTAs per SM, width-independent norms
    h100 = get_device("h100")
    assert (h100.kernels.gemm_tile_m, h100.kernels.gemm_tile_n, h100.kernels.gemm_ctas_per_sm) == (128, 256, 1)
    # compute-bound sizes: 128-row Hopper tiles give 1,025-1,152 tokens one cost and step at 1,153;
    # 64-row tiles step at 1,089 already.
    m = np.array([1025, 1152, 1153])
    hopper = roofline.gemm_ms(m, 4096 * 8, 4096, replace(h100, constants=replace(h100.constants, gemm_tail_exponent=1.0)))
    ampere = roofline.gemm_ms(m, 4096 * 8, 4096, replace(h100, kernels=KernelShapes(), constants=replace(h100.constants, gemm_tail_exponent=1.0)))
    assert hopper[1] == pytest.approx(hopper[0], rel=0.01) and hopper[2] > 1.05 * hopper[1]
    assert ampere[1] > 1.03 * ampere[0]
    # norm waves: width-independent on the A100, proportional to the row's bytes on the H100
    assert roofline.rmsnorm_ms(1, 8192, A100) == roofline.rmsnorm_ms(1, 4096, A100)
    assert roofline.rmsnorm_ms(1, 8192, h100) > roofline.rmsnorm_ms(1, 4096, h100)


def test_malformed_kernels_table_is_named(tmp_path):
    from simulator.profiles.hardware import DEVICES_FILE, load_devices

    text = DEVICES_FILE.read_text().replace("gemm_tile_m = 128", "gemm_tile_rows = 128")
    path = tmp_path / "devices.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"device 'h100' has a malformed \[kernels\] table"):
        load_devices(path)
