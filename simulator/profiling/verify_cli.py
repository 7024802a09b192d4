"""``python -m simulator.profiling fit-verify``: lambda of the interpolated verify mode, fitted to a
measured ``verify_attention.csv`` (``--profile-dir``) or to the published kernel series declared
in a calibration file (``--calibration data/calibration/engine_costs.toml``: the fits behind the
simulator's verify default); printed as Markdown, optionally written as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from simulator.vidur.models import model_shape
from simulator.util.errors import ConfigError
from simulator.profiling import verify_fit
from simulator.profiling.measured import read_attention
from simulator.profiling.verify_table import read_provenance, read_verify_attention
from simulator.profiles.vidur_format import validate_profile_dir
from simulator.util.textio import atomic_write_text

STATS = ("median", "mean", "min")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--profile-dir", help="directory holding verify_attention.csv[.xz] (from measure --tables verify)")
    source.add_argument("--calibration", help="fit every kernel series declared in this calibration file (data/calibration/engine_costs.toml)")
    parser.add_argument(
        "--decode-profile",
        help="take the bounds from this Vidur-format profile's decode rows, as the simulator does (default: the verify table's own one-query rows)",
    )
    parser.add_argument("--model", default="meta-llama/Llama-2-7b-hf", help="model whose decode rows --decode-profile holds")
    parser.add_argument("--stat", default="median", choices=STATS, help="which timing statistic to fit (default median)")
    parser.add_argument("--json", help="also write the fit to this JSON file")


def _markdown(frame: pd.DataFrame) -> str:
    formats = [".3f" if pd.api.types.is_float_dtype(frame[c]) else ".0f" for c in frame.columns]
    return frame.to_markdown(index=False, floatfmt=formats)


def _lambda_grid(batch_kv: pd.DataFrame) -> pd.DataFrame:
    grid = batch_kv.pivot(index="batch_size", columns="kv_cache_size", values="lambda")
    grid.columns = [f"KV {kv}" for kv in grid.columns]
    return grid.reset_index().astype({"batch_size": int})


def report(fit: verify_fit.LambdaFit, source: str) -> str:
    by = fit.groups
    lines = [
        f"lambda = {fit.overall:.3f}  (relative residual: RMS {fit.residual_rms_pct:.1f}%, max {fit.residual_max_pct:.1f}%; "
        f"{fit.rows} verify rows; bounds: {source})",
        "",
        "## lambda by batch",
        "",
        _markdown(by["batch"]),
        "",
        "## lambda by KV length",
        "",
        _markdown(by["kv"]),
        "",
        "## lambda by queries per sequence (k' + 1)",
        "",
        _markdown(by["queries"]),
        "",
        "## lambda by batch (rows) and KV length (columns)",
        "",
        _markdown(_lambda_grid(by["batch_kv"])),
    ]
    return "\n".join(lines)


def calibration_main(args: argparse.Namespace) -> int:
    """Fit each declared series; say which one sets the default and what the default is."""
    from simulator.speculative.verify_cost import DEFAULT_ATTENTION, DEFAULT_INTERPOLATION
    from simulator.profiling.engine_costs import read_engine_costs, series_fit, series_lambda

    costs = read_engine_costs(args.calibration)
    fits = {}
    for name, rows in costs.series.items():
        try:
            fit = series_fit(rows)
        except ValueError as exc:
            raise ConfigError(f"--calibration {args.calibration}: series {name!r}: {exc}") from exc
        fits[name] = fit
        marker = " (sets the default)" if name == costs.default_series else ""
        print(f"# {name}{marker}\n")
        print(report(fit, "the series' own one-query rows"))
        print(f"\nlambda held to [0, 1]: {series_lambda(rows):.3f}\n")
    print(f"simulator default: attention = {DEFAULT_ATTENTION!r}, interpolation = {DEFAULT_INTERPOLATION:g}")
    if args.json:
        summary = {"calibration": Path(args.calibration).name, "default_series": costs.default_series,
                   "series": {name: verify_fit.fit_summary(fit) for name, fit in fits.items()}}
        atomic_write_text(args.json, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.json and Path(args.json).is_dir():
        raise ConfigError(f"--json {args.json}: is a directory")
    if args.calibration:
        return calibration_main(args)
    verify = read_verify_attention(args.profile_dir)
    if args.decode_profile:
        shape = model_shape(args.model)
        files = validate_profile_dir(args.decode_profile, shape)
        decode, _ = read_attention(files.attention, shape)
        points, source = verify_fit.profile_bounds(verify, decode, args.stat), f"decode rows of {args.decode_profile}"
    else:
        points, source = verify_fit.same_run_bounds(verify, args.stat), "the verify table's own one-query rows"
    try:
        fit = verify_fit.fit_lambda(points)
    except ValueError as exc:
        raise ConfigError(f"--profile-dir {args.profile_dir}: {exc}") from exc
    provenance = read_provenance(args.profile_dir)
    if provenance:
        device = provenance.get("measured_on", {})
        print(f"measured: {provenance.get('model', '?')} on {device.get('name', '?')} (torch {device.get('torch_version', '?')}, {provenance.get('dtype', '?')}, {provenance.get('date', '?')})")
    print(report(fit, source))
    if args.json:
        summary = {
            "profile_dir": Path(args.profile_dir).name,
            "measured": provenance,
            "stat": args.stat,
            "bounds": "decode profile" if args.decode_profile else "same run",
            **verify_fit.fit_summary(fit),
        }
        atomic_write_text(args.json, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0
