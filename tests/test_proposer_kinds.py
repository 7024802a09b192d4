"""The kinds added to the registry, each against what it models: MTP, DFlash, suffix decoding, the
GPU n-gram matcher and SGLang's draft trees."""

from __future__ import annotations

import pytest

import simulator
from simulator import ClosedLoopWorkload, RunConfig, SpeculationConfig
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError
from simulator.speculative import proposers
from simulator.speculative.proposers.base import ModelFacts, SpeculationSettings
from simulator.speculative.proposers.suffix import truncated_geometric

MIMO, QWEN3, DFLASH = "XiaomiMiMo/MiMo-7B-Base", "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"
LLAMA31, EAGLE3 = "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
ONE_AT_A_TIME = ClosedLoopWorkload.fixed(1, 4, 100, 96)


# Kinds are compared against a free n-gram lookup on vLLM 0.10.1's engine profile, which issues every kind
# alike (synchronous, one capture grid); later versions give EAGLE-type kinds async scheduling and Model
# Runner V2 and the n-gram lookup neither (tests/test_engine_versions.py)
ENGINE = "vllm-0.10.1"


def _config(model, **speculation):
    return RunConfig(workload=ONE_AT_A_TIME, model=model, device="h100", speculation=SpeculationConfig(**speculation), engine=ENGINE)


def _run(model, **speculation):
    return simulator.run(_config(model, **speculation))


# --- MTP ----------------------------------------------------------------------------------------

def test_mtp_reuses_its_layers_only_for_a_multiple_of_their_count():
    kind = proposers.kind("mtp")
    target = ModelFacts("t", "MiMoForCausalLM", 1024, 1000, 8, mtp_layers=2, mtp_field="num_nextn_predict_layers")
    for k in (1, 2, 4):
        kind.check(SpeculationSettings(k=k, target=target), target, 1, 1)
    with pytest.raises(ConfigError, match="num_speculative_tokens = 3: t has 2 MTP layers"):
        kind.check(SpeculationSettings(k=3, target=target), target, 1, 1)
    with pytest.raises(ConfigError, match="field 'num_nextn_predict_layers' = 0"):
        kind.check(SpeculationSettings(k=1), ModelFacts("u", "X", 1, 1, 1, mtp_field="num_nextn_predict_layers"), 1, 1)


def test_mtp_memory_is_its_layer_and_fc_and_one_layer_of_kv():
    run = resolve_run(_config(MIMO, num_speculative_tokens=2, acceptance_rate=0.5, proposer="mtp"))
    h, kv_dim, mlp = 4096, 8 * 128, 11008
    layer = h * (h + 2 * kv_dim) + h * h + 3 * h * mlp  # qkv, o, gated MLP (Vidur's count; biases and norms aside)
    assert run.draft.name == MIMO + " (MTP layer)" and run.draft.model.num_layers == 1
    assert run.memory.draft.weight_bytes == pytest.approx(2 * (layer + 2 * h * h), rel=0.01)  # and the 2h -> h fc; no LM head (shared)
    assert run.memory.draft.kv_bytes_per_token == 2 * 2 * 128 * 8  # K and V of one layer


def test_dflash_memory_is_its_layers_and_fc_with_kv_in_every_layer():
    run = resolve_run(_config(QWEN3, num_speculative_tokens=8, acceptance_rate=0.5, proposer="dflash", draft_model=DFLASH))
    h, kv_dim, mlp = 4096, 8 * 128, 12288
    layer = h * (h + 2 * kv_dim) + h * h + 3 * h * mlp
    assert run.memory.draft.weight_bytes == pytest.approx(2 * (5 * layer + 5 * h * h), rel=0.01)  # 5 layers, 5 taps -> h fc, no embedding
    assert run.memory.draft.kv_bytes_per_token == 5 * 2 * 2 * 128 * 8
    assert run.target.facts.mtp_layers == 0


@pytest.mark.simulation
def test_mtp_runs_one_layer_per_draft_token():
    def draft_time(k):
        mtp = _run(MIMO, num_speculative_tokens=k, acceptance_rate=0.7, proposer="mtp")
        free = _run(MIMO, num_speculative_tokens=k, acceptance_rate=0.7, ngram_overhead_ms=0.0)
        assert mtp.summary["forward_passes"] == free.summary["forward_passes"]  # same draws, same steps
        return (mtp.summary["makespan_s"] - free.summary["makespan_s"]) / mtp.summary["forward_passes"]

    one, three = draft_time(1), draft_time(3)
    assert 2.0 * one < three < 4.0 * one  # k = 3 runs the MTP layer three times per step


@pytest.mark.simulation
def test_dflash_drafts_k_tokens_in_one_pass():
    def draft_time(k):
        dflash = _run(QWEN3, num_speculative_tokens=k, acceptance_rate=0.7, proposer="dflash", draft_model=DFLASH)
        free = _run(QWEN3, num_speculative_tokens=k, acceptance_rate=0.7, ngram_overhead_ms=0.0)
        return (dflash.summary["makespan_s"] - free.summary["makespan_s"]) / dflash.summary["forward_passes"]

    assert draft_time(8) < 1.5 * draft_time(2)  # one pass either way: k only widens it


# --- suffix decoding ----------------------------------------------------------------------------

@pytest.mark.parametrize("mean, top", [(3.26, 24), (0.5, 4), (3.9, 4), (12.0, 24)])
def test_the_length_distribution_has_the_given_mean(mean, top):
    pmf = truncated_geometric(mean, top)
    assert len(pmf) == top + 1 and sum(pmf) == pytest.approx(1.0)
    assert sum(n * p for n, p in enumerate(pmf)) == pytest.approx(mean, abs=1e-6)
    assert all(p > 0 for p in pmf)


@pytest.mark.simulation
def test_suffix_proposes_its_drawn_lengths_capped_at_k():
    k, depth, mean = 6, 12, 3.0
    result = _run(QWEN3, num_speculative_tokens=k, acceptance_rate=0.6, proposer="suffix",
                  options=(("suffix_max_tree_depth", depth), ("suffix_mean_draft_length", mean)))
    pmf = truncated_geometric(mean, depth)
    drafted = sum(p for n, p in enumerate(pmf) if n)
    capped_mean = sum(min(n, k) * p for n, p in enumerate(pmf)) / drafted  # per step that drafted
    logs = [pair for log in result.acceptance_logs.values() for pair in log]
    proposed = [p for p, _ in logs]
    assert sum(proposed) / len(proposed) == pytest.approx(capped_mean, rel=0.12)  # fewer near a request's end
    assert max(proposed) <= k and len(set(proposed)) > 3


# --- the GPU n-gram matcher ---------------------------------------------------------------------

@pytest.mark.simulation
def test_ngram_gpu_runs_the_same_steps_as_the_cpu_lookup_at_its_own_cost():
    cpu = _run(QWEN3, num_speculative_tokens=4, acceptance_rate=0.6, ngram_overhead_ms=0.0)
    gpu = _run(QWEN3, num_speculative_tokens=4, acceptance_rate=0.6, proposer="ngram_gpu")
    assert gpu.summary["forward_passes"] == cpu.summary["forward_passes"] and gpu.summary["accepted_tokens"] == cpu.summary["accepted_tokens"]
    assert gpu.summary["makespan_s"] > cpu.summary["makespan_s"]  # its kernels cost something; the free lookup nothing


# --- draft trees --------------------------------------------------------------------------------

@pytest.mark.simulation
def test_a_tree_verifies_n_plus_one_tokens_and_advances_by_its_accepted_path():
    tree = (("eagle_topk", 8), ("num_draft_tokens", 64))
    result = _run(LLAMA31, num_speculative_tokens=5, acceptance_rate=0.8, proposer="eagle3_tree", draft_model=EAGLE3, options=tree)
    chain = _run(LLAMA31, num_speculative_tokens=5, acceptance_rate=0.8, proposer="eagle3", draft_model=EAGLE3)
    logs = [pair for log in result.acceptance_logs.values() for pair in log]
    assert all(proposed == 63 for proposed, _ in logs)  # 64 verified per row, the root included
    assert max(accepted for _, accepted in logs) <= 5
    # the same draws accept the same paths as a chain of the tree's depth, at a dearer verify
    assert result.summary["accepted_tokens"] == chain.summary["accepted_tokens"]
    assert result.summary["tpot_p50_s"] > chain.summary["tpot_p50_s"]


# --- dynamic SD: a step that drafts nothing still runs the drafter's first pass ---------------------

def _k0_plan():
    from simulator.speculative.step import StepPlan

    class _Request:
        def __init__(self, i, processed, prefill):
            self.id, self.num_processed_tokens, self.num_prefill_tokens = i, processed, prefill

    # two decode rows (one token each, contexts 300 and 500) and a prefill chunk of 64 of a 128-token prompt
    requests = [_Request(0, 300, 100), _Request(1, 500, 100), _Request(2, 0, 128)]
    return StepPlan(requests, [1, 1, 64], [301, 501, 64], [True, True, False], [0, 0, 0], [0, 0, 0], [1, 1, 64])


@pytest.mark.parametrize(("name", "fc_tokens"), [("eagle3", 66), ("eagle", 66), ("mtp", 66), ("eagle3_parallel", 66), ("draft", 0)])
def test_a_k0_step_runs_one_catch_up_pass_that_samples_nothing(name, fc_tokens):
    """vLLM >= 0.24 (llm_base_proposer.py): with K = 0 the first forward still runs, to keep the
    drafter's KV in sync, and returns before sampling: one pass over the 66 computed tokens, no logits
    (a head's fc over all 66 hidden states; a draft model has none)."""
    kind = proposers.kind(name)
    settings = SpeculationSettings(k=3, draft=ModelFacts("d", "X", 4096, 32000, 1, fc_inputs=3))
    work = kind.step_cost(settings).work(_k0_plan())
    (draft_pass,) = work.passes
    assert [(row.q, row.kv) for row in draft_pass.rows] == [(1, 301), (1, 501), (64, 64)]
    assert draft_pass.logits_rows == 0 and draft_pass.fc_tokens == fc_tokens


def test_a_k0_dflash_step_runs_one_query_a_sampling_request():
    """DFlash's pass is 1 + K queries a request that samples, over the context the target's 66 hidden
    states project (vllm/v1/spec_decode/dflash.py): at K = 0, one query for each of the two decode rows
    (the unfinished prefill chunk samples nothing), no logits."""
    settings = SpeculationSettings(k=3, draft=ModelFacts("d", "X", 4096, 32000, 1, fc_inputs=5))
    (draft_pass,) = proposers.kind("dflash").step_cost(settings).work(_k0_plan()).passes
    assert [(row.q, row.kv) for row in draft_pass.rows] == [(1, 302), (1, 502)]  # context after acceptance, + 1 query
    assert draft_pass.logits_rows == 0 and draft_pass.context_kv_tokens == 66 and draft_pass.fc_tokens == 66
