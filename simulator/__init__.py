"""Speculative decoding modelled on Microsoft Vidur.

``simulator.run(RunConfig(...))`` runs one simulation and returns a :class:`RunResult`.
Vidur and pandas are imported on first use, so reading configs and every CLI's ``--help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload

if TYPE_CHECKING:
    from simulator.runs.results import RunResult

__all__ = ["run", "RunConfig", "RunResult", "PoissonWorkload", "ExplicitWorkload", "ClosedLoopWorkload", "SpeculationConfig"]


def run(config: RunConfig) -> RunResult:
    """Simulate one configuration: resolved once (:mod:`simulator.engine.resolve`), then run
    (:mod:`simulator.engine.simulation`)."""
    from simulator.engine.resolve import resolve_run
    from simulator.engine.simulation import simulate

    return simulate(resolve_run(config))


def __getattr__(name: str):
    if name == "RunResult":  # pandas behind it: loaded when asked for
        from simulator.runs.results import RunResult

        return RunResult
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
