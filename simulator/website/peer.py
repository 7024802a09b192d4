"""This project beside a peer predictor on the published check rows: the table a page section shows.

``bench/peer_aiconfigurator.py`` (issue 31) asks NVIDIA AIConfigurator for every check row it can
express and records ``data/peer/aiconfigurator.csv`` (one row per check row, sorted by id) and a
provenance sidecar ``data/peer/aiconfigurator.json``.  This module only reads them: no peer is
imported, nothing is simulated.  A row the peer cannot express (or whose project value is missing
or stale) keeps its place with an empty ``peer_predicted`` and the reason in ``note``.

The figures, over the rows both tools express: each tool's median |error|, how many rows each
has within +-15 %, and on how many rows each is closer to the published figure (a tie when the two
|errors| differ by less than :data:`TIE_PP` percentage points).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError

# data/peer/aiconfigurator.csv: what the bench writes and this module reads
PEER_COLUMNS = (
    "id", "metric", "published", "project_simulated", "project_error", "peer_predicted", "peer_error", "closer",
    "peer_setting", "note",
)
CLOSER = ("project", "peer", "tie")
CSV_NAME = "peer-aiconfigurator.csv"  # the site's download of data/peer/aiconfigurator.csv
WITHIN_PCT = 15.0  # the published page's "within +-15 %"
TIE_PP = 0.5  # |errors| closer than half a percentage point: neither tool is closer
NOT_RUN = "The side-by-side with AIConfigurator was not run (data/peer/aiconfigurator.csv is absent): python bench/peer_aiconfigurator.py"


def closer(project_error: float, peer_error: float) -> str:
    """Which tool's |error| is smaller: "project", "peer", or "tie" within :data:`TIE_PP`."""
    a, b = abs(project_error), abs(peer_error)
    if abs(a - b) < TIE_PP:
        return "tie"
    return "project" if a < b else "peer"


def _number(text: str, where: str) -> Optional[float]:
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a number") from None


def parse_rows(text: str, source: str = "peer table") -> list[dict]:
    """The recorded rows, numbers as floats (an empty cell is None); refuses unknown or missing columns."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != PEER_COLUMNS:
        raise ConfigError(f"{source}: columns {list(reader.fieldnames or ())}; expected {list(PEER_COLUMNS)}")
    rows = []
    for line, raw in enumerate(reader, start=2):
        where = f"{source} line {line} ({raw['id']})"
        row = dict(raw)
        for key in ("published", "project_simulated", "project_error", "peer_predicted", "peer_error"):
            row[key] = _number(raw[key], f"{where} {key}")
        if row["published"] is None:
            raise ConfigError(f"{where}: no published value")
        both = row["project_error"] is not None and row["peer_error"] is not None
        if both and raw["closer"] not in CLOSER:
            raise ConfigError(f"{where}: closer = {raw['closer']!r}; expected one of {list(CLOSER)}")
        if not both and raw["closer"]:
            raise ConfigError(f"{where}: closer = {raw['closer']!r} on a row one tool does not express")
        rows.append(row)
    return rows


def both_express(row: dict) -> bool:
    return row["project_error"] is not None and row["peer_error"] is not None


def summarize(rows: list[dict]) -> dict:
    """The side-by-side's figures over the rows both tools express."""
    both = [r for r in rows if both_express(r)]
    project = [abs(r["project_error"]) for r in both]
    peer = [abs(r["peer_error"]) for r in both]
    return {
        "rows": len(rows),
        "both": len(both),
        "not_expressed": len(rows) - len(both),
        "project_median_abs_error_pct": statistics.median(project) if project else None,
        "peer_median_abs_error_pct": statistics.median(peer) if peer else None,
        "project_within_15pct": sum(e <= WITHIN_PCT for e in project),
        "peer_within_15pct": sum(e <= WITHIN_PCT for e in peer),
        "closer": {who: sum(r["closer"] == who for r in both) for who in CLOSER},
    }


def peer_context(csv_path) -> Optional[dict]:
    """The page section's context, or None when the comparison was not run (the page then says
    :data:`NOT_RUN`): the rows both tools express, the rows the peer could not (with why), the
    figures (:func:`summarize`) and the provenance sidecar (``{}`` when it is missing)."""
    path = Path(csv_path)
    if not path.is_file():
        return None
    rows = parse_rows(path.read_text(encoding="utf-8"), str(path.name))
    sidecar = path.with_suffix(".json")
    provenance = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.is_file() else {}
    line = (f"{provenance.get('peer', 'the peer')} {provenance.get('aiconfigurator_version', '(version not recorded)')}, recorded "
            f"{provenance.get('date', '(date not recorded)')} against this project's simulator "
            f"{', '.join(provenance.get('project_simulator_source_hash', [])) or '(not recorded)'} by {provenance.get('command', 'bench/peer_aiconfigurator.py')}")
    return {
        "provenance_line": line,
        "rows": [r for r in rows if both_express(r)],
        "not_expressed": [r for r in rows if not both_express(r)],
        "figures": summarize(rows),
        "provenance": provenance,
        "within_pct": WITHIN_PCT,
        "tie_pp": TIE_PP,
    }
