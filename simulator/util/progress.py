"""One progress policy for every long job: the build, the sweeps, the pays-off command.

On a terminal each stage gets a tqdm bar with counts.  Elsewhere (CI, a pipe, ``tee``, a log
file) there are no bars: every stage says in one line on stderr what it starts, and a counted
stage prints a line at least every :data:`HEARTBEAT_S` seconds while it runs (a thread wakes to
print it, so one long run cannot leave a silent gap), so a slow first run on a loaded machine
never looks hung.  ``enabled=False`` silences both (library use, tests); ``enabled=True`` forces
bars.  The lines go to stderr only: no output file sees a wall-clock time.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Optional

HEARTBEAT_S = 10.0  # the longest silence of a counted stage off a terminal


class LineProgress:
    """A bar's interface (``update``, ``close``, a context manager) for stderr that is not a terminal:
    a line when it starts, one every :data:`HEARTBEAT_S` seconds, and one when it ends."""

    def __init__(self, total: int, desc: str, unit: str = "run", interval: Optional[float] = None):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.interval = HEARTBEAT_S if interval is None else interval
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._line(f"{self.total} {self.unit}s to go")
        self._thread = threading.Thread(target=self._beat, name=f"progress: {desc}", daemon=True)
        self._thread.start()

    def _line(self, what: str) -> None:
        print(f"{self.desc}: {what}", file=sys.stderr, flush=True)

    def _status(self) -> str:
        with self._lock:
            done = self.n
        return f"{done} of {self.total} {self.unit}s done, {time.monotonic() - self._start:.0f} s"

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            self._line(self._status())

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.n += n

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self._line(self._status())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return False


def bar(total: int, desc: str, unit: str = "run", enabled: Optional[bool] = None):
    """Progress over ``total`` items: a tqdm bar on a terminal (or with ``enabled=True``), lines
    at least every :data:`HEARTBEAT_S` seconds elsewhere, nothing with ``enabled=False``."""
    if enabled is None and not _terminal():
        return LineProgress(total, desc, unit)
    from tqdm import tqdm  # only for a bar (a warm answer from the result cache shows none)

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled if enabled is not None else False, file=sys.stderr, dynamic_ncols=True)


def say(message: str, enabled: Optional[bool] = None) -> None:
    """One stage line on stderr (unless progress is switched off)."""
    if enabled is not False:
        print(message, file=sys.stderr, flush=True)

