"""One progress policy for every long job: the build, the sweeps, the pays-off command.

On a terminal each stage gets a tqdm bar with counts.  Elsewhere (CI, a pipe, a log file) there
are no bars, but every stage still says in one line on stderr what it starts, so a slow first
run on a loaded machine never looks hung.  ``enabled=False`` silences both (library use, tests);
``enabled=True`` forces bars.
"""

from __future__ import annotations

import sys
from typing import Optional

from tqdm import tqdm


def bar(total: int, desc: str, unit: str = "run", enabled: Optional[bool] = None) -> tqdm:
    """A bar for ``total`` items: on a terminal when ``enabled`` is None, always or never otherwise."""
    return tqdm(total=total, desc=desc, unit=unit, disable=None if enabled is None else not enabled, file=sys.stderr, dynamic_ncols=True)


def say(message: str, enabled: Optional[bool] = None) -> None:
    """One stage line on stderr (unless progress is switched off)."""
    if enabled is not False:
        print(message, file=sys.stderr, flush=True)


def quiet_vidur() -> int:
    """Vidur logs every simulation at INFO on stdout; the project shows its own progress instead.
    This is the one way the project quiets it (``python -m simulator`` and the validation harness
    skip the call under ``-v``; the build and the pays-off command always quiet it).
    Vidur's logger sets its level when ``vidur.logger`` is first imported, so import it first.
    Returns the previous level, for :func:`restore_vidur`."""
    import importlib
    import logging

    importlib.import_module("vidur.logger")
    logger = logging.getLogger("vidur")
    previous = logger.level
    logger.setLevel(logging.WARNING)
    return previous


def restore_vidur(level: int) -> None:
    """Vidur's log level back as :func:`quiet_vidur` found it (for callers inside a longer process)."""
    import logging

    logging.getLogger("vidur").setLevel(level)
