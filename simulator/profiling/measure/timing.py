"""Timers: CUDA-graph replays between CUDA events, CUDA events around eager launches, or
``time.perf_counter`` on a CPU; and Vidur's five summary statistics of the repeated runs.

A measured op is a ``run(watch)`` callable that calls ``watch.time(name, fn)`` for each op in
order; the watch is a stopwatch (eager timing) or a capture (one CUDA graph per op).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from simulator.util.errors import ConfigError

TIMERS = ("auto", "graph", "event")
# CUDA-graph timing: a graph holds enough copies of a small op to run about this long (so the
# replay's own start-up is shared among them), judged from the op's eager time.
GRAPH_TARGET_MS = 0.1
MAX_GRAPH_COPIES = 8
# The GPU spins this long per queued replay before the first one, so the CPU is never behind;
# doubled (up to the maximum) whenever the GPU still got there first.
QUEUE_HEAD_START_MS = 0.03
MAX_HEAD_START_MS = 0.2
MAX_HOLD_MS = 50.0
QUEUE_ATTEMPTS = 3
CALIBRATION_CYCLES = 10_000_000


def summarize(times_ms) -> dict[str, float]:
    """Vidur's five statistics of one op's repeated timings (population std, as numpy's default)."""
    a = np.asarray(times_ms, dtype=float)
    return {"min": float(a.min()), "max": float(a.max()), "mean": float(a.mean()), "median": float(np.median(a)), "std": float(a.std())}


def import_torch():
    try:
        import torch
    except ImportError as exc:
        raise ConfigError("measuring a profile needs PyTorch, an optional dependency: pip install -e '.[profile]'") from exc
    return torch


def is_out_of_memory(torch, exc: BaseException) -> bool:
    # CUDA raises torch.OutOfMemoryError; the CPU allocator a plain RuntimeError.
    return isinstance(exc, torch.OutOfMemoryError) or (isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))


def free_memory(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


class Stopwatch:
    """Per-op timings in ms around eager launches: CUDA events on a GPU (read after one
    synchronize), perf_counter on a CPU."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.recording = False
        self.samples: dict[str, list] = {}

    def time(self, name: str, fn):
        if not self.recording:
            return fn()
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            self.samples.setdefault(name, []).append((start, end))
        else:
            t0 = time.perf_counter()
            out = fn()
            self.samples.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        return out

    def stats(self) -> dict[str, dict[str, float]]:
        if self.cuda:
            self.torch.cuda.synchronize()
            return {n: summarize([s.elapsed_time(e) for s, e in pairs]) for n, pairs in self.samples.items()}
        return {n: summarize(ms) for n, ms in self.samples.items()}


class CaptureFailed(Exception):
    """An op of a shape could not be captured into (or replayed from) a CUDA graph."""


class Capture:
    """Stands in for a stopwatch during one ``run``: records each op into its own CUDA graph,
    ``copies[name]`` back-to-back runs of it, on the side stream the warm-up ran on."""

    def __init__(self, torch, stream, copies: dict[str, int]):
        self.torch, self.stream, self.copies = torch, stream, copies
        self.graphs: list[tuple[str, object, int]] = []  # (op, graph, copies) in layer order
        self.outputs: list = []  # what the graphs write into, alive as long as the graphs

    def time(self, name: str, fn):
        torch, copies = self.torch, self.copies.get(name, 1)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")  # views launch no kernel
            graph.capture_begin()
            try:
                for _ in range(copies):
                    out = fn()
            except BaseException:
                try:
                    graph.capture_end()  # leave the stream out of capture mode; the capture is void anyway
                except Exception:
                    pass
                raise
            graph.capture_end()
        self.graphs.append((name, graph, copies))
        self.outputs.append(out)
        return out

    def release(self) -> None:
        """Graphs hold private memory pools: drop them (and their outputs) before the next shape."""
        self.graphs.clear()
        self.outputs.clear()


@dataclass
class Timed:
    stats: dict[str, dict[str, float]]
    timer: str  # cuda_graph, cuda_event or perf_counter
    fallback: str | None = None  # why CUDA-graph timing was wanted but not used


class Clock:
    """Times every op of a ``run(watch)`` (one transformer layer, or one attention call).

    Eager timing puts two CUDA events around each launch, so the interval includes the GPU
    idling while Python issues the op's kernels: for small shapes that launch gap, not the
    kernels, is what gets measured. With ``graphs`` each op is captured into a CUDA graph and
    the graphs are replayed behind a GPU spin-wait long enough for the CPU to queue every
    replay first, so an event pair brackets GPU execution only. An op that cannot be captured
    makes its shape fall back to eager timing, recorded in the metadata.
    """

    def __init__(self, torch, device, graphs: bool):
        self.torch, self.device, self.graphs = torch, device, graphs
        self.eager_timer = "cuda_event" if device.type == "cuda" else "perf_counter"
        self.stream = torch.cuda.Stream(device) if graphs else None
        self.head_start_ms = QUEUE_HEAD_START_MS
        self._cycles_per_ms: float | None = None
        self._calibrated = False

    def measure(self, run, warmup: int, repeats: int) -> Timed:
        if not self.graphs:
            return Timed(self._eager(run, warmup, repeats), self.eager_timer)
        try:
            return Timed(self._replayed(run, warmup, repeats), "cuda_graph")
        except CaptureFailed as exc:
            reason = str(exc)
        free_memory(self.torch, self.device)
        return Timed(self._eager(run, warmup, repeats), self.eager_timer, reason)

    def _eager(self, run, warmup: int, repeats: int) -> dict[str, dict[str, float]]:
        watch = Stopwatch(self.torch, self.device)
        for _ in range(warmup):
            run(watch)
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()
        watch.recording = True
        for _ in range(repeats):
            run(watch)
        return watch.stats()

    def _replayed(self, run, warmup: int, repeats: int) -> dict[str, dict[str, float]]:
        torch = self.torch
        # Warm up on the side stream the capture uses (lazy library set-up must not be captured);
        # the last warm-up's eager timings decide how many copies of each op one graph holds.
        watch = Stopwatch(torch, self.device)
        self.stream.wait_stream(torch.cuda.current_stream())
        rounds = max(warmup, 1)
        with torch.cuda.stream(self.stream):
            for i in range(rounds):
                watch.recording = i == rounds - 1
                run(watch)
        eager_ms = {name: s["median"] for name, s in watch.stats().items()}  # stats() synchronizes
        copies = {name: max(1, min(MAX_GRAPH_COPIES, int(GRAPH_TARGET_MS / max(ms, 1e-6)))) for name, ms in eager_ms.items()}
        capture = Capture(torch, self.stream, copies)
        try:
            run(capture)
            return self._replay(capture.graphs, repeats)
        except Exception as exc:
            if is_out_of_memory(torch, exc):
                raise
            torch.cuda.synchronize()
            raise CaptureFailed(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}") from exc
        finally:
            capture.release()

    def _replay(self, graphs, repeats: int) -> dict[str, dict[str, float]]:
        torch = self.torch
        self._calibrate()
        with torch.cuda.stream(self.stream):
            for _, graph, _ in graphs:  # the first replay uploads each graph; not timed
                graph.replay()
            torch.cuda.synchronize()
            for _ in range(QUEUE_ATTEMPTS):
                pairs = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in graphs] for _ in range(repeats)]
                self._hold_gpu(len(graphs) * repeats)
                ran_dry, previous_end = False, None
                for round_pairs in pairs:
                    for (_, graph, _), (start, end) in zip(graphs, round_pairs):
                        # The GPU done with all queued work here would idle inside the next pair.
                        ran_dry = ran_dry or (previous_end is not None and previous_end.query())
                        start.record()
                        graph.replay()
                        end.record()
                        previous_end = end
                torch.cuda.synchronize()
                if not ran_dry or self._cycles_per_ms is None or self.head_start_ms >= MAX_HEAD_START_MS:
                    break
                self.head_start_ms = min(2 * self.head_start_ms, MAX_HEAD_START_MS)
        samples: dict[str, list[float]] = {}
        for round_pairs in pairs:
            for (name, _, copies), (start, end) in zip(graphs, round_pairs):
                samples.setdefault(name, []).append(start.elapsed_time(end) / copies)
        return {name: summarize(ms) for name, ms in samples.items()}

    def _calibrate(self) -> None:
        """GPU clock cycles per millisecond for ``torch.cuda._sleep`` (absent: no head start)."""
        if self._calibrated:
            return
        self._calibrated = True
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is None:
            return
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        sleep(CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end)
        if elapsed > 0:
            self._cycles_per_ms = CALIBRATION_CYCLES / elapsed

    def _hold_gpu(self, replays: int) -> None:
        if self._cycles_per_ms is not None:
            self.torch.cuda._sleep(int(self._cycles_per_ms * min(self.head_start_ms * replays, MAX_HOLD_MS)))


def make_clock(torch, device, timer: str) -> Clock:
    """The clock for ``--timer`` (already checked against the device); a seam for tests."""
    return Clock(torch, device, graphs=device.type == "cuda" and timer in ("auto", "graph"))

