"""The LM head and sampler: which tokens produce logits, and where their cost comes from."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from simulator.vidur.models import model_shape
from simulator.engine.predictor import logits_tokens
from simulator.profiles import roofline
from simulator.profiles.hardware import get_device
from simulator.profiles.logits import BUILTIN_ESTIMATE, FROM_PROFILE, builtin_logits_table, logits_table

SHAPE = model_shape("meta-llama/Llama-3.1-8B-Instruct")


def _request(prefill_done, processed=0, prompt=100):
    return SimpleNamespace(is_prefill_complete=prefill_done, num_processed_tokens=processed, num_prefill_tokens=prompt)


def test_logits_come_from_verify_rows_and_finishing_prefills_only():
    batch = SimpleNamespace(
        requests=[_request(True), _request(True), _request(False, 0), _request(False, 60)],
        num_q_tokens=[5, 1, 40, 40],  # a verify row (k' = 4), a decode row, a middle chunk, the last chunk
    )
    assert logits_tokens(batch) == 5 + 1 + 0 + 1


def test_lm_head_scales_with_the_vocabulary_and_is_sharded_by_tp():
    dev = get_device("h100")
    one, eight = roofline.lm_head_ms(1, SHAPE, dev), roofline.lm_head_ms(1, SHAPE.sharded(8), dev)
    # reading 128,256 x 4,096 fp16 weights once is ~1 GB: bandwidth-bound around 0.3 ms on an H100
    assert 0.25 < float(one) < 0.6
    assert float(eight) < float(one) / 4


def _mlp_csv(tmp_path, with_logits: bool):
    table = builtin_logits_table(SHAPE, get_device("h100"), 64)
    frame = pd.DataFrame({"num_tokens": table.tokens, "n_embd": SHAPE.embedding_dim, "vocab_size": SHAPE.vocab_size, "num_tensor_parallel_workers": 1})
    if with_logits:
        frame["time_stats.lm_head.median"] = np.array(table.lm_head_ms) * 2  # a "measured" profile, twice as slow
        frame["time_stats.sampler.median"] = table.sampler_ms
    path = tmp_path / "mlp.csv"
    frame.to_csv(path, index=False)
    return path, table


def test_a_profile_without_the_columns_falls_back_to_the_builtin_estimate(tmp_path):
    path, builtin = _mlp_csv(tmp_path, with_logits=False)
    table = logits_table(path, SHAPE, get_device("h100"), 64)
    assert table.source == BUILTIN_ESTIMATE and table.step_ms(8) == pytest.approx(builtin.step_ms(8))


def test_a_profile_with_the_columns_is_used(tmp_path):
    path, builtin = _mlp_csv(tmp_path, with_logits=True)
    table = logits_table(path, SHAPE, get_device("h100"), 64)
    assert table.source == FROM_PROFILE
    expected = 2 * np.interp(8, builtin.tokens, builtin.lm_head_ms) + np.interp(8, builtin.tokens, builtin.sampler_ms)
    assert table.step_ms(8) == pytest.approx(expected)
    assert table.step_ms(0) == 0.0
