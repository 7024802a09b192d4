"""The on-disk layout of a replay directory, and reading it back.

    replay.jsonl          header line, then one record per finished request (appended live)
    scrapes/sNNN-before.prom, scrapes/sNNN-after.prom
                          raw /metrics text around each replay session
    replay-summary.json   per-session counts and the client's own overhead

A request may have several records (a retried failure); the last one counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from simulator.errors import ConfigError
from simulator.inputs import read_json
from simulator.validation.files import check_schema, iter_jsonl

SCHEMA = "vidur-specdec/validation-replay"
SCHEMA_VERSION = 1
RESULTS_FILE = "replay.jsonl"
SUMMARY_FILE = "replay-summary.json"
SCRAPES_DIR = "scrapes"
STATUSES = ("ok", "http_error", "stream_error", "dropped_stream", "malformed_sse", "timeout", "connection_error")
# Nothing reached the server, so a rerun always tries these again.
NOT_SENT = ("connection_error",)
_SCRAPE = re.compile(r"^s(\d{3,})-(before|after)\.prom$")


@dataclass(frozen=True)
class ReplayResults:
    header: dict
    records: dict  # request_id -> last record
    history: tuple = ()  # every record in file order, earlier attempts of a resent request included

    @property
    def workload_hash(self) -> str:
        return self.header["workload_hash"]


def results_path(directory: Path) -> Path:
    return Path(directory) / RESULTS_FILE


def scrape_path(directory: Path, session: int, when: str) -> Path:
    return Path(directory) / SCRAPES_DIR / f"s{session:03d}-{when}.prom"


def read_results(directory: Path, workload_hash: Optional[str] = None) -> Optional[ReplayResults]:
    """The replay results in ``directory``, or None when there are none yet.

    With ``workload_hash`` given, results from another workload are refused.
    """
    path = results_path(directory)
    if not path.exists():
        return None
    lines = list(iter_jsonl(path, "replay results"))
    if not lines:
        return None
    _, header = lines[0]
    check_schema(path, header, SCHEMA, SCHEMA_VERSION)
    if workload_hash is not None and header.get("workload_hash") != workload_hash:
        raise ConfigError(
            f"{path}: results are for workload {str(header.get('workload_hash'))[:12]}..., not {workload_hash[:12]}... (a different workload file)"
        )
    num_requests = header.get("num_requests")
    records = {}
    history = []
    for number, record in lines[1:]:
        rid = record.get("request_id")
        if not (isinstance(rid, int) and 0 <= rid < num_requests):
            raise ConfigError(f"{path}:{number}: request_id = {rid!r} is outside the workload's 0..{num_requests - 1}")
        if record.get("status") not in STATUSES:
            raise ConfigError(f"{path}:{number}: status = {record.get('status')!r}, expected one of {STATUSES}")
        records[rid] = record
        history.append(record)
    return ReplayResults(header=header, records=records, history=tuple(history))


def list_scrapes(directory: Path) -> dict:
    """session -> {"before": path, "after": path} for the scrape files present."""
    sessions: dict[int, dict] = {}
    folder = Path(directory) / SCRAPES_DIR
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            match = _SCRAPE.match(path.name)
            if match:
                sessions.setdefault(int(match.group(1)), {})[match.group(2)] = path
    return dict(sorted(sessions.items()))


def read_summary(directory: Path) -> dict:
    path = Path(directory) / SUMMARY_FILE
    return read_json(path, "replay summary") if path.exists() else {"sessions": []}
