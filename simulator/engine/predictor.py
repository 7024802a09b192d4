"""Vidur's sklearn predictor, fed offline from a local profile or the built-in model, costing verify steps.

Changes against the stock forest, each for a reason:
* the built-in profile needs no forest: its tables are the physical model evaluated at every point
  Vidur looks up (:func:`simulator.profiles.builtin.prediction_tables`); a Vidur-format profile
  directory is fitted by Vidur's forest as usual;
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

import hashlib
import json
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from vidur.config import RandomForrestExecutionTimePredictorConfig
from vidur.execution_time_predictor import ExecutionTimePredictorRegistry
from vidur.execution_time_predictor.random_forrest_execution_time_predictor import RandomForrestExecutionTimePredictor
from vidur.execution_time_predictor.sklearn_execution_time_predictor import ModelType

from simulator.engine.batch import SpecBatch
from simulator.profiles.builtin import BuiltinModel, PredictionGrid, prediction_tables
from simulator.profiles.logits import LogitsTable
from simulator.profiles.vidur_format import PREDICTED_MLP_OPS as PREDICTED_OPS
from simulator.engine.types import ExtensionType
from simulator.speculative.verify_cost import extrapolate_batch, verify_attention_ms
from simulator.versions import vidur_version

FOREST_SEED = 0
# Prediction tables already loaded in this process, by cache key: a sweep loads them once.
_TABLES: dict[str, dict] = {}


@dataclass
class ProfilePredictorConfig(RandomForrestExecutionTimePredictorConfig):
    """Forest fitted on local CSVs.  Fast fit settings by default (one combination, 3-fold)."""

    mlp_csv: str = ""
    attention_csv: str = ""
    all_reduce_csv: str = ""  # Vidur-format all_reduce.csv; read only at tensor parallelism > 1
    profile_sha256: str = ""
    max_profiled_decode_batch: int = 128
    num_estimators: List[int] = field(default_factory=lambda: [100])
    max_depth: List[int] = field(default_factory=lambda: [32])
    min_samples_split: List[int] = field(default_factory=lambda: [2])
    k_fold_cv_splits: int = 3
    prediction_max_tokens_per_request: int = 4096
    # verify costing (ignored for plain decode batches)
    attention_mode: str = "kv_once"
    interpolation: float = 0.5
    # time outside Vidur's op set, added to every step: LM head + sampler per logits token
    # (an empty table: not costed, as stock Vidur) and the engine's fixed per-step overhead
    logits: Optional[LogitsTable] = None
    engine_overhead_ms: float = 0.0
    # the built-in physical model: its tables are evaluated point by point, no forest is fitted
    builtin: Optional[BuiltinModel] = None
    # what proposing costs, added to speculative steps (simulator.engine.proposers); None: nothing
    proposer: Optional[object] = None

    @staticmethod
    def get_type():
        return ExtensionType.PROFILE_FOREST


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


class StepTime:
    """A step's execution time: Vidur's model time plus time outside Vidur's op set (LM head,
    sampler, engine overhead, the proposer).

    Delegates every other attribute to Vidur's ExecutionTime, so its per-op breakdown stays intact.
    """

    __slots__ = ("base", "extra_seconds", "total_time", "model_time")

    def __init__(self, base, extra_seconds: float):
        self.base = base
        self.extra_seconds = extra_seconds
        self.model_time = base.model_time
        self.total_time = base.total_time + extra_seconds

    def __getattr__(self, name):
        return getattr(self.base, name)


class ProfilePredictor(RandomForrestExecutionTimePredictor):
    def __init__(self, predictor_config, replica_config, cache_config):
        self.proposer = predictor_config.proposer
        super().__init__(predictor_config=predictor_config, replica_config=replica_config, cache_config=cache_config)
        self._decode_lookup = extrapolate_batch(self._profiled_decode_ms, predictor_config.max_profiled_decode_batch)

    # --- offline, seeded, correctly keyed --------------------------------------------------
    def _get_input_files(self):
        return self._config.mlp_csv, self._config.attention_csv, self._config.all_reduce_csv, ""

    def _load_predictions_from_hf(self):
        # The local profile is the only source.  Cached prediction tables are enough to run;
        # the forests themselves are loaded (or trained) only when a table is missing.  The
        # built-in model needs neither: its tables are computed exactly, in well under a second.
        key = self._get_hash(ModelType.COMPUTE)
        if key not in _TABLES:
            if self._config.builtin is not None:
                _TABLES[key] = self._builtin_predictions()
            else:
                cached = self._cached_predictions()
                _TABLES[key] = cached if cached is not None else self._predict_from_models(self._train_models())
        return _TABLES[key]

    def _builtin_predictions(self) -> dict:
        """Vidur's tables from the physical model, on the grid Vidur predicts over; measured
        all-reduce rows (a network profile beside the built-in compute) still go through the forest."""
        config = self._config
        grid = PredictionGrid(
            self._max_tokens, config.prediction_max_batch_size, config.prediction_max_prefill_chunk_size, config.kv_cache_prediction_granularity
        )
        tables = prediction_tables(config.builtin, grid)
        if self._replica_config.tensor_parallel_size > 1 and "all_reduce" not in tables:
            rows = self._get_all_reduce_df_with_derived_features(self._load_all_reduce_df(config.all_reduce_csv))
            forest = self._train_model("all_reduce", ModelType.NETWORK, rows, ["num_tokens"], "time_stats.all_reduce.median")
            tokens = pd.DataFrame({"num_tokens": np.arange(1, self._max_tokens + 1)})
            tables["all_reduce"] = self._get_model_prediction("all_reduce", ModelType.NETWORK, forest, tokens)
        return tables

    def _cached_predictions(self):
        key = self._get_hash(ModelType.COMPUTE)
        names = [(name, key) for name in PREDICTED_OPS + ("attn_kv_cache_save", "attn_prefill", "attn_decode")]
        if self._replica_config.tensor_parallel_size > 1:  # Vidur keys network tables on their own hash
            names.append(("all_reduce", self._get_hash(ModelType.NETWORK)))
        tables = {}
        for name, key in names:
            table = self._load_model_prediction_cache(name, key)
            if not table:
                return None
            tables[name] = table
        return tables

    def _get_estimator(self):
        return RandomForestRegressor(random_state=FOREST_SEED)

    def _get_hash(self, model_type: ModelType) -> str:
        model = self._model_config
        key = {
            "kind": model_type.value,
            "predictor": type(self).__name__,
            "vidur": vidur_version(),
            "profile_sha256": self._config.profile_sha256,
            "model": [model.get_name(), model.num_q_heads, model.num_kv_heads, model.embedding_dim, model.mlp_hidden_dim, model.vocab_size, model.use_gated_mlp],
            "device": self._replica_config.device,
            "tp": self._replica_config.tensor_parallel_size,
            "block_size": self._block_size,
            "fit": [self._config.num_estimators, self._config.max_depth, self._config.min_samples_split, self._config.k_fold_cv_splits, FOREST_SEED],
            "ranges": [self._max_tokens, self._config.prediction_max_batch_size, self._config.prediction_max_prefill_chunk_size, self._config.kv_cache_prediction_granularity],
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    # --- verify-aware attention ----------------------------------------------------------
    def _round_kv(self, kv: float) -> int:
        g = self._config.kv_cache_prediction_granularity
        return (int(kv) + g - 1) // g * g

    def _profiled_decode_ms(self, batch: int, mean_kv: float) -> float:
        overhead = 1 + self._attention_decode_batching_overhead_fraction * int(batch > 1)
        return self._predictions["attn_decode"][(batch, self._round_kv(mean_kv))] * overhead

    def decode_attention_ms(self, rows) -> float:
        """Decode-kernel time for rows [(queries, kv)] under the configured verify assumption."""
        return verify_attention_ms(rows, self._decode_lookup, self._config.attention_mode, self._config.interpolation)

    def _get_batch_prefill_attention_params(self, batch):
        if not isinstance(batch, SpecBatch):
            return super()._get_batch_prefill_attention_params(batch)
        if not hasattr(batch, "_prefill_params"):
            g = self._config.kv_cache_prediction_granularity
            batch._prefill_params = [
                ((kv + g - 1) // g * g, q)
                for q, kv, is_decode in zip(batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows)
                if not is_decode
            ]
        return batch._prefill_params

    def _get_attention_decode_execution_time(self, batch) -> float:
        if not isinstance(batch, SpecBatch):
            # Vidur's own costing, but past the profiled batch range it extrapolates instead of failing
            size, mean_kv = self._get_batch_decode_attention_params(batch)
            return self._decode_lookup(size, mean_kv) if size else 0
        rows = [(q, kv) for q, kv, d in zip(batch.num_q_tokens, batch.num_kv_tokens, batch.decode_rows) if d]
        return self.decode_attention_ms(rows)

    def logits_ms(self, tokens: int) -> float:
        """LM head + sampler for ``tokens`` logits rows (0 when the run does not cost them)."""
        logits = self._config.logits
        return logits.step_ms(tokens) if logits else 0.0

    def pass_seconds(self, batch, logits_rows: int) -> float:
        """One forward pass of this model over ``batch`` that scores ``logits_rows`` tokens: what a
        proposer's draft pass costs (no engine overhead: it runs inside the target's step)."""
        base = super().get_execution_time(batch, 0)
        return base.total_time + 1e-3 * self.logits_ms(logits_rows)

    def get_execution_time(self, batch, pipeline_stage: int):
        base = super().get_execution_time(batch, pipeline_stage)
        extra_ms = self._config.engine_overhead_ms + self.logits_ms(logits_tokens(batch))
        if self.proposer is not None and isinstance(batch, SpecBatch):
            extra_ms += 1e3 * self.proposer.step_seconds(batch)
        return StepTime(base, extra_ms * 1e-3) if extra_ms else base


ExecutionTimePredictorRegistry.register(ExtensionType.PROFILE_FOREST, ProfilePredictor)
