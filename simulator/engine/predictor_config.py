"""The two execution-time predictors' configurations, apart from the predictors themselves.

Resolving a run (:mod:`simulator.engine.resolve`) builds one of these per model side; it needs
Vidur's config classes, not its predictor machinery, which imports scikit-learn, SciPy and the
rest (about 1.5 s): a question answered from the result cache, or refused before anything is
simulated, never loads it.  The predictors are :mod:`simulator.engine.analytic` (the built-in
profile's step-time model) and :mod:`simulator.engine.predictor` (a Vidur-format profile
directory's forest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from simulator.engine.types import ExtensionType
from simulator.profiles.logits import LogitsTable
from simulator.profiles.step import StepModel
from simulator.profiles.step_scales import StepScales
from simulator.speculative.verify_cost import DEFAULT_ATTENTION, DEFAULT_INTERPOLATION
from simulator.vidur.configs import BaseExecutionTimePredictorConfig, RandomForrestExecutionTimePredictorConfig


def step_seconds(gpu_s: float, config) -> float:
    """A step's time from its GPU time and the engine's host time per step, the one rule both
    predictors follow: their sum in a synchronous engine; with asynchronous scheduling (vLLM >= 0.14,
    where the proposer keeps it) the host prepares the next step while the GPU runs this one, so
    the longer of the two plus the hand-over gap.  ``config`` is either predictor's configuration."""
    host_s = config.engine_overhead_ms * 1e-3
    if config.async_scheduling:
        return max(gpu_s, host_s) + config.async_step_gap_ms * 1e-3
    return gpu_s + host_s


@dataclass
class AnalyticPredictorConfig(BaseExecutionTimePredictorConfig):
    step_model: Optional[StepModel] = None
    # the engine's CPU time per step outside the forward (a draft's passes run inside the
    # target's step and pay none)
    engine_overhead_ms: float = 0.0
    # what proposing costs, added to speculative steps (simulator.engine.proposers); None: nothing
    proposer: Optional[object] = None
    # the engine overlaps its per-step host time with the GPU (vLLM's async scheduling): a step
    # takes max(GPU, host) + async_step_gap_ms instead of GPU + host
    async_scheduling: bool = False
    async_step_gap_ms: float = 0.0
    # a server's fitted multipliers on the step model's terms (simulator.profiles.step_scales);
    # None: the built-in profile as it stands
    scales: Optional[StepScales] = None

    @staticmethod
    def get_type():
        return ExtensionType.ANALYTIC


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
    # the engine's host time per step and whether it overlaps the GPU: as the built-in profile's (step_seconds)
    async_scheduling: bool = False
    async_step_gap_ms: float = 0.0
    # verify costing (ignored for plain decode batches)
    attention_mode: str = DEFAULT_ATTENTION
    interpolation: float = DEFAULT_INTERPOLATION
    # time outside Vidur's op set, added to every step: LM head + sampler per logits token
    # (an empty table: not costed, as stock Vidur) and the engine's fixed per-step overhead
    logits: Optional[LogitsTable] = None
    engine_overhead_ms: float = 0.0
    # what proposing costs, added to speculative steps (simulator.engine.proposers); None: nothing
    proposer: Optional[object] = None

    @staticmethod
    def get_type():
        return ExtensionType.PROFILE_FOREST
