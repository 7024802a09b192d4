"""Vidur alone: a run's requests through Vidur's own Sarathi scheduler, request generator and entities.

The reference this package is measured against: ``tests/test_run.py`` checks a stock (no
speculation) ``simulator.run`` reproduces it request for request, and ``bench/run_overhead.py``
times the wrapper against it.  Only the predictor is this package's (Vidur's stock predictor
downloads profiles from the hub, so it cannot run offline).  It imports nothing of pytest, so
the benchmark runs without the test extras.
"""

from __future__ import annotations

from simulator.runs.config import RunConfig
from simulator.engine.generator import vidur_synthetic_config
from simulator.engine.resolve import resolve_run
from simulator.vidur.configs import CacheConfig, ClusterConfig, InMemorySimulationConfig, QuietMetricsConfig, RoundRobinGlobalSchedulerConfig, SarathiSchedulerConfig
from simulator.vidur.runtime import Simulator
from simulator.vidur.seam import queued_requests, reset_entity_ids


def direct_vidur_simulator(config: RunConfig) -> Simulator:
    """Vidur's own simulator for ``config``'s workload, not yet run (its queued requests and its
    replica's predictor can be looked at first)."""
    workload = config.workload
    run = resolve_run(config)
    reset_entity_ids()
    return Simulator(
        InMemorySimulationConfig(
            cluster_config=ClusterConfig(
                num_replicas=1,
                replica_config=run.target.replica,
                cache_config=CacheConfig(),
                global_scheduler_config=RoundRobinGlobalSchedulerConfig(),
                replica_scheduler_config=SarathiSchedulerConfig(chunk_size=config.chunk_size, batch_size_cap=config.batch_size_cap),
            ),
            request_generator_config=vidur_synthetic_config(workload, workload.max_request_tokens),
            execution_time_predictor_config=run.target.predictor,
            metrics_config=QuietMetricsConfig(),
        )
    )


def direct_vidur_requests(config: RunConfig) -> list:
    """Vidur's finished ``Request`` objects for ``config``'s workload, by id."""
    sim = direct_vidur_simulator(config)
    requests = sorted(queued_requests(sim), key=lambda r: r.id)
    sim.run()
    return requests
