"""The recorded sweep as the site reads it: checked, then grouped by the home page's selectors.

The site only ever shows rows that exist in the CSV, so a CSV that lacks a column or a row for
some selector value is refused up front instead of rendering a chart with a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simulator.util.errors import ConfigError
from simulator.schemas import (
    PROGRESS_COLUMNS,
    PROGRESS_NUMERIC as NUMERIC_PROGRESS,
    SWEEP_COLUMNS,
    SWEEP_NUMERIC as NUMERIC_SWEEP,
    SWEEP_SETUP_COLUMNS as SETUP_COLUMNS,
)


@dataclass(frozen=True)
class Recorded:
    """Speculative rows keyed by (load, acceptance); one baseline row per load."""

    frame: pd.DataFrame
    loads: tuple[float, ...]
    acceptances: tuple[float, ...]
    proposals: tuple[int, ...]
    attentions: tuple[str, ...]

    def baseline(self, load: float) -> pd.Series:
        rows = self.frame[(self.frame["arrival_rate"] == load) & (self.frame["num_speculative_tokens"] == 0)]
        return rows.iloc[0]

    def selection(self, load: float, acceptance: float) -> pd.DataFrame:
        f = self.frame
        return f[(f["arrival_rate"] == load) & (f["acceptance_rate"] == acceptance) & (f["num_speculative_tokens"] > 0)]

    @property
    def setup(self) -> dict:
        return {column: self.frame[column].iloc[0] for column in SETUP_COLUMNS}


def read_csv(path: Path, columns: tuple[str, ...], numeric: tuple[str, ...], what: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} {path}: file not found (run `python build.py` without --skip-sweep to record it)") from exc
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: not a readable CSV ({exc})") from exc
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ConfigError(f"{what} {path}: missing column(s) {', '.join(missing)}")
    if frame.empty:
        raise ConfigError(f"{what} {path}: has no rows")
    for column in numeric:
        converted = pd.to_numeric(frame[column], errors="coerce")
        bad = converted.isna() & frame[column].notna()
        if bad.any():
            raise ConfigError(f"{what} {path}: column {column} has a non-numeric value {frame[column][bad].iloc[0]!r}")
        frame[column] = converted
    return frame


def load_recorded(path: str | Path) -> Recorded:
    path = Path(path)
    frame = read_csv(path, SWEEP_COLUMNS, NUMERIC_SWEEP, "sweep CSV")
    for column in SETUP_COLUMNS:
        values = frame[column].dropna().unique()
        if len(values) != 1:
            raise ConfigError(f"sweep CSV {path}: column {column} must hold one value for the whole sweep, found {list(values)!r}")
    for column in ("arrival_rate", "tpot_p50_s", "tpot_speedup"):
        if frame[column].isna().any():
            raise ConfigError(f"sweep CSV {path}: column {column} has an empty cell")

    speculative = frame[frame["num_speculative_tokens"] > 0]
    baselines = frame[frame["num_speculative_tokens"] == 0]
    if speculative.empty:
        raise ConfigError(f"sweep CSV {path}: no speculative-decoding rows (num_speculative_tokens > 0)")
    loads = tuple(sorted(frame["arrival_rate"].unique()))
    acceptances = tuple(sorted(speculative["acceptance_rate"].dropna().unique()))
    proposals = tuple(sorted(int(k) for k in speculative["num_speculative_tokens"].unique()))
    attentions = tuple(sorted(speculative["attention"].dropna().unique()))
    if speculative["acceptance_rate"].isna().any() or speculative["attention"].isna().any():
        raise ConfigError(f"sweep CSV {path}: a speculative row has no acceptance_rate or attention")

    for load in loads:
        count = int((baselines["arrival_rate"] == load).sum())
        if count != 1:
            raise ConfigError(f"sweep CSV {path}: load {load:g} req/s needs exactly one baseline row (num_speculative_tokens = 0), found {count}")
        for acceptance in acceptances:
            at = speculative[(speculative["arrival_rate"] == load) & (speculative["acceptance_rate"] == acceptance)]
            for k in proposals:
                for attention in attentions:
                    n = int(((at["num_speculative_tokens"] == k) & (at["attention"] == attention)).sum())
                    if n != 1:
                        found = "no row" if n == 0 else f"{n} rows"
                        raise ConfigError(
                            f"sweep CSV {path}: {found} for load {load:g} req/s, acceptance {acceptance:g}, k = {k}, "
                            f"attention {attention}; every selector value needs exactly one row per proposal count and attention assumption"
                        )
    frame = frame.sort_values(["arrival_rate", "num_speculative_tokens", "acceptance_rate", "attention"], na_position="first", kind="stable")
    return Recorded(frame.reset_index(drop=True), loads, acceptances, proposals, attentions)


def load_progress(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    frame = read_csv(path, PROGRESS_COLUMNS, NUMERIC_PROGRESS, "progress CSV")
    if frame[list(NUMERIC_PROGRESS)].isna().any().any():
        raise ConfigError(f"progress CSV {path}: an empty cell in {', '.join(NUMERIC_PROGRESS)}")
    return frame.sort_values(["acceptance_rate", "num_speculative_tokens"], kind="stable").reset_index(drop=True)
