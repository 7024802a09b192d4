"""Wall time of a speculative run against the stock run of the same 300-request workload.

    python bench/spec_vs_stock.py [--repeats 5]

Default workload (Llama-2-7B, A100 built-in profile, 1024/256 tokens, 4 req/s); the speculative
run uses k = 4, acceptance 0.7, n-gram proposer.  Runs alternate; minimum of the repeats.
"""

from __future__ import annotations

import argparse
import logging
import time

logging.disable(logging.INFO)

import simulator  # noqa: E402
from simulator.config import RunConfig, SpeculationConfig  # noqa: E402


def timed(config: RunConfig):
    start = time.perf_counter()
    result = simulator.run(config)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    stock_cfg = RunConfig()
    spec_cfg = RunConfig(speculation=SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7))
    simulator.run(stock_cfg)
    simulator.run(spec_cfg)
    stock, spec = [], []
    for _ in range(args.repeats):
        t, stock_result = timed(stock_cfg)
        stock.append(t)
        t, spec_result = timed(spec_cfg)
        spec.append(t)
    a, b = min(stock), min(spec)
    print(f"stock {a:.3f} s ({stock_result.summary['verify_steps'] or 'no'} verify steps), speculative {b:.3f} s "
          f"({spec_result.summary['verify_steps']} verify steps); ratio speculative/stock {b / a:.3f}")


if __name__ == "__main__":
    main()
