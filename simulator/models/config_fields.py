"""The typed reads of a ``config.json`` object that every part of its parsing shares
(:mod:`.spec`, :mod:`.drafters`, :mod:`.precision`): a field of a type, a positive or
non-negative integer, and the refusal that names the file, the field and its value."""

from __future__ import annotations

from typing import Any

from simulator.util.errors import ConfigError
from simulator.util.inputs import TYPE_NAMES, has_type


def value_of(config: dict, key: str, kind: type, source: str, default: Any = ...) -> Any:
    """``config[key]`` of type ``kind``; absent or null gives ``default`` (required when not given)."""
    value = config.get(key)
    if value is None:
        if default is ...:
            raise ConfigError(f"{source}: missing field '{key}' ({TYPE_NAMES[kind]})")
        return default
    if not has_type(value, kind):
        raise ConfigError(f"{source}: field '{key}' = {value!r} must be {TYPE_NAMES[kind]}")
    return value


def positive(config: dict, key: str, source: str, default: Any = ...) -> int:
    value = value_of(config, key, int, source, default)
    if value is not None and value <= 0:
        raise ConfigError(f"{source}: field '{key}' = {value} must be a positive integer")
    return value


def non_negative(config: dict, key: str, source: str, default: int = 0) -> int:
    value = value_of(config, key, int, source, default)
    if value < 0:
        raise ConfigError(f"{source}: field '{key}' = {value} must be an integer >= 0")
    return value


def refuse(source: str, key: str, value: Any, why: str) -> None:
    raise ConfigError(f"{source}: field '{key}' = {value!r}: {why}")
