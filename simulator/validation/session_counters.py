"""Which replay sessions' ``/metrics`` scrapes can be measured, and their counter deltas summed.

A session is measured from its opening to its closing scrape (or, when that is missing, the
next session's opening scrape, where the server process is shown to be the same); a session
whose counter deltas may not be its own alone (a restart, another client's traffic) is left
out or flagged, saying why.  The acceptance those deltas give is :mod:`counter_acceptance`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_text
from simulator.validation.metrics import CounterWentDown, Snapshot, add, delta, parse_metrics
from simulator.validation.replay_files import NOT_SENT, list_scrapes
from simulator.validation.replay_files import received_tokens as record_tokens
from simulator.validation.sessions import STATES, session_state


@dataclass(frozen=True)
class Counters:
    """Counter deltas summed over the replay sessions that can be measured."""

    total: Snapshot
    used: list  # session numbers
    dropped: list  # {"session": n, "reason": why it was left out}
    notes: list
    flagged: list = ()  # {"session", "reason", "excess_tokens", "included"}: counters beyond what the session could explain
    warnings: list = ()


def _read_scrape(path: Path) -> Snapshot:
    return parse_metrics(read_text(path, "scrape file"), str(path))


def _restart(before: Snapshot, after: Snapshot) -> Optional[str]:
    """Why ``before`` and ``after`` come from different server processes, or None."""
    if before.process_start_time is None or after.process_start_time is None:
        return None
    if before.process_start_time != after.process_start_time:
        return f"the server restarted between its opening and closing scrapes (process_start_time_seconds {before.process_start_time:.2f} -> {after.process_start_time:.2f})"
    return None


def received_tokens(records) -> int:
    """Tokens the client received in ``records``."""
    return sum(record_tokens(r) for r in records)


def _unnoticed_restart(step: Snapshot, records: list) -> Optional[str]:
    """Why a session's counter deltas cannot be this session's, judged from the counters and
    the session's own records: a server that restarted from zero counters without exporting
    process_start_time_seconds leaves deltas that are too small (often zero)."""
    received = received_tokens(records)
    # exact: every token the client received was generated, and counted, before it was streamed
    # (vLLM counts a step's tokens as it hands them to the output queues); the closing scrape is
    # taken after the last stream ended
    if step.generation_tokens is not None and step.generation_tokens < received:
        return (
            f"its counters rose by {step.generation_tokens:g} generated tokens while its {len(records)} records received {received}: "
            "the server restarted (counters from zero) between the scrapes, unnoticed by process_start_time_seconds"
        )
    multi = sum(1 for r in records for c in (r.get("chunks") or [])[1:] if c[1] is not None and c[1] > 1)
    drafted = step.drafts if step.drafts is not None else step.draft_tokens
    if multi and drafted is not None and drafted <= 0:
        return f"its spec-decode counters did not move while its records show {multi} multi-token decode chunks: the server restarted (counters from zero) between the scrapes"
    return None


# Failures the server generated nothing for: it answered with an HTTP error before streaming
# (vLLM streams with status 200 once generation starts), or the request never reached it.
GENERATED_NOTHING = ("http_error",) + NOT_SENT


def most_generated(record: dict) -> int:
    """The most tokens the server can have generated for one record's request: a completed one
    exactly what it asked for (or received, were that more); one the server refused or never
    saw, none; any other failure up to what it asked for (a stream the client gave up on may
    run to the end)."""
    if record.get("status") == "ok":
        return max(int(record["expected_output_tokens"]), received_tokens([record]))
    if record.get("status") in GENERATED_NOTHING:
        return 0
    return int(record["expected_output_tokens"])


def unexplained_traffic(step: Snapshot, records: list, entry: Optional[dict]) -> Optional[tuple[str, float]]:
    """(why, excess tokens) when a session's counters rose by more than its own requests explain.

    The bound is exact where the records tell: each record counts :func:`most_generated`
    (an HTTP error counts none, so the output its requests asked for is not slack another
    client's traffic can hide in), and the requests the session planned (its replay-summary
    entry) that left no record, cut off in flight, count what they asked for.  Counters
    beyond that come from somewhere else: another client of the same server, or traffic between
    a session cut off and the scrape that closes it.  A session none of whose requests
    succeeded, yet whose counters moved, holds drafts no complete request accounts for, and is
    flagged as well.
    """
    if step.generation_tokens is None or (entry is None and not records):  # nothing to judge by (an older caller)
        return None
    planned = entry.get("planned_output_tokens") if entry else None
    unrecorded = max(0, planned - sum(r["expected_output_tokens"] for r in records)) if planned is not None else 0
    bound = sum(most_generated(r) for r in records) + unrecorded
    received = received_tokens(records)
    if step.generation_tokens > bound:
        excess = step.generation_tokens - bound
        return (
            f"its counters rose by {step.generation_tokens:g} generated tokens, {excess:g} more than its requests could generate ({bound:g}; the client "
            f"received {received}): another client's traffic on the same server, or requests run between its scrapes by someone else",
            float(excess),
        )
    moved = (step.drafts or step.draft_tokens or 0) > 0 or step.generation_tokens > 0
    if moved and not any(r.get("status") == "ok" for r in records):
        return (
            f"none of its {len(records)} request(s) succeeded, yet its counters rose by {step.generation_tokens:g} generated tokens "
            f"(the client received {received}): drafts no complete request accounts for",
            float(max(0.0, step.generation_tokens - received)),
        )
    return None


def _session_delta(before: Snapshot, after: Snapshot, source: str, records: list, state: str, closed_by: Optional[int]) -> tuple[Optional[Snapshot], Optional[str]]:
    """(the counter deltas from ``before`` to ``after``, None), or (None, why they cannot be
    this session's): a restart between the scrapes, told by ``process_start_time_seconds``, by
    a counter going down, or (without the start time) by the session's own ``records``; and,
    without the start time, a session closed by session ``closed_by``'s opening scrape, which
    nothing shows to come from the same process."""
    restarted = _restart(before, after)
    if restarted:
        return None, (f"{STATES[state]}; " if closed_by is not None and state == "closing_scrape_failed" else "") + restarted
    try:
        step = delta(before, after, source)
    except CounterWentDown as err:
        return None, str(err)
    if before.process_start_time is None or after.process_start_time is None:
        unnoticed = _unnoticed_restart(step, records)
        if unnoticed:
            return None, unnoticed
        if closed_by is not None:
            # no counter can show that the scrape closing it comes from the same process: a
            # restart in between, and any traffic after it, would be counted as this session's
            return None, f"{STATES[state]}, and the server exports no process_start_time_seconds to show that session {closed_by}'s opening scrape, which would close it, comes from the same process"
    return step, None


def collect_counters(replay_dir: Path, history=(), summary: Optional[dict] = None, force: bool = False) -> Counters:
    """Counter deltas summed over the valid replay sessions, and what was left out and why.

    A session killed or interrupted before its closing scrape, or whose closing scrape failed
    (the server died or became unreachable), is closed by the next session's opening scrape
    only when ``process_start_time_seconds`` shows the same server process: a server that
    died comes back as a new one, and without the start time nothing shows that it did not
    (its counters from zero, raised again by another client, can pass every other check).  A session whose two scrapes come from
    different server processes (told apart by ``process_start_time_seconds``, or by a counter
    going down when the server does not export it) is left out: its counters cannot be split
    at the restart.  Without the start time, a restart from zero counters can leave every
    counter at or above its opening value; it is caught by the session's own records
    (``history``): the counters must account for at least the tokens the client received,
    and for drafts where it saw multi-token chunks.

    A session whose counters rose by more than its own requests explain
    (:func:`unexplained_traffic`) is flagged, and left out unless ``force``: its acceptance
    and its drafts per decode chunk would be another client's.
    """
    sessions = list_scrapes(replay_dir)
    entries = {e.get("session"): e for e in (summary or {}).get("sessions", [])}
    order = list(sessions)
    total: Optional[Snapshot] = None
    used, dropped, notes, flagged, warnings = [], [], [], [], []

    def drop(session: int, reason: str) -> None:
        dropped.append({"session": session, "reason": reason})

    for position, session in enumerate(order):
        files = sessions[session]
        state = session_state(entries.get(session)) if summary is not None else "unrecorded"
        if "before" not in files:
            drop(session, "no opening scrape")
            continue
        closing, closed_by = files.get("after"), None
        if closing is None and position + 1 < len(order) and "before" in sessions[order[position + 1]]:
            closed_by = order[position + 1]
            closing = sessions[closed_by]["before"]
        if closing is None:
            ended = STATES[state] if state != "unrecorded" else "no closing scrape"
            drop(session, f"{ended}, and no later session to close it")
            continue
        before, after = _read_scrape(files["before"]), _read_scrape(closing)
        records = [r for r in history if r.get("session") == session]
        step, reason = _session_delta(before, after, f"{files['before'].name} -> {closing.name}", records, state, closed_by)
        if step is None:
            drop(session, reason)
            continue
        if closed_by is not None:
            how = {"closing_scrape_failed": "its closing scrape failed (the server became unreachable; the same process answered again, by process_start_time_seconds)", "interrupted": "interrupted (Ctrl-C)", "killed": "the replay process was killed"}.get(state, "no closing scrape (interrupted)")
            notes.append(f"session {session}: {how}; closed by session {closed_by}'s opening scrape")
        unexplained = unexplained_traffic(step, records, entries.get(session))
        if unexplained:
            reason, excess = unexplained
            flagged.append({"session": session, "reason": reason, "excess_tokens": excess, "included": force})
            if not force:
                drop(session, reason + "; left out of the calibration (pass --force to include it)")
                warnings.append(f"session {session}: {reason}; left out of the calibration (pass --force to include it)")
                continue
            warnings.append(f"session {session}: {reason}; included anyway (--force), so its acceptance and proposal probability mix in that traffic")
        total = step if total is None else add(total, step)
        used.append(session)
        if before.process_start_time is None:
            notes.append(f"session {session}: the server exports no process_start_time_seconds; restarts are told by counters going down or falling short of the tokens the client received")
    if total is None:
        why = "; ".join(f"session {d['session']}: {d['reason']}" for d in dropped) or "no scrapes"
        raise ConfigError(f"{replay_dir}: no replay session can be measured ({why}); replay again against a server that stays up (and that no other client uses)")
    notes += [f"session {d['session']} left out: {d['reason']}" for d in dropped]
    return Counters(total, used, dropped, notes, flagged, warnings)
