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

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json
from simulator.validation.files import check_schema, iter_jsonl
from simulator.validation.workload import is_int

SCHEMA = "vidur-specdec/validation-replay"
SCHEMA_VERSION = 1
RESULTS_FILE = "replay.jsonl"
SUMMARY_FILE = "replay-summary.json"
SCRAPES_DIR = "scrapes"
STATUSES = ("ok", "short", "http_error", "stream_error", "dropped_stream", "malformed_sse", "timeout", "connection_error")
# What each status means, for the messages that count them.
STATUS_WORDS = {
    "short": "the stream ended cleanly before the asked length",
    "http_error": "an HTTP error",
    "stream_error": "an error in the stream",
    "dropped_stream": "the connection was cut mid-stream",
    "malformed_sse": "a malformed event",
    "timeout": "no data for longer than --timeout",
    "connection_error": "never reached the server",
}
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
    _check_header(path, header)
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
        _check_record(f"{path}:{number}", record)
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
    """The per-session summaries; a damaged file is refused, naming it."""
    path = Path(directory) / SUMMARY_FILE
    if not path.exists():
        return {"sessions": []}
    data = read_json(path, "replay summary")
    sessions = data.get("sessions", [])
    if not (isinstance(sessions, list) and all(isinstance(s, dict) for s in sessions)):
        raise ConfigError(f"replay summary {path}: sessions = {str(sessions)[:60]!r} has the wrong type, expected a list of objects; the file was edited or damaged: replay into a new --out")
    for session in sessions:
        wall = session.get("wall_s")
        if wall is not None and not (isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0):
            raise ConfigError(f"replay summary {path}: wall_s = {wall!r} has the wrong type, expected seconds >= 0; the file was edited or damaged: replay into a new --out")
    return data


def _wrong(where: str, name: str, value, expected: str) -> ConfigError:
    return ConfigError(f"{where}: {name} = {value!r} has the wrong type, expected {expected}; the file was edited or damaged: replay into a new --out")


def _check_header(path: Path, header: dict) -> None:
    """The header's fields have the types replay writes (a hand-edited ``"40"`` is refused)."""
    if not (is_int(header.get("num_requests")) and header["num_requests"] > 0):
        raise _wrong(f"{path}: header", "num_requests", header.get("num_requests"), "a positive integer")
    for name in ("workload_hash", "model"):
        if not isinstance(header.get(name), str):
            raise _wrong(f"{path}: header", name, header.get(name), "a string")


def _number_or_none(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _check_record(where: str, record: dict) -> None:
    """Every field a later step reads has the type replay writes, so a damaged file stops
    with its line named instead of a traceback in calibrate or compare."""
    if not (is_int(record.get("expected_output_tokens")) and record["expected_output_tokens"] > 0):
        raise _wrong(where, "expected_output_tokens", record.get("expected_output_tokens"), "a positive integer")
    if not is_int(record.get("session")):
        raise _wrong(where, "session", record.get("session"), "an integer")
    chunks = record.get("chunks")
    if not isinstance(chunks, list) or not all(
        isinstance(c, list) and len(c) == 2 and _number_or_none(c[0]) and c[0] is not None and (c[1] is None or (is_int(c[1]) and c[1] >= 0)) for c in chunks
    ):
        raise _wrong(where, "chunks", chunks, "a list of [seconds after send, tokens or null] pairs")
    for name in ("ttft_s", "tpot_s", "e2e_s", "done_s", "send_s", "scheduled_s", "send_lag_s", "client_handling_s", "end_s"):
        if not _number_or_none(record.get(name)):
            raise _wrong(where, name, record.get(name), "a number of seconds or null")
    for name in ("completion_tokens", "streamed_tokens"):
        if not (record.get(name) is None or is_int(record[name])):
            raise _wrong(where, name, record.get(name), "an integer or null")
    if record.get("length_mismatch") not in (None, True, False):
        raise _wrong(where, "length_mismatch", record.get("length_mismatch"), "true, false or null")
    if record["status"] == "ok" and (record.get("ttft_s") is None or record.get("e2e_s") is None or not chunks):
        raise ConfigError(f"{where}: status is ok but ttft_s, e2e_s or chunks is missing; the file was edited or damaged: replay into a new --out")


def check_replay_dir(directory: Path, option: str) -> Path:
    """``directory`` is a replay directory (it holds replay.jsonl); the message names the input."""
    directory = Path(directory)
    if not directory.exists():
        raise ConfigError(f"{option} {directory}: not found; pass the directory that replay wrote (its --out)")
    if not directory.is_dir():
        raise ConfigError(f"{option} {directory}: is a file, expected the replay directory that holds {RESULTS_FILE} (replay's --out)")
    if not results_path(directory).is_file():
        raise ConfigError(f"{option} {directory}: holds no {RESULTS_FILE}; pass the directory that replay wrote (its --out)")
    return directory


def received_tokens(record: dict) -> int:
    """Tokens the client received in one record: the token ids streamed when the server sent
    them, else the server's ``usage.completion_tokens``, else one per content chunk (a lower
    bound).  Throughput and the counter checks count these, never the tokens asked for."""
    if record.get("streamed_tokens") is not None:
        return int(record["streamed_tokens"])
    chunks = record.get("chunks") or []
    if chunks and all(c[1] is not None for c in chunks):
        return int(sum(c[1] for c in chunks))
    if record.get("completion_tokens") is not None:
        return int(record["completion_tokens"])
    return sum(c[1] if c[1] is not None else 1 for c in chunks)


def end_s(record: dict) -> Optional[float]:
    """When the request finished, in seconds after its session started (``end_s``; records
    written before it existed: the send time plus the last thing the stream delivered)."""
    if record.get("end_s") is not None:
        return float(record["end_s"])
    if record.get("send_s") is None:
        return None
    last = record.get("done_s") or record.get("e2e_s") or max((c[0] for c in record.get("chunks") or []), default=0.0)
    return float(record["send_s"]) + float(last)


def unfinished_requests(workload, results: Optional[ReplayResults]) -> list[int]:
    """Request ids of ``workload`` whose last record is not a success (or that have none)."""
    records = results.records if results else {}
    return [r.request_id for r in workload.requests if (records.get(r.request_id) or {}).get("status") != "ok"]
