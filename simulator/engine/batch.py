"""A Vidur batch that keeps computed tokens and progress tokens apart.

Vidur's Batch hands each request its ``num_q_tokens`` both as work (to the predictor) and as
progress (to ``Request.on_batch_end``).  In a verify step a request computes k' + 1 tokens
but advances by accepted + 1, so the two lists are separate here: ``num_q_tokens`` stays the
computed count Vidur costs, ``progress_tokens`` is what the request state receives.
"""

from __future__ import annotations

from typing import List

from vidur.entities import Batch, BatchStage


class SpecBatchStage(BatchStage):
    def __init__(self, *args, progress_tokens: List[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.progress_tokens = progress_tokens

    def on_stage_end(self, time: float) -> None:
        computed = self._num_q_tokens
        self._num_q_tokens = self.progress_tokens
        try:
            super().on_stage_end(time)
        finally:
            self._num_q_tokens = computed


class SpecBatch(Batch):
    def __init__(self, replica_id, requests, num_q_tokens, num_kv_tokens, progress_tokens, decode_rows):
        super().__init__(replica_id, requests, num_q_tokens, num_kv_tokens)
        self.progress_tokens = progress_tokens
        # per request: True when the row is a decode / verify row (prefill done before this step)
        self.decode_rows = decode_rows
        self.num_proposals = sum(self.proposals)

    @classmethod
    def adopt(cls, batch: Batch, progress_tokens: List[int], decode_rows: List[bool], num_proposals: int) -> "SpecBatch":
        """Turn the Batch Sarathi just built into a SpecBatch in place (same id, no second build)."""
        batch.__class__ = cls
        batch.progress_tokens = progress_tokens
        batch.decode_rows = decode_rows
        batch.num_proposals = num_proposals
        return batch

    @property
    def proposals(self) -> List[int]:
        return [q - 1 if is_decode else 0 for q, is_decode in zip(self._num_q_tokens, self.decode_rows)]

    def on_batch_end(self, time: float):
        computed = self._num_q_tokens
        self._num_q_tokens = self.progress_tokens
        try:
            super().on_batch_end(time)
        finally:
            self._num_q_tokens = computed

    def to_batch_stage(self, stage_id, execution_time) -> SpecBatchStage:
        return SpecBatchStage(
            self._id,
            self._replica_id,
            stage_id,
            execution_time,
            self._requests,
            self._num_q_tokens,
            self._num_kv_tokens,
            self._num_active_kvp_groups,
            self._last_kvp_group_ids,
            self._kvp_group_id,
            progress_tokens=self.progress_tokens,
        )
