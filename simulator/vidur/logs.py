"""Vidur's logger: named ``vidur``, its level set when ``vidur.logger`` is first imported.

Light (``vidur.logger`` only); :func:`simulator.util.progress.quiet_vidur` is the one caller.
"""

from __future__ import annotations

import logging

LOGGER_NAME = "vidur"


def vidur_logger() -> logging.Logger:
    """Vidur's logger, after Vidur has configured it (so a level set on it now stays set)."""
    import vidur.logger  # noqa: F401  (sets the level on first import)

    return logging.getLogger(LOGGER_NAME)
