"""Pure speculative-decoding pieces: acceptance draws, progress, verify cost, memory."""

import numpy as np
import pytest

from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.util.errors import ConfigError
from simulator.speculative.acceptance import AcceptanceSampler
from simulator.speculative.memory import ModelMemory, kv_capacity_tokens
from simulator.speculative.progress import expected_progress, expected_progress_per_position
from simulator.speculative.verify_cost import extrapolate_batch, kv_once_ms, per_token_ms, verify_attention_ms


def test_expected_progress_closed_form():
    assert expected_progress(0.0, 4) == 1
    assert expected_progress(1.0, 4) == 5
    assert expected_progress(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_progress_per_position([0.7] * 3) == pytest.approx(expected_progress(0.7, 3))


def test_sampler_matches_conditional_rates_and_is_reproducible():
    sampler = AcceptanceSampler([0.9, 0.5], seed=3)
    draws = np.array([sampler.draw(r, s).lead for r in range(200) for s in range(100)])
    assert (draws >= 1).mean() == pytest.approx(0.9, abs=0.01)
    assert (draws == 2).mean() == pytest.approx(0.45, abs=0.01)
    again = AcceptanceSampler([0.9, 0.5], seed=3)
    assert [again.draw(5, s) for s in range(100)] == [sampler.draw(5, s) for s in range(100)]


def test_a_varying_draft_length_follows_its_distribution_and_moves_no_acceptance_draw():
    fixed = AcceptanceSampler([0.8] * 6, seed=1)
    varying = AcceptanceSampler([0.8] * 6, seed=1, length_pmf=[0.2, 0.0, 0.3, 0.0, 0.0, 0.0, 0.5])
    pairs = [(fixed.draw(r, s), varying.draw(r, s)) for r in range(100) for s in range(100)]
    assert all(f.lead == v.lead and f.length == 6 for f, v in pairs)
    lengths = np.array([v.length for _, v in pairs])
    assert set(lengths.tolist()) == {0, 2, 6}
    assert [(lengths == n).mean() for n in (0, 2, 6)] == pytest.approx([0.2, 0.3, 0.5], abs=0.015)
    # the lengths are seeded per request: another instance, asked in another order, draws the same; another seed does not
    again = AcceptanceSampler([0.8] * 6, seed=1, length_pmf=[0.2, 0.0, 0.3, 0.0, 0.0, 0.0, 0.5])
    assert [again.draw(r, 7).length for r in reversed(range(100))] == [varying.draw(r, 7).length for r in reversed(range(100))]
    other = AcceptanceSampler([0.8] * 6, seed=2, length_pmf=[0.2, 0.0, 0.3, 0.0, 0.0, 0.0, 0.5])
    assert [other.draw(r, 7).length for r in range(100)] != [varying.draw(r, 7).length for r in range(100)]


def _lookup(batch, kv):
    # a made-up decode profile: 2 us per sequence plus 1 ns per cached token per sequence
    return batch * (2e-3 + kv * 1e-6)


def test_each_assumption_equals_its_formula_on_a_hand_built_batch():
    rows = [(5, 1000), (5, 2000), (1, 3000)]  # two verify rows (k = 4) and one plain decode
    once = verify_attention_ms(rows, _lookup, "kv_once")
    per_token = verify_attention_ms(rows, _lookup, "per_token")
    assert once == pytest.approx(_lookup(3, 2000))  # 3 sequences, mean KV 2000
    assert per_token == pytest.approx(_lookup(11, (5 * 1000 + 5 * 2000 + 3000) / 11))  # B(k+1) queries
    mid = verify_attention_ms(rows, _lookup, "interpolated", 0.25)
    assert mid == pytest.approx(0.75 * once + 0.25 * per_token)
    assert once <= mid <= per_token
    assert kv_once_ms([], _lookup) == per_token_ms([], _lookup) == 0


def test_extrapolation_past_the_profiled_batch():
    lookup = extrapolate_batch(lambda b, kv: b**0.9, max_batch=128)
    assert lookup(100, 0) == pytest.approx(100**0.9)
    assert lookup(300, 0) == pytest.approx(2 * 128**0.9 + 44**0.9)
    assert lookup(256, 0) == pytest.approx(2 * 128**0.9)
    assert all(lookup(b + 1, 0) >= lookup(b, 0) for b in range(1, 600))


def test_draft_memory_shrinks_capacity_by_exactly_its_weights_and_kv():
    # worked by hand: 10 GiB less a 10 % margin is 9 GiB; the target's 1 GiB of weights leaves
    # 8 GiB = 8192 slots of 1 MiB; a draft's 0.5 GiB of weights and 1 MiB per token more leave
    # 7.5 GiB over 2 MiB per slot = 3840 slots
    target = ModelMemory(weight_bytes=2**30, kv_bytes_per_token=2**20)
    draft = ModelMemory(weight_bytes=2**29, kv_bytes_per_token=2**20)
    memory = 10 * 2**30
    assert kv_capacity_tokens(memory, 0.1, target, None) == 8192
    assert kv_capacity_tokens(memory, 0.1, target, draft) == 3840
    # a slot short of whole is not a slot; no room at all is zero, not negative
    assert kv_capacity_tokens(memory - 1, 0.0, target, None) == 9215
    assert kv_capacity_tokens(2**29, 0.0, target, draft) == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_speculative_tokens": -1}, "num_speculative_tokens = -1"),
        ({"num_speculative_tokens": 2.5, "acceptance_rate": 0.5}, "num_speculative_tokens = 2.5"),
        ({"num_speculative_tokens": 2, "acceptance_rate": 1.5}, "acceptance_rate = 1.5"),
        ({"num_speculative_tokens": 2, "acceptance_rate": float("nan")}, "acceptance_rate = nan"),
        ({"num_speculative_tokens": 2, "acceptance_per_position": ()}, "non-empty"),
        ({"num_speculative_tokens": 2, "acceptance_per_position": (0.5, 1.2)}, r"acceptance_per_position\[1\] = 1.2"),
        ({"num_speculative_tokens": 3, "acceptance_per_position": (0.5, 0.4)}, "at least k = 3"),
        ({"num_speculative_tokens": 2}, "exactly one of"),
        ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "interpolation": 2.0}, "interpolation = 2.0"),
        ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "proposer": "eagle"}, "proposer = 'eagle'"),
        ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "attention": "flash"}, "attention = 'flash'"),
        ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "proposer": "draft"}, "draft_model"),
    ],
)
def test_bad_speculation_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SpeculationConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scheduler": "vllm"}, "only Vidur's Sarathi scheduler"),
        ({"pipeline_stages": 2}, "pipeline parallelism 1"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size = 0: must be a positive integer"),
    ],
)
def test_speculation_scope(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(speculation=SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.5), **kwargs)
