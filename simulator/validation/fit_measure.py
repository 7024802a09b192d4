"""The short measuring plan of a fit, run against a live server.

Each level is ``vllm bench serve --dataset-name random --request-rate inf --max-concurrency c``
at the user's lengths: ``c`` requests in flight, each replaced when it finishes, for a few waves.
Around each level ``/metrics`` is scraped; the level's figures are the differences of the
server's own request and step histograms (:mod:`simulator.validation.server_times`) and, on a
speculative server, of its spec-decode counters (the acceptance each position had, which the
simulation of that level then takes as its input: acceptance is measured, never fitted).  Every
level measures anew: nothing of an earlier run is reused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import httpx

from simulator.util.errors import ConfigError
from simulator.validation.fit import Level
from simulator.validation.server_times import parse_server_times

DEFAULT_LEVELS = (1, 8, 32, 128)
MIN_REQUESTS = 8
# the clock the client times each level's requests on; a test against the fake server sets the
# fake's engine clock, the one its histograms count in
client_clock = time.perf_counter


@dataclass(frozen=True)
class FitPlan:
    """What the fit measures: closed-loop levels at fixed lengths, ``waves`` requests per slot."""

    levels: tuple[int, ...] = DEFAULT_LEVELS
    held_out: tuple[int, ...] = (DEFAULT_LEVELS[-1],)
    input_len: int = 512
    output_len: int = 128
    waves: int = 3
    seed: int = 0

    def __post_init__(self):
        if len(self.levels) < 3:
            raise ConfigError(f"--levels {','.join(map(str, self.levels))}: a fit needs at least three levels (two to fit, one held out)")
        if len(set(self.levels)) != len(self.levels) or any(c < 1 for c in self.levels):
            raise ConfigError(f"--levels {','.join(map(str, self.levels))}: must be distinct positive concurrencies")
        unknown = [c for c in self.held_out if c not in self.levels]
        if unknown:
            raise ConfigError(f"--held-out {','.join(map(str, unknown))}: not among --levels {','.join(map(str, self.levels))}")
        if len(self.levels) - len(self.held_out) < 2:
            raise ConfigError(f"--held-out {','.join(map(str, self.held_out))}: leaves fewer than two levels to fit")
        if self.input_len < 1 or self.output_len < 2 or self.waves < 1:
            raise ConfigError("--random-input-len must be >= 1, --random-output-len >= 2 (TPOT needs two tokens) and --waves >= 1")

    def requests(self, concurrency: int) -> int:
        return max(MIN_REQUESTS, self.waves * concurrency)

    def describe(self) -> dict:
        return {
            "levels": list(self.levels), "held_out": list(self.held_out), "random_input_len": self.input_len,
            "random_output_len": self.output_len, "requests": [self.requests(c) for c in self.levels], "seed": self.seed,
        }


def server_version(root: str) -> Optional[str]:
    """What ``GET /version`` answers (vLLM's API server), or None where the server has no such route."""
    try:
        response = httpx.get(f"{root}/version", timeout=10.0)
        if response.status_code == 200:
            version = response.json().get("version")
            return version if isinstance(version, str) else None
    except (httpx.HTTPError, ValueError):
        return None
    return None


def _scrape(root: str) -> str:
    url = f"{root}/metrics"
    try:
        response = httpx.get(url, timeout=30.0)
    except httpx.HTTPError as err:
        raise ConfigError(f"cannot scrape {url}: {type(err).__name__}: {err}") from None
    if response.status_code != 200:
        raise ConfigError(f"cannot scrape {url}: HTTP {response.status_code}")
    return response.text


def measure_level(root: str, api_model: str, concurrency: int, plan: FitPlan, work: Path, expected_k: Optional[int]) -> tuple[Level, float]:
    """Run one level and read it off the server; returns the level and the seconds it took."""
    from simulator.validation.counter_acceptance import acceptance_from_counters
    from simulator.validation.metrics import check_vllm_metrics, delta, parse_metrics
    from simulator.validation.random_dataset import RandomDataset, generate_random
    from simulator.validation.replay import replay
    from simulator.validation.replay_files import read_results
    from simulator.validation.replay_options import ReplayOptions

    n = plan.requests(concurrency)
    workload = generate_random(RandomDataset(num_prompts=n, input_len=plan.input_len, output_len=plan.output_len, seed=plan.seed + concurrency))
    source = f"{root}/metrics"
    before_text = _scrape(root)
    check_vllm_metrics(before_text, source)
    before_times = parse_server_times(before_text, source)
    started = time.perf_counter()
    out = work / f"level-{concurrency}"
    replay(workload, out, ReplayOptions(base_url=root, model=api_model, concurrency=concurrency, retry_failed=False, clock=client_clock))
    seconds = time.perf_counter() - started
    after_text = _scrape(root)
    records = read_results(out, workload.workload_hash).records
    failed = [r for r in records.values() if r["status"] != "ok"]
    if failed or len(records) != n:
        raise ConfigError(f"{concurrency} in flight: {len(failed) or n - len(records)} of {n} requests failed ({failed[0]['status'] if failed else 'not sent'}); a fit needs every request of a level; is the server healthy?")
    times = parse_server_times(after_text, source).minus(before_times)
    if round(times.requests) != n:
        raise ConfigError(
            f"{concurrency} in flight: the server finished {times.requests:.0f} requests between the scrapes, the fit sent {n}; "
            "another client shares the server (or it restarted): fit on a server nobody else uses"
        )
    times.require_steps(f"{concurrency} in flight")
    first, turnaround = client_loop(list(records.values()), concurrency)
    counts = delta(parse_metrics(before_text, source), parse_metrics(after_text, source), source)
    acceptance = acceptance_from_counters(counts, expected_k, source)
    return (
        Level(
            concurrency=concurrency, requests=n, prompt_tokens=plan.input_len, output_tokens=plan.output_len,
            tpot_ms=1e3 * times.mean_tpot_s, ttft_ms=1e3 * times.mean_ttft_s,
            throughput_tok_s=concurrency * (times.generated / times.requests) / times.mean_e2e_s,
            acceptance_per_position=tuple(acceptance.acceptance_per_position),
            acceptance_length=acceptance.mean_acceptance_length,
            first_arrivals_s=first, turnaround_s=turnaround,
            itl_ms=1e3 * times.mean_itl_s, server_steps=round(times.steps),
        ),
        seconds,
    )


def client_loop(records: list[dict], concurrency: int) -> tuple[tuple[float, ...], float]:
    """The closed loop as the client ran it, from the replay's records: the first wave's send
    times (from the first send) and the median time from a last token received to the next send
    (a replacement is sent when a slot frees, so the j-th send after the first wave follows the
    j-th last token).  The way to the server and back is not added.  The client's mean
    end-to-end latency less the server's would measure it, but that mean carries the first
    wave's way in, a burst of sends queued in the server's front end, which no later turn of the
    loop waits for: against the fake server, on its own clock, a loop simulated with it sent each
    replacement late enough to miss 64 in flight by 5% in TPOT at the law's own terms, and
    without it by 0.0% (docs/validation.md)."""
    import statistics

    sends = sorted(float(r["send_s"]) for r in records)
    start = sends[0]
    first = tuple(round(t - start, 6) for t in sends[:concurrency])
    last_tokens = sorted(float(r["send_s"]) + float(r["e2e_s"]) for r in records)
    gaps = [max(0.0, send - finish) for send, finish in zip(sends[concurrency:], last_tokens)]
    return first, round(statistics.median(gaps), 6) if gaps else 0.0
