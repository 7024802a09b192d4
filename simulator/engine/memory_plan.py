"""How many KV blocks a run gets: one GPU's memory less the target's (and a draft's) weights.

Per GPU: each holds 1/TP of the target's weights and of every token's KV.  A draft with draft
TP 1 sits whole on the group's first GPU, which then binds; with draft TP = TP it is sharded
like the target.  Parameter counts are Vidur's own (``ParamCounter``); what a proposer's network
holds beyond its layers (an fc layer, its own LM head, several MTP layers) its kind counts.
"""

from __future__ import annotations

from typing import Optional

from vidur.config import ReplicaConfig
from vidur.utils.param_counter import ParamCounter

from simulator.config import RunConfig
from simulator.errors import ConfigError
from simulator.profiles.hardware import DeviceSpec
from simulator.speculative.memory import BYTES, ModelMemory, kv_blocks, kv_capacity_tokens
from simulator.speculative.proposers.base import NetworkMemory

MEMORY_MARGIN = 0.1  # Vidur's default memory_margin_fraction


def _embedding_params(replica: ReplicaConfig) -> int:
    """One GPU's vocabulary-parallel embedding and LM head, as vLLM shards them; one matrix when tied."""
    model = replica.model_config
    matrices = 1 if getattr(model, "tie_word_embeddings", False) else 2
    return matrices * model.vocab_size * model.embedding_dim // replica.tensor_parallel_size


def model_memory(replica: ReplicaConfig, include_embeddings: bool) -> ModelMemory:
    """One GPU's share: Vidur's per-device parameter count (weights / TP) and KV heads per worker."""
    model = replica.model_config
    weights = ParamCounter(replica).get_num_parameters_per_device()
    head_dim = getattr(model, "head_dim", 0) or replica.attention_head_dim
    if head_dim != replica.attention_head_dim:  # a config's explicit head_dim; Vidur counts hidden / heads
        q, kv_heads = replica.q_heads_per_tensor_parallel_worker, replica.kv_heads_per_tensor_parallel_worker
        weights += model.embedding_dim * (head_dim - replica.attention_head_dim) * (2 * q + 2 * kv_heads) * replica.num_layers_per_pipeline_stage
    if include_embeddings:
        weights += _embedding_params(replica)
    kv = 2 * BYTES * head_dim * replica.kv_heads_per_tensor_parallel_worker * replica.num_layers_per_pipeline_stage
    return ModelMemory(BYTES * weights, kv)


def network_memory(replica: ReplicaConfig) -> NetworkMemory:
    """A draft network's share of one GPU, for its proposer kind to count what it holds
    (:meth:`~simulator.speculative.proposers.base.ProposerKind.draft_memory`): its decoder layers,
    its own embedding and LM head, its width and TP degree."""
    return NetworkMemory(
        layers=model_memory(replica, include_embeddings=False),
        embeddings_bytes=BYTES * _embedding_params(replica),
        hidden_size=replica.model_config.embedding_dim,
        tensor_parallel=replica.tensor_parallel_size,
    )


def plan_kv_blocks(config: RunConfig, device: DeviceSpec, target: ModelMemory, draft: Optional[ModelMemory]) -> int:
    """KV blocks for the target, after its weights and (with a draft proposer) the draft's weights
    and KV; or the configured ``num_kv_blocks``, checked to hold the longest request."""
    longest = config.workload.max_request_tokens
    if config.num_kv_blocks is not None:
        if config.num_kv_blocks * config.block_size < longest:
            raise ConfigError(
                f"num_kv_blocks = {config.num_kv_blocks}: {config.num_kv_blocks * config.block_size} token slots "
                f"cannot hold the workload's longest request ({longest} tokens)"
            )
        return config.num_kv_blocks
    memory = device.datasheet.memory_gib * 2**30
    capacity = kv_capacity_tokens(memory, MEMORY_MARGIN, target, draft)
    blocks = kv_blocks(capacity, longest, config.block_size)
    if blocks <= 0:
        spec = config.speculation
        network = f"draft model '{spec.draft_model}'" if spec.draft_model else f"the {spec.proposer} proposer's network"
        what = f"{network} alongside the target" if draft else "the target model"
        raise ConfigError(
            f"device '{config.device}' ({memory / 2**30:.0f} GiB): {what} leaves no room for even one "
            f"{longest}-token request's KV cache"
        )
    return blocks
