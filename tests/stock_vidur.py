"""Vidur alone: a run's requests through Vidur's own Sarathi scheduler, request generator and entities.

The reference this package is measured against: ``tests/test_run.py`` checks a stock (no
speculation) ``simulator.run`` reproduces it request for request, and ``bench/run_overhead.py``
times the wrapper against it.  Only the predictor is this package's (Vidur's stock predictor
downloads profiles from the hub, so it cannot run offline).  It reaches two private members of
Vidur's simulator (its event queue, an event's request), so it stays out of the package, whose
private Vidur access is all in the seam; and it imports nothing of pytest, so the benchmark runs
without the test extras.
"""

from __future__ import annotations

from simulator.config import RunConfig


def direct_vidur_requests(config: RunConfig) -> list:
    """Vidur's finished ``Request`` objects for ``config``'s workload, by id."""
    from vidur.config import CacheConfig, ClusterConfig, RoundRobinGlobalSchedulerConfig, SarathiSchedulerConfig
    from vidur.simulator import Simulator

    from simulator.engine import simulation
    from simulator.engine.generator import vidur_synthetic_config
    from simulator.engine.resolve import resolve_run
    from simulator.engine.vidur_seam import reset_entity_ids

    workload = config.workload
    run = resolve_run(config)
    reset_entity_ids()
    sim = Simulator(
        simulation.InMemorySimulationConfig(
            cluster_config=ClusterConfig(
                num_replicas=1,
                replica_config=run.target.replica,
                cache_config=CacheConfig(),
                global_scheduler_config=RoundRobinGlobalSchedulerConfig(),
                replica_scheduler_config=SarathiSchedulerConfig(chunk_size=config.chunk_size, batch_size_cap=config.batch_size_cap),
            ),
            request_generator_config=vidur_synthetic_config(workload, workload.max_request_tokens),
            execution_time_predictor_config=run.target.predictor,
            metrics_config=simulation.QuietMetricsConfig(),
        )
    )
    requests = sorted((event._request for _, event in sim._event_queue), key=lambda r: r.id)
    sim.run()
    return requests
