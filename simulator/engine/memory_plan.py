"""How many KV blocks a run gets: one GPU's memory less the target's (and a draft's) weights.

Per GPU: each holds 1/TP of the target's weights and of every token's KV.  A draft with draft
TP 1 sits whole on the group's first GPU, which then binds; with draft TP = TP it is sharded
like the target.  Parameter counts are Vidur's own (``ParamCounter``).
"""

from __future__ import annotations

from typing import Optional

from vidur.config import ReplicaConfig
from vidur.utils.param_counter import ParamCounter

from simulator.config import RunConfig
from simulator.errors import ConfigError
from simulator.profiles.hardware import DeviceSpec
from simulator.speculative.memory import BYTES, ModelMemory, kv_blocks, kv_capacity_tokens

MEMORY_MARGIN = 0.1  # Vidur's default memory_margin_fraction


def model_memory(replica: ReplicaConfig, include_embeddings: bool) -> ModelMemory:
    """One GPU's share: Vidur's per-device parameter count (weights / TP) and KV heads per worker."""
    model = replica.model_config
    weights = ParamCounter(replica).get_num_parameters_per_device()
    head_dim = getattr(model, "head_dim", 0) or replica.attention_head_dim
    if head_dim != replica.attention_head_dim:  # a config's explicit head_dim; Vidur counts hidden / heads
        q, kv_heads = replica.q_heads_per_tensor_parallel_worker, replica.kv_heads_per_tensor_parallel_worker
        weights += model.embedding_dim * (head_dim - replica.attention_head_dim) * (2 * q + 2 * kv_heads) * replica.num_layers_per_pipeline_stage
    if include_embeddings:  # vocabulary-parallel embedding and LM head, as vLLM shards them; one matrix when tied
        matrices = 1 if getattr(model, "tie_word_embeddings", False) else 2
        weights += matrices * model.vocab_size * model.embedding_dim // replica.tensor_parallel_size
    kv = 2 * BYTES * head_dim * replica.kv_heads_per_tensor_parallel_worker * replica.num_layers_per_pipeline_stage
    return ModelMemory(BYTES * weights, kv)


def draft_memory(replica: ReplicaConfig, head) -> ModelMemory:
    """Per GPU: a draft model's weights with its own embedding and LM head, or an EAGLE head's one
    layer plus its fc layer (and, for EAGLE-3, its draft-vocabulary LM head; EAGLE-1 shares the
    target's embedding and LM head).  Either keeps KV for every cached token."""
    if head is None:
        return model_memory(replica, include_embeddings=True)
    layer = model_memory(replica, include_embeddings=False)
    h, tp = head.embedding_dim, replica.tensor_parallel_size
    extra = head.fc_inputs * h * h + (head.vocab_size * h if head.method == "eagle3" else 0)
    return ModelMemory(layer.weight_bytes + BYTES * extra // tp, layer.kv_bytes_per_token)


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
        what = f"draft model '{config.speculation.draft_model}' alongside the target" if draft else "the target model"
        raise ConfigError(
            f"device '{config.device}' ({memory / 2**30:.0f} GiB): {what} leaves no room for even one "
            f"{longest}-token request's KV cache"
        )
    return blocks
