"""What proposing costs, added by the target's predictor to every speculative step: the Vidur glue
that prices the work a proposer kind describes.

A kind (:mod:`simulator.speculative.proposers`) says what one step's proposing runs, from the
step's plan, as a :class:`~simulator.speculative.proposers.base.StepWork`: host time (an n-gram or
suffix lookup), GPU kernels over token ids (the GPU n-gram matcher) and forwards of the draft
network.  This module prices each and adds them; a step's cost is exactly that sum:

* a draft pass: one forward of the draft network over the pass's rows (a
  :class:`~simulator.engine.batch.DraftBatch`) through the draft side's predictor (profile or built-in tables, LM head on the pass's logits rows; no engine
  overhead, it runs inside the target's step), plus the fixed time of a pass
  (:func:`passes_fixed_seconds`: vLLM's draft loop updates positions, sequence lengths and the slot
  mapping with a handful of tiny kernels between passes, launches the head's piecewise CUDA graph
  around an eager attention, and takes an argmax; the evidence for its default is in
  ``data/calibration/engine_costs.toml``), plus the pass's fc GEMM and context K/V projections
  from the built-in physical model (:func:`simulator.profiles.roofline.gemm_ms`), whatever profile
  the run uses;
* a token scan: a memory-bound kernel of the built-in physical model
  (:func:`simulator.profiles.roofline.streaming_ms`).
"""

from __future__ import annotations

from simulator.speculative.proposers.base import DEFAULT_DRAFT_PASS_OVERHEAD_MS
from simulator.engine.batch import DraftBatch, SpeculativeBatch
from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import ModelShape
from simulator.speculative.proposers.base import DraftPass, StepWork, TokenScan


def passes_fixed_seconds(passes: int, pass_overhead_ms: float) -> float:
    """The fixed time of ``passes`` draft passes: each pays ``pass_overhead_ms`` whatever its
    batch (launch-bound work: its kernels are too small for their size to matter)."""
    if passes < 0 or pass_overhead_ms < 0:
        raise ValueError(f"passes = {passes}, pass_overhead_ms = {pass_overhead_ms}: both must be >= 0")
    return passes * pass_overhead_ms * 1e-3


class ProposerCost:
    """A run's proposer, priced: ``step_seconds(batch)`` is what the target's predictor adds to a
    speculative step (the contract of :class:`simulator.engine.predictor.ProfilePredictor`).

    ``predictor`` is the draft side's (None for a proposer without a network), ``shape`` one GPU's
    share of the draft network and ``layers`` its decoder layers (for context K/V projections).
    """

    def __init__(self, model, predictor=None, shape: ModelShape | None = None, layers: int = 0, device: DeviceSpec | None = None,
                 pass_overhead_ms: float = DEFAULT_DRAFT_PASS_OVERHEAD_MS):
        self.model = model
        self._predictor = predictor
        self._shape = shape
        self._layers = layers
        self._gpu = device
        self._pass_overhead_ms = pass_overhead_ms
        self._pass_fixed_s = passes_fixed_seconds(1, pass_overhead_ms)
        self._memo: dict = {}

    def step_seconds(self, batch: SpeculativeBatch) -> float:
        return self.work_seconds(self.model.work(batch.plan), batch.replica_id)

    def work_seconds(self, work: StepWork, replica_id: int = 0) -> float:
        """The cost of ``work``: its host time, each token scan, then each pass's terms, added in
        that order (so a step's cost is the sum of its passes, term by term)."""
        seconds = work.host_seconds
        for scan in work.scans:
            seconds += self.scan_seconds(scan)
        for draft_pass in work.passes:
            for term in self.pass_terms(draft_pass, replica_id):
                seconds += term
        return seconds

    def pass_seconds(self, draft_pass: DraftPass, replica_id: int = 0) -> float:
        return sum(self.pass_terms(draft_pass, replica_id))

    def pass_terms(self, draft_pass: DraftPass, replica_id: int = 0) -> list[float]:
        """One draft pass: the forward with its LM head and the fixed per-pass time, then the fc
        GEMM and the context K/V projections (the terms that are not zero)."""
        rows = draft_pass.rows
        requests, q, kv, multi_query = zip(*rows) if rows else ((), (), (), ())
        decode_rows = None if multi_query.count(None) == len(rows) else [bool(m) for m in multi_query]
        batch = DraftBatch(replica_id, requests, q, kv, decode_rows)
        terms = [self._predictor.pass_seconds(batch, draft_pass.logits_rows) + self._pass_fixed_s]
        if draft_pass.fc_inputs and draft_pass.fc_tokens:
            terms.append(self._fc_seconds(draft_pass.fc_tokens, draft_pass.fc_inputs))
        if draft_pass.context_kv_tokens:
            terms.append(self._context_kv_seconds(draft_pass.context_kv_tokens))
        return terms

    # the two GEMMs of the built-in physical model, memoised per token count: a run asks for the
    # same few hundred counts thousands of times, and each is a NumPy call on one number
    def _fc_seconds(self, tokens: int, inputs: int) -> float:
        key = ("fc", tokens, inputs)
        if key not in self._memo:
            h = self._shape.embedding_dim
            self._memo[key] = 1e-3 * float(roofline.gemm_ms(tokens, h, inputs * h, self._gpu))
        return self._memo[key]

    def _context_kv_seconds(self, tokens: int) -> float:
        key = ("context_kv", tokens)
        if key not in self._memo:
            shape = self._shape
            kv_width = 2 * shape.kv_heads_per_worker * shape.head_dim
            self._memo[key] = self._layers * 1e-3 * float(roofline.gemm_ms(tokens, kv_width, shape.embedding_dim, self._gpu))
        return self._memo[key]

    def scan_seconds(self, scan: TokenScan) -> float:
        return 1e-3 * float(roofline.streaming_ms(scan.bytes, self._gpu.constants.add_eff, self._gpu))
