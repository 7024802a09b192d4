"""One way to read and check the project's TOML and JSON inputs.

Every input file (sweep specs, device constants, published measurements, validation records)
is read with :func:`read_toml` or :func:`read_json` and its tables checked with
:func:`check_table`, so a bad input always fails the same way: a :class:`ConfigError` that names
the file, the table and the key, and says what was expected.  Callers then apply their own
value checks (ranges, cross-field rules) with :func:`require`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from simulator.util.errors import ConfigError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table", bool: "true or false"}


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path}: is a directory, expected a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None


def parse_toml(text: str, source: str, what: str = "input") -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {source}: not valid TOML ({exc})") from None


def read_toml(path, what: str = "input") -> dict:
    """The TOML document at ``path``; ``what`` names the kind of file in messages."""
    path = Path(path)
    return parse_toml(read_text(path, what), str(path), what)


def read_json(path, what: str = "input") -> dict:
    """The JSON object at ``path`` (a top-level array or scalar is refused)."""
    path = Path(path)
    try:
        value = json.loads(read_text(path, what))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what} {path}: expected a JSON object")
    return value


def has_type(value: Any, expected: type) -> bool:
    """TOML/JSON typing: booleans are not numbers, an integer is a valid float."""
    if expected is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if expected is float:
        return isinstance(value, (int, float))
    return isinstance(value, expected)


def check_table(table: Any, fields: Mapping[str, type], where: str, required: tuple[str, ...] | None = None) -> dict:
    """Unknown keys, missing keys and wrong types in one table, named by ``where``.

    ``required`` defaults to every field; the others may be absent.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    for key, value in table.items():
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {key!r}; expected one of {sorted(fields)}")
        if not has_type(value, fields[key]):
            raise ConfigError(f"{where}: {key} = {value!r} must be {TYPE_NAMES[fields[key]]}")
    needed = tuple(fields) if required is None else required
    missing = [key for key in needed if key not in table]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    return table


def distinct_values(items: list, name: str, check, what: str, convert=lambda v: v) -> tuple:
    """A spec's list of values, sorted: non-empty, each passing ``check``, none repeated.
    ``name`` names the file, table and key ("sweep spec x.toml: [grid] arrival_rate")."""
    if not items:
        raise ConfigError(f"{name} is empty; list at least one value")
    for item in items:
        if not check(item):
            raise ConfigError(f"{name} has {item!r}, which {what}")
    converted = tuple(convert(item) for item in items)
    if len(set(converted)) != len(converted):
        raise ConfigError(f"{name} = {items!r} repeats a value")
    return tuple(sorted(converted))


def require(condition: bool, where: str, what: str) -> None:
    """A value check: ``where`` names the file/table/key and value, ``what`` the rule broken."""
    if not condition:
        raise ConfigError(f"{where} {what}")


def positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def non_negative_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def positive_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def probability(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1


def non_empty_str(v) -> bool:
    return isinstance(v, str) and bool(v.strip())
