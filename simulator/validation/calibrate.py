"""Acceptance and KV budget from a replay's ``/metrics`` scrapes.

The math is pure (:func:`acceptance_from_counters`, with the conversions of
:class:`~simulator.speculative.acceptance_convert.AcceptanceInput`,
:func:`iid_alpha`); :func:`calibrate` does the reading.

vLLM V1 counts, per verify step with drafts, how many draft positions were accepted:
acceptance rate = accepted / draft tokens, mean acceptance length = 1 + accepted / drafts,
and the per-position counters give the *unconditional* rate u_i = P(positions 0..i all
accepted).  The simulator wants the *conditional* p_i = P(i accepted | 0..i-1 accepted) =
u_i / u_{i-1}.  V0 counts a token accepted even after an earlier rejection in the same
draft, so V0 is calibrated from emitted tokens instead, as an i.i.d. rate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

from simulator.speculative.acceptance_convert import AcceptanceInput, iid_rate_from_length
from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json, read_text
from simulator.validation.files import check_schema
from simulator.validation.metrics import COUNTERS, PER_POSITION, CounterWentDown, Snapshot, add, delta, parse_metrics, spec_counter_problem
from simulator.validation.replay_files import NOT_SENT, list_scrapes, read_results, read_summary
from simulator.validation.replay_files import received_tokens as record_tokens
from simulator.validation.sessions import STATES, session_state
from simulator.validation.workload import is_int

SCHEMA = "vidur-specdec/validation-calibration"
SCHEMA_VERSION = 1
V1_NEEDS = ("drafts", "draft_tokens", "accepted_tokens")
V0_NEEDS = ("emitted_tokens", "draft_tokens", "accepted_tokens")
ENGINES = ("v1", "v0")
# k looks too large when, at that k and the acceptance the counters then give, at least this
# many decode chunks longer than the longest one seen were expected (P(none) ~ e^-20).
K_TOO_LARGE_EXPECTED_CHUNKS = 20.0


@dataclass(frozen=True)
class MeasuredAcceptance:
    """What a server's spec-decode counters measured between two scrapes (a record of the
    measurement; the figure a run takes is its conditional ``acceptance_per_position``, converted
    by :class:`~simulator.speculative.acceptance_convert.AcceptanceInput`)."""

    engine: Optional[str]  # "v1", "v0", or None when speculation is off
    num_speculative_tokens: int
    acceptance_rate: Optional[float]
    mean_acceptance_length: Optional[float]
    acceptance_per_position: tuple  # conditional, what the simulator takes
    acceptance_per_position_unconditional: tuple
    method: str
    # drafts, draft tokens and accepted tokens as the calibrated k counts them (the summary
    # rates are these ratios): the counters' own, unless --force gave another k than theirs
    counts_at_k: Optional[dict] = None


def iid_alpha(mean_accepted_per_step: float, k: int) -> float:
    """The i.i.d. per-token rate a with a + a^2 + ... + a^k = accepted tokens per verify step: the
    one conversion from a length (:func:`~simulator.speculative.acceptance_convert.iid_rate_from_length`,
    length = 1 + accepted), held to [0, 1] at the ends a server's counters can reach."""
    if k <= 0 or mean_accepted_per_step <= 0:
        return 0.0
    if mean_accepted_per_step >= k:
        return 1.0
    return iid_rate_from_length(1 + mean_accepted_per_step, k)


def _missing(counts: Snapshot, names: Sequence[str]) -> list[str]:
    return [COUNTERS[name] for name in names if getattr(counts, name) is None]


def acceptance_from_counters(counts: Snapshot, expected_k: Optional[int], source: str, force: bool = False, warnings: Optional[list] = None) -> MeasuredAcceptance:
    """The acceptance a server measured, from counter deltas.

    ``expected_k``: None infers it (and treats absent counters as "speculation off"); 0 says
    speculation is off; k > 0 requires the counters and checks that they agree with k.
    """
    if expected_k == 0 or (expected_k is None and counts.engine is None and not counts.accepted_per_pos):
        return MeasuredAcceptance(None, 0, None, None, (), (), "speculative decoding off: no spec-decode counters" if expected_k is None else "speculative decoding off (k = 0 given)")
    if counts.drafts is not None or counts.accepted_per_pos:
        return _v1(counts, expected_k, source, force, warnings if warnings is not None else [])
    if counts.emitted_tokens is not None:
        return _v0(counts, expected_k, source)
    raise ConfigError(
        f"speculative decoding was expected (k = {expected_k}) but {spec_counter_problem(counts, source)}; is the server running with --speculative-config?"
    )


def check_no_speculation_seen(tokens_per_decode_chunk: Optional[float], source: str, counts: Snapshot = Snapshot()) -> None:
    """Without spec-decode counters and without k, speculation looks off; but a server that
    streamed more than one token per decode chunk generated several per step.  Refuse to
    call that "off": the acceptance would silently be lost."""
    if tokens_per_decode_chunk is None or tokens_per_decode_chunk <= 1 + 1e-9:
        return
    raise ConfigError(
        f"{source}: the server streamed {tokens_per_decode_chunk:.3f} tokens per decode chunk, so it generated several tokens "
        f"per step (speculative decoding), but {spec_counter_problem(counts, 'its /metrics')}; "
        "acceptance cannot be calibrated without them. Run vLLM with statistics logging on (no --disable-log-stats) and a version "
        "that exports them, and replay again. If speculation really was off (the server merges steps into one chunk, e.g. a stream "
        "interval above 1), pass --num-speculative-tokens 0."
    )


def _v1(counts: Snapshot, expected_k: Optional[int], source: str, force: bool = False, warnings: Optional[list] = None) -> MeasuredAcceptance:
    missing = _missing(counts, V1_NEEDS) + ([] if counts.accepted_per_pos else [PER_POSITION])
    if missing:
        raise ConfigError(f"{source}: V1 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if counts.drafts <= 0 or counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    counted = max(counts.accepted_per_pos) + 1
    k = counted
    if expected_k is not None and expected_k != counted:
        problem = f"{source}: the server counts acceptance for {counted} draft positions but k = {expected_k} was given"
        if not force:
            raise ConfigError(f"{problem}; pass the server's k (or leave --num-speculative-tokens out to read it from the counters), or --force to calibrate with k = {expected_k}")
        # the given k wins: positions the server did not count are taken as never accepted
        warnings.append(f"{problem} (calibrated with k = {expected_k} anyway: --force; " + ("positions beyond the counters' count as never accepted)" if expected_k > counted else f"positions {expected_k}..{counted - 1} of the counters are left out)") + "; the acceptance rate and length are the given k's")
        k = expected_k
    unconditional = tuple(counts.accepted_per_pos.get(i, 0.0) / counts.drafts for i in range(k))
    at_k = _v1_counts_at_k(counts, counted, k)
    return MeasuredAcceptance(
        engine="v1",
        num_speculative_tokens=k,
        acceptance_rate=at_k["accepted_tokens"] / at_k["draft_tokens"],
        mean_acceptance_length=1 + at_k["accepted_tokens"] / at_k["drafts"],
        acceptance_per_position=AcceptanceInput.given(unconditional=unconditional, names={"unconditional": f"{PER_POSITION} / drafts"}).per_position,
        acceptance_per_position_unconditional=unconditional,
        method="V1 counters: per-position accepted / drafts, made conditional",
        counts_at_k=at_k,
    )


def _v1_counts_at_k(counts: Snapshot, counted: int, k: int) -> dict:
    """Drafts, draft tokens and accepted tokens as a server drafting ``k`` tokens would have
    counted them, the server's counters being for ``counted`` positions: its own counts when
    the two agree; under --force, draft tokens scaled to k per draft and accepted tokens those
    of the first k positions, so the summary rates describe the run that is simulated (the
    server's would put a -23% acceptance "error" in the report that is not the simulator's)."""
    if k == counted:
        return {"drafts": counts.drafts, "draft_tokens": counts.draft_tokens, "accepted_tokens": counts.accepted_tokens}
    return {
        "drafts": counts.drafts,
        "draft_tokens": counts.draft_tokens * k / counted,
        "accepted_tokens": sum(counts.accepted_per_pos.get(i, 0.0) for i in range(k)),
    }


def _v0(counts: Snapshot, expected_k: Optional[int], source: str) -> MeasuredAcceptance:
    missing = _missing(counts, V0_NEEDS)
    if missing:
        raise ConfigError(f"{source}: V0 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if not expected_k:
        raise ConfigError(f"{source}: V0 counters do not say how many tokens each draft proposes; pass --num-speculative-tokens (the k of the server's --speculative-config)")
    if counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    k = expected_k
    steps = counts.draft_tokens / k
    mean_accepted = max(0.0, counts.emitted_tokens / steps - 1)
    alpha = iid_alpha(mean_accepted, k)
    return MeasuredAcceptance(
        engine="v0",
        num_speculative_tokens=k,
        acceptance_rate=mean_accepted / k,
        mean_acceptance_length=1 + mean_accepted,
        acceptance_per_position=AcceptanceInput.given(rate=alpha).conditional(k),
        acceptance_per_position_unconditional=tuple(alpha ** (i + 1) for i in range(k)),
        method="V0 emitted tokens: i.i.d. rate matching emitted tokens per verify step",
        counts_at_k={"drafts": steps, "draft_tokens": counts.draft_tokens, "accepted_tokens": mean_accepted * steps},
    )


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
        closing = files.get("after")
        closed_by_next = False
        if closing is None and position + 1 < len(order) and "before" in sessions[order[position + 1]]:
            closing, closed_by_next = sessions[order[position + 1]]["before"], True
        if closing is None:
            ended = STATES[state] if state != "unrecorded" else "no closing scrape"
            drop(session, f"{ended}, and no later session to close it")
            continue
        before, after = _read_scrape(files["before"]), _read_scrape(closing)
        restarted = _restart(before, after)
        if restarted:
            drop(session, (f"{STATES[state]}; " if closed_by_next and state == "closing_scrape_failed" else "") + restarted)
            continue
        try:
            step = delta(before, after, f"{files['before'].name} -> {closing.name}")
        except CounterWentDown as err:
            drop(session, str(err))
            continue
        records = [r for r in history if r.get("session") == session]
        if before.process_start_time is None or after.process_start_time is None:
            unnoticed = _unnoticed_restart(step, records)
            if unnoticed:
                drop(session, unnoticed)
                continue
            if closed_by_next:
                # no counter can show that the scrape closing it comes from the same process: a
                # restart in between, and any traffic after it, would be counted as this session's
                drop(session, f"{STATES[state]}, and the server exports no process_start_time_seconds to show that session {order[position + 1]}'s opening scrape, which would close it, comes from the same process")
                continue
        if closed_by_next:
            how = {"closing_scrape_failed": "its closing scrape failed (the server became unreachable; the same process answered again, by process_start_time_seconds)", "interrupted": "interrupted (Ctrl-C)", "killed": "the replay process was killed"}.get(state, "no closing scrape (interrupted)")
            notes.append(f"session {session}: {how}; closed by session {order[position + 1]}'s opening scrape")
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


def proposal_probability(counts: Snapshot, records: list, k: int, notes: list) -> tuple[Optional[float], Optional[float], Optional[str]]:
    """(drafts per decode chunk, proposal probability, how) from the counters and the chunks
    the client saw in the sessions used (``records``).

    vLLM counts a draft only at decode steps where the proposer produced one (an n-gram
    proposer finds no match at some) and streams one chunk per request per step, so drafts
    over decode chunks is the probability of a draft at a decode step.  V1 counts drafts;
    with V0's counters they are draft tokens / k.  Failed requests are weighed out: the
    counters hold their drafts, the client saw only some of their chunks, so the drafts are
    scaled by the complete requests' share of the decode tokens the server generated
    (``vllm:generation_tokens_total`` less one first token per request that got one) and set
    against the complete requests' decode chunks.  That share also removes other clients'
    traffic.  Above 1 (the server merged steps into a chunk) it is capped at 1.
    """
    if k == 0:
        return None, None, None
    drafts = counts.drafts if counts.drafts is not None else (counts.draft_tokens / k if counts.draft_tokens is not None else None)
    complete = [r for r in records if r.get("status") == "ok" and not r.get("length_mismatch")]
    chunks = sum(max(0, len(r["chunks"]) - 1) for r in complete)
    if drafts is None or chunks == 0:
        notes.append("the proposer's draft probability per decode step is unknown (no drafts counter or no decode chunks); simulated as a draft at every step")
        return None, None, None
    how = "V1 drafts" if counts.drafts is not None else f"V0 draft tokens / k = {k}"
    share = 1.0
    if counts.generation_tokens is not None:
        first_tokens = sum(1 for r in records if r.get("chunks"))
        generated_decode = counts.generation_tokens - first_tokens
        complete_decode = sum(r["expected_output_tokens"] - 1 for r in complete)
        if generated_decode > 0:
            share = min(1.0, complete_decode / generated_decode)
        how += f", times the complete requests' share {share:.3f} of generated decode tokens, per decode chunk of complete requests"
    else:
        how += " per decode chunk of complete requests (no generation counter to weigh failed requests out)"
    ratio = drafts * share / chunks
    probability = min(1.0, ratio)
    if probability < 1.0:
        notes.append(f"the proposer drafted at {probability:.3f} of decode steps ({how}; n-gram misses run as plain decode steps); the simulation uses this proposal probability")
    return ratio, probability, how


def check_k(acceptance: MeasuredAcceptance, counts: Snapshot, records: list, force: bool, warnings: list) -> None:
    """The client's chunks bound k: a decode chunk is one engine step, 1 + accepted tokens, so
    a chunk of n tokens proves k >= n - 1.  With V0 counters (k given, not counted) a k that is
    too large shows as chunks that never reach the lengths its fitted acceptance expects."""
    k = acceptance.num_speculative_tokens
    sizes = [c[1] for r in records for c in (r.get("chunks") or [])[1:]]
    if k == 0 or not sizes or any(size is None for size in sizes):
        return
    largest = max(sizes)
    problem = None
    if largest - 1 > k:
        problem = f"k = {k} is too small: the client received decode chunks of {largest} tokens, which proves k >= {largest - 1} (a chunk is one engine step: 1 + accepted tokens)"
    elif acceptance.engine == "v0" and counts.draft_tokens:
        alpha = acceptance.acceptance_per_position[0]
        expected = counts.draft_tokens / k * alpha**largest if largest <= k else 0.0
        if expected >= K_TOO_LARGE_EXPECTED_CHUNKS:
            problem = (
                f"k = {k} looks too large: at that k the counters give an i.i.d. acceptance of {alpha:.3f}, so about {expected:.0f} decode chunks "
                f"longer than {largest} tokens were expected, and the client saw none; the chunks suggest k = {largest - 1}"
            )
    if problem is None:
        return
    if not force:
        raise ConfigError(f"--num-speculative-tokens: {problem}; pass the server's k, or --force if the server merges steps into one chunk")
    warnings.append(f"{problem} (calibrated anyway: --force)")


def calibrate(replay_dir: Path, expected_k: Optional[int] = None, force: bool = False) -> dict:
    """The calibration record for a replay directory (pure data; the caller writes it)."""
    if expected_k is not None and not (is_int(expected_k) and expected_k >= 0):
        raise ConfigError(f"--num-speculative-tokens {expected_k!r}: must be an integer >= 0 (the k the server ran with; 0 = speculation off)")
    replay_dir = Path(replay_dir)
    results = read_results(replay_dir)
    if results is None:
        raise ConfigError(f"--replay {replay_dir}: no replay results (replay.jsonl) found; pass the directory that replay wrote")
    counters = collect_counters(replay_dir, results.history, read_summary(replay_dir), force)
    counts, used, notes = counters.total, counters.used, list(counters.notes)
    warnings: list[str] = list(counters.warnings)
    records = [r for r in results.history if r.get("session") in used]
    ok = [r for r in results.records.values() if r["status"] == "ok" and not r["length_mismatch"] and r.get("session") in used]
    decode_chunks = sum(len(r["chunks"]) - 1 for r in ok)
    decode_tokens = sum(r["expected_output_tokens"] - 1 for r in ok)
    tokens_per_chunk = decode_tokens / decode_chunks if decode_chunks else None
    if expected_k is None and counts.engine is None and not counts.accepted_per_pos:
        check_no_speculation_seen(tokens_per_chunk, str(replay_dir), counts)
    drafted = counts.drafts if counts.drafts is not None else counts.draft_tokens
    if expected_k == 0 and drafted:
        problem = f"--num-speculative-tokens 0 says speculation was off, but the counters show {drafted:g} {'drafts' if counts.drafts is not None else 'draft tokens'} in the sessions used"
        if not force:
            raise ConfigError(f"{problem}; pass the server's k (or leave it out to read k from the counters), or --force to calibrate as speculation off")
        warnings.append(f"{problem} (calibrated as speculation off anyway: --force)")
    acceptance = acceptance_from_counters(counts, expected_k, str(replay_dir / "scrapes"), force, warnings)
    check_k(acceptance, counts, records, force, warnings)
    if counts.num_gpu_blocks is None:
        notes.append("the server exports no vllm:cache_config_info num_gpu_blocks; the simulator plans memory itself")
    drafts_per_chunk, proposal, how = proposal_probability(counts, records, acceptance.num_speculative_tokens, notes)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "workload_hash": results.workload_hash,
        "model": results.header.get("model"),
        **asdict(acceptance),
        "counts": {name: getattr(counts, name) for name in COUNTERS},
        "accepted_per_position_counts": [counts.accepted_per_pos.get(i, 0.0) for i in range(len(counts.accepted_per_pos))],
        # Client-side cross-checks: a chunk is one engine step unless the server merged several.
        "decode_chunks": decode_chunks,
        "tokens_per_decode_chunk": tokens_per_chunk,
        "drafts_per_decode_chunk": drafts_per_chunk,
        "proposal_probability": proposal,  # what simulate passes on: P(a draft at a decode step)
        "proposal_probability_method": how,
        "kv_cache": {"num_gpu_blocks": counts.num_gpu_blocks, "block_size": counts.block_size},
        "sessions_used": used,
        "sessions_dropped": [d for d in counters.dropped if d["session"] not in {f["session"] for f in counters.flagged}],
        "sessions_flagged": list(counters.flagged),
        "notes": notes,
        "warnings": warnings,
    }


def read_calibration(path: Path) -> dict:
    path = Path(path)
    data = read_json(path, "calibration file")
    check_schema(path, data, SCHEMA, SCHEMA_VERSION)
    check_calibration(path, data)
    return data


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_calibration(path: Path, data: dict) -> None:
    """The fields simulate and compare read have the types calibrate writes; an edited or
    damaged file stops here, naming the field, instead of deep inside the simulator."""

    def need(ok: bool, name: str, value, expected: str) -> None:
        if not ok:
            raise ConfigError(f"calibration file {path}: {name} = {value!r} is wrong, expected {expected}; run calibrate again")

    need(isinstance(data.get("workload_hash"), str), "workload_hash", data.get("workload_hash"), "a string")
    k = data.get("num_speculative_tokens")
    need(is_int(k) and k >= 0, "num_speculative_tokens", k, "an integer >= 0")
    need(data.get("engine") in (None,) + ENGINES, "engine", data.get("engine"), f"null or one of {ENGINES}")
    rates = data.get("acceptance_per_position")
    need(
        isinstance(rates, list) and len(rates) == k and all(_number(p) and 0 <= p <= 1 for p in rates),
        "acceptance_per_position", rates, f"a list of {k} rates in [0, 1] (one per draft position)",
    )
    proposal = data.get("proposal_probability")
    need(proposal is None or (_number(proposal) and 0 < proposal <= 1), "proposal_probability", proposal, "null or a number in (0, 1]")
    for name in ("acceptance_rate", "mean_acceptance_length"):
        need(data.get(name) is None or _number(data.get(name)), name, data.get(name), "null or a number")
    for name in ("notes", "warnings"):
        value = data.get(name, [])
        need(isinstance(value, list) and all(isinstance(v, str) for v in value), name, value, "a list of strings")
    dropped = data.get("sessions_dropped", [])
    need(isinstance(dropped, list) and all(isinstance(d, dict) for d in dropped), "sessions_dropped", dropped, "a list of objects")
    kv = data.get("kv_cache", {})
    need(isinstance(kv, dict), "kv_cache", kv, "an object with num_gpu_blocks and block_size")
    for name in ("num_gpu_blocks", "block_size"):
        need(kv.get(name) is None or (is_int(kv[name]) and kv[name] > 0), f"kv_cache.{name}", kv.get(name), "null or a positive integer")
