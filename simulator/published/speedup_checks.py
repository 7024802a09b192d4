"""The check rows' speedup errors, as the pays-off answer's error bar reads them.

:mod:`simulator.sweep.error_bar` turns these into the error bar a recommendation carries.  Each
speculative check row of ``data/results/published.csv`` gives one speedup error:

* a row that publishes a speedup: its own error;
* a row that publishes an absolute figure (TPOT, throughput) with its no-speculation baseline in
  the same source (``baseline_id``): the error of the speedup the pair implies,
  ``(simulated / simulated baseline) / (published / published baseline) - 1`` for a throughput,
  the inverse ratios for a latency, so the base engine's own error cancels.

Calibration rows are left out (they set constants; their errors are not a test).  The build
writes the table as package data (``speedup_checks.csv`` beside this module), so
``python -m simulator.paysoff`` states the same error bar from any directory, the way the site does.
"""

from __future__ import annotations

import csv
import io
import math
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from simulator.schemas import SIMULATED, SPEEDUP_CHECK_COLUMNS
from simulator.sweep.error_bar import Regime, SpeedupCheck

SPEEDUP_CHECKS_FILE = Path(str(resources.files("simulator.published").joinpath("speedup_checks.csv")))
# metrics where more is faster (a speedup is the spec run over the baseline); the rest are latencies
THROUGHPUT_METRICS = frozenset({"output_tokens_per_s", "decode_tokens_per_s", "requests_per_s"})


def _number(value) -> Optional[float]:
    if value is None or value == "":
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _regime(row: Mapping) -> Regime:
    in_flight = _number(row.get("batch_size")) or _number(row.get("concurrency"))
    return Regime.of(proposer=str(row["proposer"]), engine=str(row["engine"]), version=str(row.get("engine_version") or "") or None,
                     tensor_parallel_size=int(float(row["tp"])), in_flight=in_flight, qps=_number(row.get("qps")))


def derive(rows: Sequence[Mapping], baselines: Mapping[str, str]) -> list[SpeedupCheck]:
    """One :class:`SpeedupCheck` per simulated speculative check row that gives a speedup error
    (``baselines``: row id -> its baseline row's id, from ``data/published.toml``)."""
    by_id = {r["id"]: r for r in rows}
    out = []
    for row in rows:
        if row["role"] != "check" or row["status"] != SIMULATED or row["proposer"] in ("", "none") or _number(row.get("error_pct")) is None:
            continue
        if row["metric"] == "speedup":
            error = float(row["error_pct"])
        else:
            base = by_id.get(baselines.get(row["id"], ""))
            if base is None or base["status"] != SIMULATED or base["metric"] != row["metric"] or _number(base.get("simulated")) is None:
                continue
            simulated = float(row["simulated"]) / float(base["simulated"])
            published = float(row["published"]) / float(base["published"])
            ratio = simulated / published if row["metric"] in THROUGHPUT_METRICS else published / simulated
            error = 100 * (ratio - 1)
        out.append(SpeedupCheck(str(row["id"]), str(row["source"]), _regime(row), round(error, 3)))
    return out


def derive_from_csv(published_csv_text: str, baselines: Mapping[str, str]) -> list[SpeedupCheck]:
    """:func:`derive` over the recorded CSV's text, as written: the table then follows from the
    recorded file alone, digit for digit."""
    return derive(list(csv.DictReader(io.StringIO(published_csv_text))), baselines)


def csv_text(checks: Iterable[SpeedupCheck]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SPEEDUP_CHECK_COLUMNS)
    for c in sorted(checks, key=lambda c: c.id):
        r = c.regime
        writer.writerow([c.id, c.source, r.load, r.proposer_class, r.engine, r.version_series, r.tensor_parallel, f"{c.error_pct:g}"])
    return buffer.getvalue()


def read(path: Path = SPEEDUP_CHECKS_FILE) -> list[SpeedupCheck]:
    """The recorded table; empty when the package carries none (a checkout before its first build)."""
    if not Path(path).is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != SPEEDUP_CHECK_COLUMNS:
            from simulator.util.errors import ConfigError

            raise ConfigError(f"{path}: columns {reader.fieldnames} are not {list(SPEEDUP_CHECK_COLUMNS)}; rebuild it with python build.py")
        checks = []
        for row in reader:
            error = float(row["error_pct"])
            if not (math.isfinite(error) and error > -100):
                from simulator.util.errors import ConfigError

                raise ConfigError(f"{path}: row {row['id']}: error_pct = {row['error_pct']} must be a finite percentage above -100; rebuild it with python build.py")
            checks.append(SpeedupCheck(row["id"], row["source"], Regime(row["load"], row["proposer_class"], row["engine"], row["version_series"], row["tensor_parallel"]), error))
        return checks
