"""The fake server's engine clock, and the fake in a process of its own that publishes it.

A fit against the fake times its client on the fake's clock; with the fake in another process the
clock crosses in shared memory, and must read there what the engine reads at home.
"""

from __future__ import annotations

import json
import multiprocessing
import time
import urllib.request

import pytest

from fake_vllm import FakeServerConfig
from fake_vllm.own_process import FakeServerProcess
from fake_vllm.server import EngineClock, clock_reading


def test_the_clock_runs_at_the_real_clocks_pace_over_the_factor_and_stops_at_its_cap():
    two_seconds_ago = time.perf_counter() - 2.0
    assert clock_reading((10.0, two_seconds_ago, float("inf")), 4.0) == pytest.approx(10.5, abs=0.01)  # 2 real s / 4
    assert clock_reading((10.0, two_seconds_ago, 10.2), 4.0) == 10.2  # a step's end: the clock waits there
    assert clock_reading((10.0, two_seconds_ago, 10.0), 1.0) == 10.0  # between steps it holds


def test_each_setting_is_published_to_the_shared_array():
    shared = multiprocessing.get_context("fork").Array("d", 3)
    clock = EngineClock(4.0, shared)
    real = time.perf_counter()
    clock.set(3.0, real, 3.25)
    assert tuple(shared) == (3.0, real, 3.25) and clock.state == (3.0, real, 3.25)
    assert clock_reading(tuple(shared), 4.0) == pytest.approx(clock(), abs=1e-3)  # read a moment apart


def test_a_fake_in_its_own_process_serves_and_its_clock_reads_across():
    config = FakeServerConfig(model="m", num_speculative_tokens=0, version="0.10.1", real_time_factor=2.0)
    with FakeServerProcess(config) as server:
        with urllib.request.urlopen(f"{server.url}/version", timeout=10) as answer:
            assert json.load(answer)["version"] == "0.10.1"
        before = server.clock()
        time.sleep(0.4)
        idle = server.clock() - before
        process = server._process
    assert idle == pytest.approx(0.2, abs=0.05)  # idle: 0.4 real seconds over the factor 2
    assert not process.is_alive()  # the child ended with the block
