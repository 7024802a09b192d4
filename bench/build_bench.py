"""Benchmark `python build.py`: cold- and warm-cache wall time and peak memory, site size, and
time to the first rendered chart in headless Chromium from file://.

    python bench/build_bench.py [--repeats 5] [--jobs N] [--chromium PATH]

Builds into a temporary directory (the committed data/ and site/ are not touched); a cold
build gets a fresh, empty cache directory.  Prints a Markdown table and writes
bench/out/build_bench.json.  Figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = REPO_ROOT / "bench" / "out"


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (psutil), 0 if it has exited."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def timed_build(args: list[str], env: dict) -> dict:
    """Run build.py; wall time, peak RSS of the process tree (sampled every 50 ms) and the
    largest single process's peak RSS (from the kernel's rusage)."""
    sample = importlib.util.find_spec("psutil") is not None
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "build.py"), *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        peak = 0
        stop = threading.Event()

        def watch():
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, tree_rss_bytes(proc.pid))
                stop.wait(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        if sample:
            watcher.start()
        # wait4 gives this build's own rusage: ru_maxrss is its largest process (KiB on Linux).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
        if sample:
            watcher.join()
        if proc.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"build.py failed ({proc.returncode}):\n{stderr.read()[-2000:]}")
    return {
        "wall_s": round(wall, 2),
        "peak_tree_rss_mib": round(peak / 2**20, 1) if sample else None,
        "peak_single_process_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def site_size(site: Path) -> dict:
    kinds = {"html": 0, "js": 0, "css": 0, "csv": 0}
    for path in site.iterdir():
        kind = path.suffix.lstrip(".")
        if kind in kinds:
            kinds[kind] += path.stat().st_size
    kinds = {k: round(v / 1024, 1) for k, v in kinds.items()}
    return {"kib": kinds, "total_kib": round(sum(kinds.values()), 1)}


FIRST_CHART_PROBE = """
new MutationObserver((_, observer) => {
  if (document.querySelector('#speedup-chart .main-svg')) {
    window.__firstChartMs = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""


def first_chart_ms(site: Path, repeats: int, chromium: str | None) -> list[float]:
    """performance.now() when the home chart's SVG first exists, in a fresh page each time."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(**({"executable_path": chromium} if chromium else {}))
        for _ in range(repeats):
            context = browser.new_context()
            page = context.new_page()
            page.add_init_script(FIRST_CHART_PROBE)
            page.goto((site / "index.html").as_uri())
            page.wait_for_function("() => window.__firstChartMs !== undefined")
            times.append(round(page.evaluate("window.__firstChartMs"), 1))
            context.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="page loads for the first-chart timing")
    parser.add_argument("--jobs", type=int, default=None, help="passed to build.py (default: one per core)")
    default_chromium = os.environ.get("PLAYWRIGHT_CHROMIUM") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    parser.add_argument("--chromium", default=default_chromium, help="Chromium executable (default: $PLAYWRIGHT_CHROMIUM, /usr/bin/chromium, else Playwright's)")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "VIDUR_SPECDEC_CACHE": str(tmp / "cache")}
        args = ["--csv", str(tmp / "sweep.csv"), "--progress-csv", str(tmp / "progress.csv"), "--out", str(tmp / "site")]
        if options.jobs:
            args += ["--jobs", str(options.jobs)]
        cold = timed_build(args, env)
        warm = timed_build(args, env)
        render = timed_build(args + ["--skip-sweep"], env)
        identical = (tmp / "sweep.csv").read_bytes() == (REPO_ROOT / "data" / "results" / "sweep.csv").read_bytes()
        size = site_size(tmp / "site")
        chart = first_chart_ms(tmp / "site", options.repeats, options.chromium)

    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "cold_build": cold,
        "warm_build": warm,
        "render_only": render,
        "csv_identical_to_committed": identical,
        "site_size": size,
        "first_chart_ms": {"runs": chart, "median": statistics.median(chart), "max": max(chart)},
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "build_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    print("| measure | value |\n|---|---|")
    for name in ("cold_build", "warm_build", "render_only"):
        r = result[name]
        print(f"| {name.replace('_', ' ')} | {r['wall_s']} s, peak RSS {r['peak_tree_rss_mib']} MiB (process tree), {r['peak_single_process_rss_mib']} MiB (largest process) |")
    print(f"| site size | {size['total_kib']} KiB ({', '.join(f'{k} {v} KiB' for k, v in size['kib'].items())}) |")
    print(f"| first chart (file://) | median {result['first_chart_ms']['median']} ms, max {result['first_chart_ms']['max']} ms over {len(chart)} loads |")
    print(f"| CSV identical to data/results/sweep.csv | {identical} |")
    print(f"| load average at end | {result['machine']['load_avg_at_end']} on {os.cpu_count()} CPUs |")


if __name__ == "__main__":
    main()
