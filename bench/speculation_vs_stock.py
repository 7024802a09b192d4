"""Wall time of a speculative run against the stock run of the same 300-request workload.

    python bench/speculation_vs_stock.py [--repeats 5]

Speculative runs use k = 4, acceptance 0.7, n-gram proposer, on the default workload
(Llama-2-7B, A100 built-in profile, 1024/256 tokens, Poisson 4 req/s) and on the same requests
arriving at once (a closed burst).  Runs alternate; the minimum of the repeats is reported,
with the number of forward passes (Vidur iterations) each run simulated.
"""

from __future__ import annotations

import argparse
import time


import simulator  # noqa: E402
from simulator.vidur.logs import quiet_vidur  # noqa: E402

quiet_vidur()
from simulator.runs.config import RunConfig  # noqa: E402
from simulator.runs.speculation import SpeculationConfig  # noqa: E402
from simulator.runs.workload_kinds import PoissonWorkload  # noqa: E402

WORKLOADS = {
    "Poisson 4 req/s": PoissonWorkload(arrival_rate=4.0),
    "burst (10,000 req/s)": PoissonWorkload(arrival_rate=10000.0),
}


def timed(config: RunConfig) -> tuple[float, dict]:
    start = time.perf_counter()
    result = simulator.run(config)
    return time.perf_counter() - start, result.summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    speculation = SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7)
    for name, workload in WORKLOADS.items():
        stock_cfg = RunConfig(workload=workload)
        spec_cfg = RunConfig(workload=workload, speculation=speculation)
        simulator.run(stock_cfg)
        simulator.run(spec_cfg)
        stock, spec = [], []
        for _ in range(args.repeats):
            t, stock_summary = timed(stock_cfg)
            stock.append(t)
            t, spec_summary = timed(spec_cfg)
            spec.append(t)
        a, b = min(stock), min(spec)
        print(
            f"{name}: stock {a:.3f} s ({stock_summary['forward_passes']} forward passes), "
            f"speculative {b:.3f} s ({spec_summary['forward_passes']} forward passes); ratio speculative/stock {b / a:.3f}"
        )


if __name__ == "__main__":
    main()
