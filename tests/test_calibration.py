"""Built-in constants against measured profiles: Vidur's A100 rows (needs ../shared) and our H200 profile."""

from pathlib import Path

import numpy as np
import pytest

from simulator.catalog import model_shape
from simulator.profiles import accuracy, calibrate
from simulator.profiles.hardware import get_device
from simulator.profiles.measured import read_measurements

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "vidur-profiles" / "a100" / "meta-llama" / "Llama-2-7b-hf"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/vidur-profiles is absent (measured profiles are not part of a clone)")
LLAMA = model_shape("meta-llama/Llama-2-7b-hf")


@pytest.fixture(scope="module")
def measured():
    return read_measurements(SHARED / "mlp.csv", SHARED / "attention_sample.csv", LLAMA)


@pytest.mark.shared
@needs_shared
def test_mlp_side_per_layer_time_within_3_percent(measured):
    table = accuracy.mlp_error_table(measured, LLAMA, get_device("a100")).set_index("op")
    assert table.loc["per-layer sum", "median_ape"] <= 3.0
    gemms = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"]
    assert (table.loc[gemms, "median_ape"] <= 5.0).all()


@pytest.mark.shared
@needs_shared
def test_decode_attention_held_out_mape_within_5_percent(measured):
    stats = accuracy.summarize_attention(accuracy.decode_errors(measured, LLAMA, get_device("a100")))
    assert stats["held_out_rows"] > 500
    assert stats["held_out_mape"] <= 5.0


@pytest.mark.shared
@needs_shared
def test_prefill_attention_held_out_mape_within_8_percent(measured):
    stats = accuracy.summarize_attention(accuracy.prefill_errors(measured, LLAMA, get_device("a100")))
    assert stats["held_out_rows"] > 200
    assert stats["held_out_mape"] <= 8.0


@pytest.mark.shared
@needs_shared
def test_refitting_reproduces_the_committed_constants(measured):
    dev = get_device("a100")
    refit = calibrate.rounded(calibrate.fit(measured, LLAMA, dev))
    committed = np.array(list(vars(dev.constants).values()))
    again = np.array(list(vars(refit).values()))
    np.testing.assert_allclose(again, committed, rtol=0.02, atol=1e-6)


H200 = Path(__file__).resolve().parents[1] / "data" / "profiles" / "h200" / "meta-llama" / "Llama-2-7b-hf"


@pytest.fixture(scope="module")
def measured_h200():
    return read_measurements(H200 / "mlp.csv.xz", H200 / "attention.csv.xz", LLAMA)


def test_committed_h200_profile_and_its_fitted_constants(measured_h200):
    dev = get_device("h200")
    assert dev.constants_version == "h200-2026.11"
    table = accuracy.mlp_error_table(measured_h200, LLAMA, dev).set_index("op")
    assert table.loc["per-layer sum", "median_ape"] <= 3.0
    decode = accuracy.summarize_attention(accuracy.decode_errors(measured_h200, LLAMA, dev))
    prefill = accuracy.summarize_attention(accuracy.prefill_errors(measured_h200, LLAMA, dev))
    assert decode["held_out_rows"] > 5000 and decode["held_out_mape"] <= 5.0
    # SDPA's contiguous-KV prefill differs from the paged kernel the model was shaped on
    assert prefill["held_out_rows"] > 150 and prefill["held_out_mape"] <= 16.0
