"""The workloads a run is given: Poisson arrivals of fixed lengths, exact requests, or a closed loop
of a fixed number of requests in flight.  Plain frozen dataclasses, validated on construction
(:mod:`.checks`); the requests drawn from a length trace or a declared shape are built from them
in :mod:`.workloads`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from simulator.runs.checks import is_int, require


def _check_lengths(prompt_tokens: tuple, output_tokens: tuple) -> None:
    """Every request's prompt and output lengths are positive integers (a refusal names the entry)."""
    for name, values in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        for i, v in enumerate(values):
            require(is_int(v) and v > 0, f"{name}[{i}]", v, "must be a positive integer")


def _longest(prompt_tokens: tuple, output_tokens: tuple) -> int:
    """The longest request's tokens, prompt and output together."""
    return max(p + o for p, o in zip(prompt_tokens, output_tokens))


@dataclass(frozen=True)
class PoissonWorkload:
    """Vidur's synthetic generator: Poisson arrivals, fixed prompt and output lengths.

    Arrivals come from Vidur's own interval generator, which caps each gap at 3/rate, so the
    realised rate is about 1.05x ``arrival_rate``; a stock Vidur run with the same seed sees
    the identical request stream.
    """

    num_requests: int = 300
    prompt_tokens: int = 1024
    output_tokens: int = 256
    arrival_rate: float = 4.0
    seed: int = 42

    def __post_init__(self):
        require(is_int(self.num_requests) and self.num_requests > 0, "num_requests", self.num_requests, "must be a positive integer")
        require(is_int(self.prompt_tokens) and self.prompt_tokens > 0, "prompt_tokens", self.prompt_tokens, "must be a positive integer")
        require(is_int(self.output_tokens) and self.output_tokens > 0, "output_tokens", self.output_tokens, "must be a positive integer")
        require(
            isinstance(self.arrival_rate, (int, float)) and math.isfinite(self.arrival_rate) and self.arrival_rate > 0,
            "arrival_rate",
            self.arrival_rate,
            "must be a finite number of requests per second > 0",
        )
        require(is_int(self.seed) and self.seed >= 0, "seed", self.seed, "must be an integer >= 0")

    @property
    def max_request_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class ExplicitWorkload:
    """Exact requests (e.g. a validation workload): arrival seconds and token counts."""

    arrival_s: tuple[float, ...]
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]

    def __post_init__(self):
        n = len(self.arrival_s)
        require(n > 0, "arrival_s", self.arrival_s, "must hold at least one request")
        require(
            len(self.prompt_tokens) == n and len(self.output_tokens) == n,
            "prompt_tokens/output_tokens",
            (len(self.prompt_tokens), len(self.output_tokens)),
            f"must have the same length as arrival_s ({n})",
        )
        for i, t in enumerate(self.arrival_s):
            require(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0, f"arrival_s[{i}]", t, "must be a finite time >= 0")
            if i:
                require(t >= self.arrival_s[i - 1], f"arrival_s[{i}]", t, "arrivals must be sorted")
        _check_lengths(self.prompt_tokens, self.output_tokens)

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def max_request_tokens(self) -> int:
        return _longest(self.prompt_tokens, self.output_tokens)


@dataclass(frozen=True)
class ClosedLoopWorkload:
    """A fixed number of requests in flight: each finished request is replaced at once.

    Like ``vllm bench serve --max-concurrency N``, or an offline run capped by ``max_num_seqs``:
    ``concurrency`` requests arrive at time 0 and request i + concurrency arrives when one
    finishes.  Lengths are given per request (fixed, or drawn from a trace).
    """

    concurrency: int
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    # A real client's closed loop, as the fit against a server measures it: when the first
    # `concurrency` requests reached the server (seconds, default all at 0; a client sends them
    # one after another, so a server's first step often holds only the first), and how long after
    # a completion its replacement arrives (the client's round trip: a real replacement misses
    # the step that starts as its predecessor finishes)
    first_arrivals_s: tuple[float, ...] = ()
    turnaround_s: float = 0.0

    def __post_init__(self):
        require(is_int(self.concurrency) and self.concurrency > 0, "concurrency", self.concurrency, "must be a positive integer")
        require(
            len(self.first_arrivals_s) in (0, min(self.concurrency, len(self.prompt_tokens)))
            and all(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in self.first_arrivals_s),
            "first_arrivals_s", self.first_arrivals_s, "must be empty or one time >= 0 (seconds) per request of the first wave",
        )
        require(isinstance(self.turnaround_s, (int, float)) and math.isfinite(self.turnaround_s) and self.turnaround_s >= 0, "turnaround_s", self.turnaround_s, "must be a number of seconds >= 0")
        n = len(self.prompt_tokens)
        require(n > 0, "prompt_tokens", self.prompt_tokens, "must hold at least one request")
        require(len(self.output_tokens) == n, "output_tokens", len(self.output_tokens), f"must have one entry per request ({n})")
        _check_lengths(self.prompt_tokens, self.output_tokens)

    @classmethod
    def fixed(cls, concurrency: int, num_requests: int, prompt_tokens: int, output_tokens: int) -> "ClosedLoopWorkload":
        require(is_int(num_requests) and num_requests > 0, "num_requests", num_requests, "must be a positive integer")
        return cls(concurrency, (prompt_tokens,) * num_requests, (output_tokens,) * num_requests)

    @property
    def num_requests(self) -> int:
        return len(self.prompt_tokens)

    @property
    def max_request_tokens(self) -> int:
        return _longest(self.prompt_tokens, self.output_tokens)


Workload = Union[PoissonWorkload, ExplicitWorkload, ClosedLoopWorkload]
