"""The typed deployment every front end builds (issue 34): it reaches every field of a run, its
defaults are the run's, its flat keys are the run's, and the cross-field rules refuse through it."""

from dataclasses import fields

import pytest

from simulator.profiles.step_scales import StepScales
from simulator.runs.cache import run_key
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload
from simulator.runs.deployment import Deployment, Parallelism, Precision, SchedulerLimits, Speculation, StepCosts
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.proposers.base import DraftPassOptions
from simulator.speculative.proposers.ngram import LookupOptions
from simulator.util.errors import ConfigError

RUN_ONLY = {"workload", "seed", "cache_dir", "speculation"}


def test_an_empty_deployment_is_the_default_run():
    assert Deployment().run() == RunConfig()


def test_a_deployment_runs_as_the_hand_built_config_with_the_same_cache_key():
    deployment = Deployment(
        model="meta-llama/Llama-2-7b-hf", parallelism=Parallelism(tensor=2),
        speculation=Speculation(proposer="draft", k=4, acceptance=AcceptanceInput.given(rate=0.7), draft_model="JackFram/llama-68m", draft_tensor_parallel_size=1),
    )
    built = RunConfig(
        speculation=SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7, proposer="draft", draft_model="JackFram/llama-68m", draft_tensor_parallel_size=1),
        model="meta-llama/Llama-2-7b-hf", tensor_parallel_size=2, seed=3,
    )
    assert deployment.run(seed=3) == built and run_key(deployment.run(seed=3)) == run_key(built)
    assert deployment.without_speculation().run(seed=3) == RunConfig(model="meta-llama/Llama-2-7b-hf", tensor_parallel_size=2, seed=3)


def test_its_flat_keys_are_the_runs_keys():
    run_keys = {f.name for f in fields(RunConfig)} - RUN_ONLY
    speculation_keys = {f.name for f in fields(SpeculationConfig)}
    assert set(Deployment().to_dict()) == run_keys | speculation_keys


def test_every_field_of_a_run_is_reachable():
    """A deployment with every value away from its default changes every flat key of the run:
    no field of RunConfig or SpeculationConfig is dropped on the way."""
    unusual = Deployment(
        model="meta-llama/Llama-3.1-8B-Instruct", device="h100", engine="vllm-0.30.0",
        parallelism=Parallelism(tensor=2, pipeline=1, data=1, expert=False),
        limits=SchedulerLimits(max_num_batched_tokens=4096, max_num_seqs=64, block_size=32, num_kv_blocks=5000),
        precision=Precision(quantization="fp8", kv_cache_dtype="fp8"),
        costs=StepCosts(engine_overhead_ms=2.5, lm_head=False, step_scales=StepScales(gemm=1.1), moe_routing_skew=0.5),
        speculation=Speculation(
            proposer="eagle3", k=3, acceptance=AcceptanceInput.given(per_position=(0.8, 0.6, 0.5)),
            draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", draft_tensor_parallel_size=1, adaptive_verification=True,
            proposal_probability=0.9, attention="per_token", interpolation=0.25, costs=DraftPassOptions(draft_pass_overhead_ms=0.5),
        ),
    )
    got, default = unusual.to_dict(), Deployment().to_dict()
    # pipeline stages, data parallelism and expert parallelism are refused away from their defaults on a dense
    # model, profile directories need folders, a schedule excludes adaptive verification, a fixed k has no acceptance rate
    untouched = {"scheduler", "pipeline_stages", "data_parallel_size", "expert_parallel", "profile_dir", "network_profile_dir",
                 "draft_profile_dir", "k_schedule", "acceptance_rate", "options", "ngram_overhead_ms"}  # an EAGLE-3 head has no n-gram knob
    assert sorted(key for key in got if got[key] == default[key] and key not in untouched | {"engine"}) == []
    lookup = Deployment(speculation=Speculation(proposer="ngram", k=2, acceptance=AcceptanceInput.given(rate=0.5), costs=LookupOptions(ngram_overhead_ms=0.2)))
    assert lookup.to_dict()["ngram_overhead_ms"] == 0.2 != default["ngram_overhead_ms"]
    assert Deployment(engine="vllm-0.10.1").to_dict()["engine"] == "vllm-0.10.1" != default["engine"]  # the default is the newest


def test_the_cross_field_rules_refuse_through_the_deployment():
    with pytest.raises(ConfigError, match=r"^draft_tensor_parallel_size = 2: must be 1 or the target's tensor_parallel_size \(4\)$"):
        Deployment(parallelism=Parallelism(tensor=4), speculation=Speculation(proposer="draft", draft_model="JackFram/llama-68m", draft_tensor_parallel_size=2)).checked()
    with pytest.raises(ConfigError, match=r"^draft_tensor_parallel_size = 1: proposer = 'suffix' runs no draft network"):
        Deployment(speculation=Speculation(proposer="suffix", draft_tensor_parallel_size=1)).checked()
    with pytest.raises(ConfigError, match="give exactly one of acceptance_rate or acceptance_per_position"):
        Deployment(speculation=Speculation(k=2)).run(ClosedLoopWorkload.fixed(1, 2, 64, 16))
