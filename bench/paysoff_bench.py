"""The pays-off default answer, cold and warm, as whole processes: this checkout against another commit, side by side.

    python bench/paysoff_bench.py --against COMMIT [--repeats 3] [-- PAYSOFF ARGS ...]

What it times is what a user waits for: ``python -m simulator.paysoff`` (by default
``--acceptance 0.7``, docs/performance.md's default grid), each run a fresh process.  *Cold* is an
empty result cache (a new ``VIDUR_SPECDEC_CACHE`` folder); *warm* is the same command again over
the cache that cold run filled.  The other commit is exported with ``git archive`` into a
temporary folder and run from there (the interpreter imports the ``simulator`` of its working
folder first).  Each repeat runs both revisions in turn (A B, then B A, ...), so machine drift
hits both alike; the figures to quote are each measure's median and the median of the pairs'
ratios (this checkout / the other), with their minimum and maximum.

The timed command is the one a user types: no output files, since writing a CSV is what loads
pandas.  After each timed run the same command runs again, untimed, with ``--json`` and ``--csv``
over the same cache, and the bench checks that both revisions wrote the same bytes (output paths
aside), printed the same answer, and names the CSV columns that differ, e.g.
``simulator_source_hash`` when model code changed.  Nothing is asserted about the times.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ARGS = ["--acceptance", "0.7"]


def export(commit: str, into: Path) -> Path:
    """``commit``'s tree as plain files under ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _answer(tree: Path, args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, VIDUR_SPECDEC_CACHE=str(cache))
    env.pop("VIDUR_SPECDEC_NO_RUN_CACHE", None)
    done = subprocess.run([sys.executable, "-m", "simulator.paysoff", *args, "--no-progress"], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def timed(tree: Path, args: list[str], cache: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its children, stdout) of one pays-off answer as typed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = _answer(tree, args, cache)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def write_outputs(tree: Path, args: list[str], cache: Path, out: Path) -> None:
    """The same answer again, untimed, writing its answer (--json) and runs (--csv) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    _answer(tree, [*args, "--json", str(out / "answer.json"), "--csv", str(out / "runs.csv")], cache)


def differences(a: Path, b: Path, stdout_a: str, stdout_b: str) -> list[str]:
    """What differs between two runs' outputs: stdout, the answer (its output paths read alike), CSV columns."""
    found = []
    if stdout_a != stdout_b:
        found.append("stdout")
    answer_a = (a / "answer.json").read_text().replace(str(a), "OUT")
    answer_b = (b / "answer.json").read_text().replace(str(b), "OUT")
    if answer_a != answer_b:
        found.append("answer.json")
    rows_a = list(csv.reader(io.StringIO((a / "runs.csv").read_text())))
    rows_b = list(csv.reader(io.StringIO((b / "runs.csv").read_text())))
    if rows_a[0] != rows_b[0] or len(rows_a) != len(rows_b):
        return found + ["runs.csv (columns or row count)"]
    columns = [name for j, name in enumerate(rows_a[0]) if any(ra[j] != rb[j] for ra, rb in zip(rows_a[1:], rows_b[1:]))]
    return found + [f"runs.csv column {name}" for name in columns]


def summary(label: str, values: list[float], unit: str = "s") -> str:
    return f"{label:<34} median {statistics.median(values):7.3f} {unit}   min {min(values):7.3f}   max {max(values):7.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (e.g. HEAD)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("paysoff_args", nargs="*", help=f"after --: the pays-off command's flags (default {' '.join(DEFAULT_ARGS)})")
    options = parser.parse_args()
    args = options.paysoff_args or DEFAULT_ARGS
    with tempfile.TemporaryDirectory(prefix="paysoff-bench-") as tmp:
        tmp = Path(tmp)
        trees = {"other": export(options.against, tmp / "other"), "this": REPO}
        figures = {(name, kind): {"wall": [], "cpu": []} for name in trees for kind in ("cold", "warm")}
        ratios = {"cold": [], "warm": []}
        diffs: set[str] = set()
        for repeat in range(options.repeats):
            order = ["other", "this"] if repeat % 2 == 0 else ["this", "other"]
            walls, outs = {}, {}
            for kind in ("cold", "warm"):
                for name in order:
                    cache = tmp / f"cache-{name}-{repeat}"
                    if kind == "cold":
                        cache.mkdir()
                    out = tmp / f"out-{name}-{repeat}-{kind}"
                    wall, cpu, stdout = timed(trees[name], args, cache)
                    write_outputs(trees[name], args, cache, out)
                    figures[name, kind]["wall"].append(wall)
                    figures[name, kind]["cpu"].append(cpu)
                    walls[name, kind], outs[name, kind] = wall, (out, stdout)
                    print(f"repeat {repeat + 1} {kind:<4} {name:<5}: {wall:6.2f} s wall, {cpu:6.2f} s CPU", flush=True)
                ratios[kind].append(walls["this", kind] / walls["other", kind])
                (out_a, std_a), (out_b, std_b) = outs["other", kind], outs["this", kind]
                diffs.update(differences(out_a, out_b, std_a, std_b))
                diffs.update(f"{kind} and cold differ in {d}" for d in differences(outs["this", "cold"][0], out_b, outs["this", "cold"][1], std_b) if kind == "warm")
        print(f"\npython -m simulator.paysoff {' '.join(args)}, {options.repeats} repeats, on {os.cpu_count()} cores (load average now {os.getloadavg()[0]:.2f})")
        for kind in ("cold", "warm"):
            for name, label in (("other", options.against), ("this", "this checkout")):
                print(summary(f"{kind}, {label}, wall", figures[name, kind]["wall"]))
                print(summary(f"{kind}, {label}, CPU", figures[name, kind]["cpu"]))
            print(summary(f"{kind}, ratio this / {options.against}", ratios[kind], unit="x"))
        print("outputs: " + ("identical (stdout, answer, every CSV column)" if not diffs else "DIFFER in " + ", ".join(sorted(diffs))))


if __name__ == "__main__":
    main()
