"""Reading and checking the published measurements and the reproduction's assumptions.

Strict like every input of this project (:mod:`simulator.util.inputs`): unknown keys, missing
fields, wrong types and unknown units fail with the row id and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.schemas import ACCEPTANCE_CLASSES, ROW_ENGINES
from simulator.util.inputs import check_table, non_empty_str, positive_int, positive_number, probability, read_toml, require
from simulator.speculative import proposers
from simulator.speculative.acceptance_convert import conditional_from_unconditional
from simulator.runs.workloads import SHAPE_KINDS, LengthShape

# metric -> unit, as printed on the site
METRICS = {
    "output_tokens_per_s": "output tokens/s", "decode_tokens_per_s": "decode tokens/s", "requests_per_s": "requests/s",
    "tpot_ms": "ms", "tpot_mean_ms": "ms", "itl_mean_ms": "ms", "speedup": "x",
}
# "none", a chain proposer the simulator models (a tree row names its chain's kind and says
# drafting = "tree"), or a method it does not model (so the row is recorded, not simulated)
NO_SPECULATION = "none"
PROPOSERS = (NO_SPECULATION,) + tuple(k.name for k in proposers.KINDS if getattr(k, "chain", None) is None) + tuple(proposers.NOT_MODELLED)
# a tree row's settings, SGLang's: --speculative-eagle-topk and --speculative-num-draft-tokens (the root included)
TREE_FIELDS = ("eagle_topk", "num_draft_tokens")
LOAD_FIELDS = ("batch_size", "concurrency", "qps")
ARRIVALS = ("poisson", "constant")
ROW_LENGTHS = ("dataset", "fixed")  # a row's lengths: drawn from its dataset's distribution, or exactly as stated
# What a row is for: a ``calibration`` row calibrated the model, and ``calibrated_by`` names how:
# the calibration data its source released (a link: a fit of its runs, not the rows themselves), or
# the declared calibration entry that examined the row while being set (its name in
# data/calibration/, e.g. "devices.h100.network.custom_twoshot_us"); it is never counted as
# evidence of the model's accuracy.  ``check`` rows share no source with any calibration data and
# no entry examined them (simulator/profiling/calibration_guard.py, run by the build).
ROLES = ("calibration", "check")
CALIBRATION_ENTRY = re.compile(r"(devices|engines|engine_costs)\.[A-Za-z0-9_.\-]+")
# Where the acceptance a row is simulated with comes from (schemas.ACCEPTANCE_CLASSES), most to
# least independent of guesswork: the row's own source and setting; another run of the same setting
# (same model, proposer, draft, k and dataset, all stated); a figure measured on another dataset; an assumption.
# Settings a source leaves unknowable that a row may give a plausible range for: [low, high] for a
# length, the candidate devices for a GPU the source does not name (the row's ``gpu`` among them).
# The reproduction runs the row at each value and reports the error's range.
PLAUSIBLE_KEYS = ("input_len", "output_len", "gpu", "tp")


@dataclass(frozen=True)
class Measurement:
    id: str
    source_url: str
    engine: str
    model: str
    proposer: str
    metric: str
    value: float
    role: str
    acceptance_class: str
    tp: int = 1
    calibrated_by: Optional[str] = None  # a calibration row: the data its source released, or the entry that examined it
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
    eagle_topk: Optional[int] = None  # a tree's candidates per step (SGLang's --speculative-eagle-topk)
    num_draft_tokens: Optional[int] = None  # a tree's verified tokens per request, root included
    draft_tp: Optional[int] = None  # the draft network's tensor parallelism (any proposer that runs one)
    # the engine's scheduler limits where the source states them (else vLLM's defaults for the GPU)
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    num_prompts: Optional[int] = None  # the requests the source sent, where it says
    arrivals: str = "poisson"  # a qps row's arrival process: "poisson" or "constant" (evenly spaced)
    # "dataset": requests drawn from the dataset's length distribution around the row's (or the
    # dataset's) means; "fixed": every request at exactly those lengths (a source that fixed them:
    # vLLM's random dataset at range ratio 0, --input-len/--output-len)
    lengths: str = "dataset"
    plausible: tuple[tuple[str, tuple], ...] = ()  # (setting, values) for settings the source leaves unknowable
    notes: str = ""


_TYPES = {f.name: f.type for f in fields(Measurement)}
MEASUREMENT_FIELDS = {
    "id": str, "source_url": str, "source_date": str, "engine": str, "engine_version": str, "gpu": str, "tp": int,
    "model": str, "proposer": str, "draft": str, "k": int, "batch_size": int, "concurrency": int, "qps": float,
    "dataset": str, "input_len": int, "output_len": int, "acceptance_length": float, "acceptance_per_position": list,
    "metric": str, "value": float, "baseline_id": str, "drafting": str, "notes": str,
    "role": str, "acceptance_class": str, "calibrated_by": str, "draft_tp": int, "plausible": dict,
    "max_num_seqs": int, "max_num_batched_tokens": int, "num_prompts": int, "arrivals": str, "eagle_topk": int, "num_draft_tokens": int,
    "lengths": str,
}
MEASUREMENT_REQUIRED = ("id", "source_url", "engine", "tp", "model", "proposer", "metric", "value", "role", "acceptance_class")


def _measurement(table: dict, where: str) -> Measurement:
    check_table(table, MEASUREMENT_FIELDS, where, MEASUREMENT_REQUIRED)
    where = f"{where} ({table['id']})"
    require(non_empty_str(table["id"]), where, "id must be a non-empty string")
    require(table["source_url"].startswith("https://"), where, f"source_url = {table['source_url']!r} must be an https link")
    require(table["metric"] in METRICS, where, f"metric = {table['metric']!r} is an unknown unit; expected one of {sorted(METRICS)}")
    require(positive_number(table["value"]), where, f"value = {table['value']!r} must be a positive number")
    require(table["proposer"] in PROPOSERS, where, f"proposer = {table['proposer']!r}; expected one of {list(PROPOSERS)}")
    require(table["engine"] in ROW_ENGINES, where, f"engine = {table['engine']!r} is not a known engine; expected one of {list(ROW_ENGINES)}")
    # the engine profile a row runs on is picked by its version, else its date (simulator/published/plan.py engine_identity)
    if "source_date" in table:
        require(ISO_DATE.fullmatch(table["source_date"]) is not None, where, f"source_date = {table['source_date']!r} must be a date as YYYY-MM-DD")
    if table["engine"] == "vllm" and "engine_version" in table:
        require(_is_version(table["engine_version"]), where, f"engine_version = {table['engine_version']!r} is not a vLLM version (PEP 440, e.g. \"0.15.1\")")
    require(positive_int(table["tp"]), where, f"tp = {table['tp']!r} must be a positive integer")
    require(table.get("drafting", "chain") in ("chain", "tree"), where, f"drafting = {table.get('drafting')!r}; expected 'chain' or 'tree'")
    _check_role(table, where)
    loads = [key for key in LOAD_FIELDS if key in table]
    require(len(loads) == 1, where, f"needs exactly one of {list(LOAD_FIELDS)}, has {loads}")
    for key in ("batch_size", "concurrency", "input_len", "output_len", "max_num_seqs", "max_num_batched_tokens", "num_prompts"):
        if key in table:
            require(positive_int(table[key]), where, f"{key} = {table[key]!r} must be a positive integer")
    if "qps" in table:
        require(positive_number(table["qps"]), where, f"qps = {table['qps']!r} must be a positive number")
    if "arrivals" in table:
        require(table["arrivals"] in ARRIVALS, where, f"arrivals = {table['arrivals']!r}; expected one of {list(ARRIVALS)}")
        require("qps" in table, where, "arrivals is for qps rows (a request rate)")
    if "lengths" in table:
        require(table["lengths"] in ROW_LENGTHS, where, f"lengths = {table['lengths']!r}; expected one of {list(ROW_LENGTHS)}")
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
    for key in TREE_FIELDS:
        if key in table:
            require(not chain, where, f"{key} is a tree's setting; a chain row has none (or say drafting = \"tree\")")
            require(positive_int(table[key]), where, f"{key} = {table[key]!r} must be a positive integer")
    if "draft_tp" in table:
        kind = _kind_of(table["proposer"])
        # the kind's own fact, as RunConfig's draft-TP rule reads it: any proposer that runs a draft network
        require(kind is not None and kind.runs_network, where, "draft_tp is for rows whose proposer runs a draft network (a draft model, a head, MTP layers, a drafter)")
        require(positive_int(table["draft_tp"]), where, f"draft_tp = {table['draft_tp']!r} must be a positive integer")
    table = {**table, "plausible": _plausible(table.get("plausible", {}), where, table.get("gpu"), table["tp"])}
    return Measurement(**{key: (float(v) if _TYPES[key] in ("float", "Optional[float]") else v) for key, v in table.items()})


ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_version(text: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _kind_of(proposer: str):
    """The proposer kind a row names, or None for "none" and methods the simulator does not model."""
    return proposers.find(proposer) if proposer not in (NO_SPECULATION, *proposers.NOT_MODELLED) else None


def _check_role(table: dict, where: str) -> None:
    """A row's role and acceptance class: present, known, and only a calibration row names what
    calibrated the model from it (``calibrated_by``: released data, or the entry that examined it)."""
    role, cls, by = table["role"], table["acceptance_class"], table.get("calibrated_by")
    require(role in ROLES, where, f"role = {role!r}; expected one of {list(ROLES)}")
    require(cls in ACCEPTANCE_CLASSES, where, f"acceptance_class = {cls!r}; expected one of {list(ACCEPTANCE_CLASSES)}")
    if role == "check":
        require(by is None, where, f"is a check row but calibrated_by = {by!r}: a row whose source set a constant is a calibration row (role = \"calibration\")")
    else:
        require(
            isinstance(by, str) and (by.startswith("https://") or CALIBRATION_ENTRY.fullmatch(by) is not None), where,
            "is a calibration row: name the calibration data its source released in calibrated_by = \"https://...\", "
            "or the declared calibration entry that examined it (calibrated_by = \"devices.<gpu>.<table>.<key>\", \"engines....\" or \"engine_costs.<table>\"), "
            "or make it a check row",
        )


def _plausible(ranges: dict, where: str, gpu: Optional[str] = None, tp: int = 1) -> tuple:
    out = []
    for key, values in ranges.items():
        require(key in PLAUSIBLE_KEYS, where, f"plausible.{key}: only {list(PLAUSIBLE_KEYS)} can be given a range")
        if key == "gpu":
            ok = isinstance(values, list) and len(set(values)) == len(values) >= 2 and all(non_empty_str(v) for v in values) and gpu in values
            require(ok, where, f"plausible.gpu = {values!r} must list two or more devices, the row's gpu = {gpu!r} among them")
        elif key == "tp":
            ok = isinstance(values, list) and len(set(values)) == len(values) >= 2 and all(positive_int(v) for v in values) and tp in values
            require(ok, where, f"plausible.tp = {values!r} must list two or more tensor-parallel degrees, the row's tp = {tp} among them")
        else:
            ok = isinstance(values, list) and len(values) == 2 and all(positive_int(b) for b in values) and values[0] < values[1]
            require(ok, where, f"plausible.{key} = {values!r} must be [low, high], positive integers with low < high")
        out.append((key, tuple(values)))
    return tuple(out)


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
class LengthDistribution:
    """A dataset's request-length distribution (data/calibration/length_distributions.toml): the
    shape of each side, scaled to a row's means when drawn, and where the shape comes from."""

    name: str
    source_url: str
    basis: str  # "source", "proxy" or "assumption" (LENGTH_BASES)
    statistics: str
    derivation: str
    input: LengthShape
    output: LengthShape
    examined_rows: tuple[str, ...] = ()
    filter_source_url: str = ""  # where a filter applied to the source's requests comes from (a proxy's)


LENGTH_BASES = ("source", "proxy", "assumption")
FIXED_LENGTHS = "fixed"  # a dataset whose requests all have its (or the row's) mean lengths


@dataclass(frozen=True)
class Dataset:
    input_len: int
    output_len: int
    source_url: str
    note: str
    lengths: str = FIXED_LENGTHS  # "fixed", or the name of a distribution
    lengths_note: str = ""  # why this choice (a distribution's basis, or why none is published)
    num_prompts: Optional[int] = None  # the requests the source's benchmark sends when a closed-loop row does not say
    distribution: Optional[LengthDistribution] = None  # the named distribution, resolved (None when fixed)

    @property
    def sampled(self) -> bool:
        return self.distribution is not None


_SHAPE_FIELDS = {"kind": str, "probabilities": list, "tokens": list, "turns": int, "max_tokens": int}
_DISTRIBUTION_FIELDS = {
    "source_url": str, "filter_source_url": str, "basis": str, "statistics": str, "derivation": str, "examined_rows": list,
    "input": dict, "output": dict,
}


def load_length_distributions(path) -> dict:
    """The named distributions of a length-distributions file, each shape checked (one ConfigError naming the key)."""
    where = f"length distributions {path}"
    doc = read_toml(path, "length distributions")
    check_table(doc, {"distributions": dict}, where)
    out = {}
    for name, table in doc["distributions"].items():
        at = f"{where}: [distributions.{name}]"
        check_table(table, _DISTRIBUTION_FIELDS, at, ("source_url", "basis", "statistics", "derivation", "examined_rows", "input", "output"))
        for key in ("source_url", "filter_source_url"):
            if key in table:
                require(table[key].startswith("https://"), at, f"{key} = {table[key]!r} must be an https link")
        require(table["basis"] in LENGTH_BASES, at, f"basis = {table['basis']!r}; expected one of {list(LENGTH_BASES)}")
        for key in ("statistics", "derivation"):
            require(non_empty_str(table[key]), at, f"{key} must say what the source gives and how the shape was computed")
        require(all(non_empty_str(r) for r in table["examined_rows"]), at, "examined_rows must list published row ids")
        shapes = {side: _shape(table[side], f"{at[:-1]}.{side}]") for side in ("input", "output")}
        out[name] = LengthDistribution(name, table["source_url"], table["basis"], table["statistics"], table["derivation"],
                                       shapes["input"], shapes["output"], tuple(table["examined_rows"]), table.get("filter_source_url", ""))
    return out


def _shape(table: dict, where: str) -> LengthShape:
    check_table(table, _SHAPE_FIELDS, where, ("kind",))
    require(table["kind"] in SHAPE_KINDS, where, f"kind = {table['kind']!r}; expected one of {list(SHAPE_KINDS)}")
    for key in ("probabilities", "tokens"):
        if key in table:
            require(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in table[key]), where, f"{key} = {table[key]!r} must be numbers")
    try:
        return LengthShape(table["kind"], tuple(table.get("probabilities", ())), tuple(table.get("tokens", ())), table.get("turns", 1), table.get("max_tokens"))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class AcceptanceAssumption:
    applies_to: tuple[str, ...]
    why: str
    from_measurement: Optional[str] = None
    acceptance_length: Optional[float] = None
    k: Optional[int] = None
    acceptance_rate: Optional[float] = None
    source_url: str = ""
    acceptance_class: str = "assumed"


@dataclass(frozen=True)
class Assumptions:
    datasets: dict
    acceptance: dict  # measurement id -> AcceptanceAssumption


def load_assumptions(path, measurements: tuple[Measurement, ...]) -> Assumptions:
    where = f"published assumptions {path}"
    doc = read_toml(path, "published assumptions")
    check_table(doc, {"datasets": dict, "acceptance": list, "length_distributions": str}, where, ("datasets", "acceptance"))
    datasets = _datasets(doc, Path(path), where)
    known = {m.id for m in measurements}
    acceptance = {}
    for i, table in enumerate(doc["acceptance"]):
        at = f"{where}: acceptance {i + 1}"
        check_table(
            table,
            {"applies_to": list, "why": str, "from_measurement": str, "acceptance_length": float, "k": int, "acceptance_rate": float,
             "source_url": str, "acceptance_class": str},
            at,
            ("applies_to", "why", "acceptance_class"),
        )
        require(table["acceptance_class"] in ACCEPTANCE_CLASSES, at, f"acceptance_class = {table['acceptance_class']!r}; expected one of {list(ACCEPTANCE_CLASSES)}")
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
    result = Assumptions(datasets, acceptance)
    check_acceptance_classes(measurements, result, where)
    return result


def _datasets(doc: dict, path: Path, where: str) -> dict:
    """The [datasets.*] tables, each with its length choice: ``lengths = "fixed"`` or the name of a
    distribution in the file ``length_distributions`` names (relative to the assumptions file)."""
    fields = {"input_len": int, "output_len": int, "source_url": str, "note": str, "lengths": str, "lengths_note": str, "num_prompts": int}
    tables = doc["datasets"]
    named = None
    for name, table in tables.items():
        at = f"{where}: [datasets.{name}]"
        check_table(table, fields, at, ("input_len", "output_len", "source_url", "note", "lengths", "lengths_note"))
        require(non_empty_str(table["lengths_note"]), at, "lengths_note must say why these lengths (the distribution's basis, or why none is published)")
        if "num_prompts" in table:
            require(positive_int(table["num_prompts"]), at, f"num_prompts = {table['num_prompts']!r} must be a positive integer")
        if table["lengths"] != FIXED_LENGTHS and named is None:
            require("length_distributions" in doc, at, f"lengths = {table['lengths']!r} names a distribution, but the file names no length_distributions file")
            named = load_length_distributions(path.parent / doc["length_distributions"])
        if table["lengths"] != FIXED_LENGTHS:
            require(table["lengths"] in named, at, f"lengths = {table['lengths']!r} is neither \"fixed\" nor a distribution of {doc['length_distributions']} (known: {', '.join(sorted(named))})")
    return {name: Dataset(**{**table, "distribution": None if table["lengths"] == FIXED_LENGTHS else named[table["lengths"]]}) for name, table in tables.items()}


SETTING_KEYS = ("model", "proposer", "draft", "k", "dataset")


def setting_differences(a: Measurement, b: Measurement) -> list[str]:
    """The acceptance settings two rows do not state the same: model, proposer, draft (for a
    proposer that has one), k and dataset; an unstated draft or dataset is not "the same"."""
    kind = _kind_of(a.proposer)
    keys = [key for key in SETTING_KEYS if key != "draft" or (kind is not None and kind.needs_draft_model)]
    return [key for key in keys if getattr(a, key) is None or getattr(a, key) != getattr(b, key)]


def same_setting(a: Measurement, b: Measurement) -> bool:
    return not setting_differences(a, b)


def acceptance_origin(m: Measurement, assumptions: Assumptions) -> str:
    """Where the row's acceptance comes from: "none needed", "this row", "assumption", or "nowhere"."""
    if m.proposer == NO_SPECULATION:
        return "none needed"
    if m.acceptance_length is not None or m.acceptance_per_position is not None:
        return "this row"
    return "assumption" if m.id in assumptions.acceptance else "nowhere"


def _allowed_classes(m: Measurement, assumptions: Assumptions, rows: dict) -> tuple[tuple[str, ...], str]:
    origin = acceptance_origin(m, assumptions)
    if origin == "none needed":
        return ("same_source",), "it has no speculation, so nothing is borrowed"
    if origin == "this row":
        return ("same_source",), "its acceptance is its own"
    if origin == "nowhere":
        return ("assumed",), "no acceptance is published for it anywhere"
    entry = assumptions.acceptance[m.id]
    if entry.from_measurement is None:
        return (entry.acceptance_class,), f"its acceptance assumption says {entry.acceptance_class}"
    other = rows[entry.from_measurement]
    differ = setting_differences(m, other)
    if differ:
        return ("other_dataset", "assumed"), f"it borrows from {other.id}; the two rows do not state the same {', '.join(differ)}"
    return ("same_setting_other_run",), f"it borrows from {other.id}, another run of the same setting"


def check_acceptance_classes(measurements: tuple[Measurement, ...], assumptions: Assumptions, where: str = "published measurements") -> None:
    """Refuse a row whose acceptance class contradicts where its acceptance comes from."""
    rows = {m.id: m for m in measurements}
    for m in measurements:
        allowed, why = _allowed_classes(m, assumptions, rows)
        entry = assumptions.acceptance.get(m.id)
        require(
            m.acceptance_class in allowed,
            f"{where}: {m.id}:",
            f"acceptance_class = {m.acceptance_class!r} contradicts its acceptance source ({why}); expected {' or '.join(allowed)}",
        )
        if entry is not None:
            require(entry.acceptance_class == m.acceptance_class, f"{where}: {m.id}:",
                    f"acceptance_class = {m.acceptance_class!r} but its acceptance assumption says {entry.acceptance_class!r}")


def load(published: Path, assumptions: Path) -> tuple[tuple[Measurement, ...], Assumptions]:
    measurements = load_measurements(published)
    return measurements, load_assumptions(assumptions, measurements)


__all__ = ["ROLES", "ACCEPTANCE_CLASSES", "check_acceptance_classes", "same_setting", "Measurement", "Assumptions", "Dataset", "LengthDistribution", "AcceptanceAssumption", "load", "load_measurements", "load_assumptions", "load_length_distributions", "METRICS", "ConfigError"]
