"""Which tensor-parallel degrees a model can be sharded over (vLLM's rules, which Vidur assumes).

Query heads and the MLP's hidden width split evenly over the workers.  KV heads split evenly
too when there are at least as many as workers; with fewer, each is replicated on
``tp / num_kv_heads`` workers, which needs ``tp`` to be a multiple of the KV head count.
"""

from __future__ import annotations

from simulator.util.errors import ConfigError
from simulator.models.shapes import ModelShape


def sharding_problem(shape: ModelShape, tp: int) -> str | None:
    """Why ``shape`` cannot be split over ``tp`` workers, or None when it can.

    Experts split each expert's width over the workers (vLLM's default), or with expert
    parallelism place ``num_experts / tp`` whole experts on each; an MLA latent is replicated
    (its query heads split); Gated DeltaNet splits its key and value heads."""
    if shape.num_q_heads % tp:
        return f"{shape.num_q_heads} query heads are not divisible by {tp}"
    kv = shape.num_kv_heads
    if shape.mla is None and ((kv >= tp and kv % tp) or (kv < tp and tp % kv)):
        return f"{kv} KV heads can neither be split evenly over {tp} workers nor replicated evenly on them"
    if shape.mlp_hidden_dim % tp or shape.embedding_dim % tp:
        return f"the widths (embedding {shape.embedding_dim}, MLP {shape.mlp_hidden_dim}) are not divisible by {tp}"
    moe = shape.moe
    if moe is not None:
        groups = moe.expert_groups(tp)
        if moe.expert_parallel and moe.num_experts % groups:
            return f"{moe.num_experts} experts cannot be placed evenly on {groups} GPUs (expert parallelism)"
        if not moe.expert_parallel and moe.expert_hidden_dim % tp:
            return f"the expert width {moe.expert_hidden_dim} is not divisible by {tp}"
        if moe.shared_hidden_dim % tp:
            return f"the shared experts' width {moe.shared_hidden_dim} is not divisible by {tp}"
    lin = shape.linear
    if lin is not None and (lin.num_key_heads % tp or lin.num_value_heads % tp):
        return f"the linear-attention heads ({lin.num_key_heads} key, {lin.num_value_heads} value) are not divisible by {tp}"
    return None


def shardable(shape: ModelShape, tp: int) -> bool:
    return sharding_problem(shape, tp) is None


TP_DEGREES = (1, 2, 4, 8)  # the tensor-parallel degrees a single node's profile covers


def tp_degrees(shape: ModelShape, gpus_per_node: int) -> tuple[int, ...]:
    """The TP degrees of one node that ``shape`` shards over (what a built-in profile covers)."""
    return tuple(tp for tp in TP_DEGREES if tp <= gpus_per_node and shardable(shape, tp))


def check_sharding(shape: ModelShape, tp: int, field: str, model: str) -> None:
    problem = sharding_problem(shape, tp)
    if problem:
        raise ConfigError(f"{field} = {tp}: {model} cannot be tensor-parallel over {tp} GPUs ({problem})")
