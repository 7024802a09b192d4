"""A content-addressed cache of run results: a rebuild, a repeated pays-off question or a repeated
``python -m simulator`` re-simulates only what changed.

A run's key is the SHA-256 of everything that determines its numbers: the full RunConfig
(less ``cache_dir``, which only says where caches live), the model hash
(:func:`simulator.util.versions.source_hash`, which covers the built-in profile's physics), the
content of every profile directory the run names, and the Vidur version.  The value is the
flat record the sweep writes into its CSV, stored as JSON (floats round-trip exactly, so a
cached CSV is byte-identical to a fresh one) under ``<cache dir>/runs/``, written with
:mod:`simulator.util.textio`.  A single run of ``python -m simulator`` keeps the whole result it
prints and writes (summary, per-request rows, provenance) under ``<cache dir>/results/``, with the
same key.  An unreadable entry is a miss, never an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from simulator.runs.config import RunConfig
from simulator.util.hashing import folder_digest, json_digest
from simulator.util.paths import default_cache_dir
from simulator.util.textio import atomic_write_text

FORMAT = 1  # bump when the stored record's shape changes
DISABLE_ENV = "VIDUR_SPECDEC_NO_RUN_CACHE"  # set to 1 to simulate every run


def enabled() -> bool:
    return not os.environ.get(DISABLE_ENV)


def directory_hash(path: Optional[str]) -> Optional[str]:
    """SHA-256 of a profile directory's files (names and bytes); memoised per (size, mtime)."""
    return None if path is None else folder_digest(Path(path))


def profile_hash(config: RunConfig) -> str:
    """The profiles a run reads: its Vidur-format directories (the built-in profile is code,
    covered by the model hash)."""
    parts = {
        "profile_dir": directory_hash(config.profile_dir),
        "draft_profile_dir": directory_hash(config.speculation.draft_profile_dir),
        "network_profile_dir": directory_hash(config.network_profile_dir),
    }
    from simulator.vidur.models import config_digest  # a model given as a config.json path: its numbers

    for key, name in (("model_config", config.model), ("draft_config", config.speculation.draft_model)):
        digest = config_digest(name) if name else None
        if digest is not None:
            parts[key] = digest
    return json_digest(parts)


def run_key(config: RunConfig) -> str:
    from simulator.util.versions import source_hash, vidur_version

    inputs = config.to_dict()
    inputs.pop("cache_dir", None)
    for name in ("profile_dir", "network_profile_dir"):
        inputs.pop(name, None)  # where the profile is does not matter, what it holds does
    inputs["speculation"].pop("draft_profile_dir", None)
    payload = {
        "format": FORMAT,
        "config": inputs,
        "model_hash": source_hash(),
        "profile_hash": profile_hash(config),
        "vidur": vidur_version(),
    }
    return json_digest(payload)


def cache_root(config: RunConfig, kind: str = "runs") -> Path:
    return (Path(config.cache_dir) if config.cache_dir else default_cache_dir()) / kind


def _path(config: RunConfig, key: str, kind: str = "runs") -> Path:
    return cache_root(config, kind) / key[:2] / f"{key}.json"


def load(config: RunConfig, key: Optional[str] = None) -> Optional[dict]:
    """The cached record of ``config``, or None."""
    key = key or run_key(config)
    try:
        stored = json.loads(_path(config, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("record"), dict):
        return None
    return stored["record"]


def store(config: RunConfig, record: dict, key: Optional[str] = None) -> None:
    """Keep ``record`` for ``config``; a cache that cannot be written is skipped, not fatal."""
    key = key or run_key(config)
    try:
        atomic_write_text(_path(config, key), json.dumps({"key": key, "record": record}, sort_keys=True) + "\n")
    except OSError:
        pass


def load_result(config: RunConfig):
    """The whole cached result of one ``python -m simulator`` run of ``config`` (a RunResult
    without the per-step logs, which nothing printed or written reads), or None."""
    import pandas as pd

    from simulator.runs.results import REQUEST_COLUMNS, RunResult, RunSummary

    key = run_key(config)
    try:
        stored = json.loads(_path(config, key, "results").read_text(encoding="utf-8"))
        if stored.get("key") != key:
            return None
        body = stored["result"]
        requests = pd.DataFrame(body["requests"], columns=list(REQUEST_COLUMNS))
        return RunResult(config=config, requests=requests, summary=RunSummary(**body["summary"]), provenance=dict(body["provenance"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_result(config: RunConfig, result) -> None:
    """Keep a run's result for :func:`load_result`; a cache that cannot be written is skipped."""
    from simulator.runs.results import REQUEST_COLUMNS

    key = run_key(config)
    body = {
        "summary": result.summary.as_dict(),
        "requests": {column: result.requests[column].tolist() for column in REQUEST_COLUMNS},
        "provenance": result.provenance,
    }
    try:
        # key order kept: the provenance prints in its own order
        atomic_write_text(_path(config, key, "results"), json.dumps({"key": key, "result": body}) + "\n")
    except (OSError, TypeError, ValueError):
        pass
