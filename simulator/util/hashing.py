"""The project's one way to hash: SHA-256 over text, canonical JSON or files' bytes.

Cache keys, provenance digests and the model hash all come from here, so one value always hashes
the same way: JSON with sorted keys and compact separators (tuples as lists), text as UTF-8,
files as their name and bytes in the order given.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional


def _hex(digest, length: Optional[int]) -> str:
    text = digest.hexdigest()
    return text[:length] if length else text


def text_digest(text: str, length: Optional[int] = None) -> str:
    return _hex(hashlib.sha256(text.encode("utf-8")), length)


def canonical_json(value) -> str:
    """The one JSON serialisation that is hashed: sorted keys, no spaces, sets and tuples as lists."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_jsonable)


def _jsonable(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, (tuple, Path)):
        return list(value) if isinstance(value, tuple) else str(value)
    raise TypeError(f"cannot hash a {type(value).__name__}")


def json_digest(value, length: Optional[int] = None) -> str:
    return text_digest(canonical_json(value), length)


def files_digest(paths: Iterable[Path], length: Optional[int] = None) -> str:
    """Each file's name and bytes, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        path = Path(path)
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
    return _hex(digest, length)


def folder_digest(root: Path) -> str:
    """Every file under ``root``: its relative path and bytes, in sorted order.  Memoised per
    (path, size, mtime) of every file, so a sweep hashes an unchanged profile folder once."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    stamp = tuple((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _folder_digest(str(root.resolve()), stamp)


@lru_cache(maxsize=64)
def _folder_digest(path: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    root = Path(path)
    for name, _, _ in stamp:
        digest.update(name.encode() + b"\0")
        digest.update((root / name).read_bytes() + b"\0")
    return digest.hexdigest()
