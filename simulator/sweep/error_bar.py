"""How far to trust a simulated speedup: the error bar of check rows of the same regime, and the
rule that switches speculation off where that error reaches below 1×.

A pays-off answer is a simulated speedup with a band from the verify-cost bounds.  The band says
how much the verify step's attention could cost; it does not say how well the whole speculative
step is priced.  The published check rows do: each measured speedup against the one simulated
for it.  A recommendation carries the errors of the rows closest to its own *regime*:

* the **load range** a concurrency falls in: one request in flight, 2-7, or 8 and more (or an
  open loop at 2 req/s and more): the terms that decide a speedup differ in each;
* the **proposer class**: a draft network (draft model, EAGLE head, MTP layers, a parallel
  drafter) or a lookup in the tokens so far (n-gram, suffix): the kind's own fact
  (:attr:`ProposerKind.drafts_with`);
* the **engine** (vLLM, SGLang), then its **version series** (vLLM before 0.11, synchronous,
  piecewise graphs; 0.11 and later; unstated), then the **tensor parallelism** (1 or more).

The rows matching every key are used when there are at least :data:`MIN_ROWS` of them from
:data:`MIN_SOURCES` sources or more (one source's rows share its setting); otherwise the
least important key is dropped (TP first, then the version, the engine, the proposer class and
last the load), and the bar says which keys it matched.  Its range is the smallest and largest
signed error of those rows, in percent of the measured speedup (simulated = measured x (1 + e)).

**The rule.** A measured speedup ``s`` simulated as ``s x (1 + e)`` is ``simulated / (1 + e)``,
so a simulated band ``[low, high]`` with errors ``[e_min, e_max]`` is, measured,
``[low / (1 + e_max), high / (1 + e_min)]``.  Where that guarded low is below 1×, speculation
may lose, and the recommendation does not take the risk: at each concurrency the schedule runs
the k with the highest simulated speedup among those whose guarded low is at least 1×, and k = 0
where none is; the fixed k (for a vLLM without a schedule) is the best on average among those
whose guarded low is at least 1× at every concurrency simulated, none where no k is.

Pure: values in, values out (the rows come from ``data/results/published.csv`` through
:mod:`simulator.published.speedup_checks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

MIN_ROWS = 3  # a bar from fewer rows is a guess: relax the regime until this many match
MIN_SOURCES = 2  # ... from at least this many sources (one source's rows share its setting's error)
KEYS = ("load", "proposer_class", "engine", "version_series", "tensor_parallel")  # most important first
KEY_WORDS = {
    "load": "load range",
    "proposer_class": "proposer class",
    "engine": "engine",
    "version_series": "engine version",
    "tensor_parallel": "tensor parallelism",
    "fitted": "the fitted profile's held-out levels",
}
NETWORK, LOOKUP = "draft network", "lookup"
LOAD_ONE, LOAD_FEW, LOAD_MANY = "1 in flight", "2-7 in flight", ">= 8 in flight"


def load_range(in_flight: Optional[float] = None, qps: Optional[float] = None) -> str:
    """The load range of a closed loop's requests in flight (or a batch size), or of an open
    loop's request rate (2 req/s and more counts as load, as the check rows' sources run it)."""
    if in_flight is not None and not _nan(in_flight):
        return LOAD_ONE if in_flight <= 1 else LOAD_FEW if in_flight < 8 else LOAD_MANY
    if qps is not None and not _nan(qps):
        return LOAD_MANY if qps >= 2 else LOAD_FEW
    raise ValueError("a load range needs requests in flight or a request rate")


def version_series(engine: str, version: Optional[str]) -> str:
    """vLLM's version series as the step differs: before 0.11 (piecewise graphs, synchronous),
    0.11 and later, or unstated; another engine's versions are one series."""
    if engine != "vllm":
        return f"{engine}"
    if not version:
        return "vllm (version unstated)"
    from packaging.version import Version

    return "vllm >= 0.11" if Version(version) >= Version("0.11.0") else "vllm < 0.11"


def proposer_class(proposer: str) -> str:
    """A draft network or a lookup, as the proposer kind says it drafts."""
    from simulator.speculative.proposers import kind
    from simulator.speculative.proposers.base import DraftSource

    return LOOKUP if kind(proposer).drafts_with is DraftSource.NOTHING else NETWORK


@dataclass(frozen=True)
class Regime:
    """Where a speedup is measured or simulated."""

    load: str
    proposer_class: str
    engine: str
    version_series: str
    tensor_parallel: str  # "TP 1" or "TP >= 2"

    @classmethod
    def of(cls, *, proposer: str, engine: str, version: Optional[str], tensor_parallel_size: int,
           in_flight: Optional[float] = None, qps: Optional[float] = None) -> "Regime":
        return cls(
            load=load_range(in_flight, qps),
            proposer_class=proposer_class(proposer),
            engine=engine,
            version_series=version_series(engine, version),
            tensor_parallel="TP 1" if int(tensor_parallel_size) == 1 else "TP >= 2",
        )


@dataclass(frozen=True)
class SpeedupCheck:
    """One check row's speedup error: simulated / measured - 1, in percent."""

    id: str
    source: str
    regime: Regime
    error_pct: float


@dataclass(frozen=True)
class ErrorBar:
    """The signed speedup errors of the check rows closest to a regime."""

    low_pct: float
    high_pct: float
    rows: int
    sources: int
    matched: tuple[str, ...]  # the regime keys the rows share with the answer's
    ids: tuple[str, ...]

    def __post_init__(self):
        if not (math.isfinite(self.low_pct) and math.isfinite(self.high_pct) and -100 < self.low_pct <= self.high_pct):
            raise ValueError(f"an error bar of {self.low_pct}% to {self.high_pct}%: errors must be finite, above -100% and ordered")

    def guarded(self, low: float, high: float) -> tuple[float, float]:
        """A simulated band as the check rows' errors say it may measure (module docstring)."""
        return low / (1 + self.high_pct / 100), high / (1 + self.low_pct / 100)

    def describe(self) -> str:
        """"-9% to +51% from 9 check rows (2 sources) of the same load range, proposer class, ...\""""
        rows = f"{self.rows} check row{'s' if self.rows != 1 else ''} ({self.sources} source{'s' if self.sources != 1 else ''})"
        same = ", ".join(KEY_WORDS[k] for k in self.matched) if self.matched else "no key in common"
        return f"{self.low_pct:+.0f}% to {self.high_pct:+.0f}% from {rows} sharing {same}"

    def as_dict(self) -> dict:
        return {"low_pct": round(self.low_pct, 2), "high_pct": round(self.high_pct, 2), "rows": self.rows, "sources": self.sources,
                "matched": list(self.matched), "ids": list(self.ids), "text": self.describe()}


def error_bar(checks: Sequence[SpeedupCheck], regime: Regime, min_rows: int = MIN_ROWS, min_sources: int = MIN_SOURCES) -> Optional[ErrorBar]:
    """The bar of the rows matching ``regime`` on the most important keys that leave at least
    ``min_rows`` rows from ``min_sources`` sources (None: fewer than that in all)."""
    for used in range(len(KEYS), -1, -1):
        keys = KEYS[:used]
        rows = [c for c in checks if all(getattr(c.regime, k) == getattr(regime, k) for k in keys)]
        if len(rows) >= min_rows and len({c.source for c in rows}) >= min_sources:
            errors = [c.error_pct for c in rows]
            return ErrorBar(min(errors), max(errors), len(rows), len({c.source for c in rows}), keys, tuple(sorted(c.id for c in rows)))
    return None


def guarded_low(bar: Optional[ErrorBar], low: float) -> float:
    """The band's low end as measured may have it; without a bar, the simulated low itself."""
    return bar.guarded(low, low)[0] if bar is not None else low


def safe(bar: Optional[ErrorBar], low: float, floor: float = 1.0) -> bool:
    """The rule: a k may run where its band's guarded low is at least ``floor``, what the
    alternative gives (1x: no speculation, which always may; inside a speculative server, what its
    k = 0 steps give); the choice among the safe ones is :func:`simulator.sweep.crossover.pick`'s."""
    return not _nan(low) and guarded_low(bar, low) >= floor


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def summary(bars: Sequence[dict]) -> str:
    """Several loads' bars (:meth:`ErrorBar.as_dict`) in words: their widest range, how many rows,
    and the regime keys every one of them matched ("" without a bar)."""
    if not bars:
        return ""
    low, high = min(b["low_pct"] for b in bars), max(b["high_pct"] for b in bars)
    common = [k for k in KEYS if all(k in b["matched"] for b in bars)]
    shared = ", ".join(KEY_WORDS[k] for k in common) if common else "no regime key"
    return f"{low:+.0f}% to {high:+.0f}% from up to {max(b['rows'] for b in bars)} check rows sharing the {shared}"
