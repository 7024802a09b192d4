"""What proposing k tokens costs, added to the step time of speculative steps.

* n-gram / fixed overhead: a fixed CPU time per step that has proposals.
* draft model: k sequential single-token passes of the draft over the speculating rows
  (pass j covers rows proposing more than j tokens, with j more tokens of context), plus the
  draft's prefill of this step's prompt chunks (it needs their KV too).  Approximations:
  the first pass after a verification really re-reads the accepted tokens, costed here as one
  token; very short drafts are dominated by launch overheads the profile only roughly holds.
"""

from __future__ import annotations

from vidur.entities import Batch

from simulator.engine.batch import SpecBatch


class NgramProposer:
    def __init__(self, overhead_ms: float):
        self._seconds = overhead_ms * 1e-3

    def step_seconds(self, batch: SpecBatch) -> float:
        return self._seconds if batch.num_proposals else 0.0


class DraftProposer:
    def __init__(self, draft_predictor):
        self._predictor = draft_predictor

    def _cost(self, batch: Batch) -> float:
        return self._predictor.get_execution_time(batch, 0).total_time

    def step_seconds(self, batch: SpecBatch) -> float:
        prefill = [(r, q, kv) for r, q, kv, d in zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows) if not d]
        drafting = [
            (r, kv - q, p)
            for r, q, kv, d, p in zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows, batch.proposals)
            if d and p > 0
        ]
        seconds = 0.0
        passes = max((p for _, _, p in drafting), default=0)
        for j in range(max(passes, 1 if prefill else 0)):
            rows = [(r, 1, context + j + 1) for r, context, p in drafting if p > j]
            if j == 0:
                rows += prefill
            if rows:
                requests, q, kv = zip(*rows)
                seconds += self._cost(Batch(batch.replica_id, list(requests), list(q), list(kv)))
        return seconds
