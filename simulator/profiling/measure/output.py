"""Measured rows in Vidur's profile format and in the verify tables, and writing them: the
profile through ``vidur_format.write_profile``, the verify tables through ``simulator.util.textio``
(every file whole or not at all)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.profiling.measure.shapes import Shape

# The verify tables: one row per (batch, KV, k' + 1); rows with one query are plain decode, and
# those at batches up to max_batch x (max_k + 1) are there for the per-token bound.
VERIFY_KEY_COLUMNS = ("batch_size", "kv_cache_size", "num_query_tokens", "num_speculative_tokens")
VERIFY_TABLES = {  # file stem -> (timed op, its column name, model columns)
    "verify_attention": ("verify_attention", "attention", ("n_embd", "n_q_head", "n_kv_head")),
    "verify_layer": ("verify_layer", "layer", ("n_embd", "n_q_head", "n_kv_head", "n_expanded_embd")),
}
VERIFY_TAIL_COLUMNS = ("attention_backend", "kv_layout")
VERIFY_METADATA = "verify_metadata.json"
from simulator.util.textio import atomic_path, atomic_write_text
from simulator.profiles.vidur_format import (
    ATTENTION_KEY_COLUMNS,
    ATTENTION_OPS,
    LOGITS_OPS,
    MLP_KEY_COLUMNS,
    MLP_OPS,
    STAT_SUFFIXES,
    ProfileFiles,
    stat_columns,
    write_profile,
)


def mlp_row(cfg, tokens: int, stats: dict, ops: tuple[str, ...]) -> dict:
    row = {}
    for op in MLP_OPS:  # an op the architecture lacks takes no time (Vidur's loader assumes the same)
        for suffix in STAT_SUFFIXES:
            row[f"time_stats.{op}.{suffix}"] = stats[op][suffix] if op in ops else 0.0
    for op in LOGITS_OPS:
        row.update({f"time_stats.{op}.{suffix}": stats[op][suffix] for suffix in STAT_SUFFIXES})
    row.update(
        n_head=cfg.num_q_heads,
        n_kv_head=cfg.num_kv_heads,
        n_embd=cfg.embedding_dim,
        n_expanded_embd=cfg.mlp_hidden_dim,
        vocab_size=cfg.vocab_size,
        use_gated_mlp=bool(cfg.use_gated_mlp),
        num_tokens=tokens,
        num_tensor_parallel_workers=1,
    )
    return row


def attention_row(cfg, shape: Shape, stats: dict, backend: str, block_size: int, max_kv: int) -> dict:
    row = {f"time_stats.{op}.{s}": stats[op][s] if op in stats else np.nan for op in ATTENTION_OPS for s in STAT_SUFFIXES}
    decode = shape.kind == "decode"
    row.update(
        n_embd=cfg.embedding_dim,
        n_q_head=cfg.num_q_heads,
        n_kv_head=cfg.num_kv_heads,
        block_size=block_size,
        num_tensor_parallel_workers=1,
        max_model_len=max_kv,
        batch_size=shape.a if decode else 1,
        prefill_chunk_size=0 if decode else shape.a,
        kv_cache_size=shape.b,
        is_prefill=not decode,
        attention_backend=f"sdpa_{backend}",
    )
    return row


def profile_frames(mlp_rows: list[dict], attention_rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``mlp.csv`` and ``attention.csv`` in Vidur's column order, rows in a fixed order."""
    mlp = pd.DataFrame(mlp_rows, columns=[c for op in MLP_OPS + LOGITS_OPS for c in stat_columns(op)] + list(MLP_KEY_COLUMNS))
    mlp = mlp.sort_values("num_tokens", ignore_index=True)
    attention = pd.DataFrame(attention_rows, columns=[c for op in ATTENTION_OPS for c in stat_columns(op)] + list(ATTENTION_KEY_COLUMNS))
    attention = attention.sort_values(["is_prefill", "prefill_chunk_size", "kv_cache_size", "batch_size"], ignore_index=True)
    return mlp, attention


def check_out_dir(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"--out {out}: directory exists and is not empty; pass --overwrite to replace its profile")


def write_measured_profile(out: Path, mlp: pd.DataFrame, attention: pd.DataFrame, metadata: dict, compress: bool) -> ProfileFiles:
    """Write the profile, then drop a previous profile's files in the other format (.csv / .csv.xz)."""
    files = write_profile(out, mlp, attention, metadata, compress=compress)
    other_suffix = ".csv" if compress else ".csv.xz"
    for stem in ("mlp", "attention"):
        (out / f"{stem}{other_suffix}").unlink(missing_ok=True)
    return files


def verify_columns(stem: str) -> list[str]:
    _, name, model = VERIFY_TABLES[stem]
    return list(VERIFY_KEY_COLUMNS) + stat_columns(name) + list(model) + list(VERIFY_TAIL_COLUMNS)


def verify_row(cfg, shape: Shape, stats: dict, backend: str) -> dict:
    op, name, _ = VERIFY_TABLES[shape.kind]
    model = {"n_embd": cfg.embedding_dim, "n_q_head": cfg.num_q_heads, "n_kv_head": cfg.num_kv_heads, "n_expanded_embd": cfg.mlp_hidden_dim}
    return {
        "batch_size": shape.a,
        "kv_cache_size": shape.b,
        "num_query_tokens": shape.q,
        "num_speculative_tokens": shape.q - 1,
        **{f"time_stats.{name}.{suffix}": stats[op][suffix] for suffix in STAT_SUFFIXES},
        **model,
        "attention_backend": f"sdpa_{backend}",
        "kv_layout": "contiguous",
    }


def verify_frames(attention_rows: list[dict], layer_rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``verify_attention.csv`` and ``verify_layer.csv``, rows sorted by KV, queries, batch."""
    frames = [pd.DataFrame(rows, columns=verify_columns(stem)) for stem, rows in (("verify_attention", attention_rows), ("verify_layer", layer_rows))]
    attention, layer = (f.sort_values(["kv_cache_size", "num_query_tokens", "batch_size"], ignore_index=True) for f in frames)
    return attention, layer


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, compression="xz" if path.name.endswith(".xz") else None, float_format="%.6g")


def write_verify_tables(out: Path, attention: pd.DataFrame, layer: pd.DataFrame, metadata: dict, compress: bool) -> list[Path]:
    """Write the verify tables and their metadata; drop a previous run's in the other format."""
    suffix, other = (".csv.xz", ".csv") if compress else (".csv", ".csv.xz")
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"verify_attention{suffix}", out / f"verify_layer{suffix}"]
    for frame, path in zip((attention, layer), paths):
        _write_csv(frame, path)
    atomic_write_text(out / VERIFY_METADATA, json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    for stem in VERIFY_TABLES:
        (out / f"{stem}{other}").unlink(missing_ok=True)
    return paths
