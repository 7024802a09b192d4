"""Provenance strings: which Vidur, which version of this project, and a hash of its source.

The source hash covers the simulator's own ``.py`` files (not the git commit, which changes
whenever results are committed), so a recorded CSV says exactly which model code produced it.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# Code that cannot change a simulated number: the site, the validation client, the profiler.
NOT_MODEL_CODE = ("website", "validation", "sweep")


def vidur_version() -> str:
    return metadata.version("vidur")


def simulator_version() -> str:
    try:
        return metadata.version("vidur-specdec")
    except metadata.PackageNotFoundError:  # running from a plain checkout
        return "0+unknown"


@lru_cache(maxsize=1)
def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if relative.parts[0] in NOT_MODEL_CODE or relative.name == "measure.py":
            continue
        digest.update(relative.as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
