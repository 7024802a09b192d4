"""A small stand-in for a vLLM OpenAI-compatible server, for testing the harness without a GPU.

It is a real HTTP server (aiohttp) that streams ``/v1/completions`` in the OpenAI SSE format
and serves ``/metrics`` with vLLM V1's speculative-decoding counters, its request and step
histograms (the inter-token latency under the name or names its ``version`` exports) and the
``process_start_time_seconds`` every Prometheus client exports.  Tokens come from a
deterministic model of its own: continuous batching, each engine step costing
``step_base_s + step_per_token_s * tokens processed``; at each decode step the proposer
drafts k tokens with probability ``proposal_probability`` (an n-gram proposer finds no match
at the other steps, which emit one token and count no draft), and a leading run of the draft
is accepted with i.i.d. probability ``acceptance_rate``.  Draws are seeded per request (from
its prompt), so a request gets the same tokens and chunking whatever the order of arrival.

Fault switches make chosen fractions of requests fail in the ways a real run can: HTTP 500,
a connection dropped mid-stream, a malformed SSE line, a stall longer than the client's
timeout, a completion shorter than asked, a stream that closes cleanly halfway without usage
or ``[DONE]``.  ``/v1/models`` lists ``max_model_len`` as vLLM does, and a longer request gets
vLLM's HTTP 400.  ``FakeServer.other_client`` runs requests that no replay sent, as another
client of the same server would, so the counters rise by more than the replay received.  Which requests fail is a deterministic function
of the prompt (:meth:`FakeServerConfig.fault_for`).  ``/metrics`` can omit counters or answer
an HTML page.  The server process can restart or die when the N-th completion request
arrives (counted in arrival order, so the trigger needs no timing), and can hold requests
back until the test releases them.

It imports nothing from the package under test.  Run it by hand with
``python tests/fake_vllm/server.py --port 8000 --k 3`` (``--help`` lists the faults).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import select
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

FAULTS = ("http_500", "drop", "malformed", "stall", "short", "no_done", "early_close")
ENGINES = ("v1", "v0", "v0-gauges")
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
    "vllm:spec_decode_num_emitted_tokens",
)
# vLLM V1's per-request and per-step histograms (vllm/v1/metrics/loggers.py), in the fake's
# virtual time: each step lasts exactly what its step law says, whatever the event loop's jitter
TIME_HISTOGRAMS = (
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:time_to_first_token_seconds",
)
# the inter-token latency, observed once per output after a request's first: named
# vllm:time_per_output_token_seconds before vLLM 0.11, both names in 0.11 and 0.12 (PR #24110),
# only vllm:inter_token_latency_seconds from 0.13 (PR #32661)
OLD_ITL, NEW_ITL = "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"


def inter_token_names(version: str) -> tuple[str, ...]:
    minor = tuple(int(part) for part in version.split(".")[:2])
    return (OLD_ITL,) if minor < (0, 11) else (OLD_ITL, NEW_ITL) if minor < (0, 13) else (NEW_ITL,)


TIME_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0)
TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
HTML_PAGE = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><form>proxy login</form></body></html>\n"
CUT = object()  # put in a sequence's outbox when its server process goes away


@dataclass(frozen=True)
class FakeServerConfig:
    model: str = "fake-model"
    num_speculative_tokens: int = 3
    acceptance_rate: float = 0.7
    proposal_probability: float = 1.0  # P(a draft at a decode step); below 1: n-gram misses
    seed: int = 0
    step_base_s: float = 0.002
    step_per_token_s: float = 0.00001
    max_batch: int = 64
    max_num_batched_tokens: int = 8192  # the step's token budget (vLLM's chunked prefill)
    num_gpu_blocks: int = 2048
    block_size: int = 16
    max_model_len: int = 8192  # listed by /v1/models; a longer prompt + max_tokens gets HTTP 400, as vLLM answers
    # fractions of requests hit by each fault, chosen from the prompt (see fault_for)
    fault_http_500: float = 0.0
    fault_drop: float = 0.0
    fault_malformed: float = 0.0
    fault_stall: float = 0.0
    fault_short: float = 0.0
    fault_no_done: float = 0.0  # the stream closes cleanly after every token, without data: [DONE]
    fault_early_close: float = 0.0  # the stream closes cleanly after half the tokens, without usage or data: [DONE]
    stall_s: float = 30.0
    metrics_missing: tuple[str, ...] = field(default_factory=tuple)  # metric names left out of /metrics
    metrics_html: bool = False  # /metrics answers an HTML page (a proxy's login page, say)
    # process events, triggered by the (N + 1)-th completion request to arrive:
    restart_after_requests: Optional[int] = None  # the process restarts: in-flight streams cut, counters from zero
    die_after_requests: Optional[int] = None  # the process dies: in-flight streams cut, the port closed
    hold_after_requests: Optional[int] = None  # later requests wait until FakeServer.release()
    # which spec-decode metrics /metrics exports: V1's counters; V0's counters (draft, accepted
    # and emitted tokens, accepted counted at any position as V0 does) and gauges; or V0's gauges only
    engine: str = "v1"
    # The step-time law: (prefill rows [(prompt tokens, 0)], decode rows [(query tokens, cached
    # tokens before the step)]) -> seconds.  None: step_base_s + step_per_token_s * tokens.
    step_law: Optional[Callable] = field(default=None, compare=False)
    version: str = "0.30.0"  # what GET /version answers, as vLLM's API server does
    # real seconds per virtual second: above 1 the engine runs slower than its law says (the
    # histograms still read the law), so a client in the same busy process keeps up with it
    real_time_factor: float = 1.0

    def step_seconds(self, prefill_rows: list, decode_rows: list) -> float:
        if self.step_law is not None:
            return float(self.step_law(prefill_rows, decode_rows))
        tokens = sum(q for q, _ in prefill_rows) + sum(q for q, _ in decode_rows)
        return self.step_base_s + self.step_per_token_s * tokens

    def __post_init__(self):
        def need(ok, name, what):
            if not ok:
                raise ValueError(f"{name} = {getattr(self, name)!r}: {what}")

        need(isinstance(self.num_speculative_tokens, int) and self.num_speculative_tokens >= 0, "num_speculative_tokens", "must be an integer >= 0")
        need(0 <= self.acceptance_rate <= 1, "acceptance_rate", "must be in [0, 1]")
        need(0 <= self.proposal_probability <= 1, "proposal_probability", "must be in [0, 1]")
        need(self.engine in ENGINES, "engine", f"must be one of {ENGINES}")
        need(math.isfinite(self.real_time_factor) and self.real_time_factor > 0, "real_time_factor", "must be a finite number > 0")
        for name in ("step_base_s", "step_per_token_s", "stall_s"):
            need(math.isfinite(getattr(self, name)) and getattr(self, name) >= 0, name, "must be a finite number >= 0")
        for name in ("max_batch", "max_num_batched_tokens", "num_gpu_blocks", "block_size", "max_model_len"):
            need(isinstance(getattr(self, name), int) and getattr(self, name) > 0, name, "must be a positive integer")
        for name in ("restart_after_requests", "die_after_requests", "hold_after_requests"):
            value = getattr(self, name)
            need(value is None or (isinstance(value, int) and value >= 0), name, "must be None or an integer >= 0")
        total = 0.0
        for fault in FAULTS:
            value = getattr(self, f"fault_{fault}")
            need(0 <= value <= 1, f"fault_{fault}", "must be a fraction in [0, 1]")
            total += value
        if total > 1:
            raise ValueError(f"fault fractions add up to {total:g}, more than 1")

    def request_key(self, prompt_ids: list[int]) -> int:
        digest = hashlib.sha256(f"{self.seed}:{','.join(map(str, prompt_ids))}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def fault_for(self, prompt_ids: list[int]) -> Optional[str]:
        """The fault (if any) a request with this prompt meets; a pure function of the prompt."""
        u = self.request_key(prompt_ids) / 2**64
        edge = 0.0
        for fault in FAULTS:
            edge += getattr(self, f"fault_{fault}")
            if u < edge:
                return fault
        return None


class _Metrics:
    """vLLM V1 metric names, exported through prometheus_client (a registry per process)."""

    def __init__(self, config: FakeServerConfig, start_time: float):
        registry = self.registry = CollectorRegistry()
        labels = {"model_name": config.model, "engine": "0"}
        missing = {name.removesuffix("_total") for name in config.metrics_missing}

        def counter(name, doc, extra=()):
            if name in missing:
                return None
            return Counter(name, doc, list(labels) + list(extra), registry=registry)

        v1, v0 = config.engine == "v1", config.engine == "v0"
        self.drafts = counter("vllm:spec_decode_num_drafts", "Verify steps with draft tokens") if v1 else None
        self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Proposed tokens") if v1 or v0 else None
        self.accepted = counter("vllm:spec_decode_num_accepted_tokens", "Accepted proposed tokens") if v1 or v0 else None
        self.per_pos = counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per position", ("position",)) if v1 else None
        self.emitted = counter("vllm:spec_decode_num_emitted_tokens", "Tokens emitted by speculative steps, the bonus token included") if v0 else None
        self.generation = counter("vllm:generation_tokens", "Generated tokens")

        def histogram(name, doc, buckets):
            if name in missing:
                return None
            return Histogram(name, doc, list(labels), buckets=buckets, registry=registry)

        self.times = {name: histogram(name, name, TIME_BUCKETS) for name in TIME_HISTOGRAMS}
        self.request_tokens = histogram("vllm:request_generation_tokens", "Generated tokens per request", TOKEN_BUCKETS)
        self.iteration_tokens = histogram("vllm:iteration_tokens_total", "Tokens per engine step", TOKEN_BUCKETS)
        self.inter_token = [h for h in (histogram(name, name, TIME_BUCKETS) for name in inter_token_names(config.version)) if h is not None]
        for metric in (*self.times.values(), self.request_tokens, self.iteration_tokens, *self.inter_token):
            if metric is not None:
                metric.labels(**labels)  # exported (as zeros) from the start, as vLLM does
        self.labels = labels
        self.v0_draft_tokens = self.v0_accepted = self.v0_emitted = 0
        self.gauges = None
        if config.engine in ("v0", "v0-gauges") and config.num_speculative_tokens > 0:
            # V0's rates since start: acceptance = accepted / draft tokens, efficiency = emitted / (steps * (k + 1))
            self.gauges = (
                Gauge("vllm:spec_decode_draft_acceptance_rate", "Speculative token acceptance rate", list(labels), registry=registry),
                Gauge("vllm:spec_decode_efficiency", "Speculative decoding system efficiency", list(labels), registry=registry),
            )
            for gauge in self.gauges:
                gauge.labels(**labels)  # exported (as 0) from the start
        if config.num_speculative_tokens == 0:
            self.drafts = self.draft_tokens = self.accepted = self.per_pos = self.emitted = None
        for metric in (self.drafts, self.draft_tokens, self.accepted, self.emitted, self.generation):
            if metric is not None:
                metric.labels(**labels)  # exported as 0 from the start, as vLLM does
        if self.per_pos is not None:
            for position in range(config.num_speculative_tokens):
                self.per_pos.labels(**labels, position=str(position))
        if "vllm:cache_config_info" not in missing:
            info = Gauge("vllm:cache_config_info", "Cache configuration", ["block_size", "num_gpu_blocks"], registry=registry)
            info.labels(block_size=str(config.block_size), num_gpu_blocks=str(config.num_gpu_blocks)).set(1)
        if "process_start_time_seconds" not in missing:
            Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", registry=registry).set(start_time)

    def step(self, k: int, accepted: int, accepted_anywhere: Optional[int] = None) -> None:
        """One verify step: ``accepted`` is the accepted prefix; V0 counts ``accepted_anywhere``
        (positions the verifier accepted, even after an earlier rejection)."""
        v0_accepted = accepted if accepted_anywhere is None else accepted_anywhere
        if self.drafts is not None:
            self.drafts.labels(**self.labels).inc()
        if self.draft_tokens is not None:
            self.draft_tokens.labels(**self.labels).inc(k)
        if self.accepted is not None:
            self.accepted.labels(**self.labels).inc(accepted if self.emitted is None else v0_accepted)
        if self.emitted is not None:
            self.emitted.labels(**self.labels).inc(1 + accepted)
        if self.per_pos is not None:
            for position in range(accepted):
                self.per_pos.labels(**self.labels, position=str(position)).inc()
        if self.gauges is not None:
            self.v0_draft_tokens += k
            self.v0_accepted += v0_accepted
            self.v0_emitted += 1 + accepted
            self.gauges[0].labels(**self.labels).set(self.v0_accepted / self.v0_draft_tokens)
            self.gauges[1].labels(**self.labels).set(self.v0_emitted / (self.v0_draft_tokens / k * (k + 1)))

    def finished(self, sequence: "_Sequence") -> None:
        """A request's timings, in virtual seconds, as vLLM V1 records them when it finishes."""
        values = {
            "vllm:e2e_request_latency_seconds": sequence.finished_at - sequence.arrived_at,
            "vllm:request_queue_time_seconds": sequence.scheduled_at - sequence.arrived_at,
            "vllm:request_prefill_time_seconds": sequence.first_token_at - sequence.scheduled_at,
            "vllm:request_decode_time_seconds": sequence.finished_at - sequence.first_token_at,
            "vllm:time_to_first_token_seconds": sequence.first_token_at - sequence.arrived_at,
        }
        for name, value in values.items():
            if self.times[name] is not None:
                self.times[name].labels(**self.labels).observe(value)
        if self.request_tokens is not None:
            self.request_tokens.labels(**self.labels).observe(sequence.emitted)

    def iteration(self, tokens: int) -> None:
        """A step that gave outputs: its finished prompts' tokens plus the tokens it emitted."""
        if self.iteration_tokens is not None:
            self.iteration_tokens.labels(**self.labels).observe(tokens)

    def output(self, gap_s: float) -> None:
        """A running request's output after its first, ``gap_s`` after its previous one."""
        for metric in self.inter_token:
            metric.labels(**self.labels).observe(gap_s)

    def generated(self, tokens: int) -> None:
        if self.generation is not None:
            self.generation.labels(**self.labels).inc(tokens)


class _Sequence:
    def __init__(self, prompt_ids: list[int], max_tokens: int, key: int, blocks: int):
        self.prompt_len = len(prompt_ids)
        self.max_tokens = max_tokens
        self.rng = np.random.default_rng(key)
        self.blocks = blocks
        self.emitted = 0
        self.prefilled = False
        self.prompt_done = 0  # prompt tokens prefilled so far (chunked prefill)
        self.outbox: asyncio.Queue = asyncio.Queue()
        # virtual times (the engine's clock): arrival, admission, first token, last token
        self.arrived_at = self.scheduled_at = self.first_token_at = self.finished_at = self.last_output_at = 0.0

    @property
    def remaining(self) -> int:
        return self.max_tokens - self.emitted


class EngineClock:
    """The engine's clock as (virtual, real, cap): ``virtual`` seconds at real time ``real``, then
    running at the real clock's pace over the real-time factor, never past ``cap`` (a step's end;
    infinity while idle).  ``shared`` (a ``multiprocessing`` Array of 3 doubles) publishes each
    setting to a client in another process (:mod:`fake_vllm.own_process`), which reads it with
    :func:`clock_reading`: ``time.perf_counter`` is one clock for every process on the machine."""

    def __init__(self, factor: float, shared=None):
        self.factor, self.shared = factor, shared
        self.set(0.0, time.perf_counter(), 0.0)

    def set(self, virtual: float, real: float, cap: float) -> None:
        self.state = (virtual, real, cap)  # one assignment: a client thread reads it whole
        if self.shared is not None:
            with self.shared.get_lock():
                self.shared[:] = self.state

    def __call__(self) -> float:
        return clock_reading(self.state, self.factor)


def clock_reading(state, factor: float) -> float:
    """The engine's clock now, from its (virtual, real, cap) setting."""
    virtual, real, cap = state
    return min(cap, virtual + (time.perf_counter() - real) / factor)


class _Engine:
    """Continuous batching: admit while KV blocks allow, one prefill or decode step per sequence."""

    def __init__(self, config: FakeServerConfig, metrics: _Metrics, shared_clock=None):
        self.config = config
        self.metrics = metrics
        self.waiting: list[_Sequence] = []
        self.running: list[_Sequence] = []
        self.free_blocks = config.num_gpu_blocks
        self.wakeup = asyncio.Event()
        # Virtual time: while busy it advances by exactly each step's law; while idle by the real
        # clock's seconds over the real-time factor.  Server-side timings are read off it.
        self.now = 0.0
        self._clock = EngineClock(config.real_time_factor, shared_clock)

    def blocks_for(self, prompt_len: int, max_tokens: int) -> int:
        return -(-(prompt_len + max_tokens) // self.config.block_size)

    def clock(self) -> float:
        """The engine's clock: the steps' laws while busy, real seconds (over the real-time
        factor) while idle.  The histograms count on it, and a client may time its requests on it."""
        return self._clock()

    def submit(self, sequence: _Sequence) -> None:
        sequence.arrived_at = self.clock()  # while idle, set again when the engine wakes
        self.waiting.append(sequence)
        self.wakeup.set()

    def abort(self, sequence: _Sequence) -> None:
        if sequence in self.waiting:
            self.waiting.remove(sequence)
        if sequence in self.running:
            self.running.remove(sequence)
            self.free_blocks += sequence.blocks

    def cut_all(self) -> None:
        """The process goes away: every sequence it holds ends without its tokens."""
        for sequence in self.waiting + self.running:
            sequence.outbox.put_nowait(CUT)
        self.waiting.clear()
        self.running.clear()

    def _drafts(self, sequence: _Sequence, k: int) -> bool:
        # Drawn only when some steps miss, so p = 1 keeps the acceptance draws of earlier versions.
        return k > 0 and (self.config.proposal_probability >= 1 or sequence.rng.random() < self.config.proposal_probability)

    async def run(self) -> None:
        k = self.config.num_speculative_tokens
        while True:
            while self.waiting and len(self.running) < self.config.max_batch and self.free_blocks >= self.waiting[0].blocks:
                sequence = self.waiting.pop(0)
                sequence.scheduled_at = self.now
                self.free_blocks -= sequence.blocks
                self.running.append(sequence)
            if not self.running:
                self.wakeup.clear()
                self._clock.set(self.now, time.perf_counter(), math.inf)
                await self.wakeup.wait()
                idle_end = self.clock()
                self.now = idle_end
                self._clock.set(idle_end, time.perf_counter(), idle_end)  # the clock never steps back
                for sequence in self.waiting:  # they arrived while the engine idled
                    sequence.arrived_at = idle_end
                continue
            batch = list(self.running)
            drafting = {id(s): s.prefilled and self._drafts(s, k) for s in batch}
            decode_rows = [(1 + (k if drafting[id(s)] else 0), s.prompt_len + s.emitted - 1) for s in batch if s.prefilled]
            # vLLM's chunked prefill: decode rows first, then prompt chunks in admission order
            # while the step's token budget lasts
            budget = self.config.max_num_batched_tokens - sum(q for q, _ in decode_rows)
            chunks = {}
            for s in batch:
                if not s.prefilled and budget > 0:
                    chunks[id(s)] = min(s.prompt_len - s.prompt_done, budget)
                    budget -= chunks[id(s)]
            prefill_rows = [(chunks[id(s)], s.prompt_done) for s in batch if id(s) in chunks]
            seconds = self.config.step_seconds(prefill_rows, decode_rows)
            self._clock.set(self.now, time.perf_counter(), self.now + seconds)
            self.now += seconds
            await asyncio.sleep(seconds * self.config.real_time_factor)
            self._clock.set(self.now, time.perf_counter(), self.now)
            counted = outputs = 0  # what vLLM's iteration-tokens histogram counts of this step
            for sequence in batch:
                if sequence not in self.running:  # aborted while the step ran
                    continue
                if not sequence.prefilled:
                    if id(sequence) not in chunks:
                        continue
                    sequence.prompt_done += chunks[id(sequence)]
                    if sequence.prompt_done >= sequence.prompt_len:
                        sequence.prefilled = True
                        sequence.first_token_at = self.now
                        counted += sequence.prompt_len + self._emit(sequence, 1)
                        outputs += 1
                    continue
                accepted = 0
                if drafting[id(sequence)]:
                    draws = sequence.rng.random(k)
                    while accepted < k and draws[accepted] < self.config.acceptance_rate:
                        accepted += 1
                    self.metrics.step(k, accepted, int((draws < self.config.acceptance_rate).sum()))
                self.metrics.output(self.now - sequence.last_output_at)
                counted += self._emit(sequence, min(1 + accepted, sequence.remaining))
                outputs += 1
            if outputs:
                self.metrics.iteration(counted)

    def _emit(self, sequence: _Sequence, count: int) -> int:
        sequence.last_output_at = self.now
        ids = [int(t) for t in sequence.rng.integers(1000, 32000, size=count)]
        sequence.emitted += count
        self.metrics.generated(count)
        sequence.outbox.put_nowait(ids)
        if sequence.remaining <= 0:
            sequence.finished_at = self.now
            self.metrics.finished(sequence)
            sequence.outbox.put_nowait(None)
            self.abort(sequence)
        return count


class _Process:
    """One life of the server process: its engine, its counters and its start time."""

    def __init__(self, config: FakeServerConfig, start_time: float, shared_clock=None):
        self.start_time = start_time
        self.metrics = _Metrics(config, start_time)
        self.engine = _Engine(config, self.metrics, shared_clock)
        self.task = asyncio.create_task(self.engine.run())

    async def end(self) -> None:
        self.engine.cut_all()
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


class _Control:
    """The server's lifecycle: the current process, restarts, death, held requests."""

    def __init__(self, config: FakeServerConfig, shared_clock=None):
        self.config = config
        self.shared_clock = shared_clock  # where each process's engine publishes its clock, if anywhere
        self.process: Optional[_Process] = None
        self.runner: Optional[web.AppRunner] = None
        self.site: Optional[web.TCPSite] = None
        self.host, self.port = "127.0.0.1", 0
        self.requests = 0  # completion requests received, over every life of the process
        self.last_request: Optional[dict] = None  # the last completion request's headers and JSON body
        self.released = asyncio.Event()
        self._last_start = 0.0

    def start_process(self) -> None:
        # A new process has a new start time, even within the clock's resolution.
        self._last_start = max(time.time(), self._last_start + 1.0)
        self.process = _Process(self.config, self._last_start, self.shared_clock)

    async def restart(self) -> None:
        """The process ends (cutting every stream) and a new one starts, counting from zero."""
        if self.process is not None:
            await self.process.end()
        self.start_process()
        if self.site is None:  # it had died: listen again on the same port
            self.site = web.TCPSite(self.runner, self.host, self.port)
            await self.site.start()

    async def die(self) -> None:
        """The process ends and nothing listens any more: connections are refused."""
        if self.process is not None:
            await self.process.end()
            self.process = None
        if self.site is not None:
            await self.site.stop()
            self.site = None
        for connection in list(self.runner.server.connections if self.runner and self.runner.server else []):
            if connection.transport is not None:
                connection.transport.close()

    async def other_client(self, requests: int, output_tokens: int, prompt_len: int) -> None:
        """Run ``requests`` completions that arrive by no HTTP request, to the end, through the
        current process's engine: its counters rise as another client's traffic raises them."""
        engine = self.process.engine
        sequences = []
        for i in range(requests):
            prompt = [900_000 + i] * prompt_len
            sequence = _Sequence(prompt, output_tokens, self.config.request_key(prompt), engine.blocks_for(prompt_len, output_tokens))
            engine.submit(sequence)
            sequences.append(sequence)
        for sequence in sequences:
            while (chunk := await sequence.outbox.get()) is not None and chunk is not CUT:
                pass

    async def arrived(self) -> Optional[str]:
        """Count a completion request; returns "dead" when it meets a dead process."""
        self.requests += 1
        n = self.requests - 1  # requests received before this one
        if self.config.die_after_requests is not None and n == self.config.die_after_requests:
            await self.die()
        if self.process is None:
            return "dead"
        if self.config.restart_after_requests is not None and n == self.config.restart_after_requests:
            await self.restart()
        if self.config.hold_after_requests is not None and n >= self.config.hold_after_requests:
            await self.released.wait()
            if self.process is None:
                return "dead"
        return None


CONTROL = web.AppKey("control", _Control)


def _sse(payload) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": "BadRequestError" if status == 400 else "InternalServerError", "code": status}, status=status)


def create_app(config: FakeServerConfig, shared_clock=None) -> web.Application:
    app = web.Application()
    control = app[CONTROL] = _Control(config, shared_clock)
    state = {"counter": 0}

    async def lifecycle(app: web.Application):
        control.start_process()
        yield
        if control.process is not None:
            await control.process.end()

    app.cleanup_ctx.append(lifecycle)

    async def models(request: web.Request) -> web.Response:
        entry = {"id": config.model, "object": "model", "owned_by": "fake", "root": config.model, "parent": None, "max_model_len": config.max_model_len}
        return web.json_response({"object": "list", "data": [entry]})

    async def metrics_endpoint(request: web.Request) -> web.Response:
        if config.metrics_html:
            return web.Response(text=HTML_PAGE, content_type="text/html")
        return web.Response(body=generate_latest(control.process.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def completions(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "body is not JSON")
        control.last_request = {"headers": dict(request.headers), "body": body}
        prompt = body.get("prompt")
        if not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            return _error(400, "this fake server takes the prompt as a non-empty list of token ids")
        max_tokens = body.get("max_tokens", 16)
        if not (isinstance(max_tokens, int) and max_tokens > 0):
            return _error(400, "max_tokens must be a positive integer")
        if body.get("model") not in (None, config.model):
            return _error(404, f"model {body.get('model')!r} does not exist")
        if await control.arrived() == "dead":
            request.transport.close()
            return web.Response(status=499)
        if len(prompt) + max_tokens > config.max_model_len:  # vLLM's wording
            return _error(
                400,
                f"This model's maximum context length is {config.max_model_len} tokens. However, you requested {len(prompt) + max_tokens} tokens "
                f"({len(prompt)} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
            )
        engine = control.process.engine
        fault = config.fault_for(prompt)
        if fault == "http_500":
            return _error(500, "injected fault: internal server error")
        generate = max(1, max_tokens // 2) if fault == "short" else max_tokens
        blocks = engine.blocks_for(len(prompt), generate)
        if blocks > config.num_gpu_blocks:
            return _error(400, f"request needs {blocks} KV blocks, the server has {config.num_gpu_blocks}")
        state["counter"] += 1
        request_id = f"cmpl-{state['counter']}"
        sequence = _Sequence(prompt, generate, config.request_key(prompt), blocks)
        engine.submit(sequence)
        try:
            if not body.get("stream"):
                ids = []
                while (chunk := await sequence.outbox.get()) is not None:
                    if chunk is CUT:
                        request.transport.close()
                        return web.Response(status=499)
                    ids.extend(chunk)
                return web.json_response(_completion(request_id, config.model, ids, len(prompt), body, final=True))
            return await _stream(request, body, request_id, sequence, fault, len(prompt))
        except ConnectionResetError:  # the client went away (it gave up, or a fault closed it)
            return web.Response(status=499)
        finally:
            engine.abort(sequence)

    async def _stream(request, body, request_id, sequence, fault, prompt_len) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        emitted = 0
        index = 0
        while (ids := await sequence.outbox.get()) is not None:
            if ids is CUT or (index == 1 and fault == "drop"):
                request.transport.close()  # the connection dies mid-stream
                return response
            if index == 1 and fault == "malformed":
                await response.write(b'data: {"choices": [{"text": \n\n')
            if index == 1 and fault == "stall":
                await asyncio.sleep(config.stall_s)
            emitted += len(ids)
            done = emitted >= sequence.max_tokens
            await response.write(_sse(_completion(request_id, config.model, ids, prompt_len, body, final=done, usage=False)))
            index += 1
            if fault == "early_close" and not done and emitted >= sequence.max_tokens // 2:
                await response.write_eof()  # a clean close: no usage, no data: [DONE]
                return response
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": prompt_len, "completion_tokens": emitted, "total_tokens": prompt_len + emitted}
            await response.write(_sse({"id": request_id, "object": "text_completion", "created": 0, "model": config.model, "choices": [], "usage": usage}))
        if fault != "no_done":
            await response.write(_sse("[DONE]"))
        await response.write_eof()
        return response

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": config.version})

    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics_endpoint)
    app.router.add_post("/v1/completions", completions)
    return app


def _completion(request_id: str, model: str, ids: list[int], prompt_len: int, body: dict, final: bool, usage: bool = True) -> dict:
    choice = {"index": 0, "text": "".join(f" t{t}" for t in ids), "logprobs": None, "finish_reason": "length" if final else None, "stop_reason": None}
    if body.get("return_token_ids"):
        choice["token_ids"] = ids
    payload = {"id": request_id, "object": "text_completion", "created": 0, "model": model, "choices": [choice]}
    if usage:
        payload["usage"] = {"prompt_tokens": prompt_len, "completion_tokens": len(ids), "total_tokens": prompt_len + len(ids)}
    return payload


async def _start(config: FakeServerConfig, host: str, port: int, shared_clock=None) -> tuple[web.AppRunner, str]:
    app = create_app(config, shared_clock)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    control = app[CONTROL]
    control.runner, control.site, control.host, control.port = runner, site, bound_host, bound_port
    return runner, f"http://{bound_host}:{bound_port}"


async def _stop(runner: web.AppRunner) -> None:
    """Stop serving, then end handlers still running (a stalled or held stream waits on)."""
    await runner.cleanup()
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def serve_forever(config: FakeServerConfig, host: str = "127.0.0.1", port: int = 8000, on_ready=print, stop_signals: tuple = (), shared_clock=None) -> None:
    """Run until cancelled, or until one of ``stop_signals`` arrives.

    A stop signal only sets an event the loop is waiting on, so shutdown runs in order
    whatever the loop was doing when it came; a KeyboardInterrupt raised inside the loop
    can land in a handler's task, and under Python 3.10 the process then sometimes never
    returned from the shutdown.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in stop_signals:
        loop.add_signal_handler(number, stop.set)
    runner, url = await _start(config, host, port, shared_clock)
    on_ready(url)
    try:
        await stop.wait()
    finally:
        for number in stop_signals:  # a second Ctrl-C interrupts a shutdown that hangs
            loop.remove_signal_handler(number)
        await _stop(runner)


class FakeServer:
    """The server on its own event loop in a background thread: ``with FakeServer(cfg) as s: s.url``.

    ``restart()`` starts a new server process on the same port (counters from zero, a new
    start time); ``release()`` lets requests held by ``hold_after_requests`` go on;
    ``requests_received`` counts completion requests that arrived.
    """

    def __init__(self, config: FakeServerConfig = FakeServerConfig(), host: str = "127.0.0.1", port: int = 0):
        self.config, self.host, self.port = config, host, port
        self.url: Optional[str] = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: Optional[web.AppRunner] = None

    def __enter__(self) -> "FakeServer":
        self._thread.start()
        self._runner, self.url = self._call(_start(self.config, self.host, self.port))
        return self

    def __exit__(self, *exc) -> None:
        self._call(_stop(self._runner))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, coroutine, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=timeout)

    @property
    def _control(self) -> _Control:
        return self._runner.app[CONTROL]

    def restart(self) -> None:
        self._call(self._control.restart())

    def die(self) -> None:
        self._call(self._control.die())

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._control.released.set)

    def other_client(self, requests: int = 10, output_tokens: int = 50, prompt_len: int = 32) -> None:
        """Another client's traffic: ``requests`` completions of ``output_tokens`` each, run to the end."""
        self._call(self._control.other_client(requests, output_tokens, prompt_len), timeout=120.0)

    def clock(self) -> float:
        """The server's engine clock, in the seconds its histograms count: a client in this
        process that times its requests on it sees its loop as the server saw it, whatever the
        real_time_factor and however late the busy process runs."""
        return self._control.process.engine.clock()

    @property
    def requests_received(self) -> int:
        return self._control.requests

    @property
    def last_request(self) -> Optional[dict]:
        """The last completion request: its headers and its JSON body (what the client sent)."""
        return self._control.last_request


class BlackHole:
    """A port whose connects never complete (its accept queue is full and nobody accepts), so a
    client's connect times out: ``with BlackHole() as url: ...``.  Linux drops SYNs to a full queue."""

    def __enter__(self) -> str:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)  # the queue holds one connection that nobody accepts
        address = self._listener.getsockname()
        self._fillers = []
        for _ in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(address)
            self._fillers.append(filler)
        # The queue is full once a filler's handshake has completed (it turns writable).
        _, writable, _ = select.select([], self._fillers, [], 30.0)
        if not writable:
            self.__exit__()
            raise RuntimeError("no filler connection completed in 30 s; cannot fill the accept queue")
        return f"http://{address[0]}:{address[1]}"

    def __exit__(self, *exc) -> None:
        for filler in self._fillers:
            filler.close()
        self._listener.close()


def build_parser() -> argparse.ArgumentParser:
    f = argparse.ArgumentParser(prog="python tests/fake_vllm/server.py", description="A fake vLLM server (no GPU needed) for the validation harness.")
    f.add_argument("--host", default="127.0.0.1")
    f.add_argument("--port", type=int, default=8000)
    f.add_argument("--model", default="fake-model")
    f.add_argument("--k", type=int, default=3, help="speculative tokens per step (0 = off)")
    f.add_argument("--acceptance", type=float, default=0.7, help="i.i.d. per-token acceptance")
    f.add_argument("--proposal-probability", type=float, default=1.0, help="P(a draft at a decode step); < 1 for n-gram misses")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--step-base-ms", type=float, default=2.0)
    f.add_argument("--step-per-token-ms", type=float, default=0.01)
    f.add_argument("--max-batch", type=int, default=64)
    f.add_argument("--num-gpu-blocks", type=int, default=2048)
    f.add_argument("--block-size", type=int, default=16)
    f.add_argument("--max-model-len", type=int, default=8192, help="context length listed by /v1/models; longer requests get HTTP 400")
    for fault, what in (
        ("http-500", "answer HTTP 500"),
        ("drop", "drop the connection mid-stream"),
        ("malformed", "send a malformed SSE line"),
        ("stall", "stall mid-stream for --stall-s"),
        ("short", "stop at half the asked length"),
        ("no-done", "end the stream cleanly without data: [DONE]"),
        ("early-close", "close the stream cleanly at half the asked length, without usage or data: [DONE]"),
    ):
        f.add_argument(f"--fault-{fault}", type=float, default=0.0, metavar="FRACTION", help=f"fraction of requests that {what}")
    f.add_argument("--stall-s", type=float, default=30.0)
    f.add_argument("--metrics-missing", action="append", default=[], metavar="NAME", help="leave this metric out of /metrics (repeatable)")
    f.add_argument("--metrics-html", action="store_true", help="/metrics answers an HTML page")
    f.add_argument("--engine", choices=ENGINES, default="v1", help="spec-decode metrics to export: V1 counters, V0 counters and gauges, or V0 gauges only")
    f.add_argument("--restart-after-requests", type=int, metavar="N", help="the process restarts when request N + 1 arrives")
    f.add_argument("--die-after-requests", type=int, metavar="N", help="the process dies when request N + 1 arrives")
    return f


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    config = FakeServerConfig(
        model=args.model,
        num_speculative_tokens=args.k,
        acceptance_rate=args.acceptance,
        proposal_probability=args.proposal_probability,
        seed=args.seed,
        step_base_s=args.step_base_ms / 1000,
        step_per_token_s=args.step_per_token_ms / 1000,
        max_batch=args.max_batch,
        num_gpu_blocks=args.num_gpu_blocks,
        block_size=args.block_size,
        max_model_len=args.max_model_len,
        fault_http_500=args.fault_http_500,
        fault_drop=args.fault_drop,
        fault_malformed=args.fault_malformed,
        fault_stall=args.fault_stall,
        fault_short=args.fault_short,
        fault_no_done=args.fault_no_done,
        fault_early_close=args.fault_early_close,
        engine=args.engine,
        stall_s=args.stall_s,
        metrics_missing=tuple(args.metrics_missing),
        metrics_html=args.metrics_html,
        restart_after_requests=args.restart_after_requests,
        die_after_requests=args.die_after_requests,
    )
    try:
        announce = lambda url: print(f"fake vLLM server listening on {url} (Ctrl-C stops it)", flush=True)  # noqa: E731
        asyncio.run(serve_forever(config, args.host, args.port, on_ready=announce, stop_signals=(signal.SIGINT, signal.SIGTERM)))
    except KeyboardInterrupt:  # a Ctrl-C before the loop's handler is installed
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
