"""The declared calibration data behind the defaults for costs outside Vidur's op set.

``data/calibration/engine_costs.toml`` holds, with their sources, the numbers that set
the engine overhead per step (:mod:`simulator.runs.config`), the fixed cost per draft pass and the verify-attention
setting (:mod:`simulator.runs.speculation`).  None of them is a row of ``data/published.toml``: those rows check the model, these set
it; each names the published rows examined while it was set (``examined_rows``), which are
therefore calibration rows (:mod:`simulator.profiling.calibration_guard`).  This module reads the
file (checked like every other input: a bad file is one :class:`ConfigError` naming the table
and key) and derives the defaults from it, so a test can hold each default to its evidence.  The
derivations are pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass
import pandas as pd

from simulator.util.inputs import check_table, non_empty_str, positive_int, positive_number, read_toml, require
from simulator.profiling.step_calibration import row_ids
from simulator.profiling.verify_fit import LambdaFit, fit_lambda, same_run_bounds

SERIES_COLUMNS = ("batch_size", "kv_cache_size", "num_query_tokens", "ms")

_OVERHEAD = {
    "value_ms": float, "vllm_version": str, "gpu": str, "source_url": str, "quote": str, "source_value_ms": float,
    "fitted_on": str, "rounding": str, "corroboration": list, "examined_rows": list,
}
_CORROBORATION = {"source_url": str, "value_ms": float, "what": str, "vllm_version": str}
_DRAFT_PASS = {
    "value_ms": float, "vllm_version": str, "gpu": str, "source_url": str, "quote": str, "source_c_kv_ms": float, "source_c_token_ms": float,
    "source_c_fixed_ms": float, "passes": int, "kv_cache_size": int, "batch_sizes": list, "modelled_draft_step_ms": list, "evidence": list,
    "examined_rows": list,
}
_VERIFY = {"default_series": str, "default_reason": str, "series": list, "examined_rows": list}
_SERIES = {"name": str, "kernel": str, "source_url": str, "measured_by": str, "columns": list, "rows": list}


@dataclass(frozen=True)
class DraftPassEvidence:
    value_ms: float
    passes: int
    kv_cache_size: int
    batch_sizes: tuple[int, ...]
    source_draft_step_ms: tuple[float, ...]  # the source's drafting step at each batch size
    modelled_draft_step_ms: tuple[float, ...]  # the simulator's passes without the fixed cost
    vllm_version: str

    def derived_ms(self) -> float:
        return draft_pass_fixed_ms(self.source_draft_step_ms, self.modelled_draft_step_ms, self.passes)


@dataclass(frozen=True)
class EngineCosts:
    overhead_ms: float
    overhead_source_ms: float
    overhead_vllm_version: str
    draft_pass: DraftPassEvidence
    default_series: str
    series: dict[str, pd.DataFrame]  # name -> rows of SERIES_COLUMNS


def source_draft_step_ms(c_kv_ms: float, c_token_ms: float, c_fixed_ms: float, batch: int, kv: int, passes: int) -> float:
    """SpecDecode-Bench's drafting step at ``batch`` requests of ``kv`` cached tokens verifying
    ``passes + 1`` tokens each: its predict_draft_time."""
    return c_kv_ms * batch * kv + c_token_ms * (passes + 1) + c_fixed_ms


def draft_pass_fixed_ms(measured_step_ms, modelled_step_ms, passes: int) -> float:
    """The fixed time of one draft pass: what measured drafting steps cost beyond the modelled
    passes, shared evenly by the passes and averaged over the steps given (least squares for a
    constant).  The source timed its steps at one k, so the split per pass is the model's
    assumption, not the source's."""
    measured, modelled = list(measured_step_ms), list(modelled_step_ms)
    if passes <= 0:
        raise ValueError(f"passes = {passes}: a drafting step has at least one pass")
    if not measured or len(measured) != len(modelled):
        raise ValueError(f"{len(measured)} measured and {len(modelled)} modelled steps: give one of each per setting")
    return sum((m - p) / passes for m, p in zip(measured, modelled)) / len(measured)


def series_fit(rows: pd.DataFrame) -> LambdaFit:
    """lambda of ``interpolated`` fitted to one kernel's series (rows of SERIES_COLUMNS): its q > 1
    rows against its own q = 1 rows at (B, KV) and (B x q, KV)."""
    table = rows.rename(columns={"ms": "time_stats.attention.median"})
    return fit_lambda(same_run_bounds(table))


def series_lambda(rows: pd.DataFrame) -> float:
    """The fitted lambda held to [0, 1], the range in which ``interpolated`` lies between its bounds."""
    return min(1.0, max(0.0, series_fit(rows).overall))


def _series(table, where: str) -> tuple[str, pd.DataFrame]:
    check_table(table, _SERIES, where)
    require(list(table["columns"]) == list(SERIES_COLUMNS), f"{where}: columns = {table['columns']!r}", f"must be {list(SERIES_COLUMNS)}")
    for i, row in enumerate(table["rows"]):
        good = isinstance(row, list) and len(row) == 4 and all(positive_int(v) for v in row[:3]) and positive_number(row[3])
        require(good, f"{where}: rows[{i}] = {row!r}", "must be [batch_size, kv_cache_size, num_query_tokens, ms] with positive values")
    return table["name"], pd.DataFrame(table["rows"], columns=list(SERIES_COLUMNS))


def read_engine_costs(path) -> EngineCosts:
    """The declared calibration file (the repository's ``data/calibration/engine_costs.toml``), checked."""
    doc = read_toml(path, "engine-cost calibration")
    where = f"engine-cost calibration {path}"
    check_table(doc, {"engine_overhead": dict, "draft_pass": dict, "verify_attention": dict}, where)
    overhead = check_table(doc["engine_overhead"], _OVERHEAD, f"{where}: [engine_overhead]")
    for i, item in enumerate(overhead["corroboration"]):
        check_table(item, _CORROBORATION, f"{where}: [engine_overhead] corroboration[{i}]")
    draft = check_table(doc["draft_pass"], _DRAFT_PASS, f"{where}: [draft_pass]")
    for key in ("passes", "kv_cache_size"):
        require(positive_int(draft[key]), f"{where}: [draft_pass] {key} = {draft[key]!r}", "must be a positive integer")
    batches, modelled = draft["batch_sizes"], draft["modelled_draft_step_ms"]
    require(bool(batches) and all(positive_int(b) for b in batches), f"{where}: [draft_pass] batch_sizes = {batches!r}", "must be positive integers")
    require(len(modelled) == len(batches) and all(positive_number(m) for m in modelled),
            f"{where}: [draft_pass] modelled_draft_step_ms = {modelled!r}", f"must hold one positive time per batch size ({len(batches)})")
    verify = check_table(doc["verify_attention"], _VERIFY, f"{where}: [verify_attention]")
    series = dict(_series(t, f"{where}: [verify_attention] series[{i}]") for i, t in enumerate(verify["series"]))
    require(non_empty_str(verify["default_series"]) and verify["default_series"] in series,
            f"{where}: [verify_attention] default_series = {verify['default_series']!r}", f"must name one of the series {sorted(series)}")
    for key in ("value_ms", "source_value_ms"):
        require(positive_number(overhead[key]), f"{where}: [engine_overhead] {key} = {overhead[key]!r}", "must be a positive number of milliseconds")
    for name, table in (("engine_overhead", overhead), ("draft_pass", draft), ("verify_attention", verify)):
        row_ids(table["examined_rows"], f"{where}: [{name}]", "examined_rows")  # the rows examined while it was set
    for name, table in (("engine_overhead", overhead), ("draft_pass", draft)):
        for key in ("source_url", "quote", "vllm_version"):
            require(non_empty_str(table[key]), f"{where}: [{name}] {key}", "must say something: a constant set from data names its source, quotes it and names the engine version")
    return EngineCosts(
        overhead_ms=float(overhead["value_ms"]),
        overhead_source_ms=float(overhead["source_value_ms"]),
        overhead_vllm_version=overhead["vllm_version"],
        draft_pass=DraftPassEvidence(
            value_ms=float(draft["value_ms"]),
            passes=draft["passes"],
            kv_cache_size=draft["kv_cache_size"],
            batch_sizes=tuple(batches),
            source_draft_step_ms=tuple(
                source_draft_step_ms(draft["source_c_kv_ms"], draft["source_c_token_ms"], draft["source_c_fixed_ms"], b, draft["kv_cache_size"], draft["passes"])
                for b in batches
            ),
            modelled_draft_step_ms=tuple(float(m) for m in modelled),
            vllm_version=draft["vllm_version"],
        ),
        default_series=verify["default_series"],
        series=series,
    )
