"""The built-in profile fills Vidur's prediction tables straight from the physical model.

No forest is fitted for it: the tables equal the roofline functions at every sampled point of
the grid Vidur looks up, for one GPU and for a tensor-parallel shard with its all-reduce.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import simulator
from simulator.catalog import model_shape
from simulator.config import PoissonWorkload, RunConfig, SpeculationConfig
from simulator.engine import simulation
from simulator.engine.predictor import ProfilePredictor
from simulator.engine.resolve import resolve_run
from simulator.profiles import network, roofline
from simulator.profiles.hardware import get_device

L7 = "meta-llama/Llama-2-7b-hf"
L70 = "meta-llama/Llama-2-70b-hf"
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def no_forest(monkeypatch):
    """Any attempt to fit a forest fails the test: a built-in run must not train one."""

    def refuse(self, *args, **kwargs):
        raise AssertionError("a built-in run fitted a random forest")

    monkeypatch.setattr(ProfilePredictor, "_train_model", refuse)


def _predictor(config: RunConfig) -> ProfilePredictor:
    run = resolve_run(config)
    return simulation.side_predictor(run, run.target)


def _sample(keys, n=40):
    keys = sorted(keys)
    return [keys[i] for i in RNG.choice(len(keys), size=min(n, len(keys)), replace=False)]


@pytest.mark.parametrize("model, device, tp", [(L7, "a100", 1), (L7, "h100", 1), (L70, "a100", 4)])
def test_tables_equal_the_physical_model_at_sampled_points(model, device, tp):
    predictor = _predictor(RunConfig(model=model, device=device, tensor_parallel_size=tp))
    tables = predictor._predictions
    shape, dev = model_shape(model).sharded(tp), get_device(device)

    for (tokens,) in _sample(tables["mlp_up_proj"]):
        side = roofline.mlp_side_ms(np.array([tokens]), shape, dev)
        for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "attn_rope", "add", "input_layernorm"):
            assert tables[op][(tokens,)] == pytest.approx(float(side[op][0]), rel=1e-12), (op, tokens)
        assert tables["attn_kv_cache_save"][(tokens,)] == pytest.approx(float(roofline.kv_cache_save_ms(tokens, shape, dev)), rel=1e-12)
    for batch, kv in _sample(tables["attn_decode"]):
        assert tables["attn_decode"][(batch, kv)] == pytest.approx(float(roofline.decode_attention_ms(batch, kv, shape, dev)), rel=1e-12)
    for kv, chunk in _sample(tables["attn_prefill"]):
        assert tables["attn_prefill"][(kv, chunk)] == pytest.approx(float(roofline.prefill_attention_ms(chunk, kv, shape, dev)), rel=1e-12)
    if tp > 1:
        for (tokens,) in _sample(tables["all_reduce"]):
            expected = network.ring_all_reduce_ms(network.message_bytes(tokens, shape.embedding_dim), tp, dev.network)
            assert tables["all_reduce"][(tokens,)] == pytest.approx(float(expected), rel=1e-12)
    else:
        assert "all_reduce" not in tables


def test_tables_cover_the_grid_vidur_looks_up():
    predictor = _predictor(RunConfig())
    config, tables = predictor._config, predictor._predictions
    max_tokens, g = config.prediction_max_tokens_per_request, config.kv_cache_prediction_granularity
    assert set(tables["add"]) == {(t,) for t in range(1, max_tokens + 1)}
    kvs = range(0, max_tokens + 1, g)
    assert set(tables["attn_decode"]) == {(b, kv) for b in range(1, config.prediction_max_batch_size + 1) for kv in kvs}
    chunks = range(32, config.prediction_max_prefill_chunk_size + 1, 32)
    assert set(tables["attn_prefill"]) == {(kv, c) for kv in kvs for c in chunks}


@pytest.mark.simulation
def test_a_speculative_run_with_a_draft_needs_no_forest():
    config = RunConfig(
        workload=PoissonWorkload(num_requests=8, prompt_tokens=256, output_tokens=32, arrival_rate=2.0),
        speculation=SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.7, proposer="draft", draft_model="JackFram/llama-68m"),
    )
    result = simulator.run(config)
    assert result.summary["verify_steps"] > 0
    assert result.provenance["profile_source"] == "builtin"
    assert result.provenance["draft_profile_source"] == "builtin"


def test_the_profile_digest_follows_the_device_numbers():
    """Provenance: the built-in profile's sha256 is a hash of the model shard and every device
    number, so a changed constant is a different profile."""
    a = resolve_run(RunConfig(model=L7, device="a100")).target.profile
    b = resolve_run(RunConfig(model=L7, device="h100")).target.profile
    assert a.content_sha256 != b.content_sha256
    changed = dataclasses.replace(a.builtin.device, constants=dataclasses.replace(a.builtin.device.constants, add_eff=0.5))
    assert dataclasses.replace(a.builtin, device=changed).digest() != a.builtin.digest()


@pytest.mark.simulation
def test_a_prompt_chunk_longer_than_vidurs_default_range_is_covered():
    """A 7,096-token prompt under an 8,192-token budget is one 7,104-token prefill chunk; Vidur's
    default table range stops at 4,096, so the tables must follow the budget (this run once failed
    with KeyError (7168, 7104))."""
    config = RunConfig(
        model="meta-llama/Llama-3.1-8B-Instruct",
        device="h100",
        chunk_size=8192,
        workload=PoissonWorkload(num_requests=2, prompt_tokens=7096, output_tokens=8, arrival_rate=1.0),
    )
    result = simulator.run(config)  # the KeyError was raised here
    assert _predictor(config)._config.prediction_max_prefill_chunk_size == 8192
    assert result.summary.num_requests == 2 and result.summary.e2e_p50_s > 0
    assert _predictor(RunConfig())._config.prediction_max_prefill_chunk_size == 4096  # unchanged where the budget fits
