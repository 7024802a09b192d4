"""The fake server in a process of its own, for tests that time a client against its clock.

:class:`fake_vllm.FakeServer` runs the fake on a thread of the test's process.  A client in that
process shares one interpreter lock with it: when many streams end in one step, the client reads
them late, the fake's engine goes on stepping meanwhile, and the replacements reach it later than
any client on another machine would send them.  That lag is the test rig's, not the server's, yet a
fit that simulates the client's loop would charge it to the step costs.  Here the fake runs in a
forked process (its step law, a closure, needs no pickling), and its engine publishes its clock in
shared memory, so the client in the test's process still times its requests on the fake's clock.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from typing import Optional

from fake_vllm.server import FakeServerConfig, clock_reading, serve_forever

_CONTEXT = multiprocessing.get_context("fork")


def _serve(config: FakeServerConfig, host: str, shared_clock, ready) -> None:
    """The child: serve until SIGTERM, telling the parent the URL once it listens."""
    asyncio.run(serve_forever(config, host, 0, on_ready=ready.send, stop_signals=(signal.SIGTERM,), shared_clock=shared_clock))


class FakeServerProcess:
    """``with FakeServerProcess(config) as server: server.url, server.clock()``: the fake served by
    a child process; ``clock()`` reads its engine's clock (the seconds its histograms count)."""

    def __init__(self, config: FakeServerConfig = FakeServerConfig(), host: str = "127.0.0.1", start_timeout_s: float = 30.0):
        self.config, self.host, self.start_timeout_s = config, host, start_timeout_s
        self.url: Optional[str] = None
        self._shared = _CONTEXT.Array("d", 3)
        self._process = None

    def __enter__(self) -> "FakeServerProcess":
        receive, send = _CONTEXT.Pipe(duplex=False)
        self._process = _CONTEXT.Process(target=_serve, args=(self.config, self.host, self._shared, send), daemon=True)
        self._process.start()
        send.close()
        if not receive.poll(self.start_timeout_s):
            self.__exit__()
            raise RuntimeError(f"the fake server's process did not listen within {self.start_timeout_s:g} s")
        self.url = receive.recv()
        receive.close()
        return self

    def __exit__(self, *exc) -> None:
        if self._process is None:
            return
        self._process.terminate()  # SIGTERM: the child's loop stops its server in order
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._process = None

    def clock(self) -> float:
        """The child's engine clock now (see :class:`fake_vllm.server.EngineClock`)."""
        with self._shared.get_lock():
            state = tuple(self._shared)
        return clock_reading(state, self.config.real_time_factor)
