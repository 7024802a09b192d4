"""Publish the CSVs and the site together, or not at all.

Everything a build produces is staged beside its target (a temporary file or directory in the
same folder, so a rename moves it into place).  :meth:`Publication.commit` then renames the old
targets aside, the staged ones in, and deletes the old ones.  An exception at any point of that
(a failed rename, a KeyboardInterrupt) rolls every target back to what it was; SIGINT and SIGTERM
that arrive during the swap are held until it is finished, so a Ctrl-C cannot split it.  Either
way nothing is left beside the targets.

Single files that are not part of a publication go through :mod:`simulator.util.textio`.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from simulator.util.errors import ConfigError
from simulator.util.textio import stage_bytes

STAGING = "staging-"
OLD = "old-"


class Publication:
    """Files and directories staged beside their targets, moved into place by :meth:`commit`."""

    def __init__(self) -> None:
        self._items: list[tuple[Path, Path]] = []  # (staged, target), in commit order

    def __enter__(self) -> "Publication":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()

    def file(self, target: Path, text: str, what: str = "file") -> Path:
        """Stage ``text`` (UTF-8, newlines as given) for ``target``; returns the staged path."""
        target = Path(target)
        if target.is_dir():
            raise ConfigError(f"{what} {target} is a directory")
        try:
            staged = stage_bytes(target, text.encode("utf-8"), prefix=STAGING)
        except OSError as exc:
            raise ConfigError(f"{what} {target}: cannot write ({exc.strerror or exc})") from exc
        self._items.append((staged, target))
        return staged

    def directory(self, target: Path, what: str = "output dir") -> Path:
        """An empty directory staged for ``target``."""
        target = Path(target)
        if target.exists() and not target.is_dir():
            raise ConfigError(f"{what} {target} exists and is not a directory")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{STAGING}"))
        except OSError as exc:
            raise ConfigError(f"{what} {target}: cannot write there ({exc.strerror or exc})") from exc
        os.chmod(staged, 0o777 & ~_umask() | 0o700)
        self._items.append((staged, target))
        return staged

    def commit(self) -> None:
        """Move every staged item into place, or (on any exception) none of them."""
        with deferred_signals():
            backups: list[tuple[Path, Path, Optional[Path], bool]] = []  # (staged, target, backup dir, moved in)
            try:
                for staged, target in self._items:
                    backup = None
                    if os.path.lexists(target):
                        backup = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{OLD}"))
                        backups.append((staged, target, backup, False))
                        os.rename(target, backup / target.name)
                    else:
                        backups.append((staged, target, None, False))
                    os.rename(staged, target)
                    backups[-1] = (staged, target, backup, True)
            except BaseException:
                self._roll_back(backups)
                self.abort()
                raise
            for _, _, backup, _ in backups:
                if backup is not None:
                    shutil.rmtree(backup, ignore_errors=True)
            self._items = []

    def abort(self) -> None:
        """Remove whatever is still staged."""
        for staged, _ in self._items:
            _remove(staged)
        self._items = []

    @staticmethod
    def _roll_back(backups) -> None:
        for staged, target, backup, moved_in in reversed(backups):
            if moved_in:
                os.rename(target, staged)
            if backup is not None:
                if (backup / target.name).exists() or os.path.islink(backup / target.name):
                    os.rename(backup / target.name, target)
                os.rmdir(backup)


def remove_leftovers(target: Path) -> list[Path]:
    """Delete staging or old copies of ``target`` that a killed build left beside it."""
    target = Path(target)
    removed = []
    if not target.parent.is_dir():
        return removed
    for prefix in (f".{target.name}.{STAGING}", f".{target.name}.{OLD}"):
        for path in target.parent.glob(prefix + "*"):
            _remove(path)
            removed.append(path)
    return removed


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then deliver them (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for number in received[:1]:
            signal.raise_signal(number)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
