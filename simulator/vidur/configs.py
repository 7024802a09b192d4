"""Vidur's config classes the project builds or subclasses, and the two that keep a run in memory.

Light: ``vidur.config`` and ``vidur.types`` only, so resolving a run (which builds Vidur's
``ReplicaConfig``) never imports Vidur's predictors.  Importing this module registers the SKUs of
``devices.toml`` (:mod:`simulator.vidur.skus`): a ``ReplicaConfig`` cannot be built here before
Vidur knows every device the project does.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur.config import (
    BaseExecutionTimePredictorConfig,
    BaseRequestGeneratorConfig,
    CacheConfig,
    ClusterConfig,
    FixedRequestLengthGeneratorConfig,
    MetricsConfig,
    PoissonRequestIntervalGeneratorConfig,
    RandomForrestExecutionTimePredictorConfig,
    ReplicaConfig,
    RoundRobinGlobalSchedulerConfig,
    SarathiSchedulerConfig,
    SimulationConfig,
    SyntheticRequestGeneratorConfig,
)
from vidur.config.model_config import BaseModelConfig, Llama2ModelConfig
from vidur.types import BaseIntEnum

from simulator.vidur import skus  # noqa: F401  (registers devices.toml's SKUs before any ReplicaConfig)

__all__ = [
    "BaseExecutionTimePredictorConfig", "BaseIntEnum", "BaseModelConfig", "BaseRequestGeneratorConfig", "CacheConfig", "ClusterConfig",
    "FixedRequestLengthGeneratorConfig", "InMemorySimulationConfig", "Llama2ModelConfig", "MetricsConfig", "PoissonRequestIntervalGeneratorConfig",
    "QuietMetricsConfig", "RandomForrestExecutionTimePredictorConfig", "ReplicaConfig", "RoundRobinGlobalSchedulerConfig", "SarathiSchedulerConfig",
    "SimulationConfig", "SyntheticRequestGeneratorConfig",
]


@dataclass
class QuietMetricsConfig(MetricsConfig):
    """Metrics off and no timestamped output directory in the working directory (Vidur 0.0.26's
    ``MetricsConfig.__post_init__`` creates one; the project frames its own results)."""

    write_metrics: bool = False
    enable_chrome_trace: bool = False
    store_plots: bool = False

    def __post_init__(self):
        pass


@dataclass
class InMemorySimulationConfig(SimulationConfig):
    """Vidur's simulation config without the config dump it writes into that output directory."""

    def write_config_to_file(self):
        pass
