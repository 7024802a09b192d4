"""Measured profile rows in one normal form, whatever file they came from.

Accepts Vidur's own ``mlp.csv`` / ``attention.csv`` columns and the column names of the
attention sample shipped next to this project (``attn_decode_median_ms`` ...), and averages
rows measured more than once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS


@dataclass(frozen=True)
class Measurements:
    mlp: pd.DataFrame  # num_tokens + one column per op (ms)
    decode: pd.DataFrame  # batch_size, kv_cache_size, ms
    prefill: pd.DataFrame  # prefill_chunk_size, kv_cache_size, ms


def _read(path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"measured profile file not found: {path}")
    try:
        return pd.read_csv(path)
    except Exception as exc:
        raise ConfigError(f"{path}: cannot be read as CSV ({exc})") from exc


def read_mlp(path, shape: ModelShape) -> pd.DataFrame:
    frame = _read(path)
    needed = ["num_tokens", "num_tensor_parallel_workers", "n_embd", "n_head"] + [f"time_stats.{op}.median" for op in PREDICTED_MLP_OPS]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}")
    frame = frame[
        (frame.num_tensor_parallel_workers == 1) & (frame.n_embd == shape.embedding_dim) & (frame.n_head == shape.num_q_heads)
    ]
    if frame.empty:
        raise ConfigError(f"{path}: no TP=1 rows for n_embd={shape.embedding_dim}, n_head={shape.num_q_heads}")
    columns = {f"time_stats.{op}.median": op for op in PREDICTED_MLP_OPS}
    frame = frame.rename(columns=columns)[["num_tokens", *PREDICTED_MLP_OPS]]
    return frame.groupby("num_tokens", as_index=False).mean().sort_values("num_tokens", ignore_index=True)


def read_attention(path, shape: ModelShape) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = _read(path)
    if "time_stats.attn_decode.median" in frame.columns:
        frame = frame.rename(
            columns={"time_stats.attn_decode.median": "decode_ms", "time_stats.attn_prefill.median": "prefill_ms"}
        )
        if "n_embd" in frame.columns:
            frame = frame[(frame.n_embd == shape.embedding_dim) & (frame.n_q_head == shape.num_q_heads)]
        if "num_tensor_parallel_workers" in frame.columns:
            frame = frame[frame.num_tensor_parallel_workers == 1]
    elif "attn_decode_median_ms" in frame.columns:
        frame = frame.rename(columns={"attn_decode_median_ms": "decode_ms", "attn_prefill_median_ms": "prefill_ms"})
    else:
        raise ConfigError(f"{path}: no attention timing columns (time_stats.attn_decode.median or attn_decode_median_ms)")
    needed = ["batch_size", "prefill_chunk_size", "kv_cache_size", "decode_ms", "prefill_ms"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}")
    is_prefill = frame.prefill_chunk_size > 0
    decode = frame.loc[~is_prefill].groupby(["batch_size", "kv_cache_size"], as_index=False)["decode_ms"].mean()
    prefill = frame.loc[is_prefill].groupby(["prefill_chunk_size", "kv_cache_size"], as_index=False)["prefill_ms"].mean()
    return decode.rename(columns={"decode_ms": "ms"}), prefill.rename(columns={"prefill_ms": "ms"})


def read_measurements(mlp_path, attention_path, shape: ModelShape) -> Measurements:
    mlp = read_mlp(mlp_path, shape) if mlp_path else pd.DataFrame()
    decode, prefill = read_attention(attention_path, shape) if attention_path else (pd.DataFrame(), pd.DataFrame())
    return Measurements(mlp, decode, prefill)


def alternate_split(values: pd.Series) -> np.ndarray:
    """Boolean mask of the held-out rows: distinct values in ascending order alternate fit / held-out.

    Interleaving keeps both halves spread over the whole range, so held-out error measures
    interpolation to unseen shapes rather than extrapolation past the fitted ones.
    """
    distinct = np.sort(values.unique())
    held_out = set(distinct[1::2])
    return values.isin(held_out).to_numpy()
