"""How long a fit takes (``python -m simulator.validation fit`` after its measurements), against the
issue's 30 s target on a 2-core machine.

    python bench/fit_bench.py [--repeats 3]

The measurements are simulated (the default plan: 1, 8, 32 and 128 in flight, 512 input and 128
output tokens, 3 waves, 128 held out), so the figure is the fit alone, no server: a plain fit
(vLLM 0.10.1's synchronous profile, every engine term free) and a speculative fit over it (EAGLE-3
at k = 3, only the CPU time and the drafter free).  The minimum of the repeats is reported, with
its ratio to the target.
"""

from __future__ import annotations

import argparse
import time

from simulator.vidur.logs import quiet_vidur

quiet_vidur()
from simulator.validation.fit import Level, fit_with_holdout, simulate_level  # noqa: E402
from simulator.validation.fit_measure import FitPlan  # noqa: E402

TARGET_S = 30.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = dict(proposer="eagle3", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", num_speculative_tokens=3)
START = {"cpu_ms": 1.2, "gemm": 1.0, "attention": 1.0, "all_reduce": 1.0, "drafter": 1.0}


def measured_levels(deployment: dict, terms: dict, plan: FitPlan, acceptance: tuple = ()) -> list[Level]:
    out = []
    for c in plan.levels:
        proto = Level(c, plan.requests(c), plan.input_len, plan.output_len, 1.0, 1.0, 1.0, acceptance)
        sim = simulate_level(deployment, proto, terms)
        length = sim["acceptance_length"] if acceptance else None
        out.append(Level(c, proto.requests, plan.input_len, plan.output_len, sim["tpot"], sim["ttft"], sim["throughput"], acceptance, length))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    plan = FitPlan()
    plain = dict(model=MODEL, device="h100", engine="vllm-0.10.1")
    spec = dict(plain, **EAGLE)
    truth = {**START, "cpu_ms": 2.0, "gemm": 1.2, "attention": 0.9, "drafter": 1.4}
    plain_levels = measured_levels(plain, truth, plan)
    spec_levels = measured_levels(spec, truth, plan, acceptance=(0.8, 0.7, 0.6))
    fixed = {name: truth[name] for name in ("gemm", "attention", "all_reduce")}
    for name, deployment, levels, held in (("plain fit", plain, plain_levels, None), ("speculative fit", spec, spec_levels, fixed)):
        times, result = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = fit_with_holdout(deployment, levels, plan.held_out, START, held)
            times.append(time.perf_counter() - start)
        best = min(times)
        print(f"{name}: {best:.2f} s (min of {args.repeats}, {result.evaluations} simulations), {best / TARGET_S:.3f} of the {TARGET_S:.0f} s target; "
              f"held-out error {result.held_out_error_pct:.2f}%")


if __name__ == "__main__":
    main()
