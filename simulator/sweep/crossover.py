"""Where speculation stops paying: crossovers, the best k per load, a recommended k schedule.

Pure functions over sweep rows (dicts).  A row's x is its concurrency (closed loop) or its
arrival rate (Poisson); its speedup is the baseline's median TPOT over its own at the same x.

* Crossover: where the speedup crosses 1 between two measured x, interpolated linearly in
  log x for concurrency (the grid doubles) and in x for load.  Every crossing is kept, with
  its direction; the first fall below 1 is the headline.  With no crossing the answer is
  "none in range", and whether speculation paid everywhere or nowhere.
* Best k at an x: the k with the highest speedup, k = 0 (no speculation) when none beats 1.
  Ties go to the smaller k: it risks less when acceptance is lower than assumed.  Two speedups
  tie when they differ by less than ``TIE`` or than their runs' sampling noise (:func:`noise`:
  the 95% interval of each run's median TPOT, over its requests): a run of a few requests cannot
  tell 1.51x from 1.61x, and another seed would flip the pick.
* The ceiling: in a closed loop a verify step costs at least a plain decode step and advances a
  request by the acceptance length L(k) at most on average, so no speedup exceeds L(k) (α = 0.7
  allows 3.33x however large k is).  A simulated figure above it is sampling luck; the choice
  reads it at the ceiling (:func:`value`), and the row keeps its ``speedup_ceiling``.
* Best fixed k (for a vLLM without a k schedule): the k whose closed-loop speedup has the highest
  geometric mean over the simulated concurrencies (each counted once), ties within ``TIE`` to
  the smaller k, none (k = 0) when no k's mean beats 1; the concurrencies where it is below 1
  are listed with it, since one k cannot fit every load.
* Guarded best k: the same, but only among the k whose band, widened by the error bar of the check
  rows of the same regime (:mod:`simulator.sweep.error_bar`), stays at or above 1×: the
  recommendation switches speculation off where it may lose.  The best fixed k takes the same guard
  at every concurrency.
* Recommended schedule: the guarded best k per concurrency as vLLM's
  ``num_speculative_tokens_per_batch_size`` (:func:`simulator.speculative.k_schedule.from_best_k`):
  in a closed loop the running batch is the concurrency, and each simulated concurrency's k
  holds up to the next one; the re-simulated comparison shows what the schedule gives.

Part of the model hash: these numbers are published.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Iterable, Optional, Sequence

from simulator.speculative.k_schedule import Schedule, from_best_k
from simulator.sweep.error_bar import ErrorBar, guarded_low, safe

TIE = 0.005  # speedups within 0.5% count as equal, whatever their noise
NONE_IN_RANGE = "none in range"


def fixed_k(row: dict) -> bool:
    """A run that verifies every draft of one k (a baseline too): not a k schedule, not adaptive
    verification (whose budget verifies part of its k: it is compared, never a k of the grid)."""
    return not row["k_schedule"] and not row.get("adaptive_verification")


def x_of(row: dict) -> float:
    return row["concurrency"] if row["mode"] == "closed_loop" else row["arrival_rate"]


def noise(row: dict) -> float:
    """The sampling noise of a run's median TPOT, as a log half-width: half of ln(high / low) of
    its 95% interval (:func:`simulator.runs.results.median_interval`); 0 where it is unknown."""
    low, high = row.get("tpot_p50_low_s"), row.get("tpot_p50_high_s")
    if low is None or high is None or _nan(low) or _nan(high) or low <= 0 or high <= 0:
        return 0.0
    return math.log(high / low) / 2


def value(row: dict) -> float:
    """The speedup a choice reads: the simulated one, at most the closed loop's ceiling."""
    s, ceiling = row["tpot_speedup"], row.get("speedup_ceiling")
    if row["mode"] == "closed_loop" and ceiling is not None and not _nan(ceiling) and not _nan(s):
        return min(s, ceiling)
    return s


def tied(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two (speedup, noise) figures differ by less than TIE or than their combined noise."""
    gap = abs(math.log(a[0]) - math.log(b[0]))
    return gap <= max(-math.log(1 - TIE), math.hypot(a[1], b[1]))


def pick(options: Sequence[tuple[int, float, float]]) -> tuple[int, float]:
    """(k, speedup) among ``options`` (k, speedup, noise): the highest speedup, or the smallest k
    tied with it."""
    options = sorted(o for o in options if not _nan(o[1]) and o[1] > 0)
    top = max(options, key=lambda o: o[1])
    k, s, _ = next(o for o in options if tied((o[1], o[2]), (top[1], top[2])))
    return k, s


def _nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _baseline_noise(rows: Iterable[dict]) -> dict[tuple, float]:
    """(mode, x) -> the no-speculation run's noise: no speculation is an option with its own."""
    return {(r["mode"], x_of(r)): noise(r) for r in rows if r["num_speculative_tokens"] == 0 and fixed_k(r) and not r["acceptance"]}


def crossings(xs: Sequence[float], speedups: Sequence[float], log_x: bool) -> list[tuple[float, str]]:
    """(x, "falls below 1" | "rises above 1") for each crossing of 1 between neighbours."""
    out = []
    points = sorted(zip(xs, speedups))
    for (x0, s0), (x1, s1) in zip(points, points[1:]):
        if any(math.isnan(v) for v in (s0, s1)) or (s0 >= 1) == (s1 >= 1):
            continue
        t = (1 - s0) / (s1 - s0)
        if log_x:
            x = math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
        else:
            x = x0 + t * (x1 - x0)
        out.append((x, "falls below 1" if s0 >= 1 else "rises above 1"))
    return out


def _groups(rows: Iterable[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return dict(sorted(groups.items(), key=lambda item: tuple(str(v) for v in item[0])))


def crossover_rows(rows: Iterable[dict]) -> list[dict]:
    """One row per (mode, acceptance, attention, k) of fixed-k speculative runs."""
    fixed = [r for r in rows if r["num_speculative_tokens"] > 0 and fixed_k(r)]
    out = []
    for (mode, acceptance, attention, k), group in _groups(fixed, ("mode", "acceptance", "attention", "num_speculative_tokens")).items():
        group = sorted(group, key=x_of)
        xs, speedups = [x_of(r) for r in group], [r["tpot_speedup"] for r in group]
        found = crossings(xs, speedups, log_x=mode == "closed_loop")
        falls = [x for x, direction in found if direction == "falls below 1"]
        headline = falls[0] if falls else (found[0][0] if found else None)
        if found:
            summary = f"{headline:.3g}"
        else:
            summary = NONE_IN_RANGE + (" (pays everywhere)" if min(speedups) >= 1 else " (never pays)")
        out.append(
            {
                "mode": mode,
                "acceptance": acceptance,
                "attention": attention,
                "num_speculative_tokens": k,
                "crossover_x": headline,
                "crossover": summary,
                "crossings": "; ".join(f"{d} at {x:.3g}" for x, d in found),
                "x_min": xs[0],
                "x_max": xs[-1],
                "speedup_at_x_min": speedups[0],
                "speedup_at_x_max": speedups[-1],
            }
        )
    return out


def best_k(rows: Sequence[dict]) -> dict[tuple, tuple[int, float]]:
    """(mode, acceptance, attention, x) -> (best k, its speedup) over fixed-k runs and k = 0
    (:func:`pick`: ties within the sampling noise to the smaller k; figures at most the ceiling)."""
    base = _baseline_noise(rows)
    fixed = [r for r in rows if fixed_k(r) and r["acceptance"]]
    out = {}
    for key, group in _groups(fixed, ("mode", "acceptance", "attention")).items():
        by_x: dict[float, list[tuple[int, float, float]]] = defaultdict(list)
        for r in group:
            by_x[x_of(r)].append((r["num_speculative_tokens"], value(r), noise(r)))
        for x, options in sorted(by_x.items()):
            out[key + (x,)] = pick([(0, 1.0, base.get((key[0], x), 0.0))] + options)
    return out


def best_fixed_k(rows: Sequence[dict], acceptance: str, attention: str,
                 bars: Optional[Callable[[str, str, float], Optional[ErrorBar]]] = None) -> tuple[int, float, list]:
    """(k, its geometric-mean speedup, the concurrencies where it is below 1) over the closed-loop
    fixed-k runs of one acceptance profile and verify setting; (0, 1.0, []) when none pays.  With
    ``bars`` only a k whose band, widened by the error bar at each load, stays at or above 1× at
    every concurrency simulated is a candidate."""
    lows = band_lows(rows) if bars is not None else {}
    by_k: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    unsafe: set[int] = set()
    for r in rows:
        if r["mode"] == "closed_loop" and r["acceptance"] == acceptance and r["attention"] == attention and fixed_k(r) and r["num_speculative_tokens"] > 0:
            k, x = r["num_speculative_tokens"], x_of(r)
            by_k[k].append((x, value(r), noise(r)))
            if bars is not None and guarded_low(bars("closed_loop", acceptance, x), lows.get(("closed_loop", acceptance, k, x), -math.inf)) < 1:
                unsafe.add(k)
    base = _baseline_noise(rows)
    options = [(0, 1.0, _mean_noise([base.get(("closed_loop", x), 0.0) for x, _, _ in next(iter(by_k.values()), [])]))]
    for k, points in sorted(by_k.items()):
        if points and all(s > 0 for _, s, _ in points) and k not in unsafe:
            options.append((k, math.exp(sum(math.log(s) for _, s, _ in points) / len(points)), _mean_noise([n for _, _, n in points])))
    k, mean = pick(options)
    if k == 0:
        return 0, 1.0, []
    return k, mean, sorted(x for x, s, _ in by_k[k] if s < 1)


def _mean_noise(noises: Sequence[float]) -> float:
    """The noise of a mean of logs over independent runs: sqrt(sum of squares) / count."""
    return math.sqrt(sum(n * n for n in noises)) / len(noises) if noises else 0.0


def band_lows(rows: Iterable[dict]) -> dict[tuple, float]:
    """(mode, acceptance, k, x) -> the lowest speedup of that fixed k under any verify setting
    simulated (the low end of its band)."""
    lows: dict[tuple, float] = {}
    for r in rows:
        if not fixed_k(r) or not r["acceptance"] or r["num_speculative_tokens"] == 0:
            continue
        key = (r["mode"], r["acceptance"], r["num_speculative_tokens"], x_of(r))
        # a setting that gave no speedup (NaN) leaves the band unknown: the k counts as unsafe there
        speedup = -math.inf if math.isnan(r["tpot_speedup"]) else r["tpot_speedup"]
        lows[key] = min(lows.get(key, math.inf), speedup)
    return lows


def guarded_best_k(rows: Sequence[dict], attention: str, bars: Callable[[str, str, float], Optional[ErrorBar]],
                   idle: Optional[dict] = None) -> dict[tuple, tuple[int, float]]:
    """(mode, acceptance, attention, x) -> (k, its speedup) like :func:`best_k`, but only among the
    k whose band, widened by the check rows' error bar at that load (``bars(mode, acceptance, x)``),
    stays at or above what k = 0 gives there (:func:`simulator.sweep.error_bar.safe`); k = 0 where
    none does.  This is a schedule's choice, so k = 0 is worth what the deployment's server gives
    with nothing to verify (``idle``: (mode, acceptance, x) -> (speedup, noise), the drafter still
    running), not 1x: a k that may lose to 1x can still beat staying at k = 0 inside that server."""
    lows = band_lows(rows)
    base = _baseline_noise(rows)
    idle = idle or {}
    options: dict[tuple, list[tuple[int, float, float]]] = defaultdict(list)
    for r in rows:
        if not fixed_k(r) or not r["acceptance"] or r["attention"] != attention or r["num_speculative_tokens"] == 0:
            continue
        x, k = x_of(r), r["num_speculative_tokens"]
        off = idle.get((r["mode"], r["acceptance"], x), (1.0, 0.0))[0]
        if safe(bars(r["mode"], r["acceptance"], x), lows.get((r["mode"], r["acceptance"], k, x), -math.inf), off):
            options[(r["mode"], r["acceptance"], attention, x)].append((k, value(r), noise(r)))
        else:
            options.setdefault((r["mode"], r["acceptance"], attention, x), [])

    def zero(key) -> tuple[int, float, float]:
        off, n = idle.get((key[0], key[1], key[3]), (1.0, base.get((key[0], key[3]), 0.0)))
        return 0, off, n

    return {key: pick([zero(key)] + found) for key, found in sorted(options.items(), key=lambda item: tuple(str(v) for v in item[0]))}


def recommended_schedule(best: dict[tuple, tuple[int, float]], acceptance: str, attention: str, up_to: int) -> Schedule:
    """vLLM's schedule from the closed-loop best k of one acceptance profile and bound: each
    simulated concurrency's k, held up to the next one.  k may rise with the batch (a mixture of
    experts pays more the fuller its batch, and the error-bar guard can switch a small batch off
    and a larger one on): a schedule that forced k never to rise lost to the fixed k printed
    under it (issue 33)."""
    points = sorted((int(x), k) for (mode, acc, att, x), (k, _) in best.items() if mode == "closed_loop" and acc == acceptance and att == attention)
    return from_best_k(points, up_to)
