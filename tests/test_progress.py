"""Progress off a terminal (a pipe, CI, tee) and Ctrl-C in the local pool (issue 26 §3): a line at
least every few seconds however long one run takes, and an interrupt that stops the workers at once."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from simulator.util import progress
from simulator.sweep.executors import LocalExecutor


def _slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_off_a_terminal_a_stage_prints_a_line_at_least_every_interval(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    bar = progress.bar(2, "pays-off")  # pytest's captured stderr is not a terminal
    assert isinstance(bar, progress.LineProgress)
    time.sleep(0.4)  # one long run: no update for eight intervals
    bar.update()
    bar.update()
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "pays-off: 2 runs to go"
    assert len(lines) >= 5 and all(line.startswith("pays-off: ") for line in lines)
    assert lines[-1].startswith("pays-off: 2 of 2 runs done")


def test_no_lines_when_progress_is_off(capsys):
    bar = progress.bar(2, "quiet", enabled=False)
    bar.update(2)
    bar.close()
    assert capsys.readouterr().err == ""


def test_the_local_pool_reports_while_its_workers_run(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    assert LocalExecutor(jobs=2).map(_slow, [0.3, 0.3, 0.1], desc="sweep") == [0.3, 0.3, 0.1]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 4 and lines[-1].startswith("sweep: 3 of 3 runs done")


def test_ctrl_c_stops_the_pool_without_waiting_for_its_runs(capsys):
    """The terminal's SIGINT reaches the parent (the workers ignore it); the map raises at once and
    terminates the workers instead of waiting for their 30 s runs."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        LocalExecutor(jobs=2, progress=False).map(_slow, [30.0, 30.0, 30.0])
    assert time.monotonic() - started < 10
