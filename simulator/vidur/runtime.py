"""Vidur's runtime names the project extends or calls: its registries, request generators,
events, simulator, memory planner and parameter counter.

Heavy (Vidur's predictors import scikit-learn and SciPy): the simulation imports it, resolving a
run does not.
"""

from __future__ import annotations

from vidur.events import RequestArrivalEvent
from vidur.execution_time_predictor import ExecutionTimePredictorRegistry
from vidur.execution_time_predictor.sklearn_execution_time_predictor import ModelType
from vidur.request_generator import RequestGeneratorRegistry
from vidur.request_generator.base_request_generator import BaseRequestGenerator
from vidur.request_generator.synthetic_request_generator import SyntheticRequestGenerator
from vidur.scheduler.replica_scheduler.replica_scheduler_registry import ReplicaSchedulerRegistry
from vidur.simulator import Simulator
from vidur.utils.memory_planner import MemoryPlanner
from vidur.utils.param_counter import ParamCounter

from simulator.vidur.entities import Request
from simulator.vidur.seam import reset_entity_ids

__all__ = [
    "BaseRequestGenerator", "ExecutionTimePredictorRegistry", "MemoryPlanner", "ModelType", "ParamCounter", "ReplicaSchedulerRegistry",
    "RequestArrivalEvent", "RequestGeneratorRegistry", "Simulator", "SyntheticRequestGenerator", "synthetic_request_rows",
]


def synthetic_request_rows(config) -> list[tuple[float, int, int]]:
    """(arrival, prefill tokens, decode tokens) of the stream Vidur's synthetic generator draws for
    ``config`` (a ``SyntheticRequestGeneratorConfig``), so a project run sees a stock run's requests.

    The stock generator numbers its Requests from Vidur's process-global counter; it is reset
    after, so the project's own requests are numbered from zero in arrival order (their ids key
    the acceptance draws).
    """
    rows = [(r.arrived_at, r.num_prefill_tokens, r.num_decode_tokens) for r in SyntheticRequestGenerator(config).generate()]
    reset_entity_ids(Request)
    return rows
