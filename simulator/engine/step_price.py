"""One step of a run, priced outside a simulation: the Vidur glue a step-time law is read from.

A simulation asks the target's predictor for every step Vidur's scheduler forms.  A fit to a
server's measurements (:mod:`simulator.validation.fit`) and its tests need the same price for a
step they describe themselves: so many prompt chunks and so many decode rows of so many queries
over so many cached tokens.  :class:`StepPricer` builds that step as the scheduler would (a
:class:`~simulator.engine.batch.SpeculativeBatch` of Vidur requests) and asks the run's own
predictor and proposer, so its price is the simulation's.
"""

from __future__ import annotations

from typing import Sequence

from simulator.engine.batch import SpeculativeBatch
from simulator.runs.config import RunConfig
from simulator.speculative.step import StepPlan
from simulator.vidur.entities import Request
from simulator.vidur.seam import mark_prefill_complete


class StepPricer:
    """The step costs of ``config``'s run (its model, device, TP, engine, proposer and scales)."""

    def __init__(self, config: RunConfig):
        from simulator.engine.resolve import resolve_run
        from simulator.engine.simulation import proposer, side_predictor

        run = resolve_run(config)
        self._predictor = side_predictor(run, run.target)
        if not hasattr(self._predictor, "forward_cost"):
            raise ValueError("StepPricer prices the built-in profile's steps; this run reads a Vidur-format profile directory")
        self._proposer = proposer(run)
        self._predictor.proposer = self._proposer

    @staticmethod
    def batch(prefill_rows: Sequence[tuple[int, int]], decode_rows: Sequence[tuple[int, int]]) -> SpeculativeBatch:
        """The step of ``prefill_rows`` (chunk tokens, tokens cached before it) and ``decode_rows``
        (query tokens, tokens cached before the step): a decode row of q queries verifies q - 1
        proposals and advances by one token."""
        requests, computed, kv, decode, proposals, progress = [], [], [], [], [], []
        for chunk, cached in prefill_rows:
            requests.append(Request(arrived_at=0.0, num_prefill_tokens=cached + chunk, num_decode_tokens=1))
            computed.append(chunk), kv.append(cached + chunk), decode.append(False), proposals.append(0), progress.append(chunk)
        for queries, cached in decode_rows:
            request = Request(arrived_at=0.0, num_prefill_tokens=max(1, cached), num_decode_tokens=queries + 1)
            mark_prefill_complete(request)
            requests.append(request)
            computed.append(queries), kv.append(cached + queries), decode.append(True), proposals.append(queries - 1), progress.append(1)
        plan = StepPlan(requests, computed, kv, decode, proposals, [0] * len(requests), progress)
        return SpeculativeBatch.of_plan(0, plan)

    def seconds(self, prefill_rows: Sequence[tuple[int, int]], decode_rows: Sequence[tuple[int, int]]) -> float:
        """The step's whole time, as the simulation's predictor gives it."""
        return self._predictor.get_execution_time(self.batch(prefill_rows, decode_rows), 0).total_time
