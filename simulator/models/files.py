"""Where model configs come from: the catalog's own files (package data) and a user's local path.

The catalog's entries are ``config.json`` files like any other, shipped in ``simulator/models/data``
and read with :mod:`importlib.resources`, each naming itself with ``_name_or_path`` (the field
``transformers`` writes).  A user's model is a directory holding ``config.json``, or the file itself;
nothing is downloaded.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json
from simulator.models.spec import ModelSpec, parse_config

DATA_PACKAGE, DATA_DIR = "simulator.models", "data"


@lru_cache(maxsize=1)
def catalog_specs() -> tuple[ModelSpec, ...]:
    """Every model the catalog ships, sorted by file name (read once per process)."""
    specs = []
    for entry in sorted((resources.files(DATA_PACKAGE) / DATA_DIR).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        source = f"catalog file {entry.name}"
        try:
            config = json.loads(entry.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:  # a packaging bug, not user input
            raise ConfigError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        name = config.get("_name_or_path") if isinstance(config, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{source}: missing field '_name_or_path' (the model's name)")
        specs.append(parse_config(config, name, source))
    return tuple(specs)


def looks_like_path(name: str) -> bool:
    """A name meant as a path rather than a hub name: it exists here, or is written as a path."""
    path = Path(name).expanduser()
    return (
        path.exists()
        or name.endswith(".json")
        or name.startswith(("/", "./", "../", "~"))
        or (path.parent != Path(".") and path.parent.is_dir())
    )


def config_file(name: str) -> Optional[Path]:
    """The ``config.json`` a local path names, or None when ``name`` is not a path."""
    if not looks_like_path(name):
        return None
    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(f"model {name}: no config.json at {path}; give a directory holding config.json, the file itself, or a catalog name")
    return path


def read_spec(name: str, path: Path) -> ModelSpec:
    """The model in the ``config.json`` at ``path``, to be known as ``name``."""
    source = f"config.json {path}"
    return parse_config(read_json(path, "config.json"), name, source)
