"""Read the verify-step tables that ``measure --tables verify`` writes (``verify_attention.csv``
or ``.csv.xz``, next to a Vidur-format profile), checked for the columns the fit reads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json

VERIFY_ATTENTION_REQUIRED = ("batch_size", "kv_cache_size", "num_query_tokens", "time_stats.attention.median")


def find_table(directory, stem: str) -> Path:
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"--profile-dir {directory}: does not exist or is not a directory")
    for name in (f"{stem}.csv", f"{stem}.csv.xz"):
        if (directory / name).is_file():
            return directory / name
    raise ConfigError(f"--profile-dir {directory}: no {stem}.csv (or .csv.xz); measure one with `python -m simulator.profiling measure --tables verify`")


def read_verify_attention(directory) -> pd.DataFrame:
    path = find_table(directory, "verify_attention")
    try:
        frame = pd.read_csv(path)
    except Exception as exc:  # pandas raises several parser error types
        raise ConfigError(f"{path}: cannot be read as CSV ({exc})") from exc
    missing = [c for c in VERIFY_ATTENTION_REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}")
    if not (frame.num_query_tokens > 1).any() or not (frame.num_query_tokens == 1).any():
        raise ConfigError(f"{path}: needs rows with one query per sequence (the bounds) and rows with more (verify steps)")
    return frame


def read_provenance(directory) -> dict:
    """What measured the table, from ``verify_metadata.json`` beside it ({} when there is none)."""
    path = Path(directory) / "verify_metadata.json"
    if not path.is_file():
        return {}
    meta = read_json(path, "verify metadata")
    keys = ("model", "measured_on", "dtype", "timer", "attention_backends", "date")
    return {key: meta[key] for key in keys if key in meta}
