"""Which tensor-parallel degrees a model can be sharded over (vLLM's rules, which Vidur assumes).

Query heads and the MLP's hidden width split evenly over the workers.  KV heads split evenly
too when there are at least as many as workers; with fewer, each is replicated on
``tp / num_kv_heads`` workers, which needs ``tp`` to be a multiple of the KV head count.
"""

from __future__ import annotations

from simulator.errors import ConfigError
from simulator.shapes import ModelShape


def sharding_problem(shape: ModelShape, tp: int) -> str | None:
    """Why ``shape`` cannot be split over ``tp`` workers, or None when it can."""
    if shape.num_q_heads % tp:
        return f"{shape.num_q_heads} query heads are not divisible by {tp}"
    kv = shape.num_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        return f"{kv} KV heads can neither be split evenly over {tp} workers nor replicated evenly on them"
    if shape.mlp_hidden_dim % tp or shape.embedding_dim % tp:
        return f"the widths (embedding {shape.embedding_dim}, MLP {shape.mlp_hidden_dim}) are not divisible by {tp}"
    return None


def shardable(shape: ModelShape, tp: int) -> bool:
    return sharding_problem(shape, tp) is None


def check_sharding(shape: ModelShape, tp: int, field: str, model: str) -> None:
    problem = sharding_problem(shape, tp)
    if problem:
        raise ConfigError(f"{field} = {tp}: {model} cannot be tensor-parallel over {tp} GPUs ({problem})")
