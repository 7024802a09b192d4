"""Run one simulation: build Vidur's configs from a RunConfig, run Vidur's event loop, collect results.

Nothing is written outside the cache directory: Vidur's metrics, traces and config dump are
off and its output directory is never created.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from vidur.config import (
    CacheConfig,
    ClusterConfig,
    MetricsConfig,
    ReplicaConfig,
    RoundRobinGlobalSchedulerConfig,
    SimulationConfig,
)
from vidur.simulator import Simulator
from vidur.utils.param_counter import ParamCounter

import simulator.catalog  # noqa: F401  (registers extra models and devices with Vidur)
from simulator.catalog import eagle_head, model_config, model_shape
from simulator.config import ClosedLoopWorkload, RunConfig
from simulator.engine.closed_loop import ClosedLoopSimulator
from simulator.engine import generator as _generator  # noqa: F401  (registers the generator)
from simulator.engine.generator import WorkloadRequestGeneratorConfig
from simulator.engine.ids import reset_entity_ids
from simulator.engine.predictor import ProfilePredictor, ProfilePredictorConfig
from simulator.engine.proposers import DraftProposer, EagleProposer, NgramProposer
from simulator.engine.scheduler import SpecSarathiSchedulerConfig, TrackedSarathiScheduler, TrackedSarathiSchedulerConfig
from simulator.errors import ConfigError
from simulator.paths import default_cache_dir
from simulator.profiles.hardware import get_device
from simulator.profiles.logits import cached_builtin_logits_table, cached_logits_table
from simulator.profiles.sharding import check_sharding
from simulator.profiles.source import ResolvedProfile, resolve_profile
from simulator.results import REQUEST_COLUMNS, RunResult, inter_token_gaps, summarize, tpot
from simulator.speculative.memory import BYTES, ModelMemory, kv_blocks, kv_capacity_tokens
from simulator.versions import simulator_version, source_hash, vidur_version

DEFAULT_NETWORK_DEVICE = "a100_dgx"  # Vidur's node type for a device without a [network] table (TP 1 only)
MEMORY_MARGIN = 0.1  # Vidur's default memory_margin_fraction


@dataclass
class QuietMetricsConfig(MetricsConfig):
    """Metrics off and no timestamped output directory in the working directory."""

    write_metrics: bool = False
    enable_chrome_trace: bool = False
    store_plots: bool = False

    def __post_init__(self):
        pass


@dataclass
class InMemorySimulationConfig(SimulationConfig):
    def write_config_to_file(self):
        pass


def _cache_dir(config: RunConfig) -> Path:
    path = Path(config.cache_dir) if config.cache_dir else default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cache directory {path}: cannot be created ({exc.strerror})") from exc
    if not os.access(path, os.W_OK):
        raise ConfigError(f"cache directory {path}: not writable")
    return path


def network_device(device: str) -> str:
    """Vidur's node type (``network_device``) for a device: its NVSwitch topology in devices.toml."""
    network = get_device(device).network
    return network.topology if network else DEFAULT_NETWORK_DEVICE


def _replica_config(config: RunConfig, model: str, tensor_parallel: int | None = None) -> ReplicaConfig:
    return ReplicaConfig(
        model_name=model,
        device=config.device,
        network_device=network_device(config.device),
        num_pipeline_stages=config.pipeline_stages,
        tensor_parallel_size=config.tensor_parallel_size if tensor_parallel is None else tensor_parallel,
    )


def _resolve(config: RunConfig, cache_dir: Path, max_tokens: int, draft: bool = False) -> ResolvedProfile:
    """The target's (or the draft's) profile at its tensor-parallel degree."""
    spec = config.speculation
    return resolve_profile(
        spec.draft_profile_dir if draft else config.profile_dir,
        spec.draft_model if draft else config.model,
        config.device,
        cache_dir,
        max_seq_len=max_tokens,
        block_size=config.block_size,
        tensor_parallel=config.draft_tensor_parallel_size if draft else config.tensor_parallel_size,
        network_dir=config.network_profile_dir,
    )


def _predictor_config(profile: ResolvedProfile, cache_dir: Path, max_tokens: int, config: RunConfig, draft: bool = False) -> ProfilePredictorConfig:
    """The forest's inputs, plus what Vidur's op set lacks: LM head + sampler and, for the target,
    the engine's per-step overhead (a draft's passes run inside the same engine step)."""
    model = config.speculation.draft_model if draft else config.model
    tp = config.draft_tensor_parallel_size if draft else config.tensor_parallel_size
    logits = None
    files = profile.files
    if config.lm_head:
        shard, device = model_shape(model).sharded(tp), get_device(config.device)
        logits = cached_builtin_logits_table(shard, device, max_tokens) if profile.builtin else cached_logits_table(files.mlp, shard, device, max_tokens)
    return ProfilePredictorConfig(
        logits=logits,
        engine_overhead_ms=0.0 if draft else config.engine_overhead_ms,
        builtin=profile.builtin,
        mlp_csv=str(files.mlp) if files and files.mlp else "",
        attention_csv=str(files.attention) if files and files.attention else "",
        all_reduce_csv=str(files.all_reduce) if files and files.all_reduce else "",
        profile_sha256=profile.content_sha256,
        max_profiled_decode_batch=profile.max_decode_batch,
        prediction_max_batch_size=profile.max_decode_batch,
        prediction_max_tokens_per_request=max_tokens,
        cache_dir=str(cache_dir / "predictor"),
        attention_mode=config.speculation.attention,
        interpolation=config.speculation.interpolation,
    )


def _model_memory(replica: ReplicaConfig, include_embeddings: bool) -> ModelMemory:
    """One GPU's share: Vidur's per-device parameter count (weights / TP) and KV heads per worker."""
    model = replica.model_config
    weights = ParamCounter(replica).get_num_parameters_per_device()
    if include_embeddings:  # vocabulary-parallel embedding and LM head, as vLLM shards them
        weights += 2 * model.vocab_size * model.embedding_dim // replica.tensor_parallel_size
    kv = 2 * BYTES * replica.attention_head_dim * replica.kv_heads_per_tensor_parallel_worker * replica.num_layers_per_pipeline_stage
    return ModelMemory(BYTES * weights, kv)


def _draft_memory(config: RunConfig) -> ModelMemory:
    """Per GPU: a draft model's weights with its own embedding and LM head, or an EAGLE head's one
    layer plus its fc layer (and, for EAGLE-3, its draft-vocabulary LM head; EAGLE-1 shares the
    target's embedding and LM head).  Either keeps KV for every cached token."""
    replica = _replica_config(config, config.speculation.draft_model, config.draft_tensor_parallel_size)
    head = eagle_head(config.speculation.draft_model)
    if head is None:
        return _model_memory(replica, include_embeddings=True)
    layer = _model_memory(replica, include_embeddings=False)
    h, tp = head.embedding_dim, config.draft_tensor_parallel_size
    extra = head.fc_inputs * h * h + (head.vocab_size * h if head.method == "eagle3" else 0)
    return ModelMemory(layer.weight_bytes + BYTES * extra // tp, layer.kv_bytes_per_token)


def _check_draft_network(config: RunConfig) -> None:
    """An EAGLE proposer needs an EAGLE head of the same method and its target's width; a draft
    proposer needs an ordinary model."""
    spec = config.speculation
    head = eagle_head(spec.draft_model)  # unknown names fail here, naming the known ones
    if spec.proposer == "draft":
        if head is not None:
            raise ConfigError(f"draft_model = '{spec.draft_model}': an EAGLE head, not a draft model; use proposer = '{head.method}'")
        return
    if head is None:
        raise ConfigError(f"draft_model = '{spec.draft_model}': not an EAGLE head, which proposer = '{spec.proposer}' needs")
    if head.method != spec.proposer:
        raise ConfigError(f"draft_model = '{spec.draft_model}': an {head.method.upper()} head, but proposer = '{spec.proposer}'")
    target = model_config(config.model)
    if head.embedding_dim != target.embedding_dim:
        raise ConfigError(
            f"draft_model = '{spec.draft_model}': an EAGLE head of hidden size {head.embedding_dim} cannot serve "
            f"{config.model}, whose hidden size is {target.embedding_dim}"
        )
    if config.model not in head.targets:
        raise ConfigError(
            f"draft_model = '{spec.draft_model}': an EAGLE head trained for {', '.join(head.targets)}; it was trained for another "
            f"target than {config.model}"
        )


def plan_kv_blocks(config: RunConfig, max_request_tokens: int) -> int:
    """KV blocks for the target, after its weights and (with a draft proposer) the draft's weights and KV.

    Per GPU: each holds 1/TP of the target's weights and of every token's KV.  A draft with
    draft TP 1 sits whole on the group's first GPU, which then binds; with draft TP = TP it is
    sharded like the target.
    """
    if config.num_kv_blocks is not None:
        if config.num_kv_blocks * config.block_size < max_request_tokens:
            raise ConfigError(
                f"num_kv_blocks = {config.num_kv_blocks}: {config.num_kv_blocks * config.block_size} token slots "
                f"cannot hold the workload's longest request ({max_request_tokens} tokens)"
            )
        return config.num_kv_blocks
    target = _model_memory(_replica_config(config, config.model), include_embeddings=False)
    draft = _draft_memory(config) if config.speculation.uses_draft_network else None
    memory = get_device(config.device).datasheet.memory_gib * 2**30
    capacity = kv_capacity_tokens(memory, MEMORY_MARGIN, target, draft)
    blocks = kv_blocks(capacity, max_request_tokens, config.block_size)
    if blocks <= 0:
        what = f"draft model '{config.speculation.draft_model}' alongside the target" if draft else "the target model"
        raise ConfigError(
            f"device '{config.device}' ({memory / 2**30:.0f} GiB): {what} leaves no room for even one "
            f"{max_request_tokens}-token request's KV cache"
        )
    return blocks


def _check_lengths(config: RunConfig) -> int:
    max_len = model_config(config.model).max_model_len
    if config.chunk_size + config.batch_size_cap > max_len:
        # a Sarathi step holds up to a chunk plus one token per running request: the
        # predictor's tables cover the model's context and no more
        raise ConfigError(
            f"chunk_size + batch_size_cap = {config.chunk_size + config.batch_size_cap}: a step's tokens must fit "
            f"{config.model}'s context of {max_len}"
        )
    longest = config.workload.max_request_tokens
    if longest > max_len:
        raise ConfigError(f"workload: a request of {longest} tokens (prompt + output) exceeds {config.model}'s context of {max_len}")
    if config.speculation.uses_draft_network:
        _check_draft_network(config)
        draft_len = model_config(config.speculation.draft_model).max_model_len
        if longest > draft_len:
            raise ConfigError(
                f"workload: a request of {longest} tokens exceeds draft model {config.speculation.draft_model}'s context of {draft_len}"
            )
    get_device(config.device)
    check_sharding(model_shape(config.model), config.tensor_parallel_size, "tensor_parallel_size", config.model)
    if config.speculation.uses_draft_network:
        check_sharding(
            model_shape(config.speculation.draft_model), config.draft_tensor_parallel_size, "draft_tensor_parallel_size", config.speculation.draft_model
        )
    return max_len


def _draft_proposer(config: RunConfig, cache_dir: Path, max_tokens: int) -> tuple[DraftProposer, ResolvedProfile]:
    spec = config.speculation
    profile = _resolve(config, cache_dir, max_tokens, draft=True)
    replica = _replica_config(config, spec.draft_model, config.draft_tensor_parallel_size)
    predictor = ProfilePredictor(_predictor_config(profile, cache_dir, max_tokens, config, draft=True), replica, CacheConfig(block_size=config.block_size))
    head = eagle_head(spec.draft_model)
    if head is None:
        return DraftProposer(predictor), profile
    shape = model_shape(spec.draft_model).sharded(config.draft_tensor_parallel_size)
    return EagleProposer(predictor, shape, head.fc_inputs, head.method == "eagle", get_device(config.device)), profile


def _scheduler_config(config: RunConfig):
    spec = config.speculation
    if not spec.enabled:
        return TrackedSarathiSchedulerConfig(chunk_size=config.chunk_size, batch_size_cap=config.batch_size_cap)
    return SpecSarathiSchedulerConfig(
        chunk_size=config.chunk_size,
        batch_size_cap=config.batch_size_cap,
        num_speculative_tokens=spec.num_speculative_tokens,
        conditional_acceptance=spec.conditional_acceptance(),
        acceptance_seed=config.seed,
        proposal_probability=spec.proposal_probability,
        proposer=spec.proposer,
        k_schedule=spec.k_schedule or (),
    )


def target_predictor(config: RunConfig) -> ProfilePredictor:
    """The target model's predictor for ``config`` (trained or loaded from the cache)."""
    max_tokens = _check_lengths(config)
    cache_dir = _cache_dir(config)
    profile = _resolve(config, cache_dir, max_tokens)
    return ProfilePredictor(_predictor_config(profile, cache_dir, max_tokens, config), _replica_config(config, config.model), CacheConfig(block_size=config.block_size))


def warm_predictors(config: RunConfig) -> None:
    """Train or load every predictor ``config`` needs (the target's and a draft's or head's)."""
    target_predictor(config)
    if config.speculation.uses_draft_network:
        _draft_proposer(config, _cache_dir(config), _check_lengths(config))


def simulate(config: RunConfig) -> RunResult:
    max_tokens = _check_lengths(config)
    cache_dir = _cache_dir(config)
    spec = config.speculation
    profile = _resolve(config, cache_dir, max_tokens)
    num_blocks = plan_kv_blocks(config, config.workload.max_request_tokens)
    proposer, draft_profile = None, None
    if spec.enabled:
        if spec.proposer == "ngram":
            proposer = NgramProposer(spec.ngram_overhead_ms)
        else:
            proposer, draft_profile = _draft_proposer(config, cache_dir, max_tokens)

    reset_entity_ids()
    sim_config = InMemorySimulationConfig(
        seed=config.seed,
        cluster_config=ClusterConfig(
            num_replicas=1,
            replica_config=_replica_config(config, config.model),
            cache_config=CacheConfig(block_size=config.block_size, num_blocks=num_blocks),
            global_scheduler_config=RoundRobinGlobalSchedulerConfig(),
            replica_scheduler_config=_scheduler_config(config),
        ),
        request_generator_config=WorkloadRequestGeneratorConfig(
            workload=config.workload, max_tokens=config.workload.max_request_tokens
        ),
        execution_time_predictor_config=_predictor_config(profile, cache_dir, max_tokens, config),
        metrics_config=QuietMetricsConfig(),
    )
    if isinstance(config.workload, ClosedLoopWorkload):
        sim = ClosedLoopSimulator(sim_config, config.workload.concurrency)
    else:
        sim = Simulator(sim_config)
    scheduler: TrackedSarathiScheduler = next(iter(sim.scheduler._replica_schedulers.values()))
    predictor: ProfilePredictor = scheduler._execution_time_predictor
    predictor.proposer = proposer
    sim.run()

    requests = sim._request_generator.requests
    frame = request_frame(requests)
    makespan = max(r.completed_at for r in requests) - min(r.arrived_at for r in requests)
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
            else float(spec.num_speculative_tokens),
        },
        itl_s=inter_token_gaps(r.emission_times for r in requests),
    )
    provenance = {
        **profile.provenance(),
        "device": config.device,
        "model": config.model,
        "vidur_version": vidur_version(),
        "simulator_version": simulator_version(),
        "simulator_source_hash": source_hash(),
        "seed": config.seed,
        "workload_seed": getattr(config.workload, "seed", None),
        "engine_overhead_ms": config.engine_overhead_ms,
        "lm_head_source": predictor._config.logits.source if predictor._config.logits else "not costed",
    }
    if draft_profile is not None:
        provenance.update({f"draft_{key}": value for key, value in draft_profile.provenance().items()})
    return RunResult(config, frame, summary, provenance, {r.id: list(r.acceptance_log) for r in requests})


def request_frame(requests) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "request_id": [r.id for r in requests],
            "arrival_s": [r.arrived_at for r in requests],
            "prompt_tokens": [r.total_tokens - r.output_tokens for r in requests],
            "output_tokens": [r.output_tokens for r in requests],
            "ttft_s": [r.prefill_completed_at - r.arrived_at for r in requests],
            "e2e_s": [r.completed_at - r.arrived_at for r in requests],
            "restarts": [r.num_restarts for r in requests],
            "verify_steps": [r.verify_steps for r in requests],
            "proposed_tokens": [r.proposed_tokens for r in requests],
            "accepted_tokens": [r.accepted_tokens for r in requests],
        }
    )
    frame["tpot_s"] = tpot(frame.e2e_s, frame.ttft_s, frame.output_tokens)
    return frame[list(REQUEST_COLUMNS)]
