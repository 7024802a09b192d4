"""``python -m simulator.profiling``: generate, fit (device constants, network, verify), compare and measure execution-time profiles."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import tomli_w

from simulator.vidur.models import model_shape
from simulator.util.errors import ConfigError
from simulator.util.inputs import read_toml
from simulator.profiles import network
from simulator.profiling import accuracy, calibrate, holdout, tp_accuracy
from simulator.profiles.hardware import DEVICES_FILE, get_device, load_devices
from simulator.profiling.measured import read_measurements
from simulator.profiling.shards import read_shards
from simulator.profiles.source import builtin_profile_dir
from simulator.profiles.all_reduce_rows import single_node_all_reduce_rows
from simulator.util.textio import atomic_write_text, check_writable_file


def _markdown(frame: pd.DataFrame) -> str:
    formats = [".2f" if pd.api.types.is_float_dtype(frame[c]) else "" for c in frame.columns]
    return frame.to_markdown(index=False, floatfmt=formats)


def _report(meas, shape, dev, title: str) -> str:
    lines = [f"# {title}", ""]
    if len(meas.mlp):
        table = accuracy.mlp_error_table(meas, shape, dev)
        lines += ["## MLP-side ops (num_tokens 1-4096)", "", _markdown(table), ""]
    for name, errors in (
        ("Decode attention (held out: alternate KV sizes)", accuracy.decode_errors(meas, shape, dev) if len(meas.decode) else None),
        ("Prefill attention (held out: alternate chunk sizes)", accuracy.prefill_errors(meas, shape, dev) if len(meas.prefill) else None),
    ):
        if errors is None:
            continue
        stats = accuracy.summarize_attention(errors)
        lines += [f"## {name}", "", _markdown(pd.DataFrame([stats])), ""]
    return "\n".join(lines)


def _cmd_fit_device(args) -> int:
    if args.mlp_tp:
        return _cmd_fit_pooled(args)
    if args.hold_out_model or args.hold_out_tokens or args.attention_device:
        raise ConfigError("--hold-out-model, --hold-out-tokens and --attention-device need --mlp-tp MODEL=PATH (a pooled fit)")
    shape = model_shape(args.model)
    dev = _start(args)
    meas = read_measurements(args.mlp, args.attention, shape)
    constants = calibrate.rounded(calibrate.fit(meas, shape, dev))
    fitted = dev.with_constants(constants, args.version, args.source_note)
    report = _report(meas, shape, fitted, f"Calibration of `{args.device}` against {args.source_note}")
    print(report)
    return _store(args, constants, report)


def _start(args):
    """The device to fit, with the fitted constants of ``--start-from`` as the starting point."""
    dev = get_device(args.device)
    if args.start_from:
        dev = replace(dev, constants=get_device(args.start_from).constants)
    return dev


def _cmd_fit_pooled(args) -> int:
    """MLP-side constants on several models' mlp.csv at every TP degree, scored on a held-out model
    and token range; attention constants on --attention as measured on --attention-device."""
    if args.mlp:
        raise ConfigError("give either --mlp (one model's TP 1 rows) or --mlp-tp MODEL=PATH (pooled), not both")
    dev = _start(args)
    attention_base = get_device(args.attention_device or args.device)  # an unknown name is refused before any fitting
    shards = []
    for item in args.mlp_tp:
        model, sep, path = item.partition("=")
        if not sep or not model or not path:
            raise ConfigError(f"--mlp-tp '{item}': expected MODEL=PATH, e.g. meta-llama/Llama-2-7b-hf=.../mlp.csv")
        shards += read_shards(path, model, model_shape(model))
    hold = holdout.HoldOut(args.hold_out_model, holdout.parse_token_range(args.hold_out_tokens) if args.hold_out_tokens else None)
    holdout.check(shards, hold)
    constants = calibrate.fit_mlp_side(holdout.fit_parts(shards, hold), dev)
    attention_dev, meas, shape = None, None, model_shape(args.model)
    if args.attention:
        attention_dev = replace(attention_base, constants=constants)
        meas = read_measurements(None, args.attention, shape)
        constants = calibrate.fit(meas, shape, attention_dev)
    constants = calibrate.rounded(constants)
    fitted = dev.with_constants(constants, args.version, args.source_note)
    rows = holdout.layer_rows(shards, hold, fitted)
    lines = [
        f"# Calibration of `{args.device}` against {args.source_note}",
        "",
        f"Held out of the MLP-side fit: {hold.describe()}.",
        "",
        "## MLP-side time per layer (sum of the ops each model has)",
        "",
        _markdown(holdout.summary(rows, ["subset"])),
        "",
        _markdown(holdout.summary(rows, ["subset", "model", "TP"])),
        "",
    ]
    if meas is not None:
        scored = replace(attention_dev, constants=constants)
        lines.append(_report(meas, shape, scored, f"Attention, measured on `{scored.name}`").replace("# Attention", "## Attention", 1).replace("\n## ", "\n### "))
    report = "\n".join(lines)
    print(report)
    return _store(args, constants, report)


def _store(args, constants, report: str) -> int:
    if args.write:
        if args.report:  # refused before devices.toml changes: nothing half-written
            check_writable_file(args.report, "--report")
        table = _devices_table()
        table[args.device]["constants"] = {"version": args.version, "fitted_from": args.source_note, **asdict(constants)}
        _write_devices(table)
        if args.report:
            atomic_write_text(Path(args.report), report + "\n")
    return 0


def _devices_table() -> dict:
    """devices.toml as written (variants stay variants); every device in it is checked first."""
    load_devices()
    return read_toml(DEVICES_FILE, "device constants")


def _write_devices(table: dict) -> None:
    header = DEVICES_FILE.read_text().split("\n\n", 1)[0] + "\n\n"
    atomic_write_text(DEVICES_FILE, header + tomli_w.dumps(table))


def _cmd_network(args) -> int:
    dev = get_device(args.device)
    if dev.network is None:
        raise ConfigError(f"device '{args.device}' has no [network] table in {DEVICES_FILE}")
    rows = single_node_all_reduce_rows(args.all_reduce, *network.STEP_MESSAGE_BYTES)
    net = dev.network
    if args.fit:
        net = network.fit(net, rows["size"], rows.num_workers, rows["time_stats.all_reduce.median"])
    print(f"# All-reduce: `{args.device}` ring model vs {args.all_reduce}")
    print(f"\nlaunch_us = {net.launch_us}, hop_us = {net.hop_us}, bus_eff = {net.bus_eff} "
          f"(NVLink {net.nvlink_bandwidth_gbps} GB/s per direction); sizes {network.STEP_MESSAGE_BYTES[0]}-{network.STEP_MESSAGE_BYTES[1]} bytes\n")
    print(_markdown(network.error_table(rows, net)))
    if args.fit and args.write:
        table = _devices_table()
        table[args.device]["network"].update(
            {"launch_us": net.launch_us, "hop_us": net.hop_us, "bus_eff": net.bus_eff, "version": args.version, "fitted_from": args.source_note}
        )
        _write_devices(table)
    return 0


def _cmd_tp_compare(args) -> int:
    shape, dev = model_shape(args.model), get_device(args.device)
    try:
        measured = pd.read_csv(args.mlp)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{args.mlp}: cannot be read as CSV ({exc})") from exc
    measured = measured[(measured.n_embd == shape.embedding_dim) & (measured.n_head == shape.num_q_heads)]
    print(f"# Built-in `{args.device}` TP-sharded MLP-side time per layer ({dev.constants_version}) vs {args.mlp}\n")
    print(_markdown(tp_accuracy.mlp_side_errors(measured, shape, dev)))
    return 0


def _cmd_compare(args) -> int:
    shape = model_shape(args.model)
    dev = get_device(args.device)
    meas = read_measurements(args.mlp, args.attention, shape)
    print(_report(meas, shape, dev, f"Built-in `{args.device}` profile ({dev.constants_version}) vs measured rows"))
    return 0


def _cmd_generate(args) -> int:
    path = builtin_profile_dir(args.model, model_shape(args.model), args.device, Path(args.out), max_seq_len=args.max_seq_len)
    print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulator.profiling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    cal = sub.add_parser("fit-device", help="fit a device's kernel constants to a measured profile and print per-op error")
    cmp_ = sub.add_parser("compare", help="built-in profile vs a measured profile, without refitting")
    for p in (cal, cmp_):
        p.add_argument("--device", required=True)
        p.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
        p.add_argument("--mlp", help="measured mlp.csv (Vidur format)")
        p.add_argument("--attention", help="measured attention.csv (Vidur format or the attention sample layout)")
    cal.add_argument("--mlp-tp", action="append", metavar="MODEL=PATH",
                     help="a model's measured mlp.csv with every TP degree (Vidur format); repeat for each model: one pooled fit")
    cal.add_argument("--hold-out-model", metavar="MODEL", help="with --mlp-tp, leave this model out of the fit and report its error")
    cal.add_argument("--hold-out-tokens", metavar="LO-HI", help="with --mlp-tp, leave num_tokens LO..HI of the other models out and report their error")
    cal.add_argument("--attention-device", metavar="NAME",
                     help="with --mlp-tp, the device --attention was measured on: its datasheet is used in the fit, and the constants carried to --device")
    cal.add_argument("--start-from", metavar="NAME", help="start the fit from this device's fitted constants (default: --device's own)")
    cal.add_argument("--write", action="store_true", help="store the fitted constants in the package's devices.toml (from a checkout)")
    cal.add_argument("--report", help="with --write, also write the Markdown error report here")
    cal.add_argument("--version", default="fitted", help="constants version label")
    cal.add_argument("--source-note", default="a measured profile", help="what the constants were fitted from")
    cal.set_defaults(handler=_cmd_fit_device)
    cmp_.set_defaults(handler=_cmd_compare)

    net = sub.add_parser("network", help="built-in all-reduce vs a measured all_reduce.csv; --fit refits launch, hop and bus_eff")
    net.add_argument("--device", required=True)
    net.add_argument("--all-reduce", required=True, help="Vidur-format all_reduce.csv (e.g. Vidur's network/a100_dgx)")
    net.add_argument("--fit", action="store_true", help="fit the three constants over every TP degree and size")
    net.add_argument("--write", action="store_true", help="with --fit, store them in the package's devices.toml (from a checkout)")
    net.add_argument("--version", default="fitted", help="network constants version label")
    net.add_argument("--source-note", default="a measured all_reduce.csv", help="what the constants were fitted from")
    net.set_defaults(handler=_cmd_network)

    tpc = sub.add_parser("tp-compare", help="built-in TP-sharded MLP-side rows vs a measured mlp.csv, per TP degree, without refitting")
    tpc.add_argument("--device", required=True)
    tpc.add_argument("--model", default="meta-llama/Llama-2-70b-hf")
    tpc.add_argument("--mlp", required=True, help="measured mlp.csv with num_tensor_parallel_workers 1, 2, 4, 8 (Vidur format)")
    tpc.set_defaults(handler=_cmd_tp_compare)

    gen = sub.add_parser("generate", help="write the built-in Vidur-format profile for a model and device")
    gen.add_argument("--device", required=True)
    gen.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    gen.add_argument("--out", required=True, help="directory to write mlp.csv and attention.csv into")
    gen.add_argument("--max-seq-len", type=int, default=4096)
    gen.set_defaults(handler=_cmd_generate)

    try:
        from simulator.profiling import measure
    except ImportError:  # pragma: no cover - measure is optional
        measure = None
    if measure is not None:
        meas = sub.add_parser("measure", help="time the ops on this machine's GPU (or CPU) with PyTorch")
        measure.add_arguments(meas)
        meas.set_defaults(handler=measure.main)

    from simulator.profiling import verify_cli

    fit_verify = sub.add_parser("fit-verify", help="fit lambda of the interpolated verify mode to a measured verify_attention.csv")
    verify_cli.add_arguments(fit_verify)
    fit_verify.set_defaults(handler=verify_cli.main)
    checks = sub.add_parser("step-checks", help="the step-time model against kernel benchmarks and released step-time fits, each labelled held out or in-sample")
    checks.set_defaults(handler=_step_checks)
    guard = sub.add_parser("check-sources", help="refuse a check that calibration data saw (the build's calibration guard), and examined rows that are no row")
    guard.add_argument("--published", type=Path, required=True, help="the published measurements (data/published.toml)")
    guard.add_argument("--calibration", type=Path, required=True, help="data/calibration/step_time.toml; engine_costs.toml and source_aliases.toml beside it")
    guard.set_defaults(handler=_check_sources)
    return parser


def _step_checks(args) -> int:
    from simulator.profiling.step_checks import report

    print(report())
    return 0


def _check_sources(args) -> int:
    from simulator.profiling.calibration_guard import check_published_roles, check_row_ids
    from simulator.specs.measurements import load_measurements

    measurements = load_measurements(args.published)
    check_published_roles(measurements, args.calibration, args.calibration.with_name("engine_costs.toml"))
    check_row_ids(measurements, args.calibration, args.calibration.with_name("engine_costs.toml"))
    checks = sum(m.role == "check" for m in measurements)
    print(f"{checks} check rows and {len(measurements) - checks} calibration rows: no check shares a source with calibration data or was examined by it")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
