"""How well a fit recovers a known step law: the four laws of tests/test_fit.py's fake-server
tests, each fitted ``--runs`` times, printing the fitted terms and the held-out error of each run.

    python bench/fit_fake_runs.py [--runs 3] [--laws sync,plain,speculative,jump]

The fake server (tests/fake_vllm) runs the package's own step model at known terms, so a perfect
fit exists; the spread over runs is the client's and the event loops' (a real HTTP client in this
process, timing requests on the clock of the fake, which runs in a child process).  The figures
in docs/validation.md's fake-server table come from this script.  About 2.5 minutes a run of all
four laws on a 2-core machine; each line names the fitted file, whose ``plan.measured`` holds
every level as measured, so an outlying run can be re-simulated at the law's terms.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from simulator.vidur.logs import quiet_vidur  # noqa: E402

quiet_vidur()
import fit_laws as t  # noqa: E402  (the tests' laws, so the figures are the tests')
from fake_vllm import FakeServerConfig  # noqa: E402
from fake_vllm.own_process import FakeServerProcess  # noqa: E402

from simulator.profiles.fitted import read_fitted_profile  # noqa: E402

WIDE = dict(max_batch=1024, num_gpu_blocks=20000, real_time_factor=4.0)


def fit(config: FakeServerConfig, extra: tuple = ()):
    """One fit against a fake running ``config``: the profile, its path and the warnings printed."""
    err = io.StringIO()
    with FakeServerProcess(config) as server, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code, path = t.fit_against(server, Path(tempfile.mkdtemp(prefix="fit-fake-")), extra=extra)
    if code != 0:
        raise SystemExit(f"the fit failed: {err.getvalue().strip()}")
    return read_fitted_profile(path), path, err.getvalue().count("warning:")


def show(name: str, profile, path, warnings: int) -> None:
    terms = ", ".join(f"{n} {v.value:.3f}" for n, v in profile.terms.items() if v.placed)
    # the file records every level as measured (plan.measured): an outlying run can be re-simulated from it
    print(f"  {name:<36} {terms:<48} held out {profile.held_out_error_pct:5.1f}%  warnings {warnings}  {path}", flush=True)


LAWS = ("sync", "plain", "speculative", "jump")  # speculative is fitted over the same run's plain fit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--laws", default=",".join(LAWS), help=f"which laws, comma-separated, of {', '.join(LAWS)} (default: all)")
    args = parser.parse_args()
    laws = args.laws.split(",")
    unknown = sorted(set(laws) - set(LAWS))
    if unknown:
        parser.error(f"--laws {args.laws}: no law named {', '.join(unknown)}; the laws are {', '.join(LAWS)}")
    if "speculative" in laws and "plain" not in laws:
        parser.error("--laws: speculative is fitted over the plain law's fit; add plain")
    sync_truth = {"cpu_ms": 2.5, "gemm": 1.3, "attention": 0.8}
    for run in range(args.runs):
        print(f"run {run + 1} of {args.runs} (placed terms only)")
        if "sync" in laws:
            profile, path, w = fit(FakeServerConfig(model=t.MODEL, num_speculative_tokens=0, step_law=t.law(t.SYNC, **sync_truth), version="0.10.1", **WIDE))
            show("0.10.1: CPU 2.5, GEMM x1.3, attn x0.8", profile, path, w)
        if "plain" in laws:
            profile, base, w = fit(FakeServerConfig(model=t.MODEL, num_speculative_tokens=0, step_law=t.law(f"vllm-{t.NEW}"), version=t.NEW, **WIDE))
            show(f"{t.NEW}: built-in terms", profile, base, w)
        if "speculative" in laws:
            spec = FakeServerConfig(model=t.MODEL, num_speculative_tokens=3, acceptance_rate=0.7, step_law=t.spec_law(1.5), version=t.NEW, **WIDE)
            profile, path, w = fit(spec, ("--engine-profile", str(base), "--proposer", "eagle3", "--draft-model", t.EAGLE.draft_model))
            show(f"{t.NEW}: EAGLE-3 k=3, drafter x1.5", profile, path, w)
        if "jump" in laws:
            jump = FakeServerConfig(model=t.MODEL, num_speculative_tokens=0, max_batch=1024, num_gpu_blocks=20000,
                                    step_law=t.law(t.SYNC, jump_above=16, jump_s=0.004, cpu_ms=2.0), version="0.10.1")
            profile, path, w = fit(jump)
            show("0.10.1: +4 ms above 16 decode rows", profile, path, w)


if __name__ == "__main__":
    main()
