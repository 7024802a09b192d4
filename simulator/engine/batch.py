"""A Vidur batch that keeps computed tokens and progress tokens apart.

Vidur's Batch hands each request its ``num_q_tokens`` both as work (to the predictor) and as
progress (to ``Request.on_batch_end``).  In a verify step a request computes k' + 1 tokens
but advances by accepted + 1, so the two lists are separate here: ``num_q_tokens`` stays the
computed count Vidur costs, ``progress_tokens`` is what the request state receives.
"""

from __future__ import annotations

from typing import List

from vidur.entities import Batch, BatchStage

from simulator.engine.vidur_seam import adopt, batch_stage_kwargs, q_tokens_as


class SpecBatchStage(BatchStage):
    def __init__(self, *args, progress_tokens: List[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.progress_tokens = progress_tokens

    def on_stage_end(self, time: float) -> None:
        with q_tokens_as(self, self.progress_tokens):
            super().on_stage_end(time)


class SpecBatch(Batch):
    def __init__(self, replica_id, requests, num_q_tokens, num_kv_tokens, progress_tokens, decode_rows):
        super().__init__(replica_id, requests, num_q_tokens, num_kv_tokens)
        self.progress_tokens = progress_tokens
        # per request: True when the row is a decode / verify row (prefill done before this step)
        self.decode_rows = decode_rows
        self.num_proposals = sum(self.proposals)
        self.prefill_rows = None  # the predictor's (KV, chunk) rows of the prefill chunks, once computed

    @classmethod
    def adopt(cls, batch: Batch, progress_tokens: List[int], decode_rows: List[bool], num_proposals: int) -> "SpecBatch":
        """Turn the Batch Sarathi just built into a SpecBatch in place (same id, no second build)."""
        batch = adopt(batch, cls)
        batch.progress_tokens = progress_tokens
        batch.decode_rows = decode_rows
        batch.num_proposals = num_proposals
        batch.prefill_rows = None
        return batch

    @property
    def proposals(self) -> List[int]:
        return [q - 1 if is_decode else 0 for q, is_decode in zip(self.num_q_tokens, self.decode_rows)]

    def on_batch_end(self, time: float):
        with q_tokens_as(self, self.progress_tokens):
            super().on_batch_end(time)

    def to_batch_stage(self, stage_id, execution_time) -> SpecBatchStage:
        return SpecBatchStage(**batch_stage_kwargs(self, stage_id, execution_time), progress_tokens=self.progress_tokens)
