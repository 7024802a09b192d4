"""Vidur's profile CSV format: column names, validation of a profile directory, and writing one.

A profile directory holds ``mlp.csv`` and ``attention.csv`` (either may be ``.csv.xz``), the
layout of Vidur's ``data/profiling/compute/<device>/<model>/``; times are milliseconds per layer.
Rows are per tensor-parallel degree (``num_tensor_parallel_workers``).  For TP > 1 a run also
needs the all-reduce times of Vidur's ``data/profiling/network/<topology>/all_reduce.csv``: in the
profile directory itself, in a network directory of that layout, or from the built-in model; they
are read, checked and written by :mod:`simulator.profiles.all_reduce_rows`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TYPE_CHECKING


from simulator.util.errors import ConfigError
from simulator.util.hashing import files_digest
from simulator.models.shapes import ModelShape
from simulator.util.textio import atomic_path, atomic_write_text

if TYPE_CHECKING:  # annotations only
    import pandas as pd

MLP_OPS = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
# Ops Vidur's op set lacks, run once per step on every token that produces logits (a verify
# row's k' + 1, a finishing prefill's last): optional columns of mlp.csv, per num_tokens.
LOGITS_OPS = ("lm_head", "sampler")
# The ops Vidur's predictor trains on (it ignores ``emb``).
PREDICTED_MLP_OPS = MLP_OPS[1:]
ATTENTION_OPS = ("attn_prefill", "attn_decode", "attn_kv_cache_save", "attn_input_reshape", "attn_output_reshape")
STAT_SUFFIXES = ("min", "max", "mean", "median", "std")
MLP_KEY_COLUMNS = (
    "n_head",
    "n_kv_head",
    "n_embd",
    "n_expanded_embd",
    "vocab_size",
    "use_gated_mlp",
    "num_tokens",
    "num_tensor_parallel_workers",
)
ATTENTION_KEY_COLUMNS = (
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "max_model_len",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
    "is_prefill",
    "attention_backend",
)
# What Vidur's loader reads; anything else is optional.
MLP_REQUIRED = tuple(f"time_stats.{op}.median" for op in PREDICTED_MLP_OPS) + MLP_KEY_COLUMNS
ATTENTION_REQUIRED = (
    "time_stats.attn_prefill.median",
    "time_stats.attn_decode.median",
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
)


def stat_columns(op: str) -> list[str]:
    return [f"time_stats.{op}.{s}" for s in STAT_SUFFIXES]


def with_point_stats(frame: pd.DataFrame, op: str, median_ms) -> None:
    """Fill Vidur's five statistics for a modelled (not measured) op: no spread, std 0."""
    for suffix in STAT_SUFFIXES:
        frame[f"time_stats.{op}.{suffix}"] = 0.0 if suffix == "std" else median_ms


@dataclass(frozen=True)
class ProfileFiles:
    mlp: Optional[Path]  # None for a built-in run, whose compute tables come from the physical model
    attention: Optional[Path]
    all_reduce: Optional[Path] = None  # only for TP > 1

    def sha256(self) -> str:
        """One digest over the files' bytes, in a fixed order."""
        return files_digest(p for p in (self.mlp, self.attention, self.all_reduce) if p is not None)


def _find(directory: Path, stem: str) -> Path:
    for name in (f"{stem}.csv", f"{stem}.csv.xz"):
        if (directory / name).is_file():
            return directory / name
    raise ConfigError(f"profile directory {directory}: missing {stem}.csv (or {stem}.csv.xz)")


def read_csv(path: Path) -> pd.DataFrame:
    """A profile CSV with at least one row, or a ConfigError naming the file."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    try:
        frame = pd.read_csv(path)
    except Exception as exc:  # pandas raises several parser error types
        raise ConfigError(f"{path}: cannot be read as CSV ({exc})") from exc
    if frame.empty:
        raise ConfigError(f"{path}: has no rows")
    return frame


def covered(values) -> str:
    """The integer values a column covers, for a refusal."""
    return ", ".join(str(int(v)) for v in sorted(set(values))) or "none"


def missing_columns(frame: pd.DataFrame, required) -> list[str]:
    """The ``required`` columns ``frame`` lacks."""
    return [c for c in required if c not in frame.columns]


def validate_profile_dir(directory, shape: ModelShape, block_size: int = 16) -> ProfileFiles:
    """Check the files Vidur will train on exist, have its columns, and cover this model at the
    shape's tensor-parallel degree."""
    tp = shape.tensor_parallel
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"profile directory {directory}: does not exist or is not a directory")
    files = ProfileFiles(_find(directory, "mlp"), _find(directory, "attention"))

    mlp = read_csv(files.mlp)
    missing = missing_columns(mlp, MLP_REQUIRED)
    if missing:
        raise ConfigError(f"{files.mlp}: missing columns {missing}")
    rows = mlp[
        (mlp.n_head == shape.num_q_heads)
        & (mlp.n_kv_head == shape.num_kv_heads)
        & (mlp.n_embd == shape.embedding_dim)
        & (mlp.n_expanded_embd == shape.mlp_hidden_dim)
        & (mlp.use_gated_mlp == shape.use_gated_mlp)
        & (mlp.vocab_size == shape.vocab_size)
    ]
    _check_tp(files.mlp, rows, tp)
    rows = rows[rows.num_tensor_parallel_workers == tp]
    if rows.empty:
        raise ConfigError(
            f"{files.mlp}: no rows for this model (n_head={shape.num_q_heads}, n_kv_head={shape.num_kv_heads}, "
            f"n_embd={shape.embedding_dim}, n_expanded_embd={shape.mlp_hidden_dim}, vocab_size={shape.vocab_size}, "
            f"use_gated_mlp={shape.use_gated_mlp}) at num_tensor_parallel_workers={tp}"
        )

    attention = read_csv(files.attention)
    missing = missing_columns(attention, ATTENTION_REQUIRED)
    if missing:
        raise ConfigError(f"{files.attention}: missing columns {missing}")
    rows = attention[
        (attention.n_embd == shape.embedding_dim)
        & (attention.n_q_head == shape.num_q_heads)
        & (attention.n_kv_head == shape.num_kv_heads)
        & (attention.block_size == block_size)
    ]
    _check_tp(files.attention, rows, tp)
    rows = rows[rows.num_tensor_parallel_workers == tp]
    if rows.empty:
        raise ConfigError(
            f"{files.attention}: no rows for this model (n_embd={shape.embedding_dim}, n_q_head={shape.num_q_heads}, "
            f"n_kv_head={shape.num_kv_heads}) at block_size={block_size}, num_tensor_parallel_workers={tp}"
        )
    decode = rows[rows.prefill_chunk_size == 0]
    prefill = rows[rows.prefill_chunk_size > 0]
    if decode.empty or prefill.empty:
        raise ConfigError(f"{files.attention}: needs both decode rows (prefill_chunk_size = 0) and prefill rows")
    return files


def max_decode_batch(files: ProfileFiles, shape: ModelShape, block_size: int = 16) -> int:
    """Largest decode batch profiled for this model: predictions beyond it are extrapolated,
    never invented by the forest."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    a = pd.read_csv(files.attention)
    rows = a[
        (a.prefill_chunk_size == 0)
        & (a.n_embd == shape.embedding_dim)
        & (a.n_q_head == shape.num_q_heads)
        & (a.n_kv_head == shape.num_kv_heads)
        & (a.block_size == block_size)
        & (a.num_tensor_parallel_workers == shape.tensor_parallel)
    ]
    return int(rows.batch_size.max())


def _check_tp(path: Path, rows: pd.DataFrame, tp: int) -> None:
    """A TP degree beyond every degree the file's rows cover is a larger group than was profiled."""
    if len(rows) and tp > rows.num_tensor_parallel_workers.max():
        raise ConfigError(
            f"{path}: tensor_parallel_size = {tp} is larger than the device count this profile covers "
            f"(num_tensor_parallel_workers {covered(rows.num_tensor_parallel_workers)})"
        )


def _atomic_csv(frame: pd.DataFrame, path: Path) -> None:
    compression = "xz" if path.name.endswith(".xz") else None
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, compression=compression, float_format="%.6g")


def write_profile(
    directory, mlp: pd.DataFrame, attention: pd.DataFrame, metadata: dict, compress: bool = False, all_reduce: Optional[pd.DataFrame] = None
) -> ProfileFiles:
    """Write a Vidur-format profile directory; every file appears whole or not at all."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".csv.xz" if compress else ".csv"
    files = ProfileFiles(directory / f"mlp{suffix}", directory / f"attention{suffix}", directory / f"all_reduce{suffix}" if all_reduce is not None else None)
    _atomic_csv(mlp, files.mlp)
    _atomic_csv(attention, files.attention)
    if all_reduce is not None:
        _atomic_csv(all_reduce, files.all_reduce)
    atomic_write_text(directory / "metadata.json", json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return files
