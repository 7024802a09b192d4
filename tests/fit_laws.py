"""The fit tests' step laws and their fit against the fake server, shared with the benchmark.

The fake server (``fake_vllm``, run in a process of its own) runs a step law; these build laws
from the package's own step model at known terms (:class:`simulator.engine.step_price.StepPricer`),
so a perfect fit exists, and :func:`fit_against` runs ``python -m simulator.validation fit``
against a fake.  It imports nothing of pytest, so ``bench/fit_fake_runs.py`` runs without the
test extras.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from simulator.profiles.step_scales import StepScales
from simulator.runs.deployment import Deployment, Speculation, StepCosts
from simulator.speculative.acceptance_convert import AcceptanceInput

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SYNC = "vllm-0.10.1"  # synchronous scheduling: the CPU time per step shows in every step
NEW = "0.30.0"  # Model Runner V2 and async scheduling for EAGLE-type kinds; the table needs vLLM >= 0.19
EAGLE = Speculation(proposer="eagle3", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", k=3)
START = {"cpu_ms": 1.2, "gemm": 1.0, "attention": 1.0, "all_reduce": 1.0, "drafter": 1.0}


def law(engine: str, jump_above: int = 0, jump_s: float = 0.0, **terms):
    """The fake's step law: the package's step model at ``terms``, plus a jump the model cannot
    express (``jump_s`` more per step once a step holds more than ``jump_above`` decode rows)."""
    from simulator.engine.step_price import StepPricer
    from simulator.runs.workload_kinds import ClosedLoopWorkload

    cpu = terms.pop("cpu_ms", 1.2)
    costs = StepCosts(engine_overhead_ms=cpu, step_scales=StepScales(**terms))
    pricer = StepPricer(Deployment(model=MODEL, device="h100", engine=engine, costs=costs).run(ClosedLoopWorkload(1, (512,), (64,))))

    def law(prefill_rows, decode_rows):
        return pricer.seconds(prefill_rows, decode_rows) + (jump_s if jump_above and len(decode_rows) > jump_above else 0.0)

    return law


def fit_against(server, tmp_path: Path, levels="1,4,16,64", extra=()):
    """``fit`` against the fake (a :class:`fake_vllm.own_process.FakeServerProcess`), its client
    timing requests on the fake's engine clock (the one its histograms count in): the loop the fit
    simulates is then the one the server ran, whatever the fake's real-time factor."""
    from unittest import mock

    from simulator.validation import fit_measure
    from simulator.validation.cli import main

    out = tmp_path / "fitted.toml"
    with mock.patch.object(fit_measure, "client_clock", server.clock):
        code = main(["fit", "--base-url", server.url, "--device", "h100", "--levels", levels, "--random-output-len", "64", "--waves", "2", "--out", str(out), *extra])
    return code, out


def spec_law(drafter: float, **terms):
    """A speculative server's law: EAGLE-3 at k = 3 under vLLM 0.30.0, its drafter's cost scaled by ``drafter``."""
    from simulator.engine.step_price import StepPricer
    from simulator.runs.workload_kinds import ClosedLoopWorkload

    speculation = replace(EAGLE, acceptance=AcceptanceInput.given(rate=0.7))
    deployment = Deployment(model=MODEL, device="h100", engine=f"vllm-{NEW}", costs=StepCosts(step_scales=StepScales(drafter=drafter, **terms)), speculation=speculation)
    pricer = StepPricer(deployment.run(ClosedLoopWorkload(1, (512,), (64,))))
    return pricer.seconds
