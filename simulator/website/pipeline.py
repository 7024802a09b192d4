"""`python build.py` end to end: sweep -> CSVs -> site, publishing nothing unless all of it worked.

Bad inputs are caught before the (slow) sweep where possible; new CSVs and the new site are
staged beside their targets and only renamed into place after the site rendered.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from simulator.errors import ConfigError
from simulator.sweep.executors import make_executor
from simulator.sweep.runner import PROGRESS_COLUMNS, SWEEP_COLUMNS, run_sweep, to_csv_text
from simulator.sweep.spec import load_spec
from simulator.website.render import SiteSources, check_sources, render_into, render_site, staged_directory


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


def build(options: BuildOptions, run: Optional[Callable] = None) -> None:
    check_sources(options.sources)
    _check_output_dir(options.out_dir)
    if options.skip_sweep:
        render_site(options.sources, options.out_dir)
        return
    for path in (options.sweep_csv, options.progress_csv):
        if not path.parent.is_dir():
            raise ConfigError(f"CSV {path}: directory {path.parent} does not exist")
    if options.profile_dir is not None and not Path(options.profile_dir).is_dir():
        raise ConfigError(f"profile dir {options.profile_dir} is not a directory")
    spec = load_spec(options.spec)
    executor = make_executor(options.executor, options.jobs, options.progress_bar)
    output = run_sweep(spec, executor, run=run, profile_dir=options.profile_dir)
    with ExitStack() as stack:
        sweep_csv = stack.enter_context(staged_file(options.sweep_csv, to_csv_text(output.rows, SWEEP_COLUMNS)))
        progress_csv = stack.enter_context(staged_file(options.progress_csv, to_csv_text(output.progress_rows, PROGRESS_COLUMNS)))
        staging = stack.enter_context(staged_directory(options.out_dir))
        try:
            render_into(replace(options.sources, sweep_csv=sweep_csv, progress_csv=progress_csv), staging)
        except ConfigError as exc:  # name the CSV the user knows, not its staging copy
            message = str(exc).replace(str(sweep_csv), str(options.sweep_csv)).replace(str(progress_csv), str(options.progress_csv))
            raise ConfigError(message) from exc


@contextmanager
def staged_file(target: Path, text: str) -> Iterator[Path]:
    """Write ``text`` to a temp file beside ``target``; rename it over ``target`` on success."""
    target = Path(target)
    if target.is_dir():
        raise ConfigError(f"CSV {target} is a directory")
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"CSV {target}: cannot write ({exc.strerror or exc})") from exc
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _check_output_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output dir {out_dir} exists and is not a directory")
    parent = out_dir.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"output dir {out_dir}: {parent} is not a writable directory")
