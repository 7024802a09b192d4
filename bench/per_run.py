"""Simulation time of one run of each kind the build simulates: this checkout against another commit, side by side.

    python bench/per_run.py --against COMMIT [--repeats 5] [--inner 3] [--only NAME ...]

The other commit is exported with ``git archive`` into a temporary folder.  Each repeat starts
one fresh process per revision, in turn (A B, then B A, ...), so machine drift hits both alike;
each process imports the simulator of its revision, runs every kind once to warm up, then
``--inner`` times, and reports the minimum per kind.  The figure to quote is the median over the
repeats of the pair's ratio (this checkout / the other), with the pair's minimum and maximum.
Nothing is cached between runs (the result cache is off), and every run also checks that both
revisions give the same summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name -> (what it stands for, the run).  Built from the public RunConfig API, which both
# revisions must share.
KINDS = {
    "seed-ngram": "seed sweep: Llama-2-7B, built-in A100, 300 requests Poisson 4 req/s, n-gram k = 4, per_token verify",
    "eagle-c128": "pays-off: Llama-3.1-8B + EAGLE on H100, closed loop 128 in flight, k = 3",
    "eagle3-c16": "pays-off: Llama-3.1-8B + EAGLE-3 on H100, closed loop 16 in flight, k = 4",
    "draft-70b-tp4": "pays-off: Llama-3-70B at TP 4 + a 0.5B draft model on H100, closed loop 32 in flight, k = 3",
    "moe-eagle3": "pays-off: Qwen3-30B-A3B + EAGLE-3 on H200, closed loop 64 in flight, k = 3",
    "baseline-c64": "pays-off baseline: Llama-3.1-8B on H100, no speculation, closed loop 64 in flight",
    "batch1-gptoss": "published: gpt-oss-120b on H100, one request in flight, 6 requests of 150 + 1,700 tokens",
}


def config(name: str):
    from simulator import ClosedLoopWorkload, PoissonWorkload, RunConfig, SpeculationConfig  # the public API, in every revision

    try:
        from simulator.runs.workloads import random_lengths
    except ImportError:  # a revision from before the tree was grouped
        from simulator.workloads import random_lengths

    def closed(concurrency: int, requests: int, prompt: int = 512, output: int = 256):
        # lengths spread around the given ones (what ClosedLoopWorkload.spread built before it became
        # workloads.spread_closed_loop): random_lengths and the constructor exist in both revisions
        return ClosedLoopWorkload(concurrency, *random_lengths(requests, prompt, output, 0.5, 42))

    pays_off = dict(batch_size_cap=128, chunk_size=2048)
    llama8 = dict(model="meta-llama/Llama-3.1-8B-Instruct", device="h100", **pays_off)
    if name == "seed-ngram":
        spec = SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7, attention="per_token")
        return RunConfig(workload=PoissonWorkload(arrival_rate=4.0), speculation=spec, batch_size_cap=128, chunk_size=512)
    if name == "eagle-c128":
        spec = SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.6, proposer="eagle", draft_model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
        return RunConfig(workload=closed(128, 256), speculation=spec, **llama8)
    if name == "eagle3-c16":
        spec = SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7, proposer="eagle3", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
        return RunConfig(workload=closed(16, 64), speculation=spec, **llama8)
    if name == "draft-70b-tp4":
        spec = SpeculationConfig(
            num_speculative_tokens=3, acceptance_rate=0.7, proposer="draft", draft_model="turboderp/Qwama-0.5B-Instruct", draft_tensor_parallel_size=1
        )
        return RunConfig(workload=closed(32, 64), speculation=spec, model="meta-llama/Meta-Llama-3-70B-Instruct", device="h100", tensor_parallel_size=4, **pays_off)
    if name == "moe-eagle3":
        spec = SpeculationConfig(
            num_speculative_tokens=3, acceptance_rate=0.7, proposer="eagle3", draft_model="lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge"
        )
        return RunConfig(workload=closed(64, 128), speculation=spec, model="Qwen/Qwen3-30B-A3B", device="h200", **pays_off)
    if name == "baseline-c64":
        return RunConfig(workload=closed(64, 128), **llama8)
    if name == "batch1-gptoss":
        workload = ClosedLoopWorkload.fixed(1, 6, 150, 1700)
        return RunConfig(workload=workload, model="openai/gpt-oss-120b", device="h100", batch_size_cap=1, chunk_size=8192)
    raise KeyError(name)


def child(names: list[str], inner: int) -> None:
    """One revision's process: every kind warmed once, then ``inner`` timed runs each."""
    import simulator
    try:
        from simulator.vidur.logs import quiet_vidur
    except ImportError:  # a revision from before the adapter owned Vidur's logger
        try:
            from simulator.util.progress import quiet_vidur
        except ImportError:  # a revision from before the tree was grouped
            from simulator.progress import quiet_vidur

    quiet_vidur()
    out = {"simulator": simulator.__file__}
    for name in names:
        run_config = config(name)
        summary = simulator.run(run_config).summary
        times = []
        for _ in range(inner):
            start = time.perf_counter()
            simulator.run(run_config)
            times.append(time.perf_counter() - start)
        keep = ("forward_passes", "tpot_p50_s", "ttft_p50_s", "throughput_tok_s", "accepted_tokens")
        out[name] = {"seconds": min(times), "summary": {k: summary.get(k) for k in keep}}
    print("RESULT " + json.dumps(out))


def run_child(tree: Path, names: list[str], inner: int, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), VIDUR_SPECDEC_CACHE=cache, VIDUR_SPECDEC_NO_RUN_CACHE="1")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--inner", str(inner), "--only", *names]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    if not Path(result["simulator"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the child imported {result['simulator']}, not the tree under test {tree}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the commit to compare with (any git revision)")
    parser.add_argument("--repeats", type=int, default=5, help="process pairs (default 5)")
    parser.add_argument("--inner", type=int, default=3, help="timed runs of each kind per process; the minimum counts (default 3)")
    parser.add_argument("--only", nargs="+", choices=sorted(KINDS), default=list(KINDS), help="kinds to run (default: all)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.only, args.inner)
    if not args.against:
        parser.error("--against COMMIT is required")
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        other.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.against], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(other)], input=archive, check=True)
        cache = str(Path(tmp) / "cache")
        trees = {"this": REPO, "other": other}
        seconds = {name: {"this": [], "other": []} for name in args.only}
        for repeat in range(args.repeats):
            order = ("other", "this") if repeat % 2 == 0 else ("this", "other")
            results = {side: run_child(trees[side], args.only, args.inner, cache) for side in order}
            for name in args.only:
                if results["this"][name]["summary"] != results["other"][name]["summary"]:
                    raise SystemExit(f"{name}: the two revisions disagree: {results['this'][name]['summary']} vs {results['other'][name]['summary']}")
                for side in trees:
                    seconds[name][side].append(results[side][name]["seconds"])
            print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
    print(f"this checkout against {args.against}: {args.repeats} process pairs, min of {args.inner} runs per process")
    print(f"{'kind':<15} {'other s':>8} {'this s':>8} {'ratio median':>12} {'min':>6} {'max':>6}  what")
    for name in args.only:
        a, b = seconds[name]["other"], seconds[name]["this"]
        ratios = [y / x for x, y in zip(a, b)]
        print(f"{name:<15} {statistics.median(a):8.3f} {statistics.median(b):8.3f} {statistics.median(ratios):12.3f} {min(ratios):6.3f} {max(ratios):6.3f}  {KINDS[name]}")


if __name__ == "__main__":
    main()
