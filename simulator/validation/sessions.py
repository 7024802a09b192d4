"""What each replay session of a replay directory was, how it ended and how long it was active,
and the one window the measured throughput divides by.

A replay directory can hold several sessions: a first run, a resume after Ctrl-C or ``kill -9``,
a ``--retry-failed`` rerun.  Each session is listed with its own duration, however it ended:

* a session that closed measured its own ``wall_s`` (first send due to last finish);
* one interrupted by Ctrl-C saved its ``wall_s`` up to the interruption;
* one killed (``kill -9``, a crash) left only its ``running`` entry: its duration is taken
  from its records (the last one that finished), since the requests in flight when it died
  have none.

Time lost to stalls is not activity: after the last request that did not time out has
finished (and the last request was sent), a session that still waits only on streams that
went silent is idle, waiting out ``--timeout``.  That tail is reported as ``stall_tail_s``
and left out of the session's ``active_s``.  (vllm bench serve has no stall timeout; its
duration runs to the last request's end.)

Throughput does not add the sessions' durations up: a resend session sends its few requests at
their original arrival times, so it spans about as long as the first run while the server
spends little of it on them, and the sum doubled the duration (+93% throughput error after a
``--retry-failed``).  It divides by :func:`measured_window_s` instead: every completed request
placed on the workload's own timeline, at its arrival time, from the workload's first arrival
to the last completed request's finish, which is the window the simulated run spans too.
"""

from __future__ import annotations

from typing import Iterable, Optional

from simulator.validation.replay_files import end_s

# How a session ended, in words for the report and the calibration notes.
STATES = {
    "closed": "completed, closing /metrics scrape taken",
    "closing_scrape_failed": "its closing /metrics scrape failed: the server died or became unreachable",
    "interrupted": "interrupted (Ctrl-C) before its closing scrape",
    "killed": "the replay process was killed (or crashed) before its closing scrape",
    "unrecorded": "no entry in replay-summary.json (written by an older version, or the file was replaced)",
}


def session_state(entry: Optional[dict]) -> str:
    """The state of one ``replay-summary.json`` entry: a ``running`` entry read back later belongs
    to a process that is gone (one replay at a time writes a directory)."""
    if entry is None:
        return "unrecorded"
    state = entry.get("state")
    if state == "running":
        return "killed"
    if state in STATES:
        return state
    return "closed" if entry.get("after_scrape", True) else "closing_scrape_failed"  # entries written before states existed


def describe(summary: dict, history: Iterable[dict]) -> list[dict]:
    """One row per session, in order: its state, request counts and durations (seconds)."""
    entries = {int(e["session"]): e for e in summary.get("sessions", []) if isinstance(e.get("session"), int)}
    by_session: dict[int, list[dict]] = {}
    for record in history:
        by_session.setdefault(int(record.get("session", 0)), []).append(record)
    rows = []
    for number in sorted(set(entries) | set(by_session)):
        entry, records = entries.get(number), by_session.get(number, [])
        rows.append(_row(number, entry, records))
    return rows


def _row(number: int, entry: Optional[dict], records: list[dict]) -> dict:
    state = session_state(entry)
    ends = [e for e in (end_s(r) for r in records) if e is not None]
    wall = entry.get("wall_s") if entry is not None else None
    source = "measured"
    if wall is None:
        wall, source = (max(ends) if ends else None), "records"
    timeouts = [r for r in records if r.get("status") == "timeout"]
    stall_tail = 0.0
    if timeouts and wall is not None:
        busy = [end_s(r) for r in records if r.get("status") != "timeout"] + [r.get("send_s") for r in records]
        busy = [b for b in busy if b is not None]
        stall_tail = max(0.0, float(wall) - max(busy, default=0.0))
    statuses: dict[str, int] = {}
    for record in records:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    return {
        "session": number,
        "state": state,
        "state_words": STATES[state],
        "planned": entry.get("planned", entry.get("sent")) if entry is not None else None,
        "records": len(records),
        "statuses": dict(sorted(statuses.items())),
        "timeouts": len(timeouts),
        "wall_s": None if wall is None else float(wall),
        "duration_from": source if wall is not None else "unknown (no timed record)",
        "stall_tail_s": stall_tail,
        "active_s": None if wall is None else float(wall) - stall_tail,
    }


def total_active_s(rows: list[dict]) -> Optional[float]:
    """Every session's active time, summed (None when no session's time is known): how long the
    client ran, listed in the report beside the measured window, never divided by."""
    known = [r["active_s"] for r in rows if r["active_s"] is not None]
    return float(sum(known)) if known else None


def finish_on_timeline(record: dict, arrival_s: float) -> Optional[float]:
    """When a request finished on the workload's timeline: its arrival time plus how long after
    its scheduled send it finished (its session's clock starts at the first arrival it sends,
    and ``scheduled_s`` is the arrival's offset from there; records without it: the send)."""
    finished = end_s(record)
    scheduled = record.get("scheduled_s") if record.get("scheduled_s") is not None else record.get("send_s")
    if finished is None or scheduled is None:
        return None
    return float(arrival_s) + finished - float(scheduled)


def measured_window_s(workload, records: dict) -> Optional[float]:
    """What the measured throughput divides by: from the workload's first arrival to the last
    finish of a request whose last record is a success, each placed on the workload's timeline
    (:func:`finish_on_timeline`), so a resend or a resume overlays the first run's timeline
    instead of adding its own span.  For a single session that completed every request this is
    vllm bench serve's duration (its start to the last request's end); the simulated run spans
    the same window, the first arrival to the last finish.  None when nothing completed."""
    arrivals = {r.request_id: r.arrival_s for r in workload.requests}
    finishes = [finish_on_timeline(r, arrivals[rid]) for rid, r in records.items() if r.get("status") == "ok"]
    finishes = [f for f in finishes if f is not None]
    if not finishes:
        return None
    return max(finishes) - min(arrivals.values())
