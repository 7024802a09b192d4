"""Closed-loop load: a fixed number of requests in flight, each replaced as soon as it finishes.

Vidur queues an arrival event for every generated request up front.  This subclass of its
Simulator queues only the first ``concurrency``; the others wait, and after every event that
completed requests, one waiting request arrives per completion: at the current time, or a
client's round trip later (the workload's ``turnaround_s``).
Completions are reported by the requests themselves (:class:`SpeculativeRequest`'s hook), so each
event costs O(1) extra work.
"""

from __future__ import annotations

from collections import deque

from simulator.vidur.runtime import RequestArrivalEvent
from simulator.vidur.seam import SimulatorSeam


class ClosedLoopSimulator(SimulatorSeam):
    def __init__(self, config, concurrency: int, turnaround_s: float = 0.0):
        self._concurrency = concurrency
        self._turnaround_s = turnaround_s
        self._waiting: deque = deque()
        self._finished_since_last_event = 0
        super().__init__(config)

    def _on_request_complete(self, request) -> None:
        self._finished_since_last_event += 1

    def init_event_queue(self) -> None:
        requests = self.request_generator.generate()
        for request in requests:
            request.on_complete = self._on_request_complete
        self._waiting.extend(requests[self._concurrency :])
        for request in requests[: self._concurrency]:
            self.add_event(RequestArrivalEvent(request.arrived_at, request))

    def add_events(self, events) -> None:
        super().add_events(events)
        while self._finished_since_last_event:
            self._finished_since_last_event -= 1
            if self._waiting:
                request = self._waiting.popleft()
                arrival = self.now + self._turnaround_s
                request.arrive_at(arrival)
                self.add_event(RequestArrivalEvent(arrival, request))
