"""The workload ``vllm bench serve``'s flags describe, and the two things ``python -m simulator`` makes of it.

A :class:`BenchWorkload` holds the flags as typed (None where one was left out).  It becomes the
run's workload (:meth:`BenchWorkload.workload`: Poisson arrivals at ``--request-rate``, every
request at once for ``--request-rate inf``, a closed loop of ``--max-concurrency``, or a Vidur
trace's lengths) and the ``vllm bench serve`` line that sends the same workload to a real server
(:meth:`BenchWorkload.bench_serve_line`).  Both read the defaults the flags leave open from one
place (:attr:`BenchWorkload.poisson_rate`, :meth:`BenchWorkload.range_ratio_in`), so the simulated
run and the printed line cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from simulator.cli import command, vllm_serve
from simulator.cli.simulate_flags import DATASETS, _default
from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload
from simulator.util.errors import ConfigError


@dataclass(frozen=True)
class BenchWorkload:
    """``vllm bench serve``'s workload flags as given: ``--num-prompts``, the random dataset's
    lengths and spread, the arrivals (``--request-rate``, ``--max-concurrency``), a ``--trace``
    in place of the dataset, and the seed of arrivals and drawn lengths."""

    num_prompts: int
    prompt_tokens: int
    output_tokens: int
    seed: int
    request_rate: Optional[float] = None  # inf: every request at once
    max_concurrency: Optional[int] = None
    range_ratio: Optional[float] = None
    dataset_name: Optional[str] = None
    trace: Optional[str] = None

    @property
    def poisson_rate(self) -> float:
        """The Poisson arrival rate: ``--request-rate``, else the run configuration's default."""
        return _default(PoissonWorkload, "arrival_rate") if self.request_rate is None else self.request_rate

    def range_ratio_in(self, closed_loop: bool) -> float:
        """``--random-range-ratio``, else the shared default: spread in a closed loop, fixed
        otherwise (a trace gives its own lengths)."""
        if self.range_ratio is not None:
            return self.range_ratio
        return command.DEFAULT_WORKLOAD.closed_loop_range_ratio if closed_loop and not self.trace else 0.0

    def workload(self, limits: vllm_serve.Limits, model: str):
        """The run's workload, as vllm bench serve sends it to a server of ``limits`` serving
        ``model`` (whose context bounds a trace's lengths); a combination it cannot send, or one the
        simulator does not model, is refused naming the flags."""
        rate, concurrency = self.request_rate, self.max_concurrency
        if self.dataset_name is not None and self.dataset_name not in DATASETS:
            raise ConfigError(
                f"--dataset-name {self.dataset_name}: the simulator draws vllm bench serve's random dataset (--dataset-name random); "
                "for another dataset, give its requests' lengths as a Vidur trace (--trace FILE with num_prefill_tokens, num_decode_tokens)"
            )
        if self.dataset_name is not None and self.trace:
            raise ConfigError(f"--dataset-name {self.dataset_name} and --trace: the trace gives the lengths; drop one")
        if concurrency is not None and rate is not None and math.isfinite(rate):
            raise ConfigError(
                f"--max-concurrency {concurrency} and --request-rate {rate:g}: arrivals both paced and capped are not modelled; leave "
                "--request-rate out (or give inf) for the closed loop, or drop --max-concurrency for Poisson arrivals"
            )
        if concurrency is not None:
            vllm_serve.check_concurrency([concurrency], limits, "--max-concurrency")
        if concurrency is None and rate is not None and math.isinf(rate):
            concurrency = self.num_prompts  # every request at once: a closed loop that never refills
        if concurrency is None:
            rate = self.poisson_rate
        ratio = self.range_ratio_in(closed_loop=concurrency is not None)
        if not 0 <= ratio < 1:
            raise ConfigError(f"--random-range-ratio {ratio:g}: must be in [0, 1), as in vllm bench serve")
        if self.trace:
            return self._trace_workload(model, ratio, rate, concurrency)
        n, prompt, output, seed = self.num_prompts, self.prompt_tokens, self.output_tokens, self.seed
        if concurrency is not None:
            if ratio:
                from simulator.runs.workloads import spread_closed_loop

                return spread_closed_loop(concurrency, n, prompt, output, ratio, seed)
            return ClosedLoopWorkload.fixed(concurrency, n, prompt, output)
        if ratio:
            from simulator.runs.workloads import poisson_arrivals, random_lengths

            return ExplicitWorkload(poisson_arrivals(n, rate, seed), *random_lengths(n, prompt, output, ratio, seed))
        return PoissonWorkload(n, prompt, output, rate, seed)

    def _trace_workload(self, model: str, ratio: float, rate: Optional[float], concurrency: Optional[int]):
        """The trace's lengths (drawn, seeded, within ``model``'s context) at the given arrivals."""
        from simulator.runs.workloads import trace_workload
        from simulator.vidur.models import model_config

        if ratio:
            raise ConfigError("--random-range-ratio and --trace: the trace gives the lengths; drop one")
        context = model_config(model).max_model_len
        return trace_workload(self.trace, context, self.num_prompts, self.seed, rate=None if concurrency else rate, concurrency=concurrency)

    def bench_serve_line(self, served: str, workload) -> Optional[str]:
        """The ``vllm bench serve`` line that sends ``workload`` (what :meth:`workload` made) to a real
        server of ``served`` (None when a trace gave the lengths: vLLM's random dataset cannot draw them)."""
        from simulator.cli.vllm_bench import bench_serve_command

        if self.trace:
            return None
        closed = isinstance(workload, ClosedLoopWorkload)
        return bench_serve_command(served, prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens, range_ratio=self.range_ratio_in(closed),
                                   num_prompts=self.num_prompts, seed=self.seed, request_rate=math.inf if closed else self.poisson_rate,
                                   max_concurrency=workload.concurrency if closed and self.max_concurrency is not None else None)
