"""Adaptive verification against a fixed k, side by side in one process: what vLLM 0.30's budget
does to TPOT, acceptance length and simulation time at each load (the figures docs/model.md quotes).

    python bench/adaptive_verification.py [--concurrency 1,16,64,256] [--k 3] [--max-num-seqs 256]

Llama-3.1-8B-Instruct with its EAGLE-3 head on one H100, vLLM 0.30.0 (Model Runner V2), 512/256
tokens per request, per-position acceptance 0.8, 0.6, 0.5, closed loop with 2 x N + 8 requests,
seed 0: every run is simulated (no result cache), so the wall times are the runs' own.
"""

from __future__ import annotations

import argparse
import time

from simulator import run
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload

ACCEPTANCE = (0.8, 0.6, 0.5, 0.4, 0.3, 0.3, 0.3, 0.3)


def config(concurrency: int, k: int, adaptive: bool, max_num_seqs: int) -> RunConfig:
    spec = SpeculationConfig(
        num_speculative_tokens=k, acceptance_per_position=ACCEPTANCE[: max(k, 1)] if k else None,
        proposer="eagle3", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" if k else None, adaptive_verification=adaptive,
    )
    return RunConfig(workload=ClosedLoopWorkload.fixed(concurrency, 2 * concurrency + 8, 512, 256), speculation=spec,
                     model="meta-llama/Llama-3.1-8B-Instruct", device="h100", engine="vllm-0.30.0", batch_size_cap=max_num_seqs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,16,64,256")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    args = parser.parse_args()
    print(f"{'in flight':>9} | {'base TPOT':>9} | {'k=' + str(args.k) + ' TPOT':>9} {'AL':>5} | {'adaptive':>9} {'AL':>5} | {'adaptive/fixed':>14} | sim s fixed, adaptive")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        results = []
        for k, adaptive in ((0, False), (args.k, False), (args.k, True)):
            start = time.perf_counter()
            summary = run(config(concurrency, k, adaptive, args.max_num_seqs)).summary
            results.append((summary, time.perf_counter() - start))
        (base, _), (fixed, t_fixed), (adapt, t_adapt) = results
        print(f"{concurrency:>9} | {base.tpot_mean_s * 1e3:>7.2f}ms | {fixed.tpot_mean_s * 1e3:>7.2f}ms {fixed.mean_acceptance_length:>5.2f} | "
              f"{adapt.tpot_mean_s * 1e3:>7.2f}ms {adapt.mean_acceptance_length:>5.2f} | {adapt.tpot_mean_s / fixed.tpot_mean_s:>14.3f} | "
              f"{t_fixed:.2f}, {t_adapt:.2f}")


if __name__ == "__main__":
    main()
