"""Speculative decoding modelled on Microsoft Vidur.

``simulator.run(RunConfig(...))`` runs one simulation and returns a :class:`RunResult`.
Vidur is imported on first use, so reading configs or results stays fast.
"""

from simulator.config import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload, RunConfig, SpeculationConfig
from simulator.results import RunResult

__all__ = ["run", "RunConfig", "RunResult", "PoissonWorkload", "ExplicitWorkload", "ClosedLoopWorkload", "SpeculationConfig"]


def run(config: RunConfig) -> RunResult:
    """Simulate one configuration: resolved once (:mod:`simulator.engine.resolve`), then run
    (:mod:`simulator.engine.simulation`)."""
    from simulator.engine.resolve import resolve_run
    from simulator.engine.simulation import simulate

    return simulate(resolve_run(config))
