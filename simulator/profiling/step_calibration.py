"""The declared calibration data behind the step-time model's constants (``data/calibration/step_time.toml``).

Every constant of the built-in step model that was set from a measurement is declared there, with
the measurement's source, a verbatim quote of its numbers, the settings it was taken under, the
engine (vLLM) version it stands for, the arithmetic that turns it into the constant and the
published rows examined while it was set (``examined_rows``: explicit, empty when none was); the
constants set by judgement instead are declared as assumptions, with why (and their examined rows).
Measurements the model is compared with are ``[[check]]`` entries (held out: they set nothing) or
``[[in_sample]]`` entries (compared, but not held out, with why: a source that set a constant, a fit
of runs that are check rows).  :func:`load` reads the file strictly and refuses, naming the entry, a
constant without a source, quote, version, settings or derivation; whether any source is also a
check's is :mod:`simulator.profiling.calibration_guard`'s to refuse.

:func:`live_value` reads the value the simulator actually uses (``simulator/profiles/devices.toml``
or ``engines.toml``) so a test can hold the two equal, and :func:`graph_kernel_gap_us` derives the
one constant that comes from the project's own measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.util.inputs import check_table, non_empty_str, read_toml, require
from simulator.profiles import roofline
from simulator.profiles.engines import ENGINES_FILE
from simulator.profiles.hardware import DEVICES_FILE, DeviceSpec

_CONSTANT = {
    "name": str, "value": float, "vllm_version": str, "source_url": str, "quote": str, "settings": str, "derivation": str,
    "examined_rows": list,
}
_ASSUMPTION = {"name": str, "value": float, "why": str, "examined_rows": list}
_CHECK = {"name": str, "source_url": str, "quote": str, "settings": str, "what": str}
_IN_SAMPLE = dict(_CHECK, why=str, fitted_on_rows=list)


@dataclass(frozen=True)
class Constant:
    name: str  # "devices.<device>.<table>.<key>" or "engines.<engine>.<key>"
    value: float
    vllm_version: str
    source_url: str
    quote: str
    settings: str
    derivation: str
    examined_rows: tuple[str, ...] = ()  # ids of the published rows examined while it was set


@dataclass(frozen=True)
class Assumption:
    name: str
    value: float
    why: str
    examined_rows: tuple[str, ...] = ()


@dataclass(frozen=True)
class CrossCheck:
    """A measurement the model is compared with but that sets nothing (held out)."""

    name: str
    source_url: str
    quote: str
    settings: str
    what: str


@dataclass(frozen=True)
class InSample:
    """A measurement the model is compared with that is not held out, and why (its source set a
    constant, or it is a fit of runs that are published check rows: ``fitted_on_rows``)."""

    name: str
    source_url: str
    quote: str
    settings: str
    what: str
    why: str
    fitted_on_rows: tuple[str, ...] = ()


@dataclass(frozen=True)
class Declared:
    constants: tuple[Constant, ...]
    assumptions: tuple[Assumption, ...]
    checks: tuple[CrossCheck, ...]
    in_sample: tuple[InSample, ...] = ()


def row_ids(value, where: str, key: str) -> tuple[str, ...]:
    """A list of published row ids (``examined_rows``, ``fitted_on_rows``): strings, none repeated; empty allowed."""
    require(
        isinstance(value, list) and all(non_empty_str(v) for v in value) and len(set(value)) == len(value), where,
        f"{key} = {value!r} must list the ids of published rows, each once ([] when none)",
    )
    return tuple(value)


def load(path) -> Declared:
    """The declared constants, assumptions, held-out cross-checks and in-sample comparisons, checked."""
    where = f"step-time calibration {path}"
    doc = read_toml(path, "step-time calibration")
    check_table(doc, {"constant": list, "assumption": list, "check": list, "in_sample": list}, where, ("constant",))
    constants, names = [], set()
    for i, table in enumerate(doc["constant"]):
        at = f"{where}: constant {i + 1} ({table.get('name', '?') if isinstance(table, dict) else '?'})"
        check_table(table, _CONSTANT, at)
        for key in ("name", "vllm_version", "source_url", "quote", "settings", "derivation"):
            require(non_empty_str(table[key]), at, f"{key} must say something (a constant set from data names its {key})")
        require(table["source_url"].startswith("https://"), at, f"source_url = {table['source_url']!r} must be an https link")
        require(table["name"] not in names, at, "is declared twice")
        names.add(table["name"])
        values = dict(table, value=float(table["value"]), examined_rows=row_ids(table["examined_rows"], at, "examined_rows"))
        constants.append(Constant(**values))
    assumptions = []
    for i, table in enumerate(doc.get("assumption", [])):
        at = f"{where}: assumption {i + 1} ({table.get('name', '?') if isinstance(table, dict) else '?'})"
        check_table(table, _ASSUMPTION, at)
        require(non_empty_str(table["why"]), at, "why must say why the value was chosen")
        require(table["name"] not in names, at, f"{table['name']} is declared twice")
        names.add(table["name"])
        assumptions.append(Assumption(table["name"], float(table["value"]), table["why"], row_ids(table["examined_rows"], at, "examined_rows")))
    checks = []
    for i, table in enumerate(doc.get("check", [])):
        check_table(table, _CHECK, f"{where}: check {i + 1}")
        checks.append(CrossCheck(**table))
    in_sample = []
    for i, table in enumerate(doc.get("in_sample", [])):
        at = f"{where}: in_sample {i + 1} ({table.get('name', '?') if isinstance(table, dict) else '?'})"
        check_table(table, _IN_SAMPLE, at)
        require(non_empty_str(table["why"]), at, "why must say why the comparison is not held out")
        in_sample.append(InSample(**dict(table, fitted_on_rows=row_ids(table["fitted_on_rows"], at, "fitted_on_rows"))))
    return Declared(tuple(constants), tuple(assumptions), tuple(checks), tuple(in_sample))


def live_value(name: str) -> float:
    """The value the simulator uses for a declared name, read from its package data."""
    kind, _, rest = name.partition(".")
    files = {"devices": DEVICES_FILE, "engines": ENGINES_FILE}
    if kind not in files:
        raise ConfigError(f"calibration name {name!r}: must start with 'devices.' or 'engines.'")
    table = read_toml(files[kind], kind)
    if kind == "devices":  # a variant device's values are its parent's where it carries them over
        from simulator.profiles.hardware import _resolve_variant

        table = {name: _resolve_variant(name, entry, table, files[kind]) for name, entry in table.items()}
    node = table
    keys = _split(rest, table)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            raise ConfigError(f"calibration name {name!r}: {files[kind].name} has no {'.'.join(keys)}")
        node = node[key]
    return float(node)


def _split(rest: str, table: dict) -> list[str]:
    """Dotted keys, where the first may itself contain dots (an engine named 'vllm-0.10.1')."""
    for head in sorted(table, key=len, reverse=True):
        if rest.startswith(head + "."):
            return [head] + rest[len(head) + 1:].split(".")
    return rest.split(".")


def graph_kernel_gap_us(mlp_csv: Path, dev: DeviceSpec, max_tokens: int = 64) -> float:
    """The GPU's idle time between two kernels of a CUDA graph: the project's own graph-timed
    profile (each op replayed inside a graph, so its time holds the kernel and the gap to the
    next) less the kernel-duration model (fitted on kernel durations alone), for the residual add,
    whose kernel is smallest, at up to ``max_tokens`` tokens: the median difference."""
    frame = pd.read_csv(mlp_csv)
    small = frame[frame.num_tokens <= max_tokens]
    tokens = small.num_tokens.to_numpy(dtype=float)
    width = int(small.n_embd.iloc[0])
    measured_us = small["time_stats.add.median"].to_numpy() * 1e3
    modelled_us = roofline.streaming_ms(tokens * 3 * width * roofline.BYTES, dev.constants.add_eff, dev) * 1e3
    return float(np.median(measured_us - modelled_us))
