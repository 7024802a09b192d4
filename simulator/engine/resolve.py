"""A run resolved once: every lookup, check and plan a simulation needs, made at the top.

:func:`resolve_run` checks a :class:`~simulator.runs.config.RunConfig` against the models' contexts,
the device and the tensor-parallel degrees; resolves each model's profile and predictor inputs;
and plans the KV cache.  Everything below it (the simulation, the sweeps' warm-up) takes the
:class:`ResolvedRun` and looks nothing up again.  A run has a target side and, when its proposer
kind runs a network (a draft model, an EAGLE head, the target's MTP layers, a parallel drafter),
a draft side; both are the same :class:`ModelSide`, so no code switches on a ``draft`` flag.  The
proposer kind checks the pair, counts the draft side's memory and sets its lookahead
(:mod:`simulator.speculative.proposers`); nothing here names a proposer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

from simulator.vidur.models import ModelEntry, known_entry, mtp_layer_entry
from simulator.runs.config import RunConfig
from simulator.engine.memory_plan import DraftHolding, MemoryPlan, plan_memory
from simulator.engine.predictor_config import AnalyticPredictorConfig, ProfilePredictorConfig
from simulator.util.errors import ConfigError
from simulator.models.context import table_tokens
from simulator.models.precision import precision_problem, run_precision
from simulator.util.paths import default_cache_dir
from simulator.profiles.engines import EngineSpec, get_engine, load_engines
from simulator.profiles.hardware import DeviceSpec, get_device
from simulator.profiles.logits import cached_logits_table
from simulator.profiles.source import ProfileQuery, ResolvedProfile, resolve
from simulator.profiles.step import StepModel
from simulator.profiles.step_scales import StepScales
from simulator.models.shapes import ModelShape
from simulator.speculative.proposers.base import DraftSource, ModelFacts, SpeculationSettings
from simulator.util.textio import check_writable_dir
from simulator.vidur.configs import BaseModelConfig, ReplicaConfig

DEFAULT_NETWORK_DEVICE = "a100_dgx"  # Vidur's node type for a device without a [network] table (TP 1 only)


@dataclass(frozen=True)
class ModelSide:
    """One model of a run, the target or the draft (a draft model, an EAGLE head, the target's
    MTP layer, a parallel drafter)."""

    name: str
    model: BaseModelConfig  # the model's config, looked up once
    tensor_parallel: int
    shape: ModelShape  # the whole model; ``shape.sharded(tensor_parallel)`` is one GPU's share
    max_model_len: int
    replica: ReplicaConfig  # Vidur's view of it: model config, device, node type, TP
    profile: ResolvedProfile
    predictor: Union[AnalyticPredictorConfig, ProfilePredictorConfig]  # built-in profile: the step-time model
    facts: ModelFacts  # what the proposer kind reads from the model's config


@dataclass(frozen=True)
class VerifyPlan:
    """What a speculative replica scheduler verifies with: the proposer kind's lookahead, draft
    lengths and tree at this run's k, and the acceptance draws (values, fixed at resolution)."""

    num_speculative_tokens: int
    conditional_acceptance: tuple[float, ...]
    acceptance_seed: int
    proposal_probability: float
    lookahead_slots: int
    k_schedule: tuple
    draft_length_pmf: tuple[float, ...]
    tree: object  # the kind's draft tree at this run's settings; None for a chain
    adaptive_verification: bool = False  # each step verifies the budget its cost tables pick


@dataclass(frozen=True)
class SchedulerPlan:
    """The replica scheduler's configuration as values: Sarathi's limits and, when speculating, the verify plan."""

    chunk_size: int
    batch_size_cap: int
    verify: Optional[VerifyPlan]  # None: no speculation


@dataclass(frozen=True)
class ProposerPlan:
    """What proposing costs: the kind whose step work it is and the fixed time of one draft pass;
    the draft side's predictor prices it when the kind runs a network."""

    kind: object  # the proposer kind (simulator.speculative.proposers)
    draft_pass_overhead_ms: float  # the kind's DraftPassOptions (0 for a kind without a network)
    # Model Runner V2 drafts the full num_speculative_tokens at every step whatever a k schedule
    # verifies (it never reads the scheduler's per-step k; vLLM 0.29.0, 0.30.0): that k, else 0 (the
    # drafting follows the step's own k, as the V1 runner's ``num_spec_tokens_to_schedule`` does)
    drafts_full_k: int = 0


@dataclass(frozen=True)
class ResolvedRun:
    config: RunConfig  # provenance only: the simulation reads the values below
    device: DeviceSpec
    engine: EngineSpec
    cache_dir: Path
    max_tokens: int  # the predictor's table range (simulator.models.context.table_tokens)
    target: ModelSide
    draft: Optional[ModelSide]  # the proposer's network; None when it runs none (n-gram, suffix) or without speculation
    memory: MemoryPlan  # one GPU's weights and KV bytes per cached token, each side's, and the KV blocks left
    settings: SpeculationSettings  # the proposer's settings, as its kind sees them
    block_size: int  # tokens per KV-cache block
    seed: int  # Vidur's seed (RunConfig.vidur_seed; the acceptance draws' is in the scheduler plan)
    workload: object  # the run's workload (simulator.runs.workload_kinds)
    scheduler: SchedulerPlan
    proposer: Optional[ProposerPlan]  # None without speculation
    provenance: dict  # what the run's result records of its inputs and of the LM head's costing (the simulation adds the profiles' and versions)


def scheduler_plan(spec, settings: SpeculationSettings, chunk_size: int, batch_size_cap: int, acceptance_seed: int) -> SchedulerPlan:
    """The scheduler's plan for a speculation setting: its kind's lookahead, draft lengths and tree at ``settings``."""
    if not spec.enabled:
        return SchedulerPlan(chunk_size, batch_size_cap, None)
    kind = spec.kind
    verify = VerifyPlan(
        num_speculative_tokens=spec.num_speculative_tokens,
        conditional_acceptance=spec.conditional_acceptance(),
        acceptance_seed=acceptance_seed,
        proposal_probability=spec.proposal_probability,
        lookahead_slots=kind.lookahead_slots(spec.num_speculative_tokens),
        k_schedule=spec.k_schedule or (),
        draft_length_pmf=tuple(kind.draft_length_pmf(settings)),
        tree=kind.tree(settings),
        adaptive_verification=spec.adaptive_verification,
    )
    return SchedulerPlan(chunk_size, batch_size_cap, verify)


@dataclass(frozen=True)
class _Costing:
    """What both sides of a run are costed with, read from the RunConfig once."""

    device: DeviceSpec
    engine: EngineSpec
    cache_dir: Path
    max_tokens: int  # the predictor's table range
    block_size: int
    chunk_size: int
    pipeline_stages: int
    network_dir: Optional[str]
    lm_head: bool
    attention_mode: str
    interpolation: float
    async_scheduling: bool  # the engine overlaps steps (vLLM's async scheduling, where the proposer allows it)
    scales: Optional[StepScales] = None  # a server's fitted multipliers on the target's step terms


def resolve_run(config: RunConfig) -> ResolvedRun:
    """Check ``config`` and resolve it into everything a simulation needs, once.  This is the one
    function that reads the RunConfig: everything it calls takes values."""
    spec = config.speculation
    kind = spec.kind
    device = get_device(config.device)
    # the engine as it issues this run's forwards: the capture sizes vLLM picks for its limits and k
    engine = get_engine(config.engine).for_run(
        config.batch_size_cap, config.chunk_size, spec.num_speculative_tokens, spec.kind.name if spec.enabled else None,
        dynamic=bool(spec.k_schedule), schedule_ks=tuple(k for _, _, k in spec.k_schedule or ()),
    )
    # what the engine does with this proposer, read once: async scheduling (vLLM keeps it off for the
    # speculative methods its version does not list) and the model runner
    async_scheduling = engine.overlaps(kind.name if spec.enabled else None, kind.async_scheduling)
    mrv2 = spec.enabled and engine.runner_for(kind.name) == "mrv2"
    entry = known_entry(config.model)  # its config, shape and facts, looked up once
    target_config, target_facts = entry.config, entry.facts
    longest = config.workload.max_request_tokens
    step_tokens = config.chunk_size + config.batch_size_cap
    # a profile directory's prediction tables cover the model's context and no more (the built-in step model costs any token count)
    _check_context(config.model, target_config.max_model_len, longest, step_tokens if config.profile_dir is not None else None)
    target_shape = target_run_shape(
        entry.shape, device, config.model, quantization=config.quantization, kv_cache_dtype=config.kv_cache_dtype,
        expert_parallel=config.expert_parallel, moe_routing_skew=config.moe_routing_skew,
        data_parallel_size=config.data_parallel_size, tensor_parallel_size=config.tensor_parallel_size,
    )
    # the predictor's tables cover what this run costs, not the whole context
    max_tokens = table_tokens(target_config.max_model_len, max(longest, step_tokens))
    _check_not_a_drafter(config.model, target_facts)
    drafter = _draft_network(kind, spec.draft_model, config.model, target_facts) if spec.uses_draft_network else None  # an unknown name fails here
    settings = SpeculationSettings(k=spec.num_speculative_tokens, options=spec.option_values, costs=spec.costs,
                                   draft=drafter.facts if drafter is not None else None, target=target_facts)
    if spec.enabled:
        kind.check(settings, target_facts, config.draft_tensor_parallel_size, config.tensor_parallel_size)
        if spec.adaptive_verification:
            _check_adaptive_verification(engine, kind, settings, mrv2)
    costing = _Costing(
        device, engine, cache_directory(config.cache_dir), max_tokens, config.block_size, config.chunk_size, config.pipeline_stages,
        config.network_profile_dir, config.lm_head, spec.attention, spec.interpolation, async_scheduling, scales=config.step_scales,
    )
    target = _side(
        costing,
        _SideQuery(
            target_facts, target_config, target_shape, config.tensor_parallel_size, config.profile_dir, ("tensor_parallel_size", "profile_dir"),
            engine_overhead_ms=config.engine_overhead_ms,
        ),
    )
    draft = None if drafter is None else _draft_side(
        costing, kind, drafter, target_shape.precision.kv_cache, settings, config.draft_tensor_parallel_size, spec.draft_profile_dir, longest)
    network = f"draft model '{spec.draft_model}'" if spec.draft_model else f"the {spec.proposer} proposer's network"
    holding = DraftHolding(draft.replica, draft.shape, kind, settings, network) if draft is not None else None
    memory = plan_memory(device, target.replica, target_shape, holding, longest, config.block_size, config.num_kv_blocks)
    return ResolvedRun(
        config, device, engine, costing.cache_dir, max_tokens, target, draft, memory, settings,
        block_size=config.block_size,
        seed=config.vidur_seed,
        workload=config.workload,
        scheduler=scheduler_plan(spec, settings, config.chunk_size, config.batch_size_cap, config.acceptance_seed),
        proposer=ProposerPlan(
            kind, settings.costs.draft_pass_overhead_ms if drafter is not None else 0.0,  # a kind without a network pays none
            drafts_full_k=spec.num_speculative_tokens if (spec.k_schedule or spec.adaptive_verification) and mrv2 else 0,
        ) if spec.enabled else None,
        provenance={  # what the run's result records of its inputs and of the LM head's costing
            "device": config.device, "model": config.model, "seed": config.seed, "workload_seed": getattr(config.workload, "seed", None),
            "engine_overhead_ms": config.engine_overhead_ms, "lm_head_source": lm_head_source(target.predictor),
        },
    )


def _draft_side(costing: _Costing, kind, drafter: ModelEntry, kv_cache: str, settings: SpeculationSettings, tp: int, profile_dir: Optional[str], longest: int) -> ModelSide:
    """The draft side of a run whose proposer runs a network: in its own checkpoint's precision with
    the run's KV-cache dtype (vLLM's one cache config); its context holds the longest request."""
    draft_shape = drafter.shape.with_precision(replace(drafter.shape.precision, kv_cache=kv_cache))
    draft = _side(
        replace(costing, engine=costing.engine.drafter(kind.name, tree=kind.tree(settings) is not None), scales=None),  # the drafter's own CUDA graphs; its scale is the target's drafter term
        _SideQuery(
            drafter.facts, drafter.config, draft_shape, tp, profile_dir, ("draft_tensor_parallel_size", "draft_profile_dir"),
            engine_overhead_ms=0.0,  # a draft's passes run inside the target's engine step
        ),
    )
    if longest > draft.max_model_len:
        raise ConfigError(f"workload: a request of {longest} tokens exceeds draft model {draft.name}'s context of {draft.max_model_len}")
    return draft


def _check_adaptive_verification(engine, kind, settings, mrv2: bool) -> None:
    """vLLM runs adaptive verification on Model Runner V2 only (``mrv2``: this proposer runs on it),
    from the version that has it, for a chain of drafts (the budget admits a prefix of each
    request's draft)."""
    if not engine.adaptive_verification:
        newest = [e.name for e in load_engines().values() if e.adaptive_verification]
        raise ConfigError(f"adaptive_verification: vLLM {engine.version} has no enable_adaptive_verification (it verifies every draft); "
                          f"it needs engine {' or '.join(newest)}")
    if not mrv2:
        raise ConfigError(
            f"adaptive_verification: proposer '{kind.name}' runs on vLLM {engine.version}'s V1 model runner, and adaptive verification "
            f"needs Model Runner V2 (methods {', '.join(engine.mrv2_methods)})"
        )
    if kind.tree(settings) is not None:
        raise ConfigError(f"adaptive_verification: proposer '{kind.name}' verifies a draft tree; the budget admits a prefix of a chain")


def lm_head_source(predictor) -> str:
    """What the target's LM head and sampler are costed from, for the result's provenance."""
    if isinstance(predictor, AnalyticPredictorConfig):
        return "step-time model" if predictor.step_model.lm_head else "not costed"
    return predictor.logits.source if predictor.logits else "not costed"


def _draft_network(kind, draft_model: Optional[str], target_name: str, target: ModelFacts) -> Optional[ModelEntry]:
    """The network the proposer drafts with: the draft model the run names, or the target's own
    MTP layer (None when the target has none: the kind's check names the field)."""
    if kind.drafts_with is DraftSource.MTP_LAYERS:
        return mtp_layer_entry(target_name) if target.mtp_layers else None
    return known_entry(draft_model)


def _check_context(model: str, max_len: int, longest: int, step_tokens: Optional[int]) -> None:
    """A request, and with a profile directory a step's tokens (a Sarathi step holds up to a chunk
    plus one token per running request), must fit the model's context."""
    if step_tokens is not None and step_tokens > max_len:
        raise ConfigError(f"chunk_size + batch_size_cap = {step_tokens}: a step's tokens must fit {model}'s context of {max_len}")
    if longest > max_len:
        raise ConfigError(f"workload: a request of {longest} tokens (prompt + output) exceeds {model}'s context of {max_len}")


def target_run_shape(
    shape: ModelShape, device: DeviceSpec, model: str, *, quantization: Optional[str] = None, kv_cache_dtype: str = "auto",
    expert_parallel: bool = False, moe_routing_skew: float = 0.0, data_parallel_size: int = 1, tensor_parallel_size: int = 1,
) -> ModelShape:
    """The target's shape as this run holds it: its precision (the checkpoint's with the run's
    --quantization and --kv-cache-dtype, which the GPU must support), and for a mixture of
    experts the run's expert placement and routing skew.  Values in (the run's fields, as
    :func:`resolve_run` reads them); ``model`` names the model in a refusal."""
    precision = run_precision(shape.precision, shape.moe is not None, quantization, kv_cache_dtype, model)
    problem = precision_problem(precision, device.datasheet.has_dtype, device.name)
    if problem:
        raise ConfigError(problem)
    if shape.mla is not None and not device.attention.mla_backend:
        raise ConfigError(f"device = '{device.name}': {model} uses multi-head latent attention, which has no modelled backend on this device")
    options = (("expert_parallel", expert_parallel, False), ("moe_routing_skew", moe_routing_skew, 0.0), ("data_parallel_size", data_parallel_size, 1))
    if shape.moe is None:
        for name, value, off in options:
            if value != off:
                raise ConfigError(
                    f"{name} = {value!r}: {model} is not a mixture-of-experts model"
                    + (" (a dense model's data-parallel replicas are independent: simulate one)" if name == "data_parallel_size" else "")
                )
        return shape.with_precision(precision)
    if data_parallel_size > 1 and not expert_parallel:
        raise ConfigError(
            f"data_parallel_size = {data_parallel_size}: data parallelism without expert parallelism (experts split over DP x TP) "
            "is not modelled; add expert_parallel (--enable-expert-parallel)"
        )
    if data_parallel_size > 1 and tensor_parallel_size > 1:
        raise ConfigError(
            f"data_parallel_size = {data_parallel_size} with tensor_parallel_size = {tensor_parallel_size}: data-parallel "
            "attention is modelled at tensor parallelism 1 only"
        )
    return shape.with_precision(precision).with_moe(expert_parallel=expert_parallel, routing_skew=float(moe_routing_skew), data_parallel=data_parallel_size)


def _check_not_a_drafter(name: str, facts: ModelFacts) -> None:
    """A draft network (an EAGLE head, a DFlash drafter) is no model to serve: simulated as the
    target it would be a one-layer (or few-layer) "model" with its targets' context."""
    if facts.drafter is None:
        return
    from simulator.speculative import proposers

    kind = proposers.kind(facts.drafter)
    article = "an" if kind.label[0] in "AEIOU" else "a"
    target = f"its target ({', '.join(facts.targets)})" if facts.targets else "the model it drafts for"
    raise ConfigError(
        f"model = '{name}': {article} {kind.label}, a draft network, not a model vLLM serves; simulate {target} with "
        f"proposer = '{kind.name}' and draft_model = '{name}'"
    )


def cache_directory(cache_dir: Optional[str]) -> Path:
    path = Path(cache_dir) if cache_dir else default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cache directory {path}: cannot be created ({exc.strerror})") from exc
    check_writable_dir(path, "cache directory")
    return path


def network_device(device: DeviceSpec) -> str:
    """Vidur's node type (``network_device``) for a device: its NVSwitch topology in devices.toml."""
    return device.network.topology if device.network else DEFAULT_NETWORK_DEVICE


def replica_config(device: DeviceSpec, model: str, tensor_parallel: int, pipeline_stages: int = 1) -> ReplicaConfig:
    return ReplicaConfig(
        model_name=model,
        device=device.name,
        network_device=network_device(device),
        num_pipeline_stages=pipeline_stages,
        tensor_parallel_size=tensor_parallel,
    )


@dataclass(frozen=True)
class _SideQuery:
    """One model of the run to resolve: its config and facts (looked up once), its shape as the run
    holds it, its TP degree and profile directory with the run's fields that set them (a refusal
    names them), and its per-step engine overhead (its memory is planned with the other side's, once)."""

    facts: ModelFacts
    model: BaseModelConfig
    shape: ModelShape
    tensor_parallel: int
    profile_dir: Optional[str]
    fields: tuple[str, str]  # (TP field, profile-directory field)
    engine_overhead_ms: float


def _side(costing: _Costing, side: _SideQuery) -> ModelSide:
    """One model of the run: its profile (the sharding checked there), Vidur's replica, its
    predictor's inputs and one GPU's memory."""
    tp_field, profile_field = side.fields
    name, model, shape, tp, engine_overhead_ms = side.facts.name, side.model, side.shape, side.tensor_parallel, side.engine_overhead_ms
    profile = resolve(
        ProfileQuery(
            name, shape, costing.device, tp, costing.cache_dir, max_seq_len=costing.max_tokens, block_size=costing.block_size,
            profile_dir=side.profile_dir, network_dir=costing.network_dir, tp_field=tp_field, profile_field=profile_field,
        )
    )
    replica = replica_config(costing.device, name, tp, costing.pipeline_stages)  # Vidur asserts the sharding: after the profile's check
    if profile.builtin is not None:
        predictor = analytic_config(costing, model.num_layers, profile, engine_overhead_ms)
    else:
        predictor = predictor_config(costing, shape.sharded(tp), profile, engine_overhead_ms)
    return ModelSide(name, model, tp, shape, model.max_model_len, replica, profile, predictor, side.facts)


VIDUR_PREFILL_CHUNK_RANGE = 4096  # Vidur's default prediction_max_prefill_chunk_size


def prefill_chunk_range(chunk_size: int) -> int:
    """The longest prefill chunk the tables cover: Vidur's default, or the run's token budget
    rounded up to Vidur's 32-token chunk granularity when the budget is larger (a 7,096-token
    prompt under an 8,192-token budget is looked up as a 7,104-token chunk)."""
    return max(VIDUR_PREFILL_CHUNK_RANGE, -(-chunk_size // 32) * 32)


def analytic_config(costing: _Costing, num_layers: int, profile: ResolvedProfile, engine_overhead_ms: float) -> AnalyticPredictorConfig:
    """The built-in profile's predictor: the step-time model of this shard, device and engine."""
    model, engine = profile.builtin, costing.engine
    step_model = StepModel(
        shape=model.shape,
        num_layers=num_layers,
        device=model.device,
        engine=engine,
        network=model.network,
        attention_mode=costing.attention_mode,
        interpolation=costing.interpolation,
        lm_head=costing.lm_head,
        max_tokens=costing.max_tokens,
    )
    overlaps = costing.async_scheduling
    return AnalyticPredictorConfig(
        step_model=step_model, engine_overhead_ms=engine_overhead_ms,
        async_scheduling=overlaps, async_step_gap_ms=engine.async_step_gap_us * 1e-3 if overlaps else 0.0,
        scales=costing.scales,
    )


def predictor_config(costing: _Costing, shard: ModelShape, profile: ResolvedProfile, engine_overhead_ms: float) -> ProfilePredictorConfig:
    """A Vidur-format profile directory's predictor inputs, plus what Vidur's op set lacks: LM head
    + sampler and, for the target, the engine's per-step overhead (a draft's passes run inside the
    same engine step)."""
    files, max_tokens = profile.files, costing.max_tokens
    logits = cached_logits_table(files.mlp, shard, costing.device, max_tokens) if costing.lm_head else None
    overlaps = costing.async_scheduling
    return ProfilePredictorConfig(
        logits=logits,
        engine_overhead_ms=engine_overhead_ms,
        async_scheduling=overlaps, async_step_gap_ms=costing.engine.async_step_gap_us * 1e-3 if overlaps else 0.0,
        mlp_csv=str(files.mlp) if files and files.mlp else "",
        attention_csv=str(files.attention) if files and files.attention else "",
        all_reduce_csv=str(files.all_reduce) if files and files.all_reduce else "",
        profile_sha256=profile.content_sha256,
        max_profiled_decode_batch=profile.max_decode_batch,
        prediction_max_batch_size=profile.max_decode_batch,
        prediction_max_tokens_per_request=max_tokens,
        prediction_max_prefill_chunk_size=prefill_chunk_range(costing.chunk_size),
        cache_dir=str(costing.cache_dir / "predictor"),
        attention_mode=costing.attention_mode,
        interpolation=costing.interpolation,
    )
