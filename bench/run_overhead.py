"""Cold first-run time (built-in tables, no forest), and warm 300-request run time: this package vs Vidur alone, side by side.

    python bench/run_overhead.py [--repeats 5]

"Vidur alone" is Vidur's own Sarathi scheduler, request generator and entities driven with the
same offline predictor (the stock predictor cannot run offline); the wrapper is ``simulator.run``.
Runs alternate so machine noise hits both equally; the minimum of the repeats is reported.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import simulator  # noqa: E402
from simulator.vidur.logs import quiet_vidur  # noqa: E402

quiet_vidur()
from simulator.runs.config import RunConfig  # noqa: E402
from simulator.runs.workload_kinds import PoissonWorkload  # noqa: E402

# the run docs/performance.md's figures measure: 300 requests of 1024/256 tokens at 4 req/s
WORKLOAD = PoissonWorkload(num_requests=300, prompt_tokens=1024, output_tokens=256, arrival_rate=4.0)
from stock_vidur import direct_vidur_requests  # noqa: E402  (tests/stock_vidur.py: no pytest needed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cold:
        start = time.perf_counter()
        simulator.run(RunConfig(workload=WORKLOAD, cache_dir=cold))
        print(f"cold: built-in tables + first run: {time.perf_counter() - start:.1f} s")

    config = RunConfig(workload=WORKLOAD)
    simulator.run(config)  # warm the default cache and this process
    wrapper, direct = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        simulator.run(config)
        wrapper.append(time.perf_counter() - start)
        start = time.perf_counter()
        direct_vidur_requests(config)
        direct.append(time.perf_counter() - start)
    w, d = min(wrapper), min(direct)
    print(f"warm, 300 requests (min of {args.repeats}): simulator.run {w:.3f} s, Vidur alone {d:.3f} s, ratio {w / d:.3f}")
    print(f"cpu count {os.cpu_count()}")


if __name__ == "__main__":
    main()
