#!/usr/bin/env python
"""Run the sweep, record data/results/sweep.csv and data/results/progress.csv, render the static site (docs/site.md).

Exit codes: 0 built; 2 bad input or an output that cannot be written (message on stderr, checked
before the sweep; previous CSVs and site untouched).  The CSVs and the site are replaced together
or not at all, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from simulator.util.errors import ConfigError

# build.py works from the checkout: its inputs are the folders next to it.
REPO_ROOT = Path(__file__).resolve().parent
DATA_DIR = REPO_ROOT / "data"  # the inputs: specs (*.toml), calibration data, measured profiles
RESULTS_DIR = DATA_DIR / "results"  # what a build records (CSV, JSON): kept apart from what it reads
DEFAULT_VALIDATION_REPORT = REPO_ROOT / "validation" / "report.json"
# where bench/measure_verify_h200.sh writes the verify tables the modeling page shows (pending until measured)
VERIFY_TABLES_DIR = DATA_DIR / "profiles" / "h200" / "meta-llama" / "Llama-2-7b-hf"
PEER_CSV = DATA_DIR / "peer" / "aiconfigurator.csv"  # bench/peer_aiconfigurator.py: the published page's side-by-side (optional)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DATA_DIR / "sweep.toml", help="sweep spec (TOML); default data/sweep.toml")
    parser.add_argument("--csv", type=Path, default=RESULTS_DIR / "sweep.csv", help="sweep CSV to write, or to read with --skip-sweep")
    parser.add_argument("--progress-csv", type=Path, default=RESULTS_DIR / "progress.csv", help="batch-1 progress-per-step CSV")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "site", help="site directory; default site/")
    parser.add_argument("--skip-sweep", action="store_true", help="render from the recorded CSVs without simulating")
    parser.add_argument("--jobs", type=int, default=None, help="parallel runs; default: one per CPU core")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="local process pool (default) or Ray")
    parser.add_argument("--profile-dir", default=None, help="a Vidur-format profile directory for the seed sweep's model and GPU (and the pays-off deployments on them); everything else uses the built-in profile")
    parser.add_argument("--paysoff-spec", type=Path, default=DATA_DIR / "paysoff.toml", help="the pays-off sweep spec (TOML); default data/paysoff.toml")
    parser.add_argument("--paysoff-csv", type=Path, default=RESULTS_DIR / "paysoff.csv", help="pays-off runs CSV to write (or to read with --skip-sweep)")
    parser.add_argument("--crossovers-csv", type=Path, default=RESULTS_DIR / "paysoff_crossovers.csv", help="crossovers CSV to write")
    parser.add_argument("--schedules-json", type=Path, default=RESULTS_DIR / "recommended_schedules.json", help="recommended k schedules to write")
    parser.add_argument("--no-paysoff", action="store_true", help="do not run the pays-off sweep (its page shows the recorded files if they exist)")
    parser.add_argument("--published", type=Path, default=DATA_DIR / "published.toml", help="published measurements to reproduce")
    parser.add_argument(
        "--published-assumptions", type=Path, default=DATA_DIR / "published_assumptions.toml", help="lengths and acceptance the rows leave unstated"
    )
    parser.add_argument("--published-csv", type=Path, default=RESULTS_DIR / "published.csv", help="the published-vs-simulated CSV to write")
    parser.add_argument(
        "--step-calibration", type=Path, default=DATA_DIR / "calibration" / "step_time.toml",
        help="the step-time model's declared calibration data, checked against the published check rows",
    )
    parser.add_argument(
        "--speedup-checks", type=Path, default=None,
        help="the check rows' speedup errors to write (the pays-off answers' error bar); default: the package's own "
        "simulator/published/speedup_checks.csv with the default --published-csv, else speedup_checks.csv beside --published-csv",
    )
    parser.add_argument("--no-published", action="store_true", help="do not simulate the published measurements (the page shows --published-csv if it exists)")
    parser.add_argument(
        "--validation-report",
        type=Path,
        default=None,
        help="the validation harness's report.json; default validation/report.json when it exists",
    )
    parser.add_argument(
        "--source-url",
        default=None,
        help="repository URL at a commit (e.g. https://github.com/OWNER/REPO/blob/COMMIT): the site's source links become absolute; "
        "without it the site links only to its own files and names source files as paths",
    )
    return parser.parse_args(argv)


def _speedup_checks_path(args) -> Path:
    """Where the check rows' speedup errors go: the package data the commands read when the build
    records the checkout's own published CSV, else beside the CSV it was asked to write."""
    if args.speedup_checks is not None:
        return args.speedup_checks
    if args.published_csv.resolve() == (RESULTS_DIR / "published.csv").resolve():
        from simulator.published.speedup_checks import SPEEDUP_CHECKS_FILE

        return SPEEDUP_CHECKS_FILE
    return args.published_csv.with_name("speedup_checks.csv")


def main(argv=None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    from simulator.vidur.logs import quiet_vidur

    quiet_vidur()
    report = args.validation_report
    if report is None and DEFAULT_VALIDATION_REPORT.is_file():
        report = DEFAULT_VALIDATION_REPORT
    try:
        if args.jobs is not None and args.jobs < 1:
            raise ConfigError(f"--jobs {args.jobs}: must be a positive integer")
        from simulator.pipeline.build import BuildOptions, PublishedInputs, build
        from simulator.pipeline.build import PaysoffInputs
        from simulator.website.render import SiteSources

        paysoff_files = (args.paysoff_csv, args.crossovers_csv, args.schedules_json)
        recorded_paysoff = (args.no_paysoff or args.skip_sweep) and all(path.is_file() for path in paysoff_files)

        build(
            BuildOptions(
                spec=args.spec,
                sweep_csv=args.csv,
                progress_csv=args.progress_csv,
                out_dir=args.out,
                sources=SiteSources(
                    sweep_csv=args.csv,
                    progress_csv=args.progress_csv,
                    templates_dir=REPO_ROOT / "templates",
                    content_dir=REPO_ROOT / "content",
                    docs_dir=REPO_ROOT / "docs",
                    validation_report=report,
                    source_url=args.source_url,
                    paysoff_csv=args.paysoff_csv if recorded_paysoff else None,
                    paysoff_crossovers_csv=args.crossovers_csv if recorded_paysoff else None,
                    schedules_json=args.schedules_json if recorded_paysoff else None,
                    published_csv=args.published_csv if (args.no_published or args.skip_sweep) and args.published_csv.is_file() else None,
                    verify_tables_dir=VERIFY_TABLES_DIR,
                    peer_csv=PEER_CSV if PEER_CSV.is_file() else None,
                ),
                published=None if args.no_published else PublishedInputs(
                    args.published, args.published_assumptions, args.published_csv, args.step_calibration, _speedup_checks_path(args)
                ),
                paysoff=None if args.no_paysoff else PaysoffInputs(args.paysoff_spec, *paysoff_files),
                skip_sweep=args.skip_sweep,
                jobs=args.jobs,
                executor=args.executor,
                profile_dir=args.profile_dir,
            )
        )
    except ConfigError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(args, time.monotonic() - started)))
    return 0


def _rows(path: Path) -> int:
    """Data rows of a recorded CSV (0 when absent)."""
    if not path.is_file():
        return 0
    with path.open(encoding="utf-8", newline="") as handle:
        return max(0, sum(1 for _ in csv.reader(handle)) - 1)


def summary_lines(args, seconds: float) -> list[str]:
    """What a build ends with: what it recorded, the check rows' headline, its time, where to open
    the site.  (The time is printed, never written into a file: the outputs stay byte-identical.)"""
    from simulator.website.published import headline, load_published

    minutes, rest = divmod(round(seconds), 60)
    lines = [f"build.py: built in {minutes} min {rest:02d} s" if minutes else f"build.py: built in {rest} s"]
    recorded = [(args.csv, "seed-sweep runs"), (args.paysoff_csv, "pays-off runs"), (args.published_csv, "published rows")]
    lines.append("  recorded: " + ", ".join(f"{_rows(path)} {what} ({path.name})" for path, what in recorded if path.is_file()))
    if args.published_csv.is_file():
        lines += ["  " + line for line in headline(load_published(args.published_csv).to_dict("records"))]
    lines.append(f"  open {args.out / 'index.html'} (a static site: any browser, no server needed)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
