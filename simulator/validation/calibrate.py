"""Acceptance and KV budget from a replay's ``/metrics`` scrapes.

The math is pure (:func:`~counter_acceptance.acceptance_from_counters`, with the conversions of
:class:`~simulator.speculative.acceptance_convert.AcceptanceInput`); which sessions' scrapes
count is :func:`~session_counters.collect_counters`'s; :func:`calibrate` reads a replay
directory through both and cross-checks the counters against the chunks the client saw (k,
the proposal probability), and :func:`read_calibration` reads the record back.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json
from simulator.validation.counter_acceptance import MeasuredAcceptance, acceptance_from_counters
from simulator.validation.files import check_schema
from simulator.validation.metrics import COUNTERS, Snapshot, spec_counter_problem
from simulator.validation.replay_files import read_results, read_summary
from simulator.validation.session_counters import collect_counters
from simulator.validation.workload import is_int

SCHEMA = "vidur-specdec/validation-calibration"
SCHEMA_VERSION = 1
ENGINES = ("v1", "v0")
# k looks too large when, at that k and the acceptance the counters then give, at least this
# many decode chunks longer than the longest one seen were expected (P(none) ~ e^-20).
K_TOO_LARGE_EXPECTED_CHUNKS = 20.0


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
