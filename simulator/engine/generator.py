"""Request generator that turns a workload description into SpecRequests.

Poisson workloads are drawn by Vidur's own synthetic generator with the same seed, so the
request stream is identical to a stock Vidur run; explicit workloads are replayed exactly;
closed-loop workloads are released by :class:`simulator.engine.closed_loop.ClosedLoopSimulator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload, Workload
from simulator.engine.request import SpeculativeRequest
from simulator.engine.types import ExtensionType
from simulator.vidur.configs import (
    BaseRequestGeneratorConfig,
    FixedRequestLengthGeneratorConfig,
    PoissonRequestIntervalGeneratorConfig,
    SyntheticRequestGeneratorConfig,
)
from simulator.vidur.runtime import BaseRequestGenerator, RequestGeneratorRegistry, synthetic_request_rows


def vidur_synthetic_config(workload: PoissonWorkload, max_tokens: int) -> SyntheticRequestGeneratorConfig:
    return SyntheticRequestGeneratorConfig(
        seed=workload.seed,
        num_requests=workload.num_requests,
        length_generator_config=FixedRequestLengthGeneratorConfig(
            prefill_tokens=workload.prompt_tokens, decode_tokens=workload.output_tokens, max_tokens=max_tokens
        ),
        interval_generator_config=PoissonRequestIntervalGeneratorConfig(qps=workload.arrival_rate, seed=workload.seed),
    )


@dataclass
class WorkloadRequestGeneratorConfig(BaseRequestGeneratorConfig):
    workload: Workload = field(default_factory=PoissonWorkload)

    @staticmethod
    def get_type():
        return ExtensionType.WORKLOAD


class WorkloadRequestGenerator(BaseRequestGenerator):
    def __init__(self, config: WorkloadRequestGeneratorConfig):
        super().__init__(config)
        self.requests: List[SpeculativeRequest] = []

    def generate_requests(self) -> List[SpeculativeRequest]:
        workload = self.config.workload
        if isinstance(workload, ExplicitWorkload):
            rows = zip(workload.arrival_s, workload.prompt_tokens, workload.output_tokens)
        elif isinstance(workload, ClosedLoopWorkload):
            # arrival times of all but the first `concurrency` are set when a slot frees up
            first = list(workload.first_arrivals_s) or [0.0] * min(workload.concurrency, workload.num_requests)
            rows = zip(first + [0.0] * (workload.num_requests - len(first)), workload.prompt_tokens, workload.output_tokens)
        else:  # the stock stream; its ids are given back, so ours are numbered from zero in arrival order
            rows = synthetic_request_rows(vidur_synthetic_config(workload, self.config.max_tokens))
        self.requests = [SpeculativeRequest(float(t), int(p), int(d)) for t, p, d in rows]
        return self.requests


RequestGeneratorRegistry.register(ExtensionType.WORKLOAD, WorkloadRequestGenerator)
