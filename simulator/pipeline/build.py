"""`python build.py` end to end: sweeps -> CSVs -> site, publishing nothing unless all of it worked.

The stages, in order: the seed sweep, the pays-off sweep, the published reproductions (each
simulating only what the result cache lacks), then rendering; each says what it starts
(:mod:`simulator.util.progress`).  Bad inputs and unwritable outputs are caught before any
simulation; new CSVs and the new site are staged beside their targets and renamed into place
together after the site rendered.  The site itself is rendered by :mod:`simulator.website`,
which computes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from simulator.util.errors import ConfigError
from simulator.util.progress import say
from simulator.published import reproduce as published_reproduce
from simulator.published import speedup_checks
from simulator.specs import measurements as published_spec
from simulator.profiling import calibration_guard
from simulator.paysoff import runner as paysoff_runner
from simulator.sweep.executors import make_executor
from simulator.paysoff.spec import load_paysoff_spec
from simulator.schemas import PROGRESS_COLUMNS, SWEEP_COLUMNS
from simulator.sweep.runner import run_sweep, to_csv_text
from simulator.specs.sweep import load_spec
from simulator.util.textio import check_writable_dir, check_writable_file
from simulator.util.publication import Publication, remove_leftovers
from simulator.website.render import SiteSources, check_sources, render_into, render_site


@dataclass(frozen=True)
class PaysoffInputs:
    """data/paysoff.toml -> data/results/paysoff.csv, data/results/paysoff_crossovers.csv, data/results/recommended_schedules.json."""

    spec: Path
    csv: Path
    crossovers_csv: Path
    schedules_json: Path


@dataclass(frozen=True)
class BuildOptions:
    spec: Path
    sweep_csv: Path
    progress_csv: Path
    out_dir: Path
    sources: SiteSources
    skip_sweep: bool = False
    jobs: Optional[int] = None
    executor: str = "local"
    profile_dir: Optional[str] = None
    progress_bar: Optional[bool] = None  # None: only on a terminal
    paysoff: Optional["PaysoffInputs"] = None  # run the pays-off sweep too
    published: Optional["PublishedInputs"] = None  # reproduce the published measurements too


@dataclass(frozen=True)
class PublishedInputs:
    """data/published.toml + its assumptions -> data/results/published.csv (simulated with the sweep); the
    step-time model's declared calibration data is checked against its check rows."""

    measurements: Path
    assumptions: Path
    csv: Path
    calibration: Optional[Path] = None  # data/calibration/step_time.toml
    # the check rows' speedup errors, package data the pays-off command's error bar reads
    # (simulator/published/speedup_checks.csv); None: not recorded
    speedup_checks: Optional[Path] = None


def build(options: BuildOptions, run: Optional[Callable] = None) -> None:
    check_sources(options.sources)
    check_site_dir(options.out_dir)
    if options.skip_sweep:
        remove_leftovers(options.out_dir)
        render_site(options.sources, options.out_dir)
        return
    check_writable_file(options.sweep_csv, "CSV")
    check_writable_file(options.progress_csv, "CSV")
    if options.profile_dir is not None and not Path(options.profile_dir).is_dir():
        raise ConfigError(f"profile dir {options.profile_dir} is not a directory")
    spec = load_spec(options.spec)
    paysoff_spec = None
    if options.paysoff is not None:  # a bad pays-off spec fails here, before any simulation
        for path in (options.paysoff.csv, options.paysoff.crossovers_csv, options.paysoff.schedules_json):
            check_writable_file(path, "output")
        paysoff_spec = load_paysoff_spec(options.paysoff.spec)
    published, measurements = None, ()
    if options.published is not None:  # bad measurements fail here, before any simulation
        check_writable_file(options.published.csv, "CSV")
        if options.published.speedup_checks is not None:
            check_writable_file(options.published.speedup_checks, "CSV")
        measurements, assumptions = published_spec.load(options.published.measurements, options.published.assumptions)
        if options.published.calibration is not None:  # a check that calibration data saw is refused
            engine_costs = options.published.calibration.with_name("engine_costs.toml")
            calibration_guard.check_published_roles(measurements, options.published.calibration, engine_costs)
        published = published_reproduce.plans_for(measurements, assumptions)
    executor = make_executor(options.executor, options.jobs, options.progress_bar)
    stages = 2 + (paysoff_spec is not None) + (published is not None)
    stage = _Stages(stages, options.progress_bar)
    stage(f"seed sweep ({options.spec.name})")
    output = run_sweep(spec, executor, run=run, profile_dir=options.profile_dir)
    # the published reproductions come before the pays-off sweep: their check rows' speedup errors
    # are the error bar its recommendations carry (simulator/sweep/error_bar.py)
    published_rows, checks = None, speedup_checks.read()
    if published is not None:
        stage(f"published reproductions ({options.published.measurements.name})")
        published_rows = published_reproduce.run_plans(published, executor, run)
        checks = speedup_checks.derive_from_csv(published_reproduce.csv_text(published_rows), {m.id: m.baseline_id for m in measurements if m.baseline_id})
    paysoff = None
    if paysoff_spec is not None:
        stage(f"pays-off sweep ({options.paysoff.spec.name})")
        # a --profile-dir was measured for the seed sweep's model and GPU (at TP 1, as the seed sweep
        # runs): other deployments keep the built-in profile
        paysoff = paysoff_runner.run_paysoff(paysoff_spec, executor, options.profile_dir, run, profile_system=(spec.model, spec.device, 1), checks=checks)
        for target in (options.paysoff.csv, options.paysoff.crossovers_csv, options.paysoff.schedules_json):
            remove_leftovers(target)
    stage("rendering the site")
    for target in (options.sweep_csv, options.progress_csv, options.out_dir):
        remove_leftovers(target)
    # The CSVs and the site are published together: all three are renamed into place at the end,
    # or (on any failure or interrupt) none of them.
    with Publication() as publication:
        sweep_csv = publication.file(options.sweep_csv, to_csv_text(output.rows, SWEEP_COLUMNS), "CSV")
        progress_csv = publication.file(options.progress_csv, to_csv_text(output.progress_rows, PROGRESS_COLUMNS), "CSV")
        paysoff_sources = {}
        if paysoff is not None:
            runs_text, crossovers_text = paysoff_runner.csv_texts(paysoff)
            paysoff_sources = {
                "paysoff_csv": publication.file(options.paysoff.csv, runs_text, "CSV"),
                "paysoff_crossovers_csv": publication.file(options.paysoff.crossovers_csv, crossovers_text, "CSV"),
                "schedules_json": publication.file(options.paysoff.schedules_json, paysoff_runner.schedules_json_text(paysoff.schedules), "JSON"),
            }
        options = replace(options, sources=replace(options.sources, **paysoff_sources))
        sources = replace(options.sources, sweep_csv=sweep_csv, progress_csv=progress_csv)
        if published_rows is not None:
            staged = publication.file(options.published.csv, published_reproduce.csv_text(published_rows), "CSV")
            sources = replace(sources, published_csv=staged)
            if options.published.speedup_checks is not None:
                publication.file(options.published.speedup_checks, speedup_checks.csv_text(checks), "CSV")
        staging = publication.directory(options.out_dir)
        try:
            render_into(sources, staging)
        except ConfigError as exc:  # name the CSV the user knows, not its staging copy
            message = str(exc).replace(str(sweep_csv), str(options.sweep_csv)).replace(str(progress_csv), str(options.progress_csv))
            raise ConfigError(message) from exc


class _Stages:
    """Numbered stage lines: "build [2/4] pays-off sweep (paysoff.toml)"."""

    def __init__(self, total: int, enabled: Optional[bool]):
        self.total, self.enabled, self.done = total, enabled, 0

    def __call__(self, what: str) -> None:
        self.done += 1
        say(f"build [{self.done}/{self.total}] {what}", self.enabled)


def check_site_dir(out_dir: Path) -> None:
    """Before any work: the site folder is a directory or absent, and its nearest existing
    ancestor is a directory we can create files in (probed: os.access passes for root)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output dir {out_dir} exists and is not a directory")
    parent = out_dir.parent
    while not parent.exists() and not parent.is_symlink():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"output dir {out_dir}: {parent} is not a directory")
    check_writable_dir(parent, f"output dir {out_dir}: folder")
