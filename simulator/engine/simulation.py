"""Run one resolved simulation: build Vidur's configs, run Vidur's event loop, frame the results.

The run arrives resolved (:mod:`simulator.engine.resolve`): this module looks nothing up.
Nothing is written outside the cache directory: Vidur's metrics, traces and config dump are
off and its output directory is never created.
"""

from __future__ import annotations

from dataclasses import fields, replace

from simulator.runs.workload_kinds import ClosedLoopWorkload
from simulator.engine.closed_loop import ClosedLoopSimulator
from simulator.engine.generator import WorkloadRequestGeneratorConfig
from simulator.engine import analytic, predictor  # noqa: F401  (register the built-in and the profile-directory predictors with Vidur's registry)
from simulator.engine.proposers import ProposerCost
from simulator.engine.resolve import ModelSide, ResolvedRun, SchedulerPlan
from simulator.engine.scheduler import SpeculativeSarathiSchedulerConfig, TrackedSarathiScheduler, TrackedSarathiSchedulerConfig
from simulator.runs.results import RunResult, inter_token_gaps, request_frame, summarize
from simulator.util.versions import simulator_version, source_hash, vidur_version
from simulator.vidur.configs import CacheConfig, ClusterConfig, InMemorySimulationConfig, QuietMetricsConfig, RoundRobinGlobalSchedulerConfig
from simulator.vidur.runtime import ExecutionTimePredictorRegistry, Simulator
from simulator.vidur.seam import generated_requests, replica_scheduler, reset_entity_ids


def side_predictor(run: ResolvedRun, side: ModelSide):
    """One model's predictor, from Vidur's registry: the step-time model for the built-in profile,
    Vidur's forest (tables loaded from the cache or fitted) for a profile directory."""
    config = side.predictor
    return ExecutionTimePredictorRegistry.get(
        config.get_type(), predictor_config=config, replica_config=side.replica, cache_config=CacheConfig(block_size=run.block_size)
    )


def warm_predictors(run: ResolvedRun) -> None:
    """Prepare every predictor ``run`` needs (the target's and a draft's or head's) in this process."""
    side_predictor(run, run.target)
    if run.draft is not None:
        side_predictor(run, run.draft)


def proposer(run: ResolvedRun):
    """What proposing costs in this run (None without speculation): the proposer kind's step work,
    priced with the draft side's predictor when the kind runs a network."""
    plan = run.proposer
    if plan is None:
        return None
    model = plan.kind.step_cost(run.settings)
    if plan.drafts_full_k:
        model = FullDepthDrafting(model, plan.drafts_full_k)
    if run.draft is None:
        return ProposerCost(model, device=run.device)
    draft = run.draft
    return ProposerCost(model, side_predictor(run, draft), draft.shape.sharded(draft.tensor_parallel), draft.model.num_layers, run.device, plan.draft_pass_overhead_ms)


class FullDepthDrafting:
    """A kind's step work as Model Runner V2 drafts under a k schedule: every decode row drafts the
    full ``k`` (the drafter's prefill, then its k - 1 passes), whatever the step verifies; the step's
    own plan (what is verified, accepted and advanced) is untouched."""

    def __init__(self, model, k: int):
        self.model, self.k = model, k

    def work(self, step):
        if step.max_proposals >= self.k:
            return self.model.work(step)
        drafting = replace(step, proposals=[self.k if decode else 0 for decode in step.decode])
        return self.model.work(drafting)


def _scheduler_config(plan: SchedulerPlan):
    """Vidur's replica-scheduler config from the resolved plan."""
    if plan.verify is None:
        return TrackedSarathiSchedulerConfig(chunk_size=plan.chunk_size, batch_size_cap=plan.batch_size_cap)
    verify = {f.name: getattr(plan.verify, f.name) for f in fields(plan.verify)}  # as they are (a tree stays an object)
    return SpeculativeSarathiSchedulerConfig(chunk_size=plan.chunk_size, batch_size_cap=plan.batch_size_cap, **verify)


def vidur_config(run: ResolvedRun, proposer_=None) -> InMemorySimulationConfig:
    """Vidur's simulation config for ``run``; the proposer reaches the target's predictor through
    its configuration."""
    return InMemorySimulationConfig(
        seed=run.seed,
        cluster_config=ClusterConfig(
            num_replicas=1,
            replica_config=run.target.replica,
            cache_config=CacheConfig(block_size=run.block_size, num_blocks=run.memory.num_kv_blocks),
            global_scheduler_config=RoundRobinGlobalSchedulerConfig(),
            replica_scheduler_config=_scheduler_config(run.scheduler),
        ),
        request_generator_config=WorkloadRequestGeneratorConfig(workload=run.workload, max_tokens=run.workload.max_request_tokens),
        execution_time_predictor_config=replace(run.target.predictor, proposer=proposer_),
        metrics_config=QuietMetricsConfig(),
    )


def simulate(run: ResolvedRun) -> RunResult:
    """Simulate a resolved run (its ``config`` is only handed to the result, as its provenance)."""
    cost_of_proposing = proposer(run)
    reset_entity_ids()
    sim_config = vidur_config(run, cost_of_proposing)
    workload = run.workload
    if isinstance(workload, ClosedLoopWorkload):
        sim = ClosedLoopSimulator(sim_config, workload.concurrency, workload.turnaround_s)
    else:
        sim = Simulator(sim_config)
    scheduler: TrackedSarathiScheduler = replica_scheduler(sim)
    sim.run()

    requests = generated_requests(sim)
    frame = request_frame(requests)
    makespan = max(r.completed_at for r in requests) - min(r.arrived_at for r in requests)
    verify = run.scheduler.verify
    summary = summarize(
        frame,
        makespan,
        {
            "peak_kv_blocks": scheduler.peak_allocated_blocks,
            "kv_blocks_total": scheduler.num_blocks,
            "peak_kv_fraction": scheduler.peak_allocated_blocks / scheduler.num_blocks,
            "forward_passes": scheduler.forward_passes,
            # mean k over planned steps: the fixed k, or what a k schedule picked on average
            "mean_scheduled_k": scheduler.scheduled_k_sum / scheduler.scheduled_k_steps
            if getattr(scheduler, "scheduled_k_steps", 0)
            else float(verify.num_speculative_tokens if verify else 0),
        },
        itl_s=inter_token_gaps(r.emission_times for r in requests),
    )
    given = run.provenance
    provenance = {
        **run.target.profile.provenance(),
        "device": given["device"],
        "model": given["model"],
        "vidur_version": vidur_version(),
        "simulator_version": simulator_version(),
        "simulator_source_hash": source_hash(),
        "seed": given["seed"],
        "workload_seed": given["workload_seed"],
        "engine_overhead_ms": given["engine_overhead_ms"],
        "engine": run.engine.name,
        "lm_head_source": given["lm_head_source"],
    }
    if run.draft is not None:
        provenance.update({f"draft_{key}": value for key, value in run.draft.profile.provenance().items()})
    return RunResult(run.config, frame, summary, provenance, {r.id: list(r.acceptance_log) for r in requests}, {r.id: list(r.emission_times) for r in requests})
