"""File utilities shared by the validation steps: JSON spelling, durable appends, hashing.

Outputs go through the project's one atomic writer (:mod:`simulator.util.textio`), so a crash
never leaves a half-written file; JSON inputs are read with :func:`simulator.util.inputs.read_json`.
Replay results are instead appended one line per request with flush + fsync, so a crash
loses at most the request being written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_text
from simulator.util.textio import atomic_write_text, check_creatable_dir, check_writable_file


def json_safe(value: Any) -> Any:
    """NaN and infinities become ``None`` (strict JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return json_safe(value.item())
    return value


def canonical_json(value: Any) -> str:
    """One spelling per value, so equal content hashes equally."""
    return json.dumps(json_safe(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(json_safe(value), indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_jsonl_atomic(path: Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(canonical_json(row) + "\n" for row in rows))


def check_output_file(path, what: str) -> Path:
    """Before any work: ``path`` can be written as a file (see :func:`check_output_dir`)."""
    check_writable_file(path, what)
    return Path(path)


def check_output_dir(path, what: str, files: tuple = (), dirs: tuple = ()) -> Path:
    """Before any work: ``path`` is, or can be made, a writable directory, and the ``files``
    and ``dirs`` a step writes in it are not the wrong kind of thing already.  Writability is
    probed by creating a file (``os.access`` says yes to root where it cannot write)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} exists and is not a directory")
    check_creatable_dir(path, f"{what} {path}")
    for name in files:
        if (path / name).is_dir():
            raise ConfigError(f"{what} {path}: {path / name} is a directory, expected a file")
    for name in dirs:
        if (path / name).exists() and not (path / name).is_dir():
            raise ConfigError(f"{what} {path}: {path / name} exists and is not a directory")
    return path


class DurableAppender:
    """Appends JSON lines, each flushed and fsynced before ``append`` returns (thread-safe)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_unterminated_tail(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def append(self, row: dict) -> None:
        line = canonical_json(row) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _drop_unterminated_tail(path: Path) -> None:
    """A crash mid-write can leave a final line without its newline; it is not a record."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def iter_jsonl(path: Path, what: str = "input") -> Iterator[tuple[int, dict]]:
    """(line number, object) for each complete line; an unterminated last line is skipped."""
    path = Path(path)
    return parse_jsonl(read_text(path, what), path)


def parse_jsonl(text: str, path: Path) -> Iterator[tuple[int, dict]]:
    """:func:`iter_jsonl` on text already read; ``path`` names it in messages."""
    lines = text.split("\n")
    for number, line in enumerate(lines[:-1], start=1):  # the last piece has no newline
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}:{number}: not valid JSON ({err.msg})") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{path}:{number}: expected a JSON object")
        yield number, value


def check_schema(path: Path, header: dict, schema: str, version: int) -> None:
    """The first record of every file names its schema and version; refuse anything else."""
    if header.get("schema") != schema:
        raise ConfigError(f"{path}: schema is {header.get('schema')!r}, expected {schema!r}")
    if header.get("schema_version") != version:
        raise ConfigError(
            f"{path}: schema_version is {header.get('schema_version')!r}; this version reads {schema} version {version}"
        )
