"""Adaptive verification's start-up profiling, run on the simulated engine: the Vidur glue that
times vLLM's dummy steps with the run's own predictor and hands the tables to
:class:`~simulator.speculative.adaptive_verification.VerifyBudget`.

vLLM times its profiling steps on the GPU it serves on; here the same steps (the token counts of
:func:`~simulator.speculative.adaptive_verification.profile_token_counts`, requests at 8,192 tokens
of context) are priced by the run's step model, so the budget a step picks follows the costs the
run is simulated with.  The verify table is the target's forward alone (no engine overhead: vLLM
times the forward), the draft table the proposer's passes with every request drafting the full k.
Only the built-in step model (:class:`~simulator.engine.analytic.AnalyticPredictor`) can time a
step outside a run; the run's configuration refuses adaptive verification with a profile directory.
"""

from __future__ import annotations

from simulator.engine.analytic import AnalyticPredictor
from simulator.engine.batch import DraftBatch
from simulator.speculative.adaptive_verification import PROFILE_CONTEXT_LEN, VerifyBudget
from simulator.speculative.step import StepPlan


class _DummyRequest:
    """A profiling step's request, as vLLM's ``_dummy_run`` makes them: its prompt all cached."""

    __slots__ = ()
    is_prefill_complete = True
    num_prefill_tokens = num_processed_tokens = PROFILE_CONTEXT_LEN


_DUMMY = _DummyRequest()


def profiled_budget(predictor, *, k: int, confidences, max_num_reqs: int, max_num_batched_tokens: int) -> VerifyBudget:
    """The run's :class:`VerifyBudget`, profiled through ``predictor`` (the target's)."""
    if not isinstance(predictor, AnalyticPredictor):
        raise TypeError(f"adaptive verification profiles its step costs with the built-in step model, not {type(predictor).__name__}")
    scales, proposer = predictor.scales, predictor.proposer

    def forward_ms(rows: list[int]) -> float:
        batch = DraftBatch(0, [_DUMMY] * len(rows), rows, [PROFILE_CONTEXT_LEN + q for q in rows], [True] * len(rows))
        cost = predictor.forward_cost(batch)
        return cost.total_ms if scales is None else scales.forward_ms(cost)

    def drafter_ms(rows: list[int]) -> float:
        n = len(rows)
        plan = StepPlan([_DUMMY] * n, list(rows), [PROFILE_CONTEXT_LEN + q for q in rows], [True] * n, [k] * n, [0] * n, [1] * n)
        seconds = proposer.work_seconds(proposer.model.work(plan))
        return 1e3 * seconds * (1.0 if scales is None else scales.drafter)

    return VerifyBudget.profiled(
        forward_ms, drafter_ms,
        capture_sizes=predictor.step_model.engine.capture_sizes,
        max_num_reqs=max_num_reqs, max_num_batched_tokens=max_num_batched_tokens, confidences=confidences,
    )
