"""``python -m simulator.validation <step>``: one command per step, each reading and writing files.

Flags follow ``vllm bench serve`` where it has them (``--base-url``, ``--endpoint``,
``--num-prompts``, ``--request-rate``, ``--max-concurrency``, ``--metric-percentiles``,
``--percentile-metrics``), and seeds say what they seed (``--workload-seed`` for arrivals,
lengths and prompts; ``--acceptance-seed`` for the simulator's acceptance draws), as in
``python -m simulator``.  The flags this harness used before are kept for one
release as deprecated aliases (:data:`DEPRECATED`) that print a warning.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from simulator.cli.argtypes import DeprecatedAlias, positive_int, speculative_tokens
from simulator.cli.proposer_flags import add_proposer_flags, draft_model_help, proposer_kind
from simulator.cli.speculation_flags import require_draft_model
from simulator.profiles.hardware import DEFAULT_DEVICE, device_names
from simulator.util.errors import ConfigError
from simulator.validation.exits import EXIT_BAD_INPUT, EXIT_CLOSING_SCRAPE_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REQUESTS_FAILED, unfinished_message

EXIT_CODES = f"""exit codes:
  {EXIT_OK}    done (replay: every request of the workload has a successful record)
  1    an unexpected error (a bug: please report it with the traceback)
  {EXIT_BAD_INPUT}    bad input: a file, an option, an output path, a server that cannot be reached or
       whose /metrics is not vLLM's; the message names it, and nothing was written
  {EXIT_REQUESTS_FAILED}    replay, bench: some requests of the workload have no successful record, from this run
       or an earlier one; every record is kept (replay --retry-failed, bench --resume resend them)
  {EXIT_CLOSING_SCRAPE_FAILED}    replay, bench: the closing /metrics scrape failed (the server died?); every record is
       kept, and rerunning once the server is back (bench: with --resume) closes the session (4 wins over 3)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); nothing is half-written: rerun replay as it was, or bench with --resume, to continue
"""
# (step, old flag, its replacement): accepted for one release with a warning on stderr
DEPRECATED = (
    ("generate", "--num-requests", "--num-prompts"),
    ("generate", "--rate", "--request-rate"),
    ("generate", "--seed", "--workload-seed"),
    ("replay", "--url", "--base-url"),
    ("replay", "--concurrency", "--max-concurrency"),
    ("simulate", "--seed", "--acceptance-seed"),  # as python -m simulator, whose --seed also meant the acceptance draws
)
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS = 512, 128  # generate --lengths fixed


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the option and where help is."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _names(step: str, new: str) -> tuple[str, ...]:
    """``new`` and its deprecated names in ``step``, for one DeprecatedAlias argument: declared
    together, the action sees both, so giving an old name with its new one is refused."""
    return (new,) + tuple(old for s, old, n in DEPRECATED if s == step and n == new)


def _generate(args) -> None:
    from simulator.validation.files import check_output_file
    from simulator.validation.workload import generate, read_length_trace, write_workload

    check_output_file(args.out, "workload file")
    lengths = _lengths_mode(args)
    trace_rows, skipped = None, 0
    if lengths == "trace":
        trace_rows, skipped = read_length_trace(Path(args.trace), args.max_total_tokens)
    try:
        spec = _workload_spec(args, lengths, trace_rows, skipped)
    except ConfigError as err:  # the spec names its fields; the user typed flags
        field, _, rest = str(err).partition(" = ")
        raise ConfigError(f"--{SPEC_FLAGS.get(field, field.replace('_', '-'))} {rest}" if rest else str(err)) from None
    workload = generate(spec)
    write_workload(Path(args.out), workload)
    if skipped:
        print(f"warning: skipped {skipped} of {skipped + len(trace_rows)} rows of {args.trace}: longer than --max-total-tokens {args.max_total_tokens} (prompt + output)", file=sys.stderr)
    print(f"wrote {len(workload)} requests to {args.out} (workload {workload.workload_hash[:12]})")


def _lengths_mode(args) -> str:
    """Which lengths ``generate`` draws, and a refusal for flags that mode would ignore: a flag
    the user typed is never silently dropped."""
    from simulator.validation.workload import MAX_REQUEST_TOKENS

    ranges = [flag for flag, value in (("--prompt-range", args.prompt_range), ("--output-range", args.output_range)) if value]
    fixed = [flag for flag, value in (("--prompt-tokens", args.prompt_tokens), ("--output-tokens", args.output_tokens)) if value is not None]
    lengths = args.lengths or ("trace" if args.trace else "uniform" if ranges else "fixed")
    if lengths != "trace" and args.trace:
        raise ConfigError(f"--trace applies to --lengths trace, not --lengths {lengths}: drop --trace, or drop --lengths {lengths}")
    if lengths == "trace":
        if not args.trace:
            raise ConfigError("--lengths trace needs --trace FILE")
        if ranges or fixed:
            raise ConfigError(f"--trace takes both lengths from the trace's rows, so {' and '.join(ranges + fixed)} would be ignored: drop {'them' if len(ranges + fixed) > 1 else 'it'}, or drop --trace")
    if lengths == "fixed" and ranges:
        raise ConfigError(f"--lengths fixed uses --prompt-tokens and --output-tokens, so {' and '.join(ranges)} would be ignored: drop {'them' if len(ranges) > 1 else 'it'}, or pass --lengths uniform")
    if lengths == "uniform":
        if fixed:
            raise ConfigError(f"--lengths uniform draws from --prompt-range and --output-range, so {' and '.join(fixed)} would be ignored: drop {'them' if len(fixed) > 1 else 'it'}, or pass --lengths fixed")
        if not (args.prompt_range and args.output_range):
            given, other = ("--prompt-range", "--output-range") if args.prompt_range else ("--output-range", "--prompt-range")
            raise ConfigError(f"uniform lengths draw both prompt and output lengths: pass {other} MIN MAX too" + (f" (with {given})" if ranges else ""))
    if args.max_total_tokens is not None and args.max_total_tokens > MAX_REQUEST_TOKENS:
        raise ConfigError(f"--max-total-tokens {args.max_total_tokens}: beyond the harness's bound of {MAX_REQUEST_TOKENS} tokens per request; pass the server's context")
    if args.max_total_tokens is not None and (lengths != "trace" or args.max_total_tokens <= 0):
        raise ConfigError(f"--max-total-tokens {args.max_total_tokens}: " + ("must be a positive number of tokens (the server's context)" if lengths == "trace" else "applies to --trace rows only; leave it out"))
    return lengths


# WorkloadSpec fields whose flag is spelt differently
SPEC_FLAGS = {"num_requests": "num-prompts", "rate": "request-rate", "seed": "workload-seed", "trace_lengths": "trace"}


def _workload_spec(args, lengths, trace_rows, skipped=0):
    from simulator.validation.workload import WorkloadSpec

    return WorkloadSpec(
        num_requests=args.num_prompts,
        arrival=args.arrival,
        rate=args.request_rate,
        lengths=lengths,
        prompt_tokens=DEFAULT_PROMPT_TOKENS if args.prompt_tokens is None else args.prompt_tokens,
        output_tokens=DEFAULT_OUTPUT_TOKENS if args.output_tokens is None else args.output_tokens,
        prompt_range=tuple(args.prompt_range) if args.prompt_range else None,
        output_range=tuple(args.output_range) if args.output_range else None,
        trace_lengths=trace_rows,
        trace_name=Path(args.trace).name if args.trace else None,
        trace_rows_skipped=skipped,
        vocab_size=args.vocab_size,
        min_token_id=args.min_token_id,
        repeat_fraction=args.repeat_fraction,
        repeat_span=args.repeat_span,
        seed=args.workload_seed,
    )


def _replay(args) -> int:
    from simulator.validation.compare import summary_line
    from simulator.validation.replay import replay
    from simulator.validation.replay_files import read_results, unfinished_requests
    from simulator.validation.replay_options import ReplayOptions
    from simulator.validation.workload import read_workload

    options = ReplayOptions(
        base_url=args.base_url,
        endpoint=args.endpoint,
        model=args.model,
        concurrency=args.max_concurrency,
        timeout_s=args.timeout,
        temperature=args.temperature,
        retry_failed=args.retry_failed,
        request_token_ids=not args.no_token_ids,
        progress=not args.no_progress,
    )  # the flags are checked before the workload is read
    workload = read_workload(Path(args.workload))
    try:
        summary = replay(workload, Path(args.out), options)
    except KeyboardInterrupt:
        results = read_results(Path(args.out))
        saved = len(results.records) if results else 0
        print(f"interrupted: {saved} request records are saved in {args.out}; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    for warning in summary.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    code = EXIT_OK
    if summary.get("session") is None:
        print(summary["note"])
    else:
        active = f" (active {summary['active_s']:.1f} s)" if summary["stall_tail_s"] else ""
        print(f"session {summary['session']}: sent {summary['sent']} requests in {summary['wall_s']:.1f} s{active}; " + ", ".join(f"{k} {v}" for k, v in summary["statuses"].items()) + f"; length mismatches {summary['length_mismatches']}")
        if summary["stall_tail_s"]:
            timeouts = summary["statuses"].get("timeout", 0)
            print(
                f"warning: session {summary['session']}: {timeouts} request(s) timed out (no data for --timeout {args.timeout:g} s); the session's last "
                f"{summary['stall_tail_s']:.1f} s of {summary['wall_s']:.1f} s waited only on them and are left out of its duration, so throughput is over {summary['active_s']:.1f} s",
                file=sys.stderr,
            )
        print(f"measured (as vllm bench serve, ITL over every chunk gap): {summary_line(summary['metrics'])}")
        overhead = summary["client_overhead"]
        print(f"client overhead: send lag p99 {overhead['send_lag_s']['p99'] * 1000:.2f} ms, event-loop lag p99 {overhead['event_loop_lag_s']['p99'] * 1000:.2f} ms, {overhead['chunk_handling_s_mean'] * 1e6:.1f} us per chunk")
    # The exit code describes the replay directory, not only this session: a rerun that sent
    # nothing, or a resume after a kill, still fails while earlier failures remain.
    results = read_results(Path(args.out), workload.workload_hash)
    unfinished = unfinished_requests(workload, results)
    if unfinished:
        print(f"error: {unfinished_message(workload, results, unfinished)}; every record is kept in {args.out}; rerun with --retry-failed to resend them (exit {EXIT_REQUESTS_FAILED})", file=sys.stderr)
        code = EXIT_REQUESTS_FAILED
    if summary.get("session") is not None and not summary["after_scrape"]:
        print(
            f"error: the closing /metrics scrape failed: {summary['after_scrape_error']}; every record is kept in {args.out}; "
            f"rerun replay once the server is back: its opening scrape closes this session, unless the server restarted (exit {EXIT_CLOSING_SCRAPE_FAILED})",
            file=sys.stderr,
        )
        code = EXIT_CLOSING_SCRAPE_FAILED
    if summary.get("unreported_speculation"):
        print(f"error: {summary['unreported_speculation']}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    return code


def _calibrate(args) -> None:
    from simulator.validation.calibrate import calibrate
    from simulator.validation.files import atomic_write_json, check_output_file
    from simulator.validation.replay_files import check_replay_dir

    replay_dir = check_replay_dir(Path(args.replay), "--replay")  # names the input before any output is checked
    out = check_output_file(Path(args.out) if args.out else replay_dir / "calibration.json", "calibration file")
    record = calibrate(replay_dir, args.num_speculative_tokens, force=args.force)
    atomic_write_json(out, record)
    for dropped in record["sessions_dropped"]:
        print(f"warning: replay session {dropped['session']} left out of the calibration: {dropped['reason']}", file=sys.stderr)
    for warning in record.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if record["num_speculative_tokens"]:
        print(f"k = {record['num_speculative_tokens']} ({record['engine']}): acceptance rate {record['acceptance_rate']:.4f}, mean acceptance length {record['mean_acceptance_length']:.4f}")
        if record["proposal_probability"] is not None:
            print(f"a draft at {record['proposal_probability']:.4f} of decode steps ({record['proposal_probability_method']}); simulate passes it on as proposal_probability")
    else:
        print(record["method"])
    print(f"KV cache: {record['kv_cache']['num_gpu_blocks']} blocks of {record['kv_cache']['block_size']} tokens; wrote {out}")


def _simulate(args) -> None:
    from simulator.profiles.hardware import get_device
    from simulator.validation.calibrate import read_calibration
    from simulator.validation.compare import summary_line
    from simulator.validation.simulate import build_run_config, simulate
    from simulator.validation.workload import read_workload

    kind = proposer_kind(args)
    require_draft_model(kind, args.draft_model)
    get_device(args.device)  # an unknown SKU stops here, naming the known ones
    workload = read_workload(Path(args.workload))
    calibration = read_calibration(Path(args.calibration))
    config = build_run_config(workload, calibration, model=args.model, device=args.device, profile_dir=args.profile_dir, proposer=kind.name, draft_model=args.draft_model, seed=args.acceptance_seed)
    from simulator.vidur.logs import quiet_vidur, restore_vidur

    previous = None if args.verbose else quiet_vidur()  # Vidur's INFO lines, as python -m simulator hides them without -v
    try:
        record = simulate(config, workload, calibration, Path(args.out))
    finally:
        if previous is not None:
            restore_vidur(previous)
    print(f"simulated {record['summary'].get('num_requests')} requests: {summary_line(record['metrics'])}; wrote {args.out}")


def _compare(args) -> None:
    from simulator.validation.compare import parse_percentiles, parse_percentile_metrics
    from simulator.validation.report import compare_files

    percentiles = parse_percentiles(args.metric_percentiles)
    metrics = parse_percentile_metrics(args.percentile_metrics)
    report = compare_files(Path(args.workload), Path(args.replay), Path(args.calibration), Path(args.simulated), Path(args.out), percentiles=percentiles, percentile_metrics=metrics)
    for metric, values in report["metrics"].items():
        mape = values["mape_pct"]
        means = " vs ".join("n/a" if values[side]["mean_ms"] is None else f"{values[side]['mean_ms']:.2f} ms {side}" for side in ("measured", "simulated"))
        print(f"{values['label']}: {values['requests']} requests, mean {means}, MAPE {'n/a' if mape is None else f'{mape:.1f}%'}")
    print(f"wrote the report to {args.out}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m simulator.validation",
        description="Validate the simulator against a vLLM server, request by request: generate -> replay -> calibrate -> simulate -> compare.",
        epilog=EXIT_CODES + "\ndeprecated flags (kept for one release, each prints a warning): " + ", ".join(f"{step} {old} -> {new}" for step, old, new in DEPRECATED),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = parser.add_subparsers(dest="step", required=True)

    g = steps.add_parser("generate", help="write a seeded workload file (exact lengths, prompts as token ids)")
    g.add_argument("--out", required=True, help="workload file to write (JSONL)")
    g.add_argument(*_names("generate", "--num-prompts"), dest="num_prompts", type=int, default=100, action=DeprecatedAlias, help="requests in the workload (as vllm bench serve's --num-prompts)")
    g.add_argument("--arrival", choices=("poisson", "fixed"), default="poisson")
    g.add_argument(*_names("generate", "--request-rate"), dest="request_rate", type=float, default=2.0, action=DeprecatedAlias, help="arrivals per second (Poisson, or evenly spaced with --arrival fixed)")
    g.add_argument("--lengths", choices=("fixed", "uniform", "trace"), help="default: trace with --trace, uniform with ranges, else fixed")
    g.add_argument("--prompt-tokens", type=int, help=f"with --lengths fixed (default {DEFAULT_PROMPT_TOKENS})")
    g.add_argument("--output-tokens", type=int, help=f"with --lengths fixed (default {DEFAULT_OUTPUT_TOKENS})")
    g.add_argument("--prompt-range", type=int, nargs=2, metavar=("MIN", "MAX"))
    g.add_argument("--output-range", type=int, nargs=2, metavar=("MIN", "MAX"))
    g.add_argument("--trace", help="CSV with num_prefill_tokens,num_decode_tokens (Vidur's trace format)")
    g.add_argument("--max-total-tokens", type=int, help="drop trace rows longer than this (the server's context)")
    g.add_argument("--vocab-size", type=int, default=32000)
    g.add_argument("--min-token-id", type=int, default=1000)
    g.add_argument("--repeat-fraction", type=float, default=0.0, help="share of prompt spans copied from earlier in the prompt")
    g.add_argument("--repeat-span", type=int, default=16)
    g.add_argument(*_names("generate", "--workload-seed"), dest="workload_seed", type=int, default=0, action=DeprecatedAlias, help="seeds arrivals, lengths and prompt tokens (as python -m simulator's --workload-seed)")

    r = steps.add_parser("replay", help="replay a workload open-loop against a vLLM server's completions endpoint (resumes)", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--workload", required=True)
    r.add_argument(*_names("replay", "--base-url"), dest="base_url", required=True, action=DeprecatedAlias, help="server root, e.g. http://127.0.0.1:8000 (the path goes in --endpoint)")
    r.add_argument("--endpoint", default="/v1/completions", help="the OpenAI-compatible completions path (default: /v1/completions)")
    r.add_argument("--out", required=True, help="replay directory (created; reused to resume)")
    r.add_argument("--model", help="served model name, checked against /v1/models (default: the first it lists)")
    r.add_argument(*_names("replay", "--max-concurrency"), dest="max_concurrency", type=positive_int, default=256, action=DeprecatedAlias, help="requests in flight at most; a request that waits for a slot is sent late")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds of silence (no data at all) on a stream before the request is recorded as a timeout; not a limit on a request's total time")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--retry-failed", action="store_true", help="also resend requests recorded as failed")
    r.add_argument("--no-token-ids", action="store_true", help="do not ask for return_token_ids (servers older than vLLM 0.10.2)")
    r.add_argument("--no-progress", action="store_true")

    c = steps.add_parser("calibrate", help="acceptance and KV budget from the replay's /metrics scrapes")
    c.add_argument("--replay", required=True, help="replay directory (the --out of replay)")
    c.add_argument("--num-speculative-tokens", type=speculative_tokens, help="k the server ran with; > 0 requires spec-decode counters, 0 = off; checked against the chunks the client saw")
    c.add_argument("--force", action="store_true", help="calibrate even where k disagrees with the chunks or counters (a server that merges steps into one chunk, say)")
    c.add_argument("--out", help="calibration file (default: REPLAY/calibration.json)")

    s = steps.add_parser("simulate", help="simulate the same workload with the calibration")
    s.add_argument("--workload", required=True)
    s.add_argument("--calibration", required=True)
    s.add_argument("--out", required=True, help="directory for simulated.csv and simulated.json")
    s.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    s.add_argument("--device", default=DEFAULT_DEVICE, help=f"GPU SKU the server ran on: {', '.join(device_names())} (default: {DEFAULT_DEVICE})")
    s.add_argument("--profile-dir", help="a Vidur-format profile directory measured on that GPU (default: the built-in profile)")
    add_proposer_flags(s, options=False)
    s.add_argument("--draft-model", help=draft_model_help())
    s.add_argument(*_names("simulate", "--acceptance-seed"), dest="acceptance_seed", type=int, default=0, action=DeprecatedAlias, help="seeds the simulator's acceptance draws (as python -m simulator's --acceptance-seed)")
    s.add_argument("-v", "--verbose", action="store_true", help="show Vidur's log")

    m = steps.add_parser("compare", help="join measured and simulated per request; write the report")
    m.add_argument("--workload", required=True)
    m.add_argument("--replay", required=True)
    m.add_argument("--calibration", required=True)
    m.add_argument("--simulated", required=True, help="the simulate step's output directory")
    m.add_argument("--out", required=True, help="report directory")
    m.add_argument("--metric-percentiles", default="99", help="comma-separated percentiles to report besides mean and median, as vllm bench serve (default: 99)")
    m.add_argument("--percentile-metrics", default=",".join(PERCENTILE_METRICS), help=f"comma-separated metrics that get those percentiles (default: {','.join(PERCENTILE_METRICS)})")

    from simulator.validation.bench_flags import add_bench_parser
    from simulator.validation.fit_command import add_fit_parser

    add_bench_parser(steps, EXIT_CODES)
    add_fit_parser(steps, EXIT_CODES)
    return parser


def _bench(args) -> int:
    from simulator.validation.bench import run_bench

    return run_bench(args)


def _fit(args) -> int:
    from simulator.validation.fit_command import run_fit

    return run_fit(args)


STEPS = {"generate": _generate, "replay": _replay, "calibrate": _calibrate, "simulate": _simulate, "compare": _compare, "bench": _bench, "fit": _fit}


# The `validation` extra: the client that talks to a server and reads /metrics.
EXTRA_MODULES = {"httpx": "httpx", "httpx_sse": "httpx-sse", "prometheus_client": "prometheus-client"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return STEPS[args.step](args) or 0
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        # Outputs are written atomically once the work is done, so nothing is half-written.
        print(f"interrupted: {args.step} stopped before writing its outputs; rerun the same command", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as err:
        root = (err.name or "").split(".")[0]
        if root not in EXTRA_MODULES:
            raise
        print(
            f"error: `{args.step}` needs {EXTRA_MODULES[root]}, from the validation extra; install it with "
            f"pip install 'vidur-specdec[validation]' (or: pip install {' '.join(EXTRA_MODULES.values())})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
