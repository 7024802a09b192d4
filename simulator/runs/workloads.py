"""Request lengths drawn from a Vidur length trace or a declared length distribution, and the
workloads built from them.

A Vidur trace CSV (``../shared/vidur-traces/`` holds Vidur's own) has one row per request with
``num_prefill_tokens`` and ``num_decode_tokens``.  Lengths are drawn from its rows with a
seeded generator, so the same file, count and seed give the same requests.  This is the one trace
reader; what happens to an unusable row is the caller's stated policy (see :func:`read_trace`).
A published row's lengths are drawn from its dataset's declared shape (:class:`LengthShape`) around
the row's mean, with the same seeded-generator rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload
from simulator.util.errors import ConfigError

if TYPE_CHECKING:  # annotations only
    import pandas as pd

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
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
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


# --- lengths drawn from a declared distribution (data/calibration/length_distributions.toml) -------

SHAPE_KINDS = ("fixed", "quantiles", "exponential")
_MEAN_GRID = 8192  # midpoints on which a quantile shape's mean is integrated (exact to well under a token)


@dataclass(frozen=True)
class LengthShape:
    """The shape of one side's lengths (prompt or output), scaled to whatever mean a row needs.

    A published row states a mean (or its dataset does); the shape says how requests spread around
    it, so a closed loop keeps its stragglers.  ``"fixed"``: every request at the mean.
    ``"quantiles"``: a source's empirical quantiles (``tokens`` at ``probabilities``, 0 to 1),
    linear between them, scaled.  ``"exponential"``: each of ``turns`` answers exponential, the
    request's length their sum.  ``max_tokens`` caps one draw (a quantile draw, or one turn: a
    benchmark's ``max_new_tokens``); the scale is solved so the mean after the cap is the mean asked
    for, so a row's stated mean is kept exactly in expectation.
    """

    kind: str
    probabilities: tuple[float, ...] = ()
    tokens: tuple[float, ...] = ()
    turns: int = 1
    max_tokens: Optional[int] = None

    def __post_init__(self):
        if self.kind not in SHAPE_KINDS:
            raise ConfigError(f"length shape kind = {self.kind!r}: one of {list(SHAPE_KINDS)}")
        if self.kind == "quantiles":
            p, q = np.asarray(self.probabilities, dtype=float), np.asarray(self.tokens, dtype=float)
            if len(p) < 2 or len(p) != len(q):
                raise ConfigError(f"length shape probabilities/tokens: two or more of each, as many tokens as probabilities (have {len(p)} and {len(q)})")
            if p[0] != 0 or p[-1] != 1 or not np.all(np.diff(p) > 0):
                raise ConfigError(f"length shape probabilities = {list(self.probabilities)}: must rise strictly from 0 to 1")
            if not (np.all(np.isfinite(q)) and q[0] >= 1 and np.all(np.diff(q) >= 0)):
                raise ConfigError(f"length shape tokens = {list(self.tokens)}: must be finite, >= 1 and non-decreasing")
        elif self.probabilities or self.tokens:
            raise ConfigError(f"length shape kind = {self.kind!r}: probabilities and tokens are for a \"quantiles\" shape")
        if not (_positive_int(self.turns) and (self.turns == 1 or self.kind == "exponential")):
            raise ConfigError(f"length shape turns = {self.turns!r}: a positive integer, above 1 only for an \"exponential\" shape")
        if self.max_tokens is not None and not (_positive_int(self.max_tokens) and self.kind != "fixed"):
            raise ConfigError(f"length shape max_tokens = {self.max_tokens!r}: a positive integer, for a drawn (not fixed) shape")

    def _capped_mean(self, scale: float) -> float:
        """The mean of one request's length at ``scale`` (a quantile shape's multiplier, an exponential's mean per turn)."""
        cap = np.inf if self.max_tokens is None else self.max_tokens
        if self.kind == "quantiles":
            u = (np.arange(_MEAN_GRID) + 0.5) / _MEAN_GRID
            return float(np.minimum(scale * np.interp(u, self.probabilities, self.tokens), cap).mean())
        return self.turns * scale * (1.0 if cap == np.inf else -np.expm1(-cap / scale))  # E[min(X, C)] = theta (1 - e^(-C/theta))

    def scale_for(self, mean: float) -> float:
        """The scale whose capped mean is ``mean`` (bisection: the capped mean rises with the scale)."""
        ceiling = np.inf if self.max_tokens is None else self.max_tokens * self.turns
        if not mean < ceiling:
            raise ConfigError(f"a mean of {mean:g} tokens cannot be drawn under a cap of {self.max_tokens} tokens per draw ({self.turns} per request)")
        low, high = 0.0, 1.0
        while self._capped_mean(high) < mean:
            high *= 2
        for _ in range(100):
            middle = (low + high) / 2
            low, high = (middle, high) if self._capped_mean(middle) < mean else (low, middle)
        return (low + high) / 2

    def draw(self, mean: int, num_requests: int, rng: np.random.Generator) -> tuple[int, ...]:
        """``num_requests`` lengths of this shape whose expected mean is ``mean`` (each >= 1)."""
        if not _positive_int(mean):
            raise ConfigError(f"mean length = {mean!r}: must be a positive integer")
        if not _positive_int(num_requests):
            raise ConfigError(f"num_requests = {num_requests!r}: must be a positive integer")
        if self.kind == "fixed":
            return (mean,) * num_requests
        scale, cap = self.scale_for(mean), np.inf if self.max_tokens is None else self.max_tokens
        if self.kind == "quantiles":
            values = np.minimum(scale * np.interp(rng.random(num_requests), self.probabilities, self.tokens), cap)
        else:
            values = np.minimum(-scale * np.log1p(-rng.random((num_requests, self.turns))), cap).sum(axis=1)
        return tuple(max(1, int(round(v))) for v in values)


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def sampled_lengths(
    prompt_shape: LengthShape, output_shape: LengthShape, prompt_tokens: int, output_tokens: int, num_requests: int, seed: int, max_total_tokens: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Prompts and outputs drawn independently around the given means, seeded (one stream per side,
    so changing one side's shape leaves the other's draws as they were), then clipped to the model's
    context: a prompt to ``max_total_tokens - 1``, its output to what the context leaves.  The trace
    reader refuses or skips a request beyond the context; a drawn one is a point of a continuous
    shape, so it is cut, as a server's ``max_tokens`` would cut it."""
    if not _positive_int(max_total_tokens) or max_total_tokens < 2:
        raise ConfigError(f"max_total_tokens = {max_total_tokens!r}: must be an integer >= 2 (one prompt and one output token)")
    prompts = prompt_shape.draw(prompt_tokens, num_requests, np.random.default_rng([seed, 3]))
    outputs = output_shape.draw(output_tokens, num_requests, np.random.default_rng([seed, 4]))
    prompts = tuple(min(p, max_total_tokens - 1) for p in prompts)
    return prompts, tuple(min(o, max_total_tokens - p) for p, o in zip(prompts, outputs))
