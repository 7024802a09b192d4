"""The on-disk cache (nothing is written to the CWD; the package never assumes a checkout)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$VIDUR_SPECDEC_CACHE``, else ``$XDG_CACHE_HOME/vidur-specdec``, else ``~/.cache/vidur-specdec``."""
    explicit = os.environ.get("VIDUR_SPECDEC_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vidur-specdec"
