"""A check that never saw its rows: the guard between calibration data and the checks.

The model's constants are set from declared calibration entries: ``data/calibration/step_time.toml``'s
``[[constant]]`` and ``[[assumption]]`` entries (and those of the kernel tables beside it, in its
schema: ``graph_costs.toml``, ``moe_kernels.toml``), and ``engine_costs.toml``'s ``[engine_overhead]``
(with its corroborations), ``[draft_pass]`` (with its evidence) and ``[verify_attention]`` (with its
kernel series).  The model is scored on the ``role = "check"`` rows of ``data/published.toml`` and
on the held-out ``[[check]]`` cross-checks of ``step_time.toml``.  A check counts only if no
calibration entry saw it, so :func:`check_published_roles` refuses, naming the entry or row and
what is wrong (one :class:`ConfigError`; the build exits 2 with it):

* a check row or a ``[[check]]`` cross-check whose source is a source of any calibration entry:
  every address an entry cites (its source_url, corroborations, evidence, series, and any link in
  its text), compared by identity (:mod:`simulator.profiling.source_identity`, with the aliases
  declared in ``data/calibration/source_aliases.toml``), not by spelling.  A comparison whose
  source set a constant is declared ``[[in_sample]]``, with why;
* a check row that an entry's ``examined_rows`` lists: a constant set while looking at a row's
  effect makes that row a calibration row;
* (:func:`check_row_ids`, for the committed rows) an ``examined_rows`` or ``fitted_on_rows`` id
  that is no published row;
* a calibration row whose ``calibrated_by`` is neither calibration data its own source released
  (a link with a calibration source's identity, the row's source's too) nor the name of an entry
  whose ``examined_rows`` lists the row.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from simulator.util.inputs import read_toml, require
from simulator.profiling.engine_costs import read_engine_costs
from simulator.profiling.source_identity import Aliases, describe, identities, implied_identities, parse_aliases, same_source
from simulator.profiling.step_calibration import load

ALIASES_NAME = "source_aliases.toml"  # beside step_time.toml
# kernel tables declared with step_time.toml's schema, beside it: the fused-MoE kernels
# (simulator/profiles/moe_kernels.toml) and the fixed costs inside CUDA graphs
KERNEL_FILES = ("graph_costs.toml", "moe_kernels.toml")
ENGINE_COST_ENTRIES = ("engine_overhead", "draft_pass", "verify_attention")
_LINK = re.compile(r"https?://[^\s\"'<>()\[\]{},;]+")


@dataclass(frozen=True)
class Citation:
    where: str  # the entry and key that cite the address
    url: str


@dataclass(frozen=True)
class Entry:
    """One calibration entry: what it cites and the published rows examined while it was set."""

    name: str  # "devices.h100.attention.kernel_us", "engine_costs.draft_pass"
    where: str
    citations: tuple[Citation, ...]
    examined_rows: tuple[str, ...]


class Sources:
    """The calibration entries' sources by identity (own, and implied by a GitHub Pages address)."""

    def __init__(self, entries: Sequence[Entry], aliases: Aliases):
        self.aliases = aliases
        self._own: dict[str, Citation] = {}
        self._implied: dict[str, Citation] = {}
        for entry in entries:
            for citation in entry.citations:
                for identity in identities(citation.url, aliases):
                    self._own.setdefault(identity, citation)
                for identity in implied_identities(citation.url, aliases):
                    self._implied.setdefault(identity, citation)

    def find(self, url: str) -> Optional[tuple[Citation, str]]:
        """The citation of a calibration source that ``url`` is one source with, and the identity they share."""
        for identity in sorted(identities(url, self.aliases)):
            found = self._own.get(identity) or self._implied.get(identity)
            if found:
                return found, identity
        for identity in sorted(implied_identities(url, self.aliases)):
            if identity in self._own:
                return self._own[identity], identity
        return None

    def urls(self) -> list[str]:
        return sorted({c.url for c in self._own.values()})


def read_aliases(path) -> Aliases:
    return parse_aliases(read_toml(path, "source aliases"), f"source aliases {path}")


def _cited(value, at: str, key: str = "") -> Iterator[Citation]:
    """Every link in a parsed table's strings, named by its key."""
    if isinstance(value, str):
        for link in _LINK.findall(value):
            yield Citation(f"{at} {key}".rstrip(), link.rstrip("."))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _cited(v, at, f"{key}.{k}" if key else k)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _cited(v, at, f"{key}[{i}]")


def kernel_files(step_time_path) -> tuple[Path, ...]:
    """The kernel-table calibration files beside ``step_time.toml`` (its schema), where they exist."""
    folder = Path(step_time_path).parent
    return tuple(folder / name for name in KERNEL_FILES if (folder / name).is_file())


def calibration_entries(step_time_path, engine_costs_path) -> tuple[Entry, ...]:
    """Every calibration entry of the files (each file checked by its own reader first)."""
    entries = []
    for path in (Path(step_time_path), *kernel_files(step_time_path)):
        declared = load(path)
        where = f"step-time calibration {path}"
        for kind, items in (("constant", declared.constants), ("assumption", declared.assumptions)):
            for i, item in enumerate(items):
                at = f"{where}: {kind} {i + 1} ({item.name})"
                entries.append(Entry(item.name, at, tuple(_cited(asdict(item), at)), item.examined_rows))
    read_engine_costs(engine_costs_path)
    costs = read_toml(engine_costs_path, "engine-cost calibration")
    for table in ENGINE_COST_ENTRIES:
        at = f"engine-cost calibration {engine_costs_path}: [{table}]"
        entries.append(Entry(f"engine_costs.{table}", at, tuple(_cited(costs[table], at)), tuple(costs[table]["examined_rows"])))
    return tuple(entries)


def calibration_sources(step_time_path, engine_costs_path, aliases_path=None) -> Sources:
    aliases = read_aliases(aliases_path or Path(step_time_path).with_name(ALIASES_NAME))
    return Sources(calibration_entries(step_time_path, engine_costs_path), aliases)


def _clash(found: tuple[Citation, str]) -> str:
    citation, identity = found
    return f"{citation.where} cites {citation.url}, the same source ({describe(identity)})"


def check_row_ids(measurements, step_time_path, engine_costs_path) -> None:
    """Every ``examined_rows`` and ``fitted_on_rows`` id is a row of ``measurements`` (a typo names
    no row, so it would guard nothing).  Not part of :func:`check_published_roles`: a build of a
    few rows lacks most ids, and a row it lacks is no check row of it."""
    entries = calibration_entries(step_time_path, engine_costs_path)
    ids = {m.id for m in measurements}
    for entry in entries:
        unknown = [r for r in entry.examined_rows if r not in ids]
        require(not unknown, f"{entry.where}:", f"examined_rows lists {unknown}, which no published measurement is")
    for path in (Path(step_time_path), *kernel_files(step_time_path)):
        for i, item in enumerate(load(path).in_sample):
            unknown = [r for r in item.fitted_on_rows if r not in ids]
            require(not unknown, f"step-time calibration {path}: in_sample {i + 1} ({item.name}):", f"fitted_on_rows lists {unknown}, which no published measurement is")


def _check_calibration_row(m, sources: Sources, named: dict[str, Entry]) -> None:
    at, by = f"published measurement {m.id}:", m.calibrated_by
    if by.startswith(("https://", "http://")):
        require(
            sources.find(by) is not None, at,
            f"calibrated_by = {by!r} is none of the calibration data's sources ({', '.join(sources.urls())})",
        )
        require(
            same_source(m.source_url, by, sources.aliases), at,
            f"calibrated_by = {by!r} is not data its own source {m.source_url} released: name the entry that examined the row instead",
        )
        return
    entry = named.get(by)
    require(entry is not None, at, f"calibrated_by = {by!r} names no calibration entry (one of {', '.join(sorted(named))})")
    require(m.id in entry.examined_rows, at, f"calibrated_by = {by!r}, whose examined_rows do not list this row ({entry.where})")


def check_published_roles(measurements, step_time_path, engine_costs_path, aliases_path=None) -> None:
    """Refuse a check that a calibration entry saw (the rules of the module docstring)."""
    entries = calibration_entries(step_time_path, engine_costs_path)
    sources = Sources(entries, read_aliases(aliases_path or Path(step_time_path).with_name(ALIASES_NAME)))
    checks = [(path, i, check) for path in (Path(step_time_path), *kernel_files(step_time_path)) for i, check in enumerate(load(path).checks)]
    for path, i, check in checks:
        found = sources.find(check.source_url)
        require(
            found is None, f"step-time calibration {path}: check {i + 1} ({check.name}):",
            f"is not held out: its source {check.source_url} is a source of calibration data ({_clash(found) if found else ''}); declare it [[in_sample]] with why",
        )
    examined = {}
    for entry in entries:
        for row in entry.examined_rows:
            examined.setdefault(row, entry)
    named = {entry.name: entry for entry in entries}
    for m in measurements:
        if m.role != "check":
            _check_calibration_row(m, sources, named)
            continue
        found = sources.find(m.source_url)
        require(found is None, f"published measurement {m.id}:", f"is a check row, but its source {m.source_url} is a source of calibration data ({_clash(found) if found else ''})")
        entry = examined.get(m.id)
        require(
            entry is None, f"published measurement {m.id}:",
            f"is a check row, but {entry.where if entry else ''} examined it while being set: make it a calibration row "
            f"(role = \"calibration\", calibrated_by = \"{entry.name if entry else ''}\")",
        )
