"""vLLM 0.15 to 0.30 as engine profiles (issue 30 item 1): each rule at hand-worked points, read
from vLLM's source (docs/sources/engines.md), not from this package's output."""

from __future__ import annotations

import pytest

from simulator.cli import vllm_serve
from simulator.profiles.engines import DEFAULT_ENGINE, engine_for_version, get_engine
from simulator.util.errors import ConfigError


def test_the_default_is_the_newest_release_modelled():
    assert DEFAULT_ENGINE == "vllm-0.30.0" and vllm_serve.default_version() == "0.30.0"


def test_a_newer_minor_release_is_refused_and_a_patch_runs_as_its_minor():
    assert vllm_serve.parse_version("0.30.2") == "0.30.2" and engine_for_version("0.30.2").name == "vllm-0.30.0"
    with pytest.raises(ConfigError, match="--vllm-version 0.31.0: newer than vLLM 0.30.0"):
        vllm_serve.parse_version("0.31.0")


def test_capture_sizes_without_speculation():
    # min(max_num_seqs x 1 x 2, 512) = 256 at 128 sequences: 1, 2, 4, 8, ..., 248 (every 8), 256
    engine = get_engine("vllm-0.30.0").for_run(max_num_seqs=128, max_num_batched_tokens=2048)
    assert engine.capture_sizes == (1, 2, 4, *range(8, 256, 8), 256)
    # 512 at 1024 sequences: every 16 from 256 to 512
    engine = get_engine("vllm-0.30.0").for_run(max_num_seqs=1024, max_num_batched_tokens=8192)
    assert engine.capture_sizes[-3:] == (480, 496, 512) and 264 not in engine.capture_sizes
    # never above max_num_batched_tokens
    assert get_engine("vllm-0.15.1").for_run(max_num_seqs=1024, max_num_batched_tokens=100).max_capture_size == 96


def test_the_v1_runner_rounds_capture_sizes_to_multiples_of_k_plus_one():
    # k = 3 (draft models run on the V1 runner even in 0.30): sizes rounded up to multiples of 4, up to 512
    engine = get_engine("vllm-0.30.0").for_run(1024, 8192, k=3, method="draft")
    assert engine.runner_for("draft") == "v1"
    assert all(size % 4 == 0 for size in engine.capture_sizes) and engine.capture_sizes[:3] == (4, 8, 16)
    # 37 requests verifying 4 tokens each: 148 tokens, padded to 152 in a full graph
    assert engine.mode(148, 4) == "full" and engine.padded(148, 4) == 152
    # the V1 runner keys its full graphs on the run's query length: a uniform batch of 1-token rows
    # (a draft pass, a step where no row drafts) replays the pieces, padded to the rounded sizes
    assert engine.mode(37, 1) == "piecewise" and engine.padded(37) == 40
    # 129 requests at k = 4 in 0.15.1: 645 tokens; the grid's 496 rounds up to 500, its 512 to 515 > 512 (dropped): eager
    engine = get_engine("vllm-0.15.1").for_run(1024, 8192, k=4, method="eagle3")
    assert engine.max_capture_size == 500 and engine.mode(645, True) == "eager"


def test_model_runner_v2_pads_a_verify_batch_to_a_multiple_of_its_query_length():
    engine = get_engine("vllm-0.30.0").for_run(1024, 8192, k=4, method="eagle3")
    assert engine.runner_for("eagle3") == "mrv2"
    # 37 requests x 5 = 185 tokens: the grid's 184 rounded up to a multiple of 5 is captured (cudagraph_utils.py)
    assert engine.mode(185, 5) == "full" and engine.padded(185, 5) == 185
    # 38 x 5 = 190: the grid's 192 rounds to 195, the request counts' 40 x 5 = 200 is larger: 195
    assert engine.padded(190, 5) == 195
    # a fixed-k run captures full graphs for its own query length only: a uniform batch of 1-token rows replays pieces
    assert engine.mode(37, 1) == "piecewise" and engine.padded(37) == 40
    # with a schedule, a k = 0 step (1 token a request) has a tier of its own
    dynamic = get_engine("vllm-0.30.0").for_run(1024, 8192, k=4, method="eagle3", dynamic=True, schedule_ks=(4, 0))
    assert dynamic.uniform_tiers == (1, 5) and dynamic.mode(37, 1) == "full" and dynamic.padded(37, 1) == 40
    # 103 requests x 5 = 515 tokens: above the 512 ceiling, eager
    assert engine.mode(515, 5) == "eager"
    # parallel-drafting EAGLE falls back to the V1 runner in 0.30.0
    assert engine.runner_for("eagle3_parallel") == "v1"


def test_the_drafter_has_its_own_graphs():
    """vLLM's V1 drafter captures piecewise graphs only; Model Runner V2's replays full graphs for one-token passes."""
    v1 = get_engine("vllm-0.24.0").for_run(1024, 8192, k=3, method="eagle3")
    assert v1.drafter("eagle3").mode(16, 1) == "piecewise" and v1.mode(64, 4) == "full"
    mrv2 = get_engine("vllm-0.30.0").for_run(1024, 8192, k=3, method="eagle3")
    assert mrv2.drafter("eagle3").mode(16, 1) == "full" and mrv2.mode(16, 1) == "piecewise"
    assert get_engine("vllm-0.10.1").drafter("eagle3") == get_engine("vllm-0.10.1")  # the fixed profiles as they were


def test_a_k_schedule_on_the_v1_runner_runs_piecewise():
    v1 = get_engine("vllm-0.24.0").for_run(1024, 8192, k=4, method="eagle3", dynamic=True)
    assert v1.cudagraph_mode == "piecewise" and v1.mode(40, True) == "piecewise"
    # without full decode graphs the V1 runner does not round the sizes (compilation.py: only when decode_mode() == FULL)
    assert v1.capture_sizes[:4] == (1, 2, 4, 8)
    mrv2 = get_engine("vllm-0.30.0").for_run(1024, 8192, k=4, method="eagle3", dynamic=True)
    assert mrv2.cudagraph_mode == "full_and_piecewise"
    assert get_engine("vllm-0.30.0").for_run(1024, 8192, k=4, method="draft", dynamic=True).cudagraph_mode == "piecewise"


@pytest.mark.parametrize(("version", "method", "overlaps"), [
    ("vllm-0.14.0", "eagle3", True), ("vllm-0.14.0", "draft", False),  # the kind's own rule (vLLM 0.14's EAGLE/MTP kind)
    ("vllm-0.15.1", "draft", False), ("vllm-0.19.0", "draft", False), ("vllm-0.19.0", "ngram_gpu", True),
    ("vllm-0.19.0", "dflash", False), ("vllm-0.24.0", "dflash", True), ("vllm-0.24.0", "draft", False), ("vllm-0.29.0", "draft", True),
    ("vllm-0.30.0", "ngram", False), ("vllm-0.30.0", "suffix", False), ("vllm-0.30.0", "mtp", True), ("vllm-0.30.0", None, True),
    ("vllm-0.10.1", None, False),
])
def test_async_scheduling_by_version_and_proposer(version, method, overlaps):
    from simulator.speculative import proposers

    kind_rule = proposers.kind(method).async_scheduling if method else False
    assert get_engine(version).overlaps(method, kind_rule) is overlaps


def test_model_runner_v2_drafts_the_full_k_under_a_schedule():
    """vLLM 0.29/0.30's Model Runner V2 never reads the scheduler's per-step k (only its graph sizes follow
    the schedule): the drafter runs its prefill and k - 1 passes even where the schedule verifies k = 0;
    the V1 runner drafts the step's own k (a K = 0 step runs the first pass only)."""
    from simulator import ClosedLoopWorkload, RunConfig, SpeculationConfig
    from simulator.engine.resolve import resolve_run
    from simulator.engine.simulation import FullDepthDrafting
    from simulator.speculative.step import StepPlan

    def plan(version, proposer, draft):
        spec = SpeculationConfig(k_schedule=((1, 4, 3), (5, 1024, 0)), acceptance_rate=0.7, proposer=proposer, draft_model=draft)
        config = RunConfig(workload=ClosedLoopWorkload.fixed(8, 16, 64, 32), model="meta-llama/Llama-3.1-8B-Instruct", device="h100",
                           speculation=spec, engine=engine_for_version(version).name, batch_size_cap=1024, chunk_size=8192)
        return resolve_run(config).proposer

    assert plan("0.30.0", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").drafts_full_k == 3
    assert plan("0.24.0", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").drafts_full_k == 0
    assert plan("0.30.0", "draft", "JackFram/llama-68m").drafts_full_k == 0  # draft models run on the V1 runner

    class _Request:
        id, num_processed_tokens, num_prefill_tokens = 0, 300, 100

    from simulator.speculative import proposers
    from simulator.speculative.proposers.base import ModelFacts, SpeculationSettings

    model = proposers.kind("eagle3").step_cost(SpeculationSettings(k=3, draft=ModelFacts("d", "X", 4096, 32000, 1, fc_inputs=3)))
    k0 = StepPlan([_Request(), _Request()], [1, 1], [301, 401], [True, True], [0, 0], [0, 0], [1, 1])
    assert len(model.work(k0).passes) == 1 and model.work(k0).passes[0].logits_rows == 0  # V1: the catch-up pass
    full = FullDepthDrafting(model, 3).work(k0)
    assert len(full.passes) == 3 and full.passes[0].logits_rows == 2  # MRV2: prefill + 2 passes, each sampling
