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


def stage_bytes(path, data: bytes, prefix: str = "") -> Path:
    """The first half of an atomic write: ``data`` in a fsynced temporary file beside ``path``,
    with an ordinary file's mode; the caller renames it into place (alone, or together with
    other staged outputs) or deletes it."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{prefix}", suffix=".tmp")
    staged = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(staged, default_file_mode())
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return staged


def atomic_write_bytes(path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = stage_bytes(path, data)
    try:
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise


def atomic_write_text(path, text: str) -> None:
    """UTF-8, newlines written as given (no platform translation)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def check_writable_dir(path, what: str) -> None:
    """Raise ConfigError unless ``path`` is a directory this process can create files in.

    Probes by creating (and removing) a temporary file: ``os.access`` says yes to root even on a
    read-only mount or a directory it cannot write, so it cannot be trusted for this.
    """
    from simulator.util.errors import ConfigError

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {path} does not exist")
    if not path.is_dir():
        raise ConfigError(f"{what} {path} is not a directory")
    try:
        fd, name = tempfile.mkstemp(dir=path, prefix=".write-probe-")
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot write there ({exc.strerror or exc})") from exc
    os.close(fd)
    os.unlink(name)


def check_creatable_dir(directory, subject: str) -> None:
    """``directory`` exists and is writable, or can be created: its nearest existing ancestor
    is a directory this process can write in (probed by :func:`check_writable_dir`)."""
    from simulator.util.errors import ConfigError

    ancestor = Path(directory)
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{subject}: {ancestor} is a file, not a directory")
    check_writable_dir(ancestor, f"{subject}: folder")


def check_writable_file(path, what: str, folder_must_exist: bool = False) -> None:
    """Raise ConfigError unless ``path`` can be written as a file: not a directory or another
    non-file, and its folder writable or creatable (probed, see above).  A file a user names on
    the command line (``--json``, ``--csv``) takes ``folder_must_exist``: a mistyped folder is
    refused, not silently created."""
    from simulator.util.errors import ConfigError

    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a directory, expected a file")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{what} {path} is not a regular file")
    if folder_must_exist and not path.parent.is_dir():
        raise ConfigError(f"{what} {path}: folder {path.parent} does not exist; create it first or name a file in an existing folder")
    check_creatable_dir(path.parent, f"{what} {path}")
