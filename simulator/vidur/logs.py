"""Vidur's logger: named ``vidur``, its level set when ``vidur.logger`` is first imported.

Vidur logs every simulation at INFO on stdout; the project shows its own progress instead
(:mod:`simulator.util.progress`), so :func:`quiet_vidur` is the one way the project quiets it.
Light (``vidur.logger`` only).
"""

from __future__ import annotations

import logging

LOGGER_NAME = "vidur"


def vidur_logger() -> logging.Logger:
    """Vidur's logger, after Vidur has configured it (so a level set on it now stays set)."""
    import vidur.logger  # noqa: F401  (sets the level on first import)

    return logging.getLogger(LOGGER_NAME)


def quiet_vidur() -> int:
    """Vidur's INFO lines off (``python -m simulator`` and the validation harness skip the call
    under ``-v``; the build and the pays-off command always quiet it).  Vidur's logger sets its
    level when ``vidur.logger`` is first imported, so it is imported first.  Returns the previous
    level, for :func:`restore_vidur`."""
    logger = vidur_logger()
    previous = logger.level
    logger.setLevel(logging.WARNING)
    return previous


def restore_vidur(level: int) -> None:
    """Vidur's log level back as :func:`quiet_vidur` found it (for callers inside a longer process)."""
    vidur_logger().setLevel(level)
