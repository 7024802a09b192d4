"""The embedded default profile: Vidur-format tables generated from the physical model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.profiles import grid, roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.profiles.roofline import ModelShape
from simulator.profiles.vidur_format import ATTENTION_OPS, MLP_OPS, with_point_stats

# Bump when the model's equations change: it is part of every cache key and provenance string.
GENERATOR_VERSION = "1"
MAX_DECODE_BATCH = 1024


def mlp_table(shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> pd.DataFrame:
    tokens = np.array(grid.num_tokens_grid(max_tokens))
    times = roofline.mlp_side_ms(tokens, shape, dev)
    frame = pd.DataFrame(index=range(len(tokens)))
    for op in MLP_OPS:
        with_point_stats(frame, op, times[op])
    frame["n_head"] = shape.num_q_heads
    frame["n_kv_head"] = shape.num_kv_heads
    frame["n_embd"] = shape.embedding_dim
    frame["n_expanded_embd"] = shape.mlp_hidden_dim
    frame["vocab_size"] = shape.vocab_size
    frame["use_gated_mlp"] = shape.use_gated_mlp
    frame["num_tokens"] = tokens
    frame["num_tensor_parallel_workers"] = 1
    return frame


def attention_table(
    shape: ModelShape, dev: DeviceSpec, max_seq_len: int, block_size: int = 16, max_batch: int = MAX_DECODE_BATCH
) -> pd.DataFrame:
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
    frame["num_tensor_parallel_workers"] = 1
    frame["max_model_len"] = max_seq_len
    frame["batch_size"] = np.concatenate([np.ones(n_prefill), batch]).astype(int)
    frame["prefill_chunk_size"] = np.concatenate([chunk, zeros_d]).astype(int)
    frame["kv_cache_size"] = np.concatenate([prefill_kv, decode_kv]).astype(int)
    frame["is_prefill"] = np.concatenate([np.ones(n_prefill, bool), np.zeros(n_decode, bool)])
    frame["attention_backend"] = f"builtin-roofline-v{GENERATOR_VERSION}"
    return frame
