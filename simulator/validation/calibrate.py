"""Acceptance and KV budget from a replay's ``/metrics`` scrapes.

The math is pure (:func:`acceptance_from_counters`, :func:`conditional_from_unconditional`,
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

from scipy.optimize import brentq

from simulator.errors import ConfigError
from simulator.inputs import read_json
from simulator.validation.files import check_schema
from simulator.validation.metrics import COUNTERS, PER_POSITION, CounterWentDown, Snapshot, add, delta, parse_metrics
from simulator.validation.replay_files import list_scrapes, read_results

SCHEMA = "vidur-specdec/validation-calibration"
SCHEMA_VERSION = 1
V1_NEEDS = ("drafts", "draft_tokens", "accepted_tokens")
V0_NEEDS = ("emitted_tokens", "draft_tokens", "accepted_tokens")


@dataclass(frozen=True)
class Acceptance:
    engine: Optional[str]  # "v1", "v0", or None when speculation is off
    num_speculative_tokens: int
    acceptance_rate: Optional[float]
    mean_acceptance_length: Optional[float]
    acceptance_per_position: tuple  # conditional, what the simulator takes
    acceptance_per_position_unconditional: tuple
    method: str


def conditional_from_unconditional(unconditional: Sequence[float]) -> tuple[float, ...]:
    """p_0 = u_0, p_i = u_i / u_{i-1}; a position never reached gets 0 (it cannot be accepted)."""
    result = []
    previous = 1.0
    for u in unconditional:
        result.append(min(1.0, u / previous) if previous > 0 else 0.0)
        previous = u
    return tuple(result)


def iid_alpha(mean_accepted_per_step: float, k: int) -> float:
    """The i.i.d. per-token rate a with a + a^2 + ... + a^k = accepted tokens per verify step."""
    if k <= 0 or mean_accepted_per_step <= 0:
        return 0.0
    if mean_accepted_per_step >= k:
        return 1.0
    return float(brentq(lambda a: sum(a**i for i in range(1, k + 1)) - mean_accepted_per_step, 0.0, 1.0, xtol=1e-12))


def _missing(counts: Snapshot, names: Sequence[str]) -> list[str]:
    return [COUNTERS[name] for name in names if getattr(counts, name) is None]


def acceptance_from_counters(counts: Snapshot, expected_k: Optional[int], source: str) -> Acceptance:
    """Acceptance from counter deltas.

    ``expected_k``: None infers it (and treats absent counters as "speculation off"); 0 says
    speculation is off; k > 0 requires the counters and checks that they agree with k.
    """
    if expected_k == 0 or (expected_k is None and counts.engine is None and not counts.accepted_per_pos):
        return Acceptance(None, 0, None, None, (), (), "speculative decoding off: no spec-decode counters" if expected_k is None else "speculative decoding off (k = 0 given)")
    if counts.drafts is not None or counts.accepted_per_pos:
        return _v1(counts, expected_k, source)
    if counts.emitted_tokens is not None:
        return _v0(counts, expected_k, source)
    raise ConfigError(
        f"{source}: speculative decoding was expected (k = {expected_k}) but the scrapes hold no spec-decode counters "
        f"(looked for {', '.join(COUNTERS[n] for n in V1_NEEDS)}, {PER_POSITION}); is the server running with --speculative-config?"
    )


def check_no_speculation_seen(tokens_per_decode_chunk: Optional[float], source: str) -> None:
    """Without spec-decode counters and without k, speculation looks off; but a server that
    streamed more than one token per decode chunk generated several per step.  Refuse to
    call that "off": the acceptance would silently be lost."""
    if tokens_per_decode_chunk is None or tokens_per_decode_chunk <= 1 + 1e-9:
        return
    raise ConfigError(
        f"{source}: the server streamed {tokens_per_decode_chunk:.3f} tokens per decode chunk, so it generated several tokens "
        f"per step (speculative decoding), but its /metrics holds no spec-decode counters ({', '.join(COUNTERS[n] for n in V1_NEEDS)}, {PER_POSITION}); "
        "acceptance cannot be calibrated without them. Run vLLM with statistics logging on (no --disable-log-stats) and a version "
        "that exports them, and replay again. If speculation really was off (the server merges steps into one chunk, e.g. a stream "
        "interval above 1), pass --num-speculative-tokens 0."
    )


def _v1(counts: Snapshot, expected_k: Optional[int], source: str) -> Acceptance:
    missing = _missing(counts, V1_NEEDS) + ([] if counts.accepted_per_pos else [PER_POSITION])
    if missing:
        raise ConfigError(f"{source}: V1 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if counts.drafts <= 0 or counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    k = max(counts.accepted_per_pos) + 1
    if expected_k is not None and expected_k != k:
        raise ConfigError(f"{source}: the server counts acceptance for {k} draft positions but k = {expected_k} was given")
    unconditional = tuple(counts.accepted_per_pos.get(i, 0.0) / counts.drafts for i in range(k))
    return Acceptance(
        engine="v1",
        num_speculative_tokens=k,
        acceptance_rate=counts.accepted_tokens / counts.draft_tokens,
        mean_acceptance_length=1 + counts.accepted_tokens / counts.drafts,
        acceptance_per_position=conditional_from_unconditional(unconditional),
        acceptance_per_position_unconditional=unconditional,
        method="V1 counters: per-position accepted / drafts, made conditional",
    )


def _v0(counts: Snapshot, expected_k: Optional[int], source: str) -> Acceptance:
    missing = _missing(counts, V0_NEEDS)
    if missing:
        raise ConfigError(f"{source}: V0 spec-decode counters are incomplete, missing {', '.join(missing)}")
    if not expected_k:
        raise ConfigError(f"{source}: V0 counters do not say how many tokens each draft proposes; pass --num-speculative-tokens")
    if counts.draft_tokens <= 0:
        raise ConfigError(f"{source}: no draft tokens were counted between the scrapes, so acceptance cannot be measured")
    k = expected_k
    steps = counts.draft_tokens / k
    mean_accepted = max(0.0, counts.emitted_tokens / steps - 1)
    alpha = iid_alpha(mean_accepted, k)
    return Acceptance(
        engine="v0",
        num_speculative_tokens=k,
        acceptance_rate=mean_accepted / k,
        mean_acceptance_length=1 + mean_accepted,
        acceptance_per_position=(alpha,) * k,
        acceptance_per_position_unconditional=tuple(alpha ** (i + 1) for i in range(k)),
        method="V0 emitted tokens: i.i.d. rate matching emitted tokens per verify step",
    )


@dataclass(frozen=True)
class Counters:
    """Counter deltas summed over the replay sessions that can be measured."""

    total: Snapshot
    used: list  # session numbers
    dropped: list  # {"session": n, "reason": why it was left out}
    notes: list


def _read_scrape(path: Path) -> Snapshot:
    return parse_metrics(path.read_text(encoding="utf-8"), str(path))


def _restart(before: Snapshot, after: Snapshot) -> Optional[str]:
    """Why ``before`` and ``after`` come from different server processes, or None."""
    if before.process_start_time is None or after.process_start_time is None:
        return None
    if before.process_start_time != after.process_start_time:
        return f"the server restarted between its opening and closing scrapes (process_start_time_seconds {before.process_start_time:.2f} -> {after.process_start_time:.2f})"
    return None


def collect_counters(replay_dir: Path) -> Counters:
    """Counter deltas summed over the valid replay sessions, and what was left out and why.

    A session killed before its closing scrape is closed by the next session's opening
    scrape.  A session whose two scrapes come from different server processes (told apart
    by ``process_start_time_seconds``, or by a counter going down when the server does not
    export it) is left out: its counters cannot be split at the restart.
    """
    sessions = list_scrapes(replay_dir)
    order = list(sessions)
    total: Optional[Snapshot] = None
    used, dropped, notes = [], [], []

    def drop(session: int, reason: str) -> None:
        dropped.append({"session": session, "reason": reason})

    for position, session in enumerate(order):
        files = sessions[session]
        if "before" not in files:
            drop(session, "no opening scrape")
            continue
        closing = files.get("after")
        if closing is None and position + 1 < len(order) and "before" in sessions[order[position + 1]]:
            closing = sessions[order[position + 1]]["before"]
            notes.append(f"session {session}: no closing scrape (interrupted); closed by session {order[position + 1]}'s opening scrape")
        if closing is None:
            drop(session, "no closing scrape (interrupted), and no later session to close it")
            continue
        before, after = _read_scrape(files["before"]), _read_scrape(closing)
        restarted = _restart(before, after)
        if restarted:
            drop(session, restarted)
            continue
        try:
            step = delta(before, after, f"{files['before'].name} -> {closing.name}")
        except CounterWentDown as err:
            drop(session, str(err))
            continue
        total = step if total is None else add(total, step)
        used.append(session)
        if before.process_start_time is None:
            notes.append(f"session {session}: the server exports no process_start_time_seconds, so a restart that left every counter higher than before would go unnoticed")
    if total is None:
        why = "; ".join(f"session {d['session']}: {d['reason']}" for d in dropped) or "no scrapes"
        raise ConfigError(f"{replay_dir}: no replay session can be measured ({why}); replay again against a server that stays up")
    notes += [f"session {d['session']} left out: {d['reason']}" for d in dropped]
    return Counters(total, used, dropped, notes)


def proposal_probability(counts: Snapshot, history, used: list, k: int, notes: list) -> tuple[Optional[float], Optional[float]]:
    """(drafts per decode chunk, proposal probability) from V1's drafts counter and the chunks
    the client saw.

    vLLM counts a draft only at decode steps where the proposer produced one (an n-gram
    proposer finds no match at some), and streams one chunk per request per step, so drafts
    over decode chunks is the probability of a draft at a decode step.  Every record of the
    used sessions counts (failed ones too: their drafts are in the counters), the first chunk
    of each being the prefill's.  Above 1 (the server merged steps into a chunk, or ran steps
    the client never saw) it is capped at 1.
    """
    if k == 0:
        return None, None
    chunks = sum(max(0, len(r.get("chunks") or []) - 1) for r in history if r.get("session") in used)
    if counts.drafts is None or chunks == 0:
        notes.append("the proposer's draft probability per decode step is unknown (no drafts counter or no decode chunks); simulated as a draft at every step")
        return None, None
    ratio = counts.drafts / chunks
    probability = min(1.0, ratio)
    if probability < 1.0:
        notes.append(f"the proposer drafted at {probability:.3f} of decode steps (drafts per decode chunk; n-gram misses run as plain decode steps); the simulation uses this proposal probability")
    return ratio, probability


def calibrate(replay_dir: Path, expected_k: Optional[int] = None) -> dict:
    """The calibration record for a replay directory (pure data; the caller writes it)."""
    replay_dir = Path(replay_dir)
    results = read_results(replay_dir)
    if results is None:
        raise ConfigError(f"{replay_dir}: no replay results (replay.jsonl) found")
    counters = collect_counters(replay_dir)
    counts, used, notes = counters.total, counters.used, list(counters.notes)
    ok = [r for r in results.records.values() if r["status"] == "ok" and not r["length_mismatch"] and r.get("session") in used]
    decode_chunks = sum(len(r["chunks"]) - 1 for r in ok)
    decode_tokens = sum(r["expected_output_tokens"] - 1 for r in ok)
    tokens_per_chunk = decode_tokens / decode_chunks if decode_chunks else None
    if expected_k is None and counts.engine is None and not counts.accepted_per_pos:
        check_no_speculation_seen(tokens_per_chunk, str(replay_dir))
    acceptance = acceptance_from_counters(counts, expected_k, str(replay_dir / "scrapes"))
    if counts.num_gpu_blocks is None:
        notes.append("the server exports no vllm:cache_config_info num_gpu_blocks; the simulator plans memory itself")
    drafts_per_chunk, proposal = proposal_probability(counts, results.history, used, acceptance.num_speculative_tokens, notes)
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
        "kv_cache": {"num_gpu_blocks": counts.num_gpu_blocks, "block_size": counts.block_size},
        "sessions_used": used,
        "sessions_dropped": counters.dropped,
        "notes": notes,
    }


def read_calibration(path: Path) -> dict:
    path = Path(path)
    data = read_json(path, "calibration file")
    check_schema(path, data, SCHEMA, SCHEMA_VERSION)
    return data
