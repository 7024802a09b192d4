"""What proposing k tokens costs, added to the step time of speculative steps.

* n-gram / fixed overhead: a fixed CPU time per step that has proposals.
* draft model: k sequential single-token passes of the draft over the speculating rows
  (pass j covers rows proposing more than j tokens, with j more tokens of context), plus the
  draft's prefill of this step's prompt chunks (it needs their KV too).  Approximations:
  the first pass after a verification really re-reads the accepted tokens, costed here as one
  token; very short drafts are dominated by launch overheads the profile only roughly holds.
* EAGLE / EAGLE-3 head (as vLLM V1 runs it): pass 0 runs the head over every token the
  target computed this step (it consumes their hidden states), its decode rows' attention costed
  like the target's verify rows; passes 1..k-1 run one token for
  every request that sampled a token.  Every pass scores one token per request with the head's
  LM head (EAGLE-1: the target's vocabulary; EAGLE-3: its draft vocabulary).  The fc layer
  that projects hidden states into one (EAGLE-1: embedding and hidden state, 2h -> h, in every
  pass; EAGLE-3: three target layers, 3h -> h, in pass 0) is costed with the built-in physical
  model, whatever profile the run uses.

Each pass goes through the draft's own :class:`ProfilePredictor` (profile, forest, LM head), plus
a fixed time per pass (``pass_overhead_ms``) for what no profile holds: vLLM's draft loop updates
positions, sequence lengths and the slot mapping with a handful of tiny kernels between passes,
launches the head's piecewise CUDA graph around an eager attention, and takes an argmax
(:func:`passes_fixed_seconds`; the evidence for its default is in
``data/calibration/engine_costs.toml``).
"""

from __future__ import annotations

from vidur.entities import Batch

from simulator.config import DEFAULT_DRAFT_PASS_OVERHEAD_MS
from simulator.engine.batch import SpecBatch
from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.shapes import ModelShape


class NgramProposer:
    def __init__(self, overhead_ms: float):
        self._seconds = overhead_ms * 1e-3

    def step_seconds(self, batch: SpecBatch) -> float:
        return self._seconds if batch.num_proposals else 0.0


def _finishing_prefills(rows) -> int:
    return sum(1 for r, q, _ in rows if not r.is_prefill_complete and r.num_processed_tokens + q >= r.num_prefill_tokens)


def passes_fixed_seconds(passes: int, pass_overhead_ms: float) -> float:
    """The fixed time of ``passes`` draft passes: each pays ``pass_overhead_ms`` whatever its
    batch (launch-bound work: its kernels are too small for their size to matter)."""
    if passes < 0 or pass_overhead_ms < 0:
        raise ValueError(f"passes = {passes}, pass_overhead_ms = {pass_overhead_ms}: both must be >= 0")
    return passes * pass_overhead_ms * 1e-3


class DraftProposer:
    def __init__(self, draft_predictor, pass_overhead_ms: float = DEFAULT_DRAFT_PASS_OVERHEAD_MS):
        self._predictor = draft_predictor
        self._pass_overhead_ms = pass_overhead_ms

    def _pass(self, replica_id, rows, logits_rows: int, decode_rows=None) -> float:
        """One draft pass: the profiled forward and LM head, plus the pass's fixed time.

        ``decode_rows`` (one flag per row) marks rows that run several tokens over their cache in
        one varlen attention, as a verify row does: they are costed by the verify model
        (:mod:`simulator.speculative.verify_cost`), not one by one as prompt chunks."""
        requests, q, kv = (list(column) for column in zip(*rows))
        if decode_rows is None:
            batch = Batch(replica_id, requests, q, kv)
        else:
            batch = SpecBatch(replica_id, requests, q, kv, q, list(decode_rows))
        forward = self._predictor.pass_seconds(batch, logits_rows)
        return forward + passes_fixed_seconds(1, self._pass_overhead_ms)

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
            logits_rows = len(rows)
            if j == 0:
                rows += prefill
                logits_rows += _finishing_prefills(prefill)
            if rows:
                seconds += self._pass(batch.replica_id, rows, logits_rows)
        return seconds


class EagleProposer(DraftProposer):
    def __init__(
        self, head_predictor, head_shape: ModelShape, fc_inputs: int, fc_every_pass: bool, device: DeviceSpec,
        pass_overhead_ms: float = DEFAULT_DRAFT_PASS_OVERHEAD_MS,
    ):
        super().__init__(head_predictor, pass_overhead_ms)
        self._fc_inputs = fc_inputs
        self._fc_every_pass = fc_every_pass
        self._shape = head_shape
        self._gpu = device

    def _fc_seconds(self, tokens: int) -> float:
        h = self._shape.embedding_dim
        return 1e-3 * float(roofline.gemm_ms(tokens, h, self._fc_inputs * h, self._gpu))

    def step_seconds(self, batch: SpecBatch) -> float:
        rows = list(zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens))
        passes = max(batch.proposals, default=0)
        if passes == 0:
            return 0.0
        # pass 0: the head over every token the target computed, one logits row per request; its
        # attention is one varlen kernel as the target's verify is (the verified rows' queries
        # over their cache), not a prompt chunk per row
        tokens = sum(q for _, q, _ in rows)
        seconds = self._fc_seconds(tokens) + self._pass(batch.replica_id, rows, len(rows), batch.decode_rows)
        # passes 1..k-1: one token for every request that sampled a token this step (vLLM drafts
        # for all of them, whatever k' verification allowed), its context grown by the tokens
        # this step accepted and the drafts so far
        sampled = []
        for (r, q, kv), decode, progress in zip(rows, batch.decode_rows, batch.progress_tokens):
            if decode:
                sampled.append((r, kv - q + progress))
            elif r.num_processed_tokens + q >= r.num_prefill_tokens:
                sampled.append((r, kv + 1))
        for j in range(1, passes):
            step_rows = [(r, 1, context + j) for r, context in sampled]
            seconds += self._pass(batch.replica_id, step_rows, len(step_rows))
            if self._fc_every_pass:
                seconds += self._fc_seconds(len(step_rows))
        return seconds
