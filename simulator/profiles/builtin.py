"""The embedded default profile: Vidur-format tables generated from the physical model.

Rows are written for every tensor-parallel degree the model can be sharded over (1, 2, 4, 8 where
the head counts allow it and the device's node holds that many GPUs), each costed on one worker's
shard; the all-reduce rows come from the device's NVLink ring model (:mod:`simulator.profiles.network`),
written by :func:`simulator.profiles.all_reduce_rows.model_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, TYPE_CHECKING

import numpy as np

from simulator.util.hashing import text_digest
from simulator.profiles import grid, roofline, sharding
from simulator.profiles.hardware import DeviceSpec, NetworkSpec
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import ATTENTION_OPS, MLP_OPS, with_point_stats

if TYPE_CHECKING:  # annotations only
    import pandas as pd

# Bump when the model's equations change: it is part of every cache key and provenance string.
GENERATOR_VERSION = "4"  # 2: TP-sharded rows and all-reduce rows; 3: LM head and sampler columns; 4: the step-time model (engine, FA3, custom all-reduce)
MAX_DECODE_BATCH = 1024


def tp_degrees(shape: ModelShape, dev: DeviceSpec) -> tuple[int, ...]:
    """The TP degrees the built-in profile covers for this model on this device."""
    return sharding.tp_degrees(shape, dev.network.gpus_per_node if dev.network else 1)


def _per_degree(table, shape: ModelShape, degrees) -> pd.DataFrame:
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    frames = [table(shape.sharded(tp)) for tp in degrees]
    return pd.concat(frames, ignore_index=True)


def mlp_table(shape: ModelShape, dev: DeviceSpec, max_tokens: int, degrees=(1,)) -> pd.DataFrame:
    return _per_degree(lambda s: _mlp_rows(s, dev, max_tokens), shape, degrees)


def attention_table(
    shape: ModelShape, dev: DeviceSpec, max_seq_len: int, block_size: int = 16, max_batch: int = MAX_DECODE_BATCH, degrees=(1,)
) -> pd.DataFrame:
    return _per_degree(lambda s: _attention_rows(s, dev, max_seq_len, block_size, max_batch), shape, degrees)


def _mlp_rows(shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> pd.DataFrame:
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    tokens = np.array(grid.num_tokens_grid(max_tokens))
    times = roofline.mlp_side_ms(tokens, shape, dev)
    frame = pd.DataFrame(index=range(len(tokens)))
    for op in MLP_OPS:
        with_point_stats(frame, op, times[op])
    with_point_stats(frame, "lm_head", roofline.lm_head_ms(tokens, shape, dev))
    with_point_stats(frame, "sampler", roofline.sampler_ms(tokens, shape, dev))
    frame["n_head"] = shape.num_q_heads
    frame["n_kv_head"] = shape.num_kv_heads
    frame["n_embd"] = shape.embedding_dim
    frame["n_expanded_embd"] = shape.mlp_hidden_dim
    frame["vocab_size"] = shape.vocab_size
    frame["use_gated_mlp"] = shape.use_gated_mlp
    frame["num_tokens"] = tokens
    frame["num_tensor_parallel_workers"] = shape.tensor_parallel
    return frame


def _attention_rows(shape: ModelShape, dev: DeviceSpec, max_seq_len: int, block_size: int, max_batch: int) -> pd.DataFrame:
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    prefill = np.array(grid.prefill_shapes(max_seq_len, max_chunk=max_seq_len), dtype=float)
    decode = np.array(grid.decode_shapes(max_seq_len, max_batch), dtype=float)
    chunk, prefill_kv = prefill[:, 0], prefill[:, 1]
    batch, decode_kv = decode[:, 0], decode[:, 1]
    n_prefill, n_decode = len(prefill), len(decode)

    frame = pd.DataFrame(index=range(n_prefill + n_decode))
    zeros_p, zeros_d = np.zeros(n_prefill), np.zeros(n_decode)
    with_point_stats(frame, "attn_prefill", np.concatenate([roofline.prefill_attention_ms(chunk, prefill_kv, shape, dev), zeros_d]))
    with_point_stats(frame, "attn_decode", np.concatenate([zeros_p, roofline.decode_attention_ms(batch, decode_kv, shape, dev)]))
    new_tokens = np.concatenate([chunk, batch])
    with_point_stats(frame, "attn_kv_cache_save", roofline.kv_cache_save_ms(new_tokens, shape, dev))
    for op in ATTENTION_OPS[3:]:  # reshapes are folded into the kernels above
        with_point_stats(frame, op, 0.0)
    frame["n_embd"] = shape.embedding_dim
    frame["n_q_head"] = shape.num_q_heads
    frame["n_kv_head"] = shape.num_kv_heads
    frame["block_size"] = block_size
    frame["num_tensor_parallel_workers"] = shape.tensor_parallel
    frame["max_model_len"] = max_seq_len
    frame["batch_size"] = np.concatenate([np.ones(n_prefill), batch]).astype(int)
    frame["prefill_chunk_size"] = np.concatenate([chunk, zeros_d]).astype(int)
    frame["kv_cache_size"] = np.concatenate([prefill_kv, decode_kv]).astype(int)
    frame["is_prefill"] = np.concatenate([np.ones(n_prefill, bool), np.zeros(n_decode, bool)])
    frame["attention_backend"] = f"builtin-roofline-v{GENERATOR_VERSION}"
    return frame


@dataclass(frozen=True)
class BuiltinModel:
    """What a built-in run's step-time model is made of: one worker's shard of the model on one
    device, and the node's NVLink model at TP > 1 (the device's, or one fitted to measured
    all-reduce rows)."""

    shape: ModelShape  # already sharded to the run's TP degree
    device: DeviceSpec
    network: Optional[NetworkSpec] = None

    def digest(self) -> str:
        """Content hash of every number the tables depend on (provenance and cache keys)."""
        return text_digest(f"{self.shape}|{self.device.fingerprint()}|{self.network}|v{GENERATOR_VERSION}")
