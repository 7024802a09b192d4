"""Every proposer kind through the same checks: names, lookahead, memory, a step's cost as the sum of
its passes, and the recommended config's round trip through vLLM's key names.

The expected values are the definitions (vLLM's scheduler and config, docs/model.md), written
here by hand, not read from the kinds; a kind added to the registry joins every check by its name
and fails the table checks until its row is added.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from simulator.engine.batch import SpeculativeBatch
from simulator.engine.proposers import ProposerCost
from simulator.util.errors import ConfigError
from simulator.profiles.hardware import get_device
from simulator.models.shapes import ModelShape
from simulator.speculative import proposers
from simulator.speculative.memory import BYTES, ModelMemory
from simulator.speculative.proposers.base import ACCEPTANCE_INPUTS, DraftPass, DraftSource, ModelFacts, NetworkMemory, SpeculationSettings, StepWork, TokenScan
from simulator.speculative.step import StepPlan

from round_device import ROUND, SMALL

KINDS = {kind.name: kind for kind in proposers.KINDS}
# vLLM's num_lookahead_tokens per method (vllm/v1/core/sched/scheduler.py; docs/sources/proposers.md
# §1.4): k for EAGLE-style and draft-model proposers, k + 1 for DFlash, 0 for lookups
LOOKAHEAD = {
    "ngram": lambda k: 0, "ngram_gpu": lambda k: 0, "suffix": lambda k: 0, "draft": lambda k: k, "eagle": lambda k: k, "eagle3": lambda k: k,
    "eagle3_parallel": lambda k: k, "mtp": lambda k: k, "dflash": lambda k: k + 1, "eagle_tree": lambda k: k, "eagle3_tree": lambda k: k,
}
# what each kind drafts with
SOURCES = {
    "ngram": DraftSource.NOTHING, "ngram_gpu": DraftSource.NOTHING, "suffix": DraftSource.NOTHING, "draft": DraftSource.DRAFT_MODEL,
    "eagle": DraftSource.EAGLE_HEAD, "eagle3": DraftSource.EAGLE_HEAD, "eagle3_parallel": DraftSource.EAGLE_HEAD, "mtp": DraftSource.MTP_LAYERS,
    "dflash": DraftSource.PARALLEL_DRAFTER, "eagle_tree": DraftSource.EAGLE_HEAD, "eagle3_tree": DraftSource.EAGLE_HEAD,
}
# vLLM's SpeculativeConfig fields a recommended config may use (vllm/config/speculative.py, 2026 main)
VLLM_KEYS = {
    "method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting",
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
    "num_speculative_tokens_per_batch_size",
}
H = 1024
DRAFTS = {  # the draft network each kind reads, as the engine resolves it
    "draft": ModelFacts("d", "LlamaForCausalLM", 512, 32000, 4),
    "eagle": ModelFacts("e", "LlamaForCausalLMEagle", H, 32000, 1, drafter="eagle", fc_inputs=2),
    "eagle3": ModelFacts("e3", "LlamaForCausalLMEagle3", H, 8000, 1, drafter="eagle3", fc_inputs=3),
    "eagle3_parallel": ModelFacts("pe", "LlamaForCausalLMEagle3", H, 8000, 1, drafter="eagle3", fc_inputs=3, mask_token=True),
    "mtp": ModelFacts("t (MTP layer)", "MiMoForCausalLM", H, 32000, 1),
    "dflash": ModelFacts("df", "DFlashDraftModel", H, 32000, 3, drafter="dflash", fc_inputs=4, block_size=9, target_layer_ids=(1, 3, 5, 7)),
    "eagle_tree": ModelFacts("e", "LlamaForCausalLMEagle", H, 32000, 1, drafter="eagle", fc_inputs=2),
    "eagle3_tree": ModelFacts("e3", "LlamaForCausalLMEagle3", H, 8000, 1, drafter="eagle3", fc_inputs=3),
}
TARGET = ModelFacts("t", "MiMoForCausalLM", H, 32000, 8, mtp_layers=2, mtp_field="num_nextn_predict_layers")
OPTIONS = {"ngram_gpu": {"prompt_lookup_max": 4, "prompt_lookup_min": 2}, "eagle_tree": {"eagle_topk": 3, "num_draft_tokens": 10},
           "eagle3_tree": {"eagle_topk": 3, "num_draft_tokens": 10}, "suffix": {"suffix_lookup_us_per_token": 20.0}}


def settings(name: str, k: int = 4) -> SpeculationSettings:
    kind = KINDS[name]
    return SpeculationSettings(k=k, options=kind.resolve_options(OPTIONS.get(name, {})), costs=kind.Options(ngram_overhead_ms=0.25) if name == "ngram" else None, draft=DRAFTS.get(name), target=TARGET)


def test_every_kind_is_in_the_tables():
    assert set(KINDS) == set(LOOKAHEAD) == set(SOURCES)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_names_resolve_and_describe_the_kind(name):
    kind = KINDS[name]
    assert kind.label and kind.vllm_version and kind.drafts_with is SOURCES[name]
    assert all(proposers.kind(alias) is kind for alias in kind.names)
    assert set(kind.acceptance_inputs) <= set(ACCEPTANCE_INPUTS) and kind.acceptance_inputs
    assert kind.needs_draft_model == (name in DRAFTS and name != "mtp")
    keys = [o.vllm_key for o in kind.options if o.vllm_key]
    assert len(keys) == len(set(keys)) and set(keys) <= VLLM_KEYS
    if kind.engine == "vllm":
        assert kind.vllm_method and (kind.config_flags or kind.vllm_method in kind.names)


def test_an_unknown_or_unmodelled_method_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown; use one of ngram, ngram_gpu, suffix, draft"):
        proposers.kind("nope")
    with pytest.raises(ConfigError, match="Medusa heads are not modelled; the simulator models ngram"):
        proposers.kind("medusa")
    assert proposers.kind("deepseek_mtp") is proposers.kind("mimo_mtp") is KINDS["mtp"]  # vLLM rewrites both to mtp
    assert proposers.kind("draft_model") is KINDS["draft"]


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("k", [1, 3, 7])
def test_lookahead_is_vllms(name, k):
    assert KINDS[name].lookahead_slots(k) == LOOKAHEAD[name](k)


# --- memory: what each kind holds, by its definition -------------------------------------------

NETWORK = NetworkMemory(layers=ModelMemory(weight_bytes=1_000_000, kv_bytes_per_token=4096), embeddings_bytes=300_000, hidden_size=H, tensor_parallel=2)


def expected_memory(name: str) -> ModelMemory:
    layers, kv = NETWORK.layers.weight_bytes, NETWORK.layers.kv_bytes_per_token
    tp, draft = NETWORK.tensor_parallel, DRAFTS[name]
    fc = BYTES * draft.fc_inputs * H * H // tp
    if name == "draft":
        return ModelMemory(layers + NETWORK.embeddings_bytes, kv)  # its own embedding and LM head
    if name in ("eagle", "eagle_tree"):
        return ModelMemory(layers + fc, kv)  # shares the target's LM head
    if name in ("eagle3", "eagle3_tree", "eagle3_parallel"):
        return ModelMemory(layers + BYTES * (3 * H * H + 8000 * H) // tp, kv)  # and its draft-vocabulary LM head
    if name == "mtp":
        return ModelMemory(2 * (layers + BYTES * 2 * H * H // tp), 2 * kv)  # each of the target's 2 MTP layers: layer + 2h -> h fc
    if name == "dflash":
        return ModelMemory(layers + fc, kv)  # its layers and taps x h -> h fc; the target's embedding and LM head
    raise AssertionError(name)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_memory_matches_its_definition(name):
    kind = KINDS[name]
    if not kind.runs_network:
        with pytest.raises(NotImplementedError):
            kind.draft_memory(NETWORK, settings(name))
        return
    assert kind.draft_memory(NETWORK, settings(name)) == expected_memory(name)


# --- a step's cost is the sum of its passes --------------------------------------------------

class RecordingPredictor:
    """A draft predictor whose pass costs some function of its batch (any would do: the checks
    below read what it returned, not its formula); it records each pass and what it cost."""

    def __init__(self, scale: float = 1.0):
        self.scale = scale
        self.batches = []
        self.returned = []

    def pass_seconds(self, batch, logits_rows):
        multi = getattr(batch, "decode_rows", None)
        self.batches.append((list(batch.num_q_tokens), list(batch.num_kv_tokens), logits_rows, multi))
        seconds = self.scale * (1e-6 * sum(batch.num_q_tokens) + 1e-8 * sum(batch.num_kv_tokens) + 1e-5 * logits_rows)
        self.returned.append(seconds)
        return seconds


class ConstantPredictor:
    """A draft predictor whose every pass costs ``ms``, whatever its batch."""

    def __init__(self, ms: float):
        self.seconds = ms * 1e-3

    def pass_seconds(self, batch, logits_rows):
        return self.seconds


def _request(processed: int, prompt: int = 100):
    return SimpleNamespace(num_processed_tokens=processed, num_prefill_tokens=prompt, is_prefill_complete=processed >= prompt)


def sampled_step(rng, rows: int, k: int, tree_nodes: int = 0) -> StepPlan:
    """A step of ``rows`` decode rows (random k', accepted, context) and a prefill chunk that finishes."""
    requests, computed, kv, decode, proposals, accepted, progress = [], [], [], [], [], [], []
    for _ in range(rows):
        p = tree_nodes if tree_nodes else int(rng.integers(0, k + 1))
        a = int(rng.integers(0, min(p, k) + 1))
        context = int(rng.integers(100, 3000))
        requests.append(_request(context))
        computed.append(p + 1), kv.append(context + p + 1), decode.append(True), proposals.append(p), accepted.append(a), progress.append(a + 1)
    requests.append(_request(40, prompt=100))
    computed.append(60), kv.append(100), decode.append(False), proposals.append(0), accepted.append(0), progress.append(60)
    return StepPlan(requests, computed, kv, decode, proposals, accepted, progress)


DEVICE = get_device("h100")
SHAPE = ModelShape(num_q_heads=8, num_kv_heads=2, embedding_dim=H, mlp_hidden_dim=4 * H, vocab_size=32000)
OVERHEAD_MS = 0.3


def test_a_steps_cost_worked_by_hand():
    """Host time, a token scan and two passes (one with the fc GEMM and the context K/V
    projections), each priced by hand on round numbers (tests/round_device.py) for a 3-layer
    drafter of hidden 256 with 2 KV heads of 64: every term once, the fixed cost once per pass."""
    cost = ProposerCost(None, ConstantPredictor(1.0), SMALL, 3, ROUND, pass_overhead_ms=0.3)
    work = StepWork(
        host_seconds=5e-6,
        scans=(TokenScan(1e6),),
        passes=(DraftPass((), 0, fc_inputs=3, fc_tokens=64, context_kv_tokens=64), DraftPass((), 0)),
    )
    us = (
        5  # host
        + 2 + 1e6 / (1e6 / 4)  # the scan: 1 MB at add 1/4 of 1 TB/s, 2 us launch: 6
        + 1000 + 300  # first pass: the predictor's 1 ms and the fixed 0.3 ms
        + 10 + 2 * (64 * 768 + 256 * 768 + 64 * 256) / 1e6  # its fc GEMM [64, 3 x 256] x [768, 256]: 10.524288
        + 3 * (10 + 2 * (64 * 256 + 256 * 256 + 64 * 256) / 1e6)  # K and V of 64 tokens, [64, 256] x [256, 2 x 2 x 64], 3 layers: 30.589824
        + 1000 + 300  # second pass
    )
    assert us == pytest.approx(2652.114112, rel=1e-12)
    assert cost.work_seconds(work) == pytest.approx(2652.114112e-6, rel=1e-9)


def expected_passes(name: str, step: StepPlan, s: SpeculationSettings) -> int:
    depth = step.max_proposals
    if name in ("ngram", "ngram_gpu", "suffix"):
        return 0
    if name in ("dflash", "eagle3_parallel"):
        return 1 if depth else 0  # parallel drafting: one pass whatever k
    if name in ("eagle_tree", "eagle3_tree"):
        return s.k if depth else 0  # the draft-extend pass and depth - 1 top-k passes
    return depth  # one pass per draft token (a draft model's prefill rides in its first)


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_steps_cost_is_the_sum_of_its_passes(name, seed):
    rng = np.random.default_rng(seed)
    kind, s = KINDS[name], settings(name)
    tree = kind.tree(s)
    step = sampled_step(rng, rows=int(rng.integers(1, 9)), k=s.k, tree_nodes=tree.nodes if tree else 0)
    predictor = RecordingPredictor()
    cost = ProposerCost(kind.step_cost(s), predictor, SHAPE, 3, DEVICE, OVERHEAD_MS)
    seconds = cost.step_seconds(SpeculativeBatch.of_plan(0, step))
    work = kind.step_cost(s).work(step)
    assert len(work.passes) == len(predictor.batches) == expected_passes(name, step, s)
    n = len(work.passes)

    def priced(predictor, overhead_ms=OVERHEAD_MS, what=work):
        return ProposerCost(kind.step_cost(s), predictor, SHAPE, 3, DEVICE, overhead_ms).work_seconds(what)

    # each pass's forward counts once, as the predictor priced it: doubling the predictor adds what it returned
    doubled = RecordingPredictor(scale=2.0)
    assert priced(doubled) - seconds == pytest.approx(sum(predictor.returned), rel=1e-9, abs=1e-15)
    assert sum(doubled.returned) == pytest.approx(2 * sum(predictor.returned), rel=1e-12)
    # each pass pays the fixed cost once
    assert seconds - priced(RecordingPredictor(), overhead_ms=0.0) == pytest.approx(n * OVERHEAD_MS * 1e-3, rel=1e-9, abs=1e-15)
    # additive across a split of the step's work: the host time and scans with the first passes, then the rest
    for i in range(n + 1):
        first, rest = dataclasses.replace(work, passes=work.passes[:i]), StepWork(passes=work.passes[i:])
        assert priced(RecordingPredictor(), what=first) + priced(RecordingPredictor(), what=rest) == pytest.approx(seconds, rel=1e-12)
    sampling = sum(step.samples(i) for i in range(len(step.requests)))
    if name in ("eagle", "eagle3", "mtp") and work.passes:
        assert predictor.batches[0][0] == step.computed  # pass 0 over every token the target computed
        assert all(b[0] == [1] * sampling for b in predictor.batches[1:])  # then one token per sampling request
    if name == "dflash" and work.passes:
        k = step.max_proposals
        assert predictor.batches[0][0] == [k + 1] * sampling and predictor.batches[0][2] == k * sampling  # anchor + k masks, k logits each
        assert work.passes[0].context_kv_tokens == sum(step.computed)
    if name == "eagle3_parallel" and work.passes:
        k = step.max_proposals
        assert predictor.batches[0][0] == [q + (k - 1) for q in step.computed[:-1]] + [step.computed[-1] + k - 1]
    if name.endswith("_tree") and work.passes:
        assert all(b[0] == [3] * sampling and b[2] == 3 * sampling for b in predictor.batches[1:])  # top-k queries and logits
    if name == "ngram":
        assert seconds == (0.25e-3 if step.num_proposals else 0.0)
    if name == "ngram_gpu":
        assert [scan.bytes for scan in work.scans] == [4.0 * n * sum(kv - q + p for kv, q, p, d in zip(step.kv_tokens, step.computed, step.progress, step.decode) if d) for n in (2, 3, 4)]
    if name == "suffix":
        tokens = sum(p for p, d in zip(step.progress, step.decode) if d) + 1  # the finishing prefill samples one
        assert seconds == pytest.approx(tokens * 20e-6)  # the 20 us per token OPTIONS sets, not the kind's default


def test_the_suffix_lookups_default_is_its_sources_two_timings():
    """Arctic Inference PR #212 (snowflakedb/ArcticInference): spec_ms_per_tok and update_ms_per_tok, the lookup and the tree update:
    0.006288 + 0.004126 ms = 10.414 us per generated token."""
    assert KINDS["suffix"].resolve_options({})["suffix_lookup_us_per_token"] == pytest.approx(1e3 * (0.006288 + 0.004126), rel=1e-12)


# --- the recommended config round-trips through vLLM's key names -------------------------------

@pytest.mark.parametrize("name", sorted(n for n, k in KINDS.items() if k.engine == "vllm"))
def test_the_recommended_config_round_trips_through_vllms_keys(name):
    kind = KINDS[name]
    given = {"ngram": {"prompt_lookup_max": 3}, "ngram_gpu": {"prompt_lookup_max": 6, "prompt_lookup_min": 2},
             "suffix": {"suffix_max_tree_depth": 16, "suffix_min_token_prob": 0.2}}.get(name, {})
    s = SpeculationSettings(k=3, options=kind.resolve_options(given))
    draft = "some/draft" if kind.needs_draft_model else None
    config = json.loads(json.dumps(kind.speculative_config(s, draft, 1 if kind.runs_network else None)))
    assert set(config) <= VLLM_KEYS and config["method"] == kind.vllm_method and config["num_speculative_tokens"] == 3
    back, s2, draft2, tp2 = proposers.from_speculative_config(config)
    assert back is kind and draft2 == draft and s2.k == 3
    assert {k: v for k, v in s2.options.items() if k in given} == given  # what vLLM is told comes back
    if name == "eagle3_parallel":
        assert config["parallel_drafting"] is True
        assert proposers.from_speculative_config({**config, "parallel_drafting": False})[0] is KINDS["eagle3"]


@pytest.mark.parametrize("name", ["eagle_tree", "eagle3_tree"])
def test_a_trees_launch_flags_round_trip_through_sglangs_names(name):
    kind = KINDS[name]
    s = SpeculationSettings(k=8, options=kind.resolve_options({"eagle_topk": 8, "num_draft_tokens": 64}))
    flags = dict(flag.split(" ", 1) for flag in kind.launch_flags(s, "some/head"))
    assert flags["--speculative-algorithm"] == ("EAGLE" if name == "eagle_tree" else "EAGLE3")
    assert kind.from_launch_flags(flags) == s
    assert kind.serve_command("t", kind.launch_flags(s, "some/head"), None).startswith("python3 -m sglang.launch_server --model t --speculative-algorithm")
    with pytest.raises(ConfigError, match="no vLLM --speculative-config"):
        kind.speculative_config(s, "some/head", None)
