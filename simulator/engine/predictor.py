"""Vidur's sklearn predictor over a Vidur-format profile directory, costing verify steps.

(The built-in profile has its own predictor, :mod:`simulator.engine.analytic`, which costs whole
steps from the step-time model.)  Changes against the stock forest, each for a reason:
* profiles come from local files, never from the HuggingFace hub (``_get_input_files``,
  ``_load_predictions_from_hf``);
* the forest is seeded (``random_state``), so the same profile always gives the same tables;
* the cache key covers what the predictions depend on: profile bytes, model dimensions,
  device, fit settings, prediction ranges and the Vidur version (the stock key ignores most);
* a verify row (k' + 1 queries over its KV) is costed by :mod:`simulator.speculative.verify_cost`
  instead of silently as a small prefill; decode batches past the profiled range are extrapolated;
* the proposer's time (n-gram overhead or draft passes) is added to the step.
"""

from __future__ import annotations

from pathlib import Path

from sklearn.ensemble import RandomForestRegressor

from simulator.engine.batch import DraftBatch, SpeculativeBatch
from simulator.engine.predictor_config import ProfilePredictorConfig, step_seconds  # noqa: F401  (its configuration, importable from here)
from simulator.util.hashing import json_digest
from simulator.util.progress import say
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS as PREDICTED_OPS
from simulator.engine.types import ExtensionType
from simulator.speculative.verify_cost import extrapolate_batch, verify_attention_ms
from simulator.util.versions import vidur_version
from simulator.vidur.entities import ExecutionTimePlus
from simulator.vidur.runtime import ExecutionTimePredictorRegistry, ModelType
from simulator.vidur.seam import ForestPredictorSeam

FOREST_SEED = 0
# Prediction tables already loaded in this process, by cache key: a sweep loads them once.
_TABLES: dict[str, dict] = {}


def logits_tokens(batch) -> int:
    """Tokens whose logits a step computes: every token of a decode / verify row, and the last
    token of a prefill that finishes in this step (vLLM samples only there)."""
    total = 0
    for request, q in zip(batch.requests, batch.num_q_tokens):
        if request.is_prefill_complete:
            total += q
        elif request.num_processed_tokens + q >= request.num_prefill_tokens:
            total += 1
    return total


class ProfilePredictor(ForestPredictorSeam):
    """Vidur's sklearn predictor over a local profile directory, costing verify
    steps, the LM head, the engine overhead and the proposer (every Vidur hook it uses is a
    public method of :class:`~simulator.vidur.seam.ForestPredictorSeam`)."""

    def __init__(self, predictor_config, replica_config, cache_config):
        self.proposer = predictor_config.proposer
        super().__init__(predictor_config=predictor_config, replica_config=replica_config, cache_config=cache_config)
        self._decode_lookup = extrapolate_batch(self._profiled_decode_ms, predictor_config.max_profiled_decode_batch)

    # --- offline, seeded, correctly keyed --------------------------------------------------
    def input_files(self):
        config = self.predictor_config
        return config.mlp_csv, config.attention_csv, config.all_reduce_csv, ""

    def load_predictions(self) -> dict:
        # The local profile is the only source.  Cached prediction tables are enough to run;
        # the forests themselves are loaded (or trained) only when a table is missing.
        key = self.cache_key(ModelType.COMPUTE)
        if key not in _TABLES:
            cached = self._cached_predictions()
            if cached is None:  # the one slow step of a first run on a profile directory: say so
                say(f"fitting Vidur's random forests for {self.model_config.get_name()} on {Path(self.predictor_config.mlp_csv).parent} (once; cached)")
            _TABLES[key] = cached if cached is not None else self.fit_and_predict()
        return _TABLES[key]

    def _cached_predictions(self):
        key = self.cache_key(ModelType.COMPUTE)
        names = [(name, key) for name in PREDICTED_OPS + ("attn_kv_cache_save", "attn_prefill", "attn_decode")]
        if self.replica_config.tensor_parallel_size > 1:  # Vidur keys network tables on their own hash
            names.append(("all_reduce", self.cache_key(ModelType.NETWORK)))
        tables = {}
        for name, key in names:
            table = self.cached_table(name, key)
            if not table:
                return None
            tables[name] = table
        return tables

    def estimator(self):
        return RandomForestRegressor(random_state=FOREST_SEED)

    def cache_key(self, model_type: ModelType) -> str:
        model, config, replica = self.model_config, self.predictor_config, self.replica_config
        key = {
            "kind": model_type.value,
            "predictor": type(self).__name__,
            "vidur": vidur_version(),
            "profile_sha256": config.profile_sha256,
            "model": [model.get_name(), model.num_q_heads, model.num_kv_heads, model.embedding_dim, model.mlp_hidden_dim, model.vocab_size, model.use_gated_mlp],
            "device": replica.device,
            "tp": replica.tensor_parallel_size,
            "block_size": self.block_size,
            "fit": [config.num_estimators, config.max_depth, config.min_samples_split, config.k_fold_cv_splits, FOREST_SEED],
            "ranges": [self.table_tokens, config.prediction_max_batch_size, config.prediction_max_prefill_chunk_size, config.kv_cache_prediction_granularity],
        }
        return json_digest(key, 16)

    # --- verify-aware attention ----------------------------------------------------------
    def _round_kv(self, kv: float) -> int:
        g = self.predictor_config.kv_cache_prediction_granularity
        return (int(kv) + g - 1) // g * g

    def _profiled_decode_ms(self, batch: int, mean_kv: float) -> float:
        overhead = 1 + self.decode_batching_overhead * int(batch > 1)
        return self.predictions["attn_decode"][(batch, self._round_kv(mean_kv))] * overhead

    def decode_attention_ms(self, rows) -> float:
        """Decode-kernel time for rows [(queries, kv)] under the configured verify assumption."""
        config = self.predictor_config
        return verify_attention_ms(rows, self._decode_lookup, config.attention_mode, config.interpolation)

    def prefill_attention_rows(self, batch):
        if not isinstance(batch, SpeculativeBatch):
            return super().prefill_attention_rows(batch)
        if batch.prefill_rows is None:  # once per batch: Vidur asks once per layer group
            batch.prefill_rows = [
                (self._round_kv(kv), q) for q, kv, is_decode in zip(batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows) if not is_decode
            ]
        return batch.prefill_rows

    def decode_attention_time(self, batch) -> float:
        if not isinstance(batch, SpeculativeBatch):
            # Vidur's own costing, but past the profiled batch range it extrapolates instead of failing
            size, mean_kv = self.decode_attention_rows(batch)
            return self._decode_lookup(size, mean_kv) if size else 0
        rows = [(q, kv) for q, kv, d in zip(batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows) if d]
        return self.decode_attention_ms(rows)

    def logits_ms(self, tokens: int) -> float:
        """LM head + sampler for ``tokens`` logits rows (0 when the run does not cost them)."""
        logits = self.predictor_config.logits
        return logits.step_ms(tokens) if logits else 0.0

    def pass_seconds(self, batch: DraftBatch, logits_rows: int) -> float:
        """One forward pass of this model over ``batch`` that scores ``logits_rows`` tokens: what a
        proposer's draft pass costs (no engine overhead: it runs inside the target's step)."""
        base = super().get_execution_time(batch.vidur_batch(), 0)
        return base.total_time + 1e-3 * self.logits_ms(logits_rows)

    def get_execution_time(self, batch, pipeline_stage: int):
        base = super().get_execution_time(batch, pipeline_stage)
        gpu_s = base.total_time + 1e-3 * self.logits_ms(logits_tokens(batch))
        if self.proposer is not None and isinstance(batch, SpeculativeBatch):
            gpu_s += self.proposer.step_seconds(batch)
        extra_s = step_seconds(gpu_s, self.predictor_config) - base.total_time  # the host time as the built-in profile adds it
        return ExecutionTimePlus(base, extra_s) if extra_s else base


ExecutionTimePredictorRegistry.register(ExtensionType.PROFILE_FOREST, ProfilePredictor)
