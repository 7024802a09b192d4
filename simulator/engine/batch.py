"""A Vidur batch that carries its step's plan: computed tokens to the predictor, progress to the requests.

Vidur's Batch hands each request its ``num_q_tokens`` both as work (to the predictor) and as
progress (to ``Request.on_batch_end``).  In a verify step a request computes k' + 1 tokens but
advances by accepted + 1, so a :class:`SpeculativeBatch` keeps the step's
:class:`~simulator.speculative.step.StepPlan`: ``num_q_tokens`` stays the computed count Vidur
costs, and the requests receive the plan's progress.  Nothing here recomputes the plan.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from simulator.speculative.step import StepPlan
from simulator.vidur.entities import Batch, BatchStage
from simulator.vidur.seam import adopt, batch_stage_kwargs, q_tokens_as


class SpeculativeBatchStage(BatchStage):
    def __init__(self, *args, progress_tokens: List[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.progress_tokens = progress_tokens

    def on_stage_end(self, time: float) -> None:
        with q_tokens_as(self, self.progress_tokens):
            super().on_stage_end(time)


class SpeculativeBatch(Batch):
    """A batch and its step plan (``plan``).  Also built directly for a draft pass: rows of
    several queries over their cache (``decode_rows``) are costed as verify rows."""

    def __init__(self, replica_id, requests, num_q_tokens, num_kv_tokens, decode_rows):
        super().__init__(replica_id, requests, num_q_tokens, num_kv_tokens)
        self.plan = StepPlan(list(requests), list(num_q_tokens), list(num_kv_tokens), list(decode_rows), [0] * len(requests), [0] * len(requests), list(num_q_tokens))
        self.prefill_rows = None  # the predictor's (KV, chunk) rows of the prefill chunks, once computed

    @classmethod
    def of_plan(cls, replica_id, plan: StepPlan) -> "SpeculativeBatch":
        """A batch of ``plan``'s rows (a step built outside a run: tests, calibration)."""
        batch = cls(replica_id, plan.requests, plan.computed, plan.kv_tokens, plan.decode)
        batch.plan = plan
        return batch

    @classmethod
    def adopt(cls, batch: Batch, plan: StepPlan) -> "SpeculativeBatch":
        """Turn the Batch Sarathi just built into a SpeculativeBatch in place (same id, no second build)."""
        batch = adopt(batch, cls)
        batch.plan = plan
        batch.prefill_rows = None
        return batch

    @property
    def decode_rows(self) -> List[bool]:
        """Per row: True for a decode / verify row (its prefill finished before this step)."""
        return self.plan.decode

    @property
    def progress_tokens(self) -> List[int]:
        return self.plan.progress

    def on_batch_end(self, time: float):
        with q_tokens_as(self, self.plan.progress):
            super().on_batch_end(time)

    def to_batch_stage(self, stage_id, execution_time) -> SpeculativeBatchStage:
        return SpeculativeBatchStage(**batch_stage_kwargs(self, stage_id, execution_time), progress_tokens=self.plan.progress)



class DraftBatch(NamedTuple):
    """One draft pass's rows, read by a predictor as it reads a batch (``requests``,
    ``num_q_tokens``, ``num_kv_tokens``, ``decode_rows``), without building a Vidur Batch: Vidur
    numbers every Batch from a process-wide counter and sums its tokens on construction, work a
    pass costed by the built-in step model never reads.  ``decode_rows`` None: Vidur's rule (a row
    is a decode row once its request's prefill is complete)."""

    replica_id: int
    requests: Sequence
    num_q_tokens: Sequence[int]
    num_kv_tokens: Sequence[int]
    decode_rows: Optional[Sequence[bool]] = None

    def vidur_batch(self) -> Batch:
        """The pass as a Vidur batch, for a predictor that sums Vidur's per-op times (a profile
        directory's): a SpeculativeBatch when the rows say how their attention runs, else a plain Batch."""
        requests, q, kv = list(self.requests), list(self.num_q_tokens), list(self.num_kv_tokens)
        if self.decode_rows is None:
            return Batch(self.replica_id, requests, q, kv)
        return SpeculativeBatch(self.replica_id, requests, q, kv, list(self.decode_rows))
