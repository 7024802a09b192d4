"""Reading and checking the published measurements and the reproduction's assumptions.

Strict like every input of this project (:mod:`simulator.inputs`): unknown keys, missing
fields, wrong types and unknown units fail with the row id and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

from simulator.errors import ConfigError
from simulator.inputs import check_table, non_empty_str, positive_int, positive_number, probability, read_toml, require
from simulator.speculative.acceptance_convert import conditional_from_unconditional

# metric -> unit, as printed on the site
METRICS = {"output_tokens_per_s": "output tokens/s", "tpot_ms": "ms", "speedup": "x"}
PROPOSERS = ("none", "ngram", "draft", "eagle", "eagle3", "medusa")
LOAD_FIELDS = ("batch_size", "concurrency", "qps")


@dataclass(frozen=True)
class Measurement:
    id: str
    source_url: str
    engine: str
    model: str
    proposer: str
    metric: str
    value: float
    tp: int = 1
    source_date: Optional[str] = None
    engine_version: Optional[str] = None
    gpu: Optional[str] = None
    draft: Optional[str] = None
    k: Optional[int] = None
    batch_size: Optional[int] = None
    concurrency: Optional[int] = None
    qps: Optional[float] = None
    dataset: Optional[str] = None
    input_len: Optional[int] = None
    output_len: Optional[int] = None
    acceptance_length: Optional[float] = None
    acceptance_per_position: Optional[tuple[float, ...]] = None
    baseline_id: Optional[str] = None
    drafting: str = "chain"  # "tree": several candidates per position (k then is the tree's depth)
    notes: str = ""


_TYPES = {f.name: f.type for f in fields(Measurement)}
MEASUREMENT_FIELDS = {
    "id": str, "source_url": str, "source_date": str, "engine": str, "engine_version": str, "gpu": str, "tp": int,
    "model": str, "proposer": str, "draft": str, "k": int, "batch_size": int, "concurrency": int, "qps": float,
    "dataset": str, "input_len": int, "output_len": int, "acceptance_length": float, "acceptance_per_position": list,
    "metric": str, "value": float, "baseline_id": str, "drafting": str, "notes": str,
}
MEASUREMENT_REQUIRED = ("id", "source_url", "engine", "tp", "model", "proposer", "metric", "value")


def _measurement(table: dict, where: str) -> Measurement:
    check_table(table, MEASUREMENT_FIELDS, where, MEASUREMENT_REQUIRED)
    where = f"{where} ({table['id']})"
    require(non_empty_str(table["id"]), where, "id must be a non-empty string")
    require(table["source_url"].startswith("https://"), where, f"source_url = {table['source_url']!r} must be an https link")
    require(table["metric"] in METRICS, where, f"metric = {table['metric']!r} is an unknown unit; expected one of {sorted(METRICS)}")
    require(positive_number(table["value"]), where, f"value = {table['value']!r} must be a positive number")
    require(table["proposer"] in PROPOSERS, where, f"proposer = {table['proposer']!r}; expected one of {list(PROPOSERS)}")
    require(positive_int(table["tp"]), where, f"tp = {table['tp']!r} must be a positive integer")
    require(table.get("drafting", "chain") in ("chain", "tree"), where, f"drafting = {table.get('drafting')!r}; expected 'chain' or 'tree'")
    loads = [key for key in LOAD_FIELDS if key in table]
    require(len(loads) == 1, where, f"needs exactly one of {list(LOAD_FIELDS)}, has {loads}")
    for key in ("batch_size", "concurrency", "input_len", "output_len"):
        if key in table:
            require(positive_int(table[key]), where, f"{key} = {table[key]!r} must be a positive integer")
    if "qps" in table:
        require(positive_number(table["qps"]), where, f"qps = {table['qps']!r} must be a positive number")
    chain = table.get("drafting", "chain") == "chain"
    k = table.get("k")
    if table["proposer"] == "none":
        require(k in (None, 0), where, f"k = {k!r}: a row without speculation has k = 0")
    elif chain:
        require(k is not None and k >= 1, where, f"k = {k!r}: a speculative chain row needs k >= 1 (tree rows say drafting = \"tree\")")
    elif k is not None:
        require(k >= 1, where, f"k = {k!r}: a tree's depth is >= 1")
    if "acceptance_per_position" in table:
        rates = table["acceptance_per_position"]
        require(bool(rates) and all(probability(r) for r in rates), where, f"acceptance_per_position = {rates!r} must be rates in [0, 1]")
        try:
            conditional_from_unconditional(rates)
        except ConfigError as exc:
            raise ConfigError(f"{where} {exc}") from None
        table = {**table, "acceptance_per_position": tuple(float(r) for r in rates)}
    if "acceptance_length" in table:
        length = table["acceptance_length"]
        require(length >= 1, where, f"acceptance_length = {length} must be >= 1 (bonus token included)")
        if chain and k:
            require(length <= k + 1, where, f"acceptance_length = {length} exceeds k + 1 = {k + 1}; a chain of k drafts advances at most k + 1")
    return Measurement(**{key: (float(v) if _TYPES[key] in ("float", "Optional[float]") else v) for key, v in table.items()})


def load_measurements(path) -> tuple[Measurement, ...]:
    doc = read_toml(path, "published measurements")
    check_table(doc, {"measurement": list}, f"published measurements {path}")
    rows = tuple(_measurement(t, f"published measurements {path}: measurement {i + 1}") for i, t in enumerate(doc["measurement"]))
    ids = [m.id for m in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    require(not duplicates, f"published measurements {path}:", f"repeats id(s) {duplicates}")
    known = set(ids)
    for m in rows:
        if m.baseline_id is not None:
            require(m.baseline_id in known, f"published measurements {path}: {m.id}:", f"baseline_id {m.baseline_id!r} is not a row")
    return rows


@dataclass(frozen=True)
class Dataset:
    input_len: int
    output_len: int
    source_url: str
    note: str


@dataclass(frozen=True)
class AcceptanceAssumption:
    applies_to: tuple[str, ...]
    why: str
    from_measurement: Optional[str] = None
    acceptance_length: Optional[float] = None
    k: Optional[int] = None
    acceptance_rate: Optional[float] = None
    source_url: str = ""


@dataclass(frozen=True)
class Assumptions:
    datasets: dict
    acceptance: dict  # measurement id -> AcceptanceAssumption


def load_assumptions(path, measurements: tuple[Measurement, ...]) -> Assumptions:
    where = f"published assumptions {path}"
    doc = read_toml(path, "published assumptions")
    check_table(doc, {"datasets": dict, "acceptance": list}, where)
    datasets = {}
    for name, table in doc["datasets"].items():
        check_table(table, {"input_len": int, "output_len": int, "source_url": str, "note": str}, f"{where}: [datasets.{name}]")
        datasets[name] = Dataset(**table)
    known = {m.id for m in measurements}
    acceptance = {}
    for i, table in enumerate(doc["acceptance"]):
        at = f"{where}: acceptance {i + 1}"
        check_table(
            table,
            {"applies_to": list, "why": str, "from_measurement": str, "acceptance_length": float, "k": int, "acceptance_rate": float, "source_url": str},
            at,
            ("applies_to", "why"),
        )
        given = [key for key in ("from_measurement", "acceptance_length", "acceptance_rate") if key in table]
        require(len(given) == 1, at, f"needs exactly one of from_measurement, acceptance_length (with k) or acceptance_rate; has {given}")
        require(("acceptance_length" in table) == ("k" in table), at, "acceptance_length needs the k it was measured at")
        if "from_measurement" in table:
            require(table["from_measurement"] in known, at, f"from_measurement {table['from_measurement']!r} is not a row")
        entry = AcceptanceAssumption(**{**table, "applies_to": tuple(table["applies_to"])})
        for row in entry.applies_to:
            require(row in known, at, f"applies_to names {row!r}, which is not a row")
            require(row not in acceptance, at, f"{row!r} already has an acceptance assumption")
            acceptance[row] = entry
    return Assumptions(datasets, acceptance)


def load(published: Path, assumptions: Path) -> tuple[tuple[Measurement, ...], Assumptions]:
    measurements = load_measurements(published)
    return measurements, load_assumptions(assumptions, measurements)


__all__ = ["Measurement", "Assumptions", "Dataset", "AcceptanceAssumption", "load", "load_measurements", "load_assumptions", "METRICS", "ConfigError"]
