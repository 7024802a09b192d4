"""Where sweep runs execute: a local process pool by default, Ray for grids beyond one machine.

An executor has one method, ``map(fn, items) -> list``, returning results in input order, so
the rows a sweep writes cannot depend on which executor ran it or on completion order.

Ctrl-C: the local pool's workers ignore SIGINT (the terminal sends it to the whole process
group), so only the parent sees it; it then terminates the workers at once instead of waiting for
their runs, and re-raises, so a command prints its one interrupt line and no worker prints a
traceback.  Each run the sweep simulates is stored in the result cache by the worker as it
finishes (:func:`simulator.sweep.runner.simulate_all`), so an interrupted sweep resumes.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import signal
from contextlib import closing
from typing import Callable, Optional, Sequence

from simulator.util import progress as progress_policy
from simulator.util.errors import ConfigError

EXECUTORS = ("local", "ray")


class LocalExecutor:
    """A process pool on this machine; ``jobs=1`` runs in this process (no pickling)."""

    def __init__(self, jobs: Optional[int] = None, progress: Optional[bool] = None):
        if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
            raise ConfigError(f"jobs = {jobs!r}: must be a positive integer")
        self.jobs = jobs or os.cpu_count() or 1
        self.progress = progress

    def map(self, fn: Callable, items: Sequence, desc: str = "simulating") -> list:
        items = list(items)
        if self.jobs == 1 or len(items) <= 1:
            with closing(progress_policy.bar(len(items), desc, enabled=self.progress)) as bar:
                results = []
                for item in items:
                    results.append(fn(item))
                    bar.update()
                return results
        results: list = [None] * len(items)
        # the workers are forked when the pool starts, before the progress thread does (a fork never copies a held lock);
        # leaving the block (done, an error, Ctrl-C) terminates them: none outlives the map
        with multiprocessing.get_context().Pool(processes=min(self.jobs, len(items)), initializer=_ignore_interrupts) as pool:
            with closing(progress_policy.bar(len(items), desc, enabled=self.progress)) as bar:
                for i, result in pool.imap_unordered(_indexed, [(fn, i, item) for i, item in enumerate(items)]):
                    results[i] = result
                    bar.update()
        return results


def _ignore_interrupts() -> None:
    """A pool worker leaves Ctrl-C to the parent, which terminates it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _indexed(job: tuple) -> tuple:
    fn, i, item = job
    return i, fn(item)


class RayExecutor:
    """Ray tasks, one per run.  Connects to ``RAY_ADDRESS`` when set (every node then needs
    this project installed), otherwise starts a local Ray with ``jobs`` CPUs and stops it after."""

    def __init__(self, jobs: Optional[int] = None, progress: Optional[bool] = None):
        if importlib.util.find_spec("ray") is None:
            raise ConfigError("executor 'ray' needs Ray: pip install 'vidur-specdec[ray]'")
        self.jobs = jobs
        self.progress = progress

    def map(self, fn: Callable, items: Sequence, desc: str = "simulating") -> list:
        import ray

        items = list(items)
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(num_cpus=self.jobs, include_dashboard=False, log_to_driver=False, configure_logging=False)
        bar = progress_policy.bar(len(items), desc, enabled=self.progress)
        try:
            task = ray.remote(fn)
            refs = [task.remote(item) for item in items]
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                bar.update(len(done))
            return ray.get(refs)
        finally:
            bar.close()
            if started_here:
                ray.shutdown()


def make_executor(name: str, jobs: Optional[int] = None, progress: Optional[bool] = None):
    if name == "local":
        return LocalExecutor(jobs, progress)
    if name == "ray":
        return RayExecutor(jobs, progress)
    raise ConfigError(f"executor = {name!r}: must be one of {EXECUTORS}")

