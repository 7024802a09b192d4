"""The built-in profile's predictor: each step costed whole by the engine's step-time model.

Vidur's own predictors sum per-op times looked up in tables fitted to a measured profile; the
built-in profile *is* a model of the step (:mod:`simulator.profiles.step`), so this predictor asks
it directly, once per step, for the batch Vidur's scheduler formed: no tables, no forest.  A step
costs

    engine overhead (CPU, per step)  +  the forward and logits (StepModel.forward)
                                     +  the proposer's passes (speculative steps)

or, with asynchronous scheduling (vLLM >= 0.14 for runs without speculation or with an EAGLE-type
proposer), max(host overhead, forward + proposer) plus the hand-over gap between steps.  A run
fitted to a server (``step_scales``, :mod:`simulator.profiles.step_scales`) scales the forward's
terms and the proposer's time before they are added.

A verify row of k' + 1 queries is an attention row of k' + 1 queries over its cache: the attention
backend costs it under the run's verify assumption (``kv_once`` by default).
"""

from __future__ import annotations

import operator
from typing import Optional

from simulator.engine.batch import SpeculativeBatch
from simulator.engine.predictor_config import AnalyticPredictorConfig, step_seconds  # noqa: F401  (its configuration, importable from here)
from simulator.engine.types import ExtensionType
from simulator.profiles.attention import AttentionRows
from simulator.profiles.step import StepCost, StepModel
from simulator.vidur.runtime import ExecutionTimePredictorRegistry
from simulator.vidur.seam import WholeStepPredictorSeam


class StepTime:
    """What Vidur reads of a step's execution time: the whole step and the model's part of it."""

    __slots__ = ("total_time", "model_time", "cost")

    def __init__(self, total_s: float, model_s: float, cost: StepCost):
        self.total_time = total_s
        self.model_time = model_s
        self.cost = cost


def batch_rows(batch) -> tuple[AttentionRows, int, int, int]:
    """(attention rows, computed tokens, logits rows, uniform decode) of a batch: a Vidur batch, a
    :class:`SpeculativeBatch` or a draft pass's :class:`DraftBatch`.

    A decode or verify row attends over its cache and the step's own tokens; a prefill chunk
    over the prompt cached before it.  Logits come from every decode/verify token and from the
    last token of a prompt that completes in the step.  The batch is a uniform decode when every
    row is a decode/verify row with the same query count (vLLM's full-graph condition); that count
    is returned (0: not uniform), since a runner captures full graphs per query length.  Which
    rows decode: the batch's ``decode_rows`` where it has them, else Vidur's rule (the request's
    prefill is complete)."""
    requests, q_tokens, kv_tokens = batch.requests, batch.num_q_tokens, batch.num_kv_tokens
    flags = getattr(batch, "decode_rows", None)
    if flags is None:
        flags = [request.is_prefill_complete for request in requests]
    tokens = sum(q_tokens)
    if all(flags):  # every row decodes (most steps): the same rows, read column-wise
        decode = tuple(zip(q_tokens, map(operator.add, kv_tokens, q_tokens)))
        return AttentionRows(decode, ()), tokens, tokens, (q_tokens[0] if len(set(q_tokens)) == 1 else 0)
    decode = tuple((q, kv + q) for q, kv, is_decode in zip(q_tokens, kv_tokens, flags) if is_decode)
    chunks = [(request, q, kv) for request, q, kv, is_decode in zip(requests, q_tokens, kv_tokens, flags) if not is_decode]
    prefill = tuple((q, kv) for _, q, kv in chunks)
    logits = sum(q for q, _ in decode) + sum(1 for request, q, _ in chunks if request.num_processed_tokens + q >= request.num_prefill_tokens)
    return AttentionRows(decode, prefill), tokens, logits, 0


class AnalyticPredictor(WholeStepPredictorSeam):
    def __init__(self, predictor_config, replica_config, cache_config):
        super().__init__(predictor_config, replica_config, cache_config)
        self._model: StepModel = predictor_config.step_model
        self._timing = predictor_config  # its host-time fields (step_seconds)
        self.proposer = predictor_config.proposer
        self.scales = predictor_config.scales

    @property
    def step_model(self) -> StepModel:
        return self._model

    def forward_cost(self, batch, logits_rows: Optional[int] = None) -> StepCost:
        rows, tokens, logits, uniform = batch_rows(batch)
        return self._model.forward(rows, tokens, logits if logits_rows is None else logits_rows, uniform)

    def pass_seconds(self, batch, logits_rows: int) -> float:
        """One forward of this model over ``batch`` scoring ``logits_rows`` tokens: a draft pass
        (no engine overhead: it runs inside the target's step)."""
        return self.forward_cost(batch, logits_rows).total_ms * 1e-3

    def get_execution_time(self, batch, pipeline_stage: int) -> StepTime:
        cost = self.forward_cost(batch)
        scales = self.scales
        model_s = (cost.total_ms if scales is None else scales.forward_ms(cost)) * 1e-3
        gpu_s = model_s
        if self.proposer is not None and isinstance(batch, SpeculativeBatch):
            proposing_s = self.proposer.step_seconds(batch)
            gpu_s += proposing_s if scales is None else scales.drafter * proposing_s
        return StepTime(step_seconds(gpu_s, self._timing), model_s, cost)


ExecutionTimePredictorRegistry.register(ExtensionType.ANALYTIC, AnalyticPredictor)
