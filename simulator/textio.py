"""The project's one atomic writer: a reader (or a crash) never sees half a file.

Every file the project writes goes through :func:`atomic_write` (or its text/bytes
wrappers): a temporary file in the target's directory, fsynced, then renamed over the
target.  ``mkstemp`` makes private (0600) files; the result gets the mode an ordinary
``open`` would give (0644 under the usual umask), so profiles, CSVs and sites are readable
by everyone who could read a normally written file.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def default_file_mode() -> int:
    """The mode ``open(path, "w")`` would create: 0o666 less the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    For writers that want a file name (``DataFrame.to_csv`` with compression, say).  On any
    exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, default_file_mode())
        with open(tmp_path, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path, text: str) -> None:
    """UTF-8, newlines written as given (no platform translation)."""
    atomic_write_bytes(path, text.encode("utf-8"))
