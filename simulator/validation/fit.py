"""Fit a server's step costs to its own measurements, and hold one level out to say how well.

The forward model is the simulator itself: each measured level (a closed loop of ``c`` requests
in flight at fixed lengths, with the acceptance the server's counters measured) is simulated
with trial terms, and the terms are moved until the simulated mean TPOT, output throughput and
TTFT match the server's (:func:`fit_terms`: bounded least squares on log ratios, SciPy's
``least_squares``).  The free terms are those of a fitted profile
(:data:`simulator.profiles.fitted.TERMS`): the engine's CPU time per step and the scales of the
GEMM, attention, all-reduce and drafter terms; a term the levels cannot tell (the all-reduce at
TP 1, the drafter without speculation, the CPU time hidden under async scheduling) is left at
its start and said to be unplaced.

:func:`fit_with_holdout` fits on every level but the held-out ones, then predicts those: the
printed error is what the fit gets wrong where it did not look, the answer's error bar.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np

from simulator.profiles.fitted import TERMS
from simulator.profiles.step_scales import StepScales
from simulator.runs.deployment import Deployment
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.util.errors import ConfigError

# residual weights: TPOT and throughput are the answers; TTFT (one prefill per request) mostly
# tells the GEMM scale at large token counts apart from the decode terms
WEIGHTS = {"tpot": 1.0, "throughput": 1.0, "ttft": 0.5}
# A weak pull of each free term toward its start (the built-in profile's value): where the levels
# cannot tell two terms apart, the fit keeps the built-in split instead of wandering along the
# valley; against a residual of a percent it moves a well-measured term by well under one
PRIOR_WEIGHT = {"cpu_ms": 0.005, "scale": 0.01}  # per ms of CPU time, per unit of log scale
UNPLACED_SENSITIVITY = 0.002  # a term whose doubling moves no residual by 0.2% cannot be told
POOR_FIT_PCT = 5.0  # a level this far off (fitted or held out) is reported
STEPS_OFF_PCT = 10.0  # a level whose server ran this many more or fewer steps than simulated is reported
CPU_MS_BOUNDS = (0.0, 50.0)
SCALE_BOUNDS = (0.05, 20.0)


@dataclass(frozen=True)
class Level:
    """One measured level: what ran and what the server's histograms said."""

    concurrency: int
    requests: int
    prompt_tokens: int
    output_tokens: int
    tpot_ms: float
    ttft_ms: float
    throughput_tok_s: float  # concurrency x mean output tokens / mean end-to-end latency
    acceptance_per_position: tuple = ()  # conditional rates the counters measured; () without speculation
    acceptance_length: Optional[float] = None  # 1 + accepted / drafts the counters measured; None without speculation
    # the client's closed loop as it ran (simulator.runs.workload_kinds.ClosedLoopWorkload): when the first
    # wave was sent, and how long after a completion its replacement was sent
    first_arrivals_s: tuple = ()
    turnaround_s: float = 0.0
    # the engine's steps as the server's step histograms counted them (simulator.validation.server_times):
    # the mean time between a running request's outputs, and the steps that gave outputs.  A check of the
    # step the fit prices and of the batching the simulation schedules, not fitted: without speculation the
    # ITL is the TPOT again, and with it the TPOT per verify step already says what the ITL does
    itl_ms: Optional[float] = None
    server_steps: Optional[int] = None

    def measured(self) -> dict:
        return {"tpot": self.tpot_ms, "throughput": self.throughput_tok_s, "ttft": self.ttft_ms}


@dataclass(frozen=True)
class FitResult:
    terms: dict  # name -> fitted value
    uncertainty: dict  # name -> one standard error (None: not placed)
    placed: dict  # name -> bool
    notes: dict  # name -> why a term is not placed
    fitted: tuple  # (level, simulated dict) per fitted level
    held_out: tuple = ()  # (level, simulated dict) per held-out level
    warnings: tuple = ()
    evaluations: int = 0

    @property
    def held_out_error_pct(self) -> Optional[float]:
        errors = [abs(error_pct(sim[m], level.measured()[m])) for level, sim in self.held_out for m in ("tpot", "throughput")]
        return max(errors) if errors else None


def error_pct(simulated: float, measured: float) -> float:
    return 100.0 * (simulated / measured - 1.0)


def simulate_level(deployment: Deployment, level: Level, terms: dict) -> dict:
    """``level`` simulated for ``deployment`` (its speculation at the level's measured acceptance)
    with the trial ``terms``: its mean TPOT and TTFT (ms) and its output throughput, defined as the
    measurement is (concurrency x mean output / mean end-to-end)."""
    from simulator.engine.resolve import resolve_run
    from simulator.engine.simulation import simulate
    from simulator.runs.workload_kinds import ClosedLoopWorkload

    n = level.requests
    speculation = deployment.speculation
    if speculation is not None and level.acceptance_per_position:
        speculation = replace(speculation, acceptance=AcceptanceInput.given(per_position=level.acceptance_per_position))
    costs = replace(deployment.costs, engine_overhead_ms=float(terms["cpu_ms"]), step_scales=StepScales(**{name: float(terms[name]) for name in TERMS if name != "cpu_ms"}))
    workload = ClosedLoopWorkload(level.concurrency, (level.prompt_tokens,) * n, (level.output_tokens,) * n, tuple(level.first_arrivals_s), level.turnaround_s)
    config = replace(deployment, speculation=speculation, costs=costs).run(workload)
    result = simulate(resolve_run(config))
    summary = result.summary
    return {
        "tpot": 1e3 * summary["tpot_mean_s"],
        "ttft": 1e3 * summary["ttft_mean_s"],
        "throughput": level.concurrency * summary["total_output_tokens"] / summary["num_requests"] / summary["e2e_mean_s"],
        "acceptance_length": summary["mean_acceptance_length"],
        "itl": 1e3 * summary["itl_mean_s"],
        # steps that gave outputs, as vLLM's iteration histogram counts them: a step's requests share its end time
        "steps": len({t for times in result.emission_times.values() for t in times}),
    }


def log_ratio(level: Level, simulated: dict, metric: str) -> float:
    """log(simulated / measured) of one metric, per verify step where the level speculates: TPOT
    times the acceptance length, throughput divided by it, each side by its own.  The fit is of
    step costs; the simulation draws its acceptance from the measured rates, and its realised
    length differs from the server's by sampling noise (a few percent on a few thousand tokens),
    which would otherwise land on the smallest term, the drafter."""
    ratio = simulated[metric] / level.measured()[metric]
    sim_length = simulated.get("acceptance_length")
    if level.acceptance_length and sim_length and math.isfinite(sim_length) and metric != "ttft":
        step = sim_length / level.acceptance_length
        ratio = ratio * step if metric == "tpot" else ratio / step
    return math.log(ratio)


def free_terms(deployment: Deployment, levels: Sequence[Level], fixed: dict) -> tuple[list[str], dict]:
    """The terms these levels can place, and why each other one is not free."""
    notes = {}
    speculative = any(level.acceptance_per_position for level in levels)
    if deployment.parallelism.tensor == 1:
        notes["all_reduce"] = "TP 1: no all-reduce to measure"
    if not speculative:
        notes["drafter"] = "no speculative level: measure a speculative server to place it"
    for name in fixed:
        notes.setdefault(name, "held at the base profile's fit (--engine-profile)")
    return [name for name in TERMS if name not in notes], notes


def fit_terms(deployment: Deployment, levels: Sequence[Level], start: dict, fixed: Optional[dict] = None) -> FitResult:
    """Bounded least squares of the free terms on ``levels`` (log ratios, weighted by :data:`WEIGHTS`)."""
    from scipy.optimize import least_squares

    fixed = dict(fixed or {})
    names, notes = free_terms(deployment, levels, fixed)
    if not names:
        raise ConfigError("nothing to fit: every term is fixed or cannot be measured by these levels")
    base = {**start, **fixed}
    metrics = tuple(WEIGHTS)
    evaluations = [0]

    def terms_of(x: np.ndarray) -> dict:
        terms = dict(base)
        for name, value in zip(names, x):
            terms[name] = float(value) if name == "cpu_ms" else float(math.exp(value))
        return terms

    def residuals(x: np.ndarray) -> np.ndarray:
        evaluations[0] += 1
        terms = terms_of(x)
        out = []
        for level in levels:
            sim = simulate_level(deployment, level, terms)
            out += [WEIGHTS[m] * log_ratio(level, sim, m) for m in metrics]
        for name, value in zip(names, x):
            out.append(PRIOR_WEIGHT["cpu_ms"] * (value - x0_of[name]) if name == "cpu_ms" else PRIOR_WEIGHT["scale"] * (value - x0_of[name]))
        return np.array(out)

    x0 = np.array([base[n] if n == "cpu_ms" else math.log(base[n]) for n in names])
    low = np.array([CPU_MS_BOUNDS[0] if n == "cpu_ms" else math.log(SCALE_BOUNDS[0]) for n in names])
    high = np.array([CPU_MS_BOUNDS[1] if n == "cpu_ms" else math.log(SCALE_BOUNDS[1]) for n in names])
    x0 = np.clip(x0, low + 1e-9, high - 1e-9)
    x0_of = dict(zip(names, x0))
    solution = least_squares(residuals, x0, bounds=(low, high), diff_step=1e-2, x_scale=np.where(np.array(names) == "cpu_ms", 1.0, 0.3), xtol=1e-6, ftol=1e-8, max_nfev=200)
    terms = terms_of(solution.x)
    jac = solution.jac[: len(levels) * len(metrics)]  # the data's rows, not the prior's
    m, n = jac.shape
    dof = max(1, m - n)
    data = solution.fun[: m]
    s2 = max(float(data @ data) / dof, 1e-6)
    covariance = np.linalg.pinv(jac.T @ jac) * s2
    uncertainty, placed = {}, {}
    for i, name in enumerate(names):
        # a term's sensitivity: the largest residual change from doubling it (or +1 ms of CPU)
        sensitivity = float(np.max(np.abs(jac[:, i]))) * (1.0 if name == "cpu_ms" else math.log(2))
        sigma = math.sqrt(max(covariance[i, i], 0.0))
        if sensitivity < UNPLACED_SENSITIVITY or (name != "cpu_ms" and sigma > 1.0):
            placed[name], uncertainty[name] = False, None
            terms[name] = base[name]
            notes[name] = (
                "the levels do not move with it (hidden: async scheduling overlaps the CPU with the GPU)" if name == "cpu_ms"
                else "the levels cannot tell it from the other terms; add a level where it matters"
            )
        else:
            placed[name] = True
            uncertainty[name] = sigma if name == "cpu_ms" else terms[name] * sigma  # a log-space sigma is relative
    for name in TERMS:
        placed.setdefault(name, False)
        uncertainty.setdefault(name, None)
    fitted = tuple((level, simulate_level(deployment, level, terms)) for level in levels)
    # judged per verify step, as fitted: the fit answers for step costs, not for acceptance noise
    step_errors = [(level, m, 100.0 * math.expm1(log_ratio(level, sim, m))) for level, sim in fitted for m in ("tpot", "throughput")]
    warnings = tuple(
        f"the fit misses {level.concurrency} in flight by {error:+.1f}% in {m}" + (" per verify step" if level.acceptance_length else "")
        for level, m, error in step_errors if abs(error) > POOR_FIT_PCT
    )
    return FitResult(terms, uncertainty, placed, notes, fitted, (), warnings, evaluations[0] + len(levels))


def fit_with_holdout(deployment: Deployment, levels: Sequence[Level], held_out: Sequence[int], start: dict, fixed: Optional[dict] = None) -> FitResult:
    """Fit on the levels not in ``held_out`` (concurrencies), then predict the held-out ones."""
    train = [level for level in levels if level.concurrency not in held_out]
    test = [level for level in levels if level.concurrency in held_out]
    if len(train) < 2:
        raise ConfigError(f"a fit needs at least two measured levels besides the held-out ones; got {[l.concurrency for l in train]}")
    result = fit_terms(deployment, train, start, fixed)
    predicted = tuple((level, simulate_level(deployment, level, result.terms)) for level in test)
    warnings = list(result.warnings)
    for level, sim in predicted:
        for m in ("tpot", "throughput"):
            error = error_pct(sim[m], level.measured()[m])
            if abs(error) > POOR_FIT_PCT:
                warnings.append(
                    f"held out, {level.concurrency} in flight is predicted {error:+.1f}% off in {m}: the server's step time changes between the "
                    "fitted levels and this one in a way the model's terms cannot follow (a CUDA-graph capture size, a kernel switch); "
                    "measure a level near it and fit again"
                )
    warnings += step_count_warnings(result.fitted + predicted)
    return FitResult(result.terms, result.uncertainty, result.placed, result.notes, result.fitted, predicted, tuple(warnings), result.evaluations + len(test))


def step_count_warnings(rows) -> list[str]:
    """Levels whose server ran clearly more or fewer output steps than the simulation: the two
    batch differently (another --max-num-seqs or --max-num-batched-tokens, a prefill chunked
    otherwise), so the fitted terms stand in for a scheduling difference."""
    out = []
    for level, sim in rows:
        if level.server_steps:
            off = error_pct(sim["steps"], level.server_steps)
            if abs(off) > STEPS_OFF_PCT:
                out.append(
                    f"{level.concurrency} in flight: the server ran {level.server_steps} steps with outputs (vllm:iteration_tokens_total), "
                    f"the simulation {sim['steps']} ({off:+.0f}%): they batch differently; check --max-num-seqs and --max-num-batched-tokens"
                )
    return out
