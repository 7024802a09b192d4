"""How many KV blocks a run gets: one GPU's memory less the target's (and a draft's) weights.

Per GPU: each holds 1/TP of the target's weights and of every token's KV (an MLA latent whole).
A draft with draft TP 1 sits whole on the group's first GPU, which then binds; with draft TP = TP
it is sharded like the target.  Weights are counted as Vidur's ``ParamCounter`` counts them, per
layer kind and at each part's storage dtype (:mod:`simulator.models.weights`); what a proposer's
network holds beyond its layers (an fc layer, its own LM head, several MTP layers) its kind counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.models import weights
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import ModelShape
from simulator.speculative.memory import ModelMemory, kv_blocks, kv_capacity_tokens
from simulator.speculative.proposers.base import NetworkMemory
from simulator.vidur.configs import ReplicaConfig

MEMORY_MARGIN = 0.1  # Vidur's default memory_margin_fraction


@dataclass(frozen=True)
class MemoryPlan:
    """One GPU's memory for a run: what the target and the draft network hold, and the KV blocks left."""

    target: ModelMemory
    draft: Optional[ModelMemory]  # None: the proposer runs no network, or no speculation
    num_kv_blocks: int


@dataclass(frozen=True)
class DraftHolding:
    """The draft network's replica and shape as the run resolved them, and the proposer kind (with
    its settings) that counts what it holds beyond its layers."""

    replica: ReplicaConfig
    shape: ModelShape
    kind: object  # the proposer kind (simulator.speculative.proposers)
    settings: object  # its SpeculationSettings
    name: str  # what drafts, for a refusal


def plan_memory(
    device: DeviceSpec, target: ReplicaConfig, target_shape: ModelShape, draft: Optional[DraftHolding], longest: int, block_size: int,
    num_kv_blocks: Optional[int],
) -> MemoryPlan:
    """The run's memory in one call: the target's share of one GPU (its decoder layers, as Vidur's
    ``ParamCounter`` counts them), the draft's as its kind counts it, and the KV blocks left
    (:func:`plan_kv_blocks`)."""
    target_memory = model_memory(target, include_embeddings=False, shape=target_shape)
    draft_memory = draft.kind.draft_memory(network_memory(draft.replica, shape=draft.shape), draft.settings) if draft is not None else None
    blocks = plan_kv_blocks(device, target_memory, draft_memory, longest, block_size, num_kv_blocks, draft.name if draft else "")
    return MemoryPlan(target_memory, draft_memory, blocks)


def model_memory(replica: ReplicaConfig, include_embeddings: bool, shape: ModelShape) -> ModelMemory:
    """One GPU's share of the model ``replica`` runs: its weights (embedding and LM head where
    ``include_embeddings``) and its cache per token.  ``shape``: the whole model as the run
    resolved it (its precision, expert placement), a value: nothing is looked up here."""
    model = replica.model_config
    shard = shape.sharded(replica.tensor_parallel_size)
    layers = replica.num_layers_per_pipeline_stage
    weight = weights.weight_bytes(shard, layers, include_embeddings, getattr(model, "tie_word_embeddings", False))
    full, windows, state = weights.kv_layout(shard, layers)
    return ModelMemory(weight, full, windows, state)


def network_memory(replica: ReplicaConfig, shape: ModelShape) -> NetworkMemory:
    """A draft network's share of one GPU, for its proposer kind to count what it holds
    (:meth:`~simulator.speculative.proposers.base.ProposerKind.draft_memory`): its decoder layers,
    its own embedding and LM head, its width and TP degree."""
    layers = model_memory(replica, include_embeddings=False, shape=shape)
    whole = model_memory(replica, include_embeddings=True, shape=shape)
    return NetworkMemory(
        layers=layers,
        embeddings_bytes=whole.weight_bytes - layers.weight_bytes,
        hidden_size=replica.model_config.embedding_dim,
        tensor_parallel=replica.tensor_parallel_size,
    )


def plan_kv_blocks(
    device: DeviceSpec, target: ModelMemory, draft: Optional[ModelMemory], longest: int, block_size: int, num_kv_blocks: Optional[int], network: str
) -> int:
    """KV blocks for the target, after its weights and (with a draft proposer) the draft's weights
    and KV; or the configured ``num_kv_blocks``, checked to hold the ``longest`` request.
    ``network`` names what drafts, for the refusal."""
    if num_kv_blocks is not None:
        if num_kv_blocks * block_size < longest:
            raise ConfigError(
                f"num_kv_blocks = {num_kv_blocks}: {num_kv_blocks * block_size} token slots "
                f"cannot hold the workload's longest request ({longest} tokens)"
            )
        return num_kv_blocks
    memory = device.datasheet.memory_gib * 2**30
    capacity = kv_capacity_tokens(memory, MEMORY_MARGIN, target, draft, longest)
    blocks = kv_blocks(capacity, longest, block_size)
    if blocks <= 0:
        what = f"{network} alongside the target" if draft else "the target model"
        raise ConfigError(
            f"device '{device.name}' ({memory / 2**30:.0f} GiB): {what} leaves no room for even one "
            f"{longest}-token request's KV cache"
        )
    return blocks
