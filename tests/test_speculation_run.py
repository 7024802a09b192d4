"""Speculative runs through Vidur: progress, invariants, cost assumptions, memory, common random numbers."""

import math

import pytest

import simulator
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ExplicitWorkload, PoissonWorkload
from simulator.engine import simulation
from simulator.engine.batch import SpeculativeBatch
from simulator.vidur.models import shape_of
from simulator.engine.memory_plan import model_memory
from simulator.engine.resolve import resolve_run
from simulator.engine.scheduler import SpeculativeSarathiScheduler
from simulator.util.errors import ConfigError
from simulator.speculative.progress import expected_progress
from simulator.profiles.attention import AttentionRows, attention_ms
from simulator.vidur.entities import Request
from simulator.vidur.seam import mark_prefill_complete


def _isolated(num_requests: int, output_tokens: int, gap_s: float = 1000.0) -> ExplicitWorkload:
    """Requests so far apart that each runs alone (batch 1, no contention)."""
    return ExplicitWorkload(
        arrival_s=tuple(i * gap_s for i in range(num_requests)),
        prompt_tokens=(32,) * num_requests,
        output_tokens=(output_tokens,) * num_requests,
    )


def _target_predictor(config: RunConfig):
    run = resolve_run(config)
    return simulation.side_predictor(run, run.target)


def spec(k, alpha, **kwargs):
    return SpeculationConfig(num_speculative_tokens=k, acceptance_rate=alpha, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.5, 0.7, 0.9])
@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.simulation
def test_mean_progress_matches_closed_form_at_batch_1(alpha, k):
    expected = expected_progress(alpha, k)
    target_steps = 30000  # standard error of the mean <= 0.4%: a 1% miss is a real bias
    requests = math.ceil(target_steps * expected / 4000)
    result = simulator.run(RunConfig(workload=_isolated(requests, 4000), speculation=spec(k, alpha), seed=11))
    s = result.summary
    assert s["verify_steps"] >= target_steps * 0.95
    # realized progress per verify step = accepted + 1, i.e. vLLM's mean acceptance length
    assert s["mean_acceptance_length"] == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.simulation
def test_alpha_zero_and_one_are_exact(k):
    never = simulator.run(RunConfig(workload=_isolated(3, 200), speculation=spec(k, 0.0)))
    assert never.summary["accepted_tokens"] == 0 and never.summary["mean_acceptance_length"] == 1
    always = simulator.run(RunConfig(workload=_isolated(3, 200), speculation=spec(k, 1.0)))
    assert always.summary["accepted_tokens"] == always.summary["proposed_tokens"]
    full_steps = [pair for log in always.acceptance_logs.values() for pair in log if pair[0] == k]
    assert full_steps and all(accepted == k for _, accepted in full_steps)


def test_verify_step_cost_ordering_and_formula():
    predictors = {
        mode: _target_predictor(RunConfig(speculation=spec(4, 0.7, attention=mode, interpolation=0.5)))
        for mode in ("kv_once", "interpolated", "per_token")
    }
    requests = [Request(0.0, 1000, 100) for _ in range(24)]
    for r in requests:
        mark_prefill_complete(r)
    kv = [1005 + 37 * i for i in range(24)]
    batch = lambda: SpeculativeBatch(0, requests, [5] * 24, kv, [True] * 24)  # noqa: E731
    times = {mode: p.get_execution_time(batch(), 0) for mode, p in predictors.items()}
    assert times["kv_once"].total_time < times["interpolated"].total_time < times["per_token"].total_time
    # the attention term is verify_cost's definition over the backend's decode cost (a verify row
    # attends over its cache and its own 5 tokens)
    model = predictors["kv_once"].predictor_config.step_model
    lookup = lambda b, mean_kv: attention_ms(AttentionRows(decode=((1, mean_kv),) * b), model.shape, model.device)  # noqa: E731
    per_layer = {mode: times[mode].cost.attention_ms / model.num_layers for mode in times}
    mean_kv = sum(kv) / 24 + 5  # every row has 5 query tokens, so the weighted and plain means agree
    # KV-once = the decode cost of a batch of B queries over the mean cache; per-token = a batch of
    # B (k + 1) queries; interpolated at 0.5 = halfway between them
    once, per_token = lookup(24, mean_kv), lookup(24 * 5, mean_kv)
    assert per_layer["kv_once"] == pytest.approx(once, rel=1e-9)
    assert per_layer["per_token"] == pytest.approx(per_token, rel=1e-9)
    assert per_layer["interpolated"] == pytest.approx((once + per_token) / 2, rel=1e-9)


@pytest.fixture
def recorded_batches(monkeypatch):
    seen = []
    original = SpeculativeSarathiScheduler.next_batch

    def recording(self, time):
        batch = original(self, time)
        if batch is not None:
            seen.append((self, list(batch.num_q_tokens), self.allocated_blocks))
        return batch

    monkeypatch.setattr(SpeculativeSarathiScheduler, SpeculativeSarathiScheduler.vidur_name("next_batch"), recording)
    return seen


@pytest.mark.simulation
def test_budget_outputs_and_kv_invariants_under_pressure(recorded_batches):
    config = RunConfig(
        workload=PoissonWorkload(num_requests=80, prompt_tokens=900, output_tokens=300, arrival_rate=30.0, seed=5),
        speculation=spec(8, 0.8),
        chunk_size=256,
        num_kv_blocks=1000,  # small enough to force preemptions
    )
    result = simulator.run(config)
    assert recorded_batches
    for scheduler, computed, allocated in recorded_batches:
        assert sum(computed) <= config.chunk_size
        assert 0 <= allocated <= scheduler.num_blocks
    assert result.summary["preemptions"] > 0  # the restart path ran (and did not trip Vidur's assertions)
    assert (result.requests.output_tokens == 300).all()
    for log in result.acceptance_logs.values():
        assert all(0 <= accepted <= proposed <= 8 for proposed, accepted in log)
    assert result.summary["peak_kv_blocks"] <= 1000


@pytest.mark.simulation
def test_common_random_numbers_across_attention_modes():
    workload = PoissonWorkload(num_requests=30, arrival_rate=1.0, seed=9)
    once = simulator.run(RunConfig(workload=workload, speculation=spec(4, 0.7, attention="kv_once"), seed=4))
    per_token = simulator.run(RunConfig(workload=workload, speculation=spec(4, 0.7, attention="per_token"), seed=4))
    assert once.acceptance_logs == per_token.acceptance_logs
    assert (per_token.requests.tpot_s >= once.requests.tpot_s).all()
    other_seed = simulator.run(RunConfig(workload=workload, speculation=spec(4, 0.7, attention="kv_once"), seed=5))
    assert other_seed.acceptance_logs != once.acceptance_logs


@pytest.mark.simulation
def test_draft_model_costs_time_and_memory():
    workload = PoissonWorkload(num_requests=30, arrival_rate=2.0, seed=2)
    ngram = simulator.run(RunConfig(workload=workload, speculation=spec(4, 0.7, ngram_overhead_ms=0.0)))
    draft = simulator.run(RunConfig(workload=workload, speculation=spec(4, 0.7, proposer="draft", draft_model="TinyLlama/TinyLlama-1.1B-Chat-v1.0")))
    assert draft.summary["kv_blocks_total"] < ngram.summary["kv_blocks_total"]
    assert draft.summary["tpot_p50_s"] > ngram.summary["tpot_p50_s"]
    # same acceptance input; schedules differ, so only the realized rates agree
    assert draft.summary.realized_acceptance_rate == pytest.approx(ngram.summary.realized_acceptance_rate, abs=0.05)


def test_draft_blocks_follow_the_memory_formula():
    config = RunConfig(speculation=spec(4, 0.7, proposer="draft", draft_model="TinyLlama/TinyLlama-1.1B-Chat-v1.0"))
    run = resolve_run(config)
    target = model_memory(run.target.replica, include_embeddings=False, shape=shape_of(run.target.replica.model_config))
    draft = model_memory(run.draft.replica, include_embeddings=True, shape=shape_of(run.draft.replica.model_config))
    usable = 80 * 2**30 * 0.9 - target.weight_bytes - draft.weight_bytes
    tokens = int(usable // (target.kv_bytes_per_token + draft.kv_bytes_per_token))
    assert run.memory.num_kv_blocks == (1280 // 16) * (tokens // 1280)


def test_draft_that_does_not_fit_is_rejected():
    config = RunConfig(speculation=spec(4, 0.7, proposer="draft", draft_model="meta-llama/Llama-2-70b-hf"))
    with pytest.raises(ConfigError, match="draft model 'meta-llama/Llama-2-70b-hf' alongside the target"):
        simulator.run(config)


@pytest.mark.parametrize("k", [0, 1, 4])
@pytest.mark.simulation
def test_preemption_in_the_middle_of_a_prompt_keeps_the_prompt(k):
    # request 1's 2048-token prompt is cut off by KV pressure part-way through its prefill
    workload = ExplicitWorkload((0.0, 0.0), (16, 2048), (300, 8))
    speculation = spec(k, 0.3) if k else SpeculationConfig()
    result = simulator.run(RunConfig(workload=workload, speculation=speculation, num_kv_blocks=130, chunk_size=128))
    late = result.requests.iloc[1]
    assert late.restarts >= 1
    assert late.output_tokens == 8
    # its first token needs the whole prompt: at least 16 chunks of 128 tokens
    assert late.ttft_s > 16 * 0.005
    assert late.tpot_s < 0.05  # 7 decode tokens, not thousands of prompt tokens turned into output


@pytest.mark.simulation
def test_draft_provenance_names_the_draft_profile():
    config = RunConfig(
        workload=PoissonWorkload(num_requests=5, arrival_rate=2.0),
        speculation=spec(2, 0.7, proposer="draft", draft_model="JackFram/llama-68m"),
    )
    provenance = simulator.run(config).provenance
    assert provenance["draft_profile_source"] == "builtin"
    assert provenance["draft_profile_sha256"] != provenance["profile_sha256"]
