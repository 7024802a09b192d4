"""``python -m simulator.profiling measure``: the options, and the run from options to files."""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.util.errors import ConfigError
from simulator.profiling.measure import output, runner
from simulator.profiling.measure.ops import ATTENTION_BACKENDS
from simulator.profiling.measure.runner import DEFAULT_VERIFY_MAX_K, DTYPES, TABLES, MeasureOptions
from simulator.profiling.measure.shapes import GRIDS
from simulator.profiling.measure.timing import TIMERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model name, e.g. meta-llama/Llama-2-7b-hf")
    parser.add_argument("--out", required=True, help="profile directory to write (mlp.csv, attention.csv, metadata.json; verify_*.csv, verify_metadata.json)")
    parser.add_argument("--tables", default="profile", choices=TABLES, help="profile: Vidur's mlp.csv and attention.csv (default); verify: the verify-step tables; all: both")
    # --device names a GPU SKU everywhere else (a100, h100, h200); this is which PyTorch device runs the ops.
    parser.add_argument("--torch-device", default="auto", choices=("auto", "cuda", "cpu"), help="PyTorch device to measure on (default: cuda when available)")
    parser.add_argument("--dtype", default="auto", choices=("auto", *DTYPES), help="default: float16 on cuda, float32 on cpu")
    parser.add_argument("--grid", default="vidur", choices=GRIDS, help="vidur: Vidur's profiler grids; small: powers of two")
    parser.add_argument("--max-tokens", type=int, default=4096, help="largest num_tokens and prefill chunk (default 4096)")
    parser.add_argument("--max-batch", type=int, default=128, help="largest decode batch, and largest verify batch (default 128)")
    parser.add_argument("--verify-max-k", type=int, default=DEFAULT_VERIFY_MAX_K, help=f"verify steps of k' = 0..this many proposals per sequence (default {DEFAULT_VERIFY_MAX_K})")
    parser.add_argument("--max-kv", type=int, default=None, help="largest KV cache size; for prefill, earlier tokens plus chunk (default: the model's context, at most 4096)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per shape (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per shape first (default 3)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS", help="stop refining the grid after this long; corners are always measured")
    parser.add_argument("--timer", default="auto", choices=TIMERS, help="graph: replay each op from a CUDA graph, so CPU launch gaps are not timed (auto's choice on a GPU); event: CUDA events around eager launches")
    parser.add_argument("--attention-backend", default="auto", choices=ATTENTION_BACKENDS, help="SDPA kernel; auto: the first of flash, efficient, math that accepts a shape; fastest: the faster of flash and efficient, timing both")
    parser.add_argument("--block-size", type=int, default=16, help="block_size written into attention.csv for loaders that filter on it (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compress", action="store_true", help="write .csv.xz files")
    parser.add_argument("--overwrite", action="store_true", help="replace the measured tables in a non-empty --out directory")


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    output.check_out_dir(out, args.overwrite)
    options = MeasureOptions(
        model=args.model,
        torch_device=args.torch_device,
        dtype=args.dtype,
        grid=args.grid,
        max_tokens=args.max_tokens,
        max_batch=args.max_batch,
        max_kv=args.max_kv,
        repeats=args.repeats,
        warmup=args.warmup,
        time_budget_s=args.time_budget,
        attention_backend=args.attention_backend,
        block_size=args.block_size,
        seed=args.seed,
        timer=args.timer,
        tables=args.tables,
        verify_max_k=args.verify_max_k,
    )
    profile = runner.measure_profile(options)
    for metadata in (profile.metadata, profile.verify_metadata):  # nothing is written unless every table has rows
        missing = [kind for kind, rows in (metadata or {}).get("measured_shapes", {}).items() if rows == 0]
        if missing:
            reasons = "; ".join(f"{s['kind']}: {s['reason']}" for s in metadata["skipped"][:3])
            raise ConfigError(f"no {' or '.join(missing)} shape of '{args.model}' could be measured here ({reasons}): nothing written")
    if profile.metadata is not None:
        files = output.write_measured_profile(out, profile.mlp, profile.attention, profile.metadata, args.compress)
        skipped = len(profile.metadata["skipped"]) + sum(profile.metadata["skipped_for_time_budget"].values())
        print(f"wrote {files.mlp}, {files.attention} ({len(profile.mlp)} + {len(profile.attention)} rows; {skipped} shapes skipped)")
    if profile.verify_metadata is not None:
        paths = output.write_verify_tables(out, profile.verify_attention, profile.verify_layer, profile.verify_metadata, args.compress)
        skipped = len(profile.verify_metadata["skipped"]) + sum(profile.verify_metadata["skipped_for_time_budget"].values())
        print(f"wrote {paths[0]}, {paths[1]} ({len(profile.verify_attention)} + {len(profile.verify_layer)} rows; {skipped} shapes skipped)")
    return 0
