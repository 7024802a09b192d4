"""The value checks every run dataclass applies on construction (:mod:`.config`, :mod:`.workload_kinds`,
:mod:`.speculation`): one wording of each refusal, a :class:`~simulator.util.errors.ConfigError`
naming the field and the offending value."""

from __future__ import annotations

import math

from simulator.util.errors import ConfigError


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require(condition: bool, name: str, value, what: str) -> None:
    if not condition:
        raise ConfigError(f"{name} = {value!r}: {what}")


def probability(name: str, value) -> None:
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) and 0 <= value <= 1,
        name,
        value,
        "must be a number in [0, 1]",
    )
