"""Request lengths drawn from a Vidur length trace, and the workloads built from them.

A Vidur trace CSV (``../shared/vidur-traces/`` holds Vidur's own) has one row per request with
``num_prefill_tokens`` and ``num_decode_tokens``.  Lengths are drawn from its rows with a
seeded generator, so the same file, count and seed give the same requests.  This is the one trace
reader; what happens to an unusable row is the caller's stated policy (see :func:`read_trace`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from simulator.runs.config import ClosedLoopWorkload, ExplicitWorkload
from simulator.util.errors import ConfigError

TRACE_COLUMNS = ("num_prefill_tokens", "num_decode_tokens")


TRACE_POLICIES = ("refuse", "skip")


def read_trace(path, max_total_tokens: Optional[int], unusable: str = "refuse") -> np.ndarray:
    """(prompt, output) rows of a trace, as an int array of shape (rows, 2).

    A row is unusable when a length is missing, infinite, not an integer, below 1, or when prompt + output
    exceeds ``max_total_tokens`` (the model's or server's context; None: no limit).  The policy
    is the caller's, stated at the call: ``"refuse"`` (the simulator's: the user chose the trace
    and the model, so the first such row is an error naming it) or ``"skip"`` (the validation
    workload's: only rows whose exact lengths a server can serve are replayed; an error only if
    none is left).  A file that cannot be read as a length trace is refused under both.
    """
    if unusable not in TRACE_POLICIES:
        raise ValueError(f"unusable = {unusable!r}: one of {TRACE_POLICIES}")
    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)  # the cells as written: a refusal quotes them
    except FileNotFoundError:
        raise ConfigError(f"trace {path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"trace {path}: is a directory, expected a CSV file") from None
    except pd.errors.EmptyDataError:
        raise ConfigError(f"trace {path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ConfigError(f"trace {path}: not a readable CSV ({exc})") from None
    missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"trace {path}: missing column(s) {missing}; a Vidur length trace has {list(TRACE_COLUMNS)}")
    if frame.empty:
        raise ConfigError(f"trace {path}: has a header but no rows")
    lengths = frame[list(TRACE_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    malformed = (
        lengths.isna().any(axis=1) | ~np.isfinite(lengths).all(axis=1) | (lengths < 1).any(axis=1) | (lengths != lengths.round()).any(axis=1)
    ).to_numpy()
    totals = lengths.fillna(0).sum(axis=1).to_numpy()
    too_long = ~malformed & (totals > max_total_tokens) if max_total_tokens is not None else np.zeros(len(frame), dtype=bool)
    if unusable == "skip":
        kept = ~(malformed | too_long)
        if not kept.any():
            within = f" within {max_total_tokens} total tokens" if max_total_tokens is not None else ""
            raise ConfigError(f"trace {path}: no row has integer lengths >= 1{within}")
        return lengths[kept].to_numpy(dtype=np.int64)
    if malformed.any():
        row = int(np.flatnonzero(malformed)[0])
        shown = ", ".join(f"{column} = {frame.loc[row, column] or '(empty)'}" for column in TRACE_COLUMNS)  # as the file has them
        raise ConfigError(f"trace {path}: data row {row + 1} has {shown}; lengths must be integers >= 1")
    if too_long.any():
        row = int(np.flatnonzero(too_long)[0])
        raise ConfigError(
            f"trace {path}: data row {row + 1} needs {int(totals[row])} tokens (prompt + output), beyond the model's "
            f"context of {max_total_tokens}; {int(too_long.sum())} of {len(frame)} rows do; filter the trace or pick a longer-context model"
        )
    return lengths.to_numpy(dtype=np.int64)


def draw_lengths(lengths: np.ndarray, num_requests: int, seed: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``num_requests`` rows drawn uniformly with replacement, seeded."""
    if num_requests <= 0:
        raise ConfigError(f"num_requests = {num_requests}: must be a positive integer")
    rows = np.random.default_rng(seed).integers(0, len(lengths), size=num_requests)
    chosen = lengths[rows]
    return tuple(int(p) for p in chosen[:, 0]), tuple(int(o) for o in chosen[:, 1])


def random_lengths(
    num_requests: int, prompt_tokens: int, output_tokens: int, range_ratio: float, seed: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Lengths drawn as ``vllm bench serve --dataset-name random --random-range-ratio r`` draws them:
    integers uniform in [L(1 - r), L(1 + r)] (at least 1) around each given length L, seeded."""
    if not (isinstance(range_ratio, (int, float)) and 0 <= range_ratio < 1):
        raise ConfigError(f"random range ratio {range_ratio!r}: must be a number in [0, 1), as in vllm bench serve")
    if num_requests <= 0:
        raise ConfigError(f"num_requests = {num_requests}: must be a positive integer")
    rng = np.random.default_rng([seed, 2])

    def draw(length: int) -> tuple[int, ...]:
        low, high = max(1, int(length * (1 - range_ratio))), max(1, int(length * (1 + range_ratio)))
        return tuple(int(v) for v in rng.integers(low, high + 1, size=num_requests))

    return draw(prompt_tokens), draw(output_tokens)


def spread_closed_loop(
    concurrency: int, num_requests: int, prompt_tokens: int, output_tokens: int, range_ratio: float, seed: int
) -> ClosedLoopWorkload:
    """A closed loop whose lengths are drawn uniformly around the given ones, as ``vllm bench serve
    --random-range-ratio`` does (:func:`random_lengths`): fixed lengths finish in lockstep, so a
    closed loop would refill in waves; a spread lets completions and arrivals interleave."""
    if not (isinstance(num_requests, int) and not isinstance(num_requests, bool) and num_requests > 0):
        raise ConfigError(f"num_requests = {num_requests!r}: must be a positive integer")
    prompts, outputs = random_lengths(num_requests, prompt_tokens, output_tokens, range_ratio, seed)
    return ClosedLoopWorkload(concurrency, prompts, outputs)


def poisson_arrivals(num_requests: int, rate: float, seed: int) -> tuple[float, ...]:
    """Poisson arrival times (exponential gaps, uncapped), seeded; the first request at 0."""
    gaps = np.random.default_rng([seed, 1]).exponential(1.0 / rate, size=num_requests)
    gaps[0] = 0.0
    return tuple(float(t) for t in np.cumsum(gaps))


def trace_workload(path, max_total_tokens: int, num_requests: int, seed: int, *, rate: float | None = None, concurrency: int | None = None):
    """A workload whose lengths come from a trace: Poisson at ``rate`` or closed loop at ``concurrency``."""
    if (rate is None) == (concurrency is None):
        raise ConfigError("a trace workload needs exactly one of an arrival rate or a concurrency")
    prompts, outputs = draw_lengths(read_trace(path, max_total_tokens), num_requests, seed)
    if concurrency is not None:
        return ClosedLoopWorkload(concurrency, prompts, outputs)
    return ExplicitWorkload(poisson_arrivals(num_requests, rate, seed), prompts, outputs)
