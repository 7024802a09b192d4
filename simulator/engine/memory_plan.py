"""How many KV blocks a run gets: one GPU's memory less the target's (and a draft's) weights.

Per GPU: each holds 1/TP of the target's weights and of every token's KV (an MLA latent whole).
A draft with draft TP 1 sits whole on the group's first GPU, which then binds; with draft TP = TP
it is sharded like the target.  Weights are counted as Vidur's ``ParamCounter`` counts them,
per layer kind and at each part's storage dtype (:mod:`simulator.models.weights`).
"""

from __future__ import annotations

from typing import Optional

from vidur.config import ReplicaConfig

from simulator.catalog import shape_of
from simulator.config import RunConfig
from simulator.errors import ConfigError
from simulator.models import weights
from simulator.profiles.hardware import DeviceSpec
from simulator.shapes import ModelShape
from simulator.speculative.memory import BYTES, ModelMemory, kv_blocks, kv_capacity_tokens

MEMORY_MARGIN = 0.1  # Vidur's default memory_margin_fraction


def model_memory(replica: ReplicaConfig, include_embeddings: bool, shape: Optional[ModelShape] = None) -> ModelMemory:
    """One GPU's share of the model ``replica`` runs: its weights (embedding and LM head where
    ``include_embeddings``) and its cache per token.  ``shape``: the whole model as the run
    resolved it (its precision, expert placement); default: the model's config."""
    model = replica.model_config
    whole = shape if shape is not None else shape_of(model)
    shard = whole.sharded(replica.tensor_parallel_size)
    layers = replica.num_layers_per_pipeline_stage
    weight = weights.weight_bytes(shard, layers, include_embeddings, getattr(model, "tie_word_embeddings", False))
    full, windows, state = weights.kv_layout(shard, layers)
    return ModelMemory(weight, full, windows, state)


def draft_memory(replica: ReplicaConfig, head, shape: Optional[ModelShape] = None) -> ModelMemory:
    """Per GPU: a draft model's weights with its own embedding and LM head, or an EAGLE head's one
    layer plus its fc layer (and, for EAGLE-3, its draft-vocabulary LM head; EAGLE-1 shares the
    target's embedding and LM head).  Either keeps KV for every cached token."""
    if head is None:
        return model_memory(replica, include_embeddings=True, shape=shape)
    layer = model_memory(replica, include_embeddings=False, shape=shape)
    h, tp = head.embedding_dim, replica.tensor_parallel_size
    extra = head.fc_inputs * h * h + (head.vocab_size * h if head.method == "eagle3" else 0)
    return ModelMemory(layer.weight_bytes + BYTES * extra // tp, layer.kv_bytes_per_token, layer.window_kv, layer.state_bytes_per_request)


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
    capacity = kv_capacity_tokens(memory, MEMORY_MARGIN, target, draft, longest)
    blocks = kv_blocks(capacity, longest, config.block_size)
    if blocks <= 0:
        what = f"draft model '{config.speculation.draft_model}' alongside the target" if draft else "the target model"
        raise ConfigError(
            f"device '{config.device}' ({memory / 2**30:.0f} GiB): {what} leaves no room for even one "
            f"{longest}-token request's KV cache"
        )
    return blocks
