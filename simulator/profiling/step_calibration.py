"""The declared calibration data behind the step-time model's constants (``data/calibration/step_time.toml``).

Every constant of the built-in step model that was set from a measurement is declared there, with
the measurement's source, a verbatim quote of its numbers, the settings it was taken under, the
engine (vLLM) version it stands for and the arithmetic that turns it into the constant; the
constants set by judgement instead are declared as assumptions, with why.  This module reads the
file strictly and refuses, naming the entry:

* a constant without a source, quote, version, settings or derivation;
* a constant whose source is also the source of a check row of ``data/published.toml``: a
  measurement cannot both set the model and check it.

:func:`live_value` reads the value the simulator actually uses (``simulator/profiles/devices.toml``
or ``engines.toml``) so a test can hold the two equal, and :func:`graph_kernel_gap_us` derives the
one constant that comes from the project's own measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.util.inputs import check_table, non_empty_str, read_toml, require
from simulator.profiles import roofline
from simulator.profiles.engines import ENGINES_FILE
from simulator.profiles.hardware import DEVICES_FILE, DeviceSpec

_CONSTANT = {
    "name": str, "value": float, "vllm_version": str, "source_url": str, "quote": str, "settings": str, "derivation": str,
}
_ASSUMPTION = {"name": str, "value": float, "why": str}
_CHECK = {"name": str, "source_url": str, "quote": str, "settings": str, "what": str}


@dataclass(frozen=True)
class Constant:
    name: str  # "devices.<device>.<table>.<key>" or "engines.<engine>.<key>"
    value: float
    vllm_version: str
    source_url: str
    quote: str
    settings: str
    derivation: str


@dataclass(frozen=True)
class Assumption:
    name: str
    value: float
    why: str


@dataclass(frozen=True)
class CrossCheck:
    """A measurement the model is compared with but that sets nothing (held out)."""

    name: str
    source_url: str
    quote: str
    settings: str
    what: str


@dataclass(frozen=True)
class Declared:
    constants: tuple[Constant, ...]
    assumptions: tuple[Assumption, ...]
    checks: tuple[CrossCheck, ...]


def source_key(url: str) -> str:
    """What counts as one source: a GitHub issue or pull request (comments included), a GitHub
    repository's files, or a page (host and path, without fragment or query)."""
    parsed = urlparse(url)
    host, parts = parsed.netloc.lower(), [p for p in parsed.path.split("/") if p]
    if host == "github.com" and len(parts) >= 2:
        if len(parts) >= 4 and parts[2] in ("pull", "issues"):
            return f"github.com/{parts[0]}/{parts[1]}/{parts[3]}".lower()
        return f"github.com/{parts[0]}/{parts[1]}".lower()
    return f"{host}/{'/'.join(parts)}".rstrip("/").lower()


def load(path, check_row_sources: tuple[str, ...] = ()) -> Declared:
    """The declared constants, assumptions and cross-checks; ``check_row_sources`` are the source
    URLs of the check rows, none of which may have set a constant."""
    where = f"step-time calibration {path}"
    doc = read_toml(path, "step-time calibration")
    check_table(doc, {"constant": list, "assumption": list, "check": list}, where, ("constant",))
    forbidden = {source_key(url): url for url in check_row_sources}
    constants, names = [], set()
    for i, table in enumerate(doc["constant"]):
        at = f"{where}: constant {i + 1} ({table.get('name', '?') if isinstance(table, dict) else '?'})"
        check_table(table, _CONSTANT, at)
        for key in ("name", "vllm_version", "source_url", "quote", "settings", "derivation"):
            require(non_empty_str(table[key]), at, f"{key} must say something (a constant set from data names its {key})")
        require(table["source_url"].startswith("https://"), at, f"source_url = {table['source_url']!r} must be an https link")
        clash = forbidden.get(source_key(table["source_url"]))
        require(
            clash is None, at,
            f"its source {table['source_url']} is also a check row's ({clash}): a measurement that sets a constant cannot check the model",
        )
        require(table["name"] not in names, at, "is declared twice")
        names.add(table["name"])
        constants.append(Constant(**{key: (float(v) if key == "value" else v) for key, v in table.items()}))
    assumptions = []
    for i, table in enumerate(doc.get("assumption", [])):
        at = f"{where}: assumption {i + 1}"
        check_table(table, _ASSUMPTION, at)
        require(non_empty_str(table["why"]), at, "why must say why the value was chosen")
        require(table["name"] not in names, at, f"{table['name']} is declared twice")
        names.add(table["name"])
        assumptions.append(Assumption(table["name"], float(table["value"]), table["why"]))
    checks = []
    for i, table in enumerate(doc.get("check", [])):
        at = f"{where}: check {i + 1}"
        check_table(table, _CHECK, at)
        checks.append(CrossCheck(**table))
    return Declared(tuple(constants), tuple(assumptions), tuple(checks))


def calibration_sources(step_time_path, engine_costs_path) -> dict[str, str]:
    """source key -> URL of every measurement that set a constant: the step-time constants and
    the engine costs (per-step overhead, draft-pass cost, the verify-attention series)."""
    declared = load(step_time_path)
    costs = read_toml(engine_costs_path, "engine-cost calibration")
    urls = [c.source_url for c in declared.constants]
    urls += [costs["engine_overhead"]["source_url"], costs["draft_pass"]["source_url"]]
    urls += [series["source_url"] for series in costs["verify_attention"]["series"]]
    return {source_key(url): url for url in urls}


def check_published_roles(measurements, step_time_path, engine_costs_path) -> None:
    """A check row shares no source with calibration data; a calibration row names calibration
    data its source released (``calibrated_by``)."""
    sources = calibration_sources(step_time_path, engine_costs_path)
    load(step_time_path, tuple(m.source_url for m in measurements if m.role == "check"))
    for m in measurements:
        if m.role == "check":
            clash = sources.get(source_key(m.source_url))
            require(clash is None, f"published measurement {m.id}:", f"is a check row, but its source {m.source_url} set a constant ({clash})")
        else:
            require(
                source_key(m.calibrated_by) in sources, f"published measurement {m.id}:",
                f"calibrated_by = {m.calibrated_by!r} is none of the calibration data's sources ({', '.join(sorted(sources.values()))})",
            )


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
