"""What ``--model``, ``--draft-model`` and ``--device`` accept, in the words ``--help`` prints, read
from the catalog and the device table, so a model or GPU added there is listed by every command."""

from __future__ import annotations


def _models() -> tuple[list[str], list[str]]:
    """(targets, drafters) of the catalog: a drafter is an EAGLE head or a DFlash drafter."""
    from simulator.models.catalog import CATALOG
    from simulator.vidur.models import known_models

    drafters = {name for name, spec in CATALOG.items() if spec.eagle is not None or spec.dflash is not None}
    names = known_models()
    return [n for n in names if n not in drafters], [n for n in names if n in drafters]


def model_help() -> str:
    """``--model``'s help: a local config.json, or a catalog name (every one listed)."""
    targets, _ = _models()
    return f"target model: a local config.json (or its folder), or one of the catalog's {len(targets)}: {', '.join(targets)}"


def drafter_names() -> list[str]:
    """The catalog's EAGLE heads and DFlash drafters (any target of the catalog is a draft model too)."""
    return _models()[1]


def device_help() -> str:
    """``--device``'s help: every GPU of ``simulator/profiles/devices.toml``."""
    from simulator.profiles.hardware import device_names

    return f"GPU, case-insensitive: {', '.join(device_names())}"
