"""Measured MLP-side rows of one model at every tensor-parallel degree, for a pooled fit.

Vidur's ``mlp.csv`` holds one block of rows per TP degree, each timing one worker's shard of the
model (1/TP of the heads and of the MLP width; norms and residual add at full width).  A
:class:`Shard` is one such (model, TP) block in normal form: the sharded shape the physical model
takes, and per num_tokens the median time of each op Vidur predicts (repeated rows averaged).
Fitting on shards of several models and degrees shows the constants kernels of many widths, which
one model's TP 1 rows cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulator.util.errors import ConfigError
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS


@dataclass(frozen=True)
class Shard:
    model: str
    tp: int
    shape: ModelShape  # already sharded: shape.tensor_parallel == tp
    rows: pd.DataFrame  # num_tokens + one column per op of PREDICTED_MLP_OPS the model has (ms per layer)

    @property
    def ops(self) -> list[str]:
        return [op for op in PREDICTED_MLP_OPS if op in self.rows.columns]


# Every transformer layer has these; the rest (the norms) may be absent from a model's mlp.csv.
REQUIRED_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "add", "attn_rope")


def read_shards(path, model: str, shape: ModelShape) -> list[Shard]:
    """Every TP degree of ``model`` found in the Vidur-format ``mlp.csv`` at ``path``, ascending."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"measured mlp.csv for {model} not found: {path}")
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise ConfigError(f"{path}: cannot be read as CSV ({exc})") from exc
    # A model without some op (phi-2's parallel block has no post-attention norm) lacks its column.
    medians = {f"time_stats.{op}.median": op for op in PREDICTED_MLP_OPS}
    needed = ["num_tokens", "num_tensor_parallel_workers", "n_embd", "n_head", *(f"time_stats.{op}.median" for op in REQUIRED_OPS)]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing} (expected Vidur's mlp.csv format)")
    ops = [op for column, op in medians.items() if column in frame.columns]
    frame = frame[(frame.n_embd == shape.embedding_dim) & (frame.n_head == shape.num_q_heads)]
    if frame.empty:
        raise ConfigError(
            f"{path}: no rows for {model} (n_embd={shape.embedding_dim}, n_head={shape.num_q_heads}); is it that model's mlp.csv?"
        )
    frame = frame.rename(columns=medians)
    shards = []
    for tp, block in frame.groupby("num_tensor_parallel_workers"):
        tp = int(tp)
        if tp < 1 or shape.num_q_heads % tp:
            raise ConfigError(f"{path}: num_tensor_parallel_workers {tp} does not divide {model}'s {shape.num_q_heads} heads")
        rows = block[["num_tokens", *ops]].groupby("num_tokens", as_index=False).mean()
        shards.append(Shard(model, tp, shape.sharded(tp), rows.sort_values("num_tokens", ignore_index=True)))
    return shards
