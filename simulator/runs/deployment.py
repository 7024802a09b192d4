"""A deployment as a serving engineer describes it: one typed value that every front end builds.

A target model on a device, served by an engine version at a parallelism, with the scheduler's
limits, a precision, what prices its steps, and optionally a speculation (a proposer kind, k or a k
schedule, an :class:`~simulator.speculative.acceptance_convert.AcceptanceInput`, the kind's
options).  Each input form builds one with its own parser (the command lines' flags, vLLM's
``--speculative-config``, the sweep and pays-off specs, the published rows, a server's
calibration), and :meth:`Deployment.run` alone turns it, with a workload and a seed, into the
:class:`~simulator.runs.config.RunConfig` the resolver reads; so the cross-field rules (the draft-TP
rule, a k schedule against the batch) are checked in one place, and each front end maps a refusal
to its own flag names.

:meth:`Deployment.to_dict` gives a run's flat keys (RunConfig's and its speculation's field
names), and :meth:`Deployment.run` passes the fields as they are: nothing is normalised, so a run's
cache key and every CSV row is what it was when front ends spelled the fields out one by one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Optional

from simulator.profiles.engines import DEFAULT_ENGINE
from simulator.profiles.hardware import DEFAULT_DEVICE
from simulator.profiles.step_scales import StepScales
from simulator.runs import config as run_config
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload, Workload
from simulator.speculative import proposers
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.verify_cost import DEFAULT_ATTENTION, DEFAULT_INTERPOLATION


def _default(cls, name: str):
    """A field's default as the run's own dataclass declares it (one definition of each default)."""
    return next(f.default for f in fields(cls) if f.name == name)


@dataclass(frozen=True)
class Parallelism:
    """vLLM's --tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size and
    --enable-expert-parallel."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    expert: bool = False


@dataclass(frozen=True)
class SchedulerLimits:
    """vLLM's --max-num-batched-tokens (Sarathi's token budget per step) and --max-num-seqs, the KV
    cache's block size and, to override the memory planner, its block count."""

    max_num_batched_tokens: int = run_config.DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = run_config.DEFAULT_MAX_NUM_SEQS
    block_size: int = _default(RunConfig, "block_size")
    num_kv_blocks: Optional[int] = None
    scheduler: str = _default(RunConfig, "scheduler")


@dataclass(frozen=True)
class Precision:
    """vLLM's --quantization (None: the model's own) and --kv-cache-dtype."""

    quantization: Optional[str] = None
    kv_cache_dtype: str = _default(RunConfig, "kv_cache_dtype")


@dataclass(frozen=True)
class StepCosts:
    """What prices the steps besides the device: the engine's per-step CPU time, the LM head, a
    server's fitted scales, Vidur-format profile directories, the router's popularity skew."""

    engine_overhead_ms: float = run_config.DEFAULT_ENGINE_OVERHEAD_MS
    lm_head: bool = _default(RunConfig, "lm_head")
    step_scales: Optional[StepScales] = None
    profile_dir: Optional[str] = None
    network_profile_dir: Optional[str] = None
    moe_routing_skew: float = _default(RunConfig, "moe_routing_skew")


@dataclass(frozen=True)
class Speculation:
    """A proposer kind with k proposals a step (or a k schedule over the batch size), the acceptance
    it reaches, and the kind's options and draft network.  ``attention`` and ``interpolation`` say
    how the verify step's attention is priced (a modelling choice, its band's bounds).  ``costs``
    is the kind's cost knobs, an instance of its ``Options`` (the n-gram lookup's host time, a
    draft network's fixed time per pass); None takes their defaults."""

    proposer: str = _default(SpeculationConfig, "proposer")
    k: int = 0
    schedule: Optional[tuple[tuple[int, int, int], ...]] = None
    acceptance: Optional[AcceptanceInput] = None
    options: tuple[tuple[str, object], ...] = ()
    draft_model: Optional[str] = None
    draft_tensor_parallel_size: Optional[int] = None
    draft_profile_dir: Optional[str] = None
    adaptive_verification: bool = False
    proposal_probability: float = 1.0
    attention: str = DEFAULT_ATTENTION
    interpolation: float = DEFAULT_INTERPOLATION
    costs: Any = None

    def config(self) -> SpeculationConfig:
        acceptance = self.acceptance
        # the kind's knobs as the run's fields (another kind's knobs are refused; the fields of
        # knobs the kind does not own keep their defaults)
        costs = asdict(proposers.kind(self.proposer).costs(self.costs)) if self.costs is not None else {}
        return SpeculationConfig(
            num_speculative_tokens=self.k,
            k_schedule=self.schedule,
            acceptance_rate=acceptance.rate if acceptance is not None else None,
            acceptance_per_position=acceptance.per_position if acceptance is not None else None,
            proposer=self.proposer,
            options=self.options,
            draft_model=self.draft_model,
            draft_tensor_parallel_size=self.draft_tensor_parallel_size,
            draft_profile_dir=self.draft_profile_dir,
            adaptive_verification=self.adaptive_verification,
            proposal_probability=self.proposal_probability,
            attention=self.attention,
            interpolation=self.interpolation,
            **costs,
        )


@dataclass(frozen=True)
class Deployment:
    """One deployment (module docstring); ``speculation`` None runs without speculation."""

    model: str = _default(RunConfig, "model")
    device: str = DEFAULT_DEVICE
    engine: str = DEFAULT_ENGINE  # an engine profile (simulator/profiles/engines.toml), named for the vLLM version
    parallelism: Parallelism = field(default_factory=Parallelism)
    limits: SchedulerLimits = field(default_factory=SchedulerLimits)
    precision: Precision = field(default_factory=Precision)
    costs: StepCosts = field(default_factory=StepCosts)
    speculation: Optional[Speculation] = None

    def run(self, workload: Optional[Workload] = None, seed: int = 0, cache_dir: Optional[str] = None) -> RunConfig:
        """The run of this deployment on ``workload`` (default: the seed sweep's Poisson one),
        checked: a refusal names the run's field, which each front end writes as its own input."""
        p, limits, precision, costs = self.parallelism, self.limits, self.precision, self.costs
        return RunConfig(
            workload=PoissonWorkload() if workload is None else workload,
            speculation=self.speculation.config() if self.speculation is not None else SpeculationConfig(),
            model=self.model,
            device=self.device,
            engine=self.engine,
            tensor_parallel_size=p.tensor,
            pipeline_stages=p.pipeline,
            data_parallel_size=p.data,
            expert_parallel=p.expert,
            chunk_size=limits.max_num_batched_tokens,
            batch_size_cap=limits.max_num_seqs,
            block_size=limits.block_size,
            num_kv_blocks=limits.num_kv_blocks,
            scheduler=limits.scheduler,
            quantization=precision.quantization,
            kv_cache_dtype=precision.kv_cache_dtype,
            engine_overhead_ms=costs.engine_overhead_ms,
            lm_head=costs.lm_head,
            step_scales=costs.step_scales,
            profile_dir=costs.profile_dir,
            network_profile_dir=costs.network_profile_dir,
            moe_routing_skew=costs.moe_routing_skew,
            seed=seed,
            cache_dir=cache_dir,
        )

    def checked(self) -> "Deployment":
        """This deployment, its cross-field rules checked (a refusal as :meth:`run` gives it)."""
        self.run()
        return self

    def without_speculation(self) -> "Deployment":
        """The same server without speculation: a speculative run's baseline."""
        return replace(self, speculation=None)

    def to_dict(self) -> dict:
        """The deployment's flat keys: a run's (RunConfig's and its speculation's field names, as
        the CSVs and cache keys name them), less the workload and the seeds."""
        data = self.run().to_dict()
        for key in ("workload", "seed", "cache_dir"):
            data.pop(key)
        return {**data.pop("speculation"), **data}
