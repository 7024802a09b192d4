"""``python -m simulator.validation <step>``: one command per step, each reading and writing files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from simulator.errors import ConfigError

# Exit codes, also listed in --help and docs/validation.md.
EXIT_OK = 0
EXIT_BAD_INPUT = 2  # a ConfigError: bad input, unreachable or non-vLLM server, unusable output path
EXIT_REQUESTS_FAILED = 3  # replay: some requests failed; every record is kept
EXIT_CLOSING_SCRAPE_FAILED = 4  # replay: the closing /metrics scrape failed (server down?); records kept
EXIT_INTERRUPTED = 130
EXIT_CODES = f"""exit codes:
  {EXIT_OK}    done
  1    an unexpected error (a bug: please report it with the traceback)
  {EXIT_BAD_INPUT}    bad input: a file, an option, an output path, a server that cannot be reached or
       whose /metrics is not vLLM's; the message names it, and nothing was written
  {EXIT_REQUESTS_FAILED}    replay: some requests failed; every record is kept (rerun with --retry-failed)
  {EXIT_CLOSING_SCRAPE_FAILED}    replay: the closing /metrics scrape failed (the server died?); every record is
       kept, and rerunning replay once the server is back closes the session (4 wins over 3)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); rerun the same command to resume
"""


def _generate(args) -> None:
    from simulator.validation.files import check_output_file
    from simulator.validation.workload import WorkloadSpec, generate, read_length_trace, write_workload

    check_output_file(args.out, "workload file")

    lengths = args.lengths or ("trace" if args.trace else "uniform" if args.prompt_range or args.output_range else "fixed")
    trace_rows = None
    if lengths == "trace":
        if not args.trace:
            raise ConfigError("--lengths trace needs --trace FILE")
        trace_rows = read_length_trace(Path(args.trace), args.max_total_tokens)
    spec = WorkloadSpec(
        num_requests=args.num_requests,
        arrival=args.arrival,
        rate=args.rate,
        lengths=lengths,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        prompt_range=tuple(args.prompt_range) if args.prompt_range else None,
        output_range=tuple(args.output_range) if args.output_range else None,
        trace_lengths=trace_rows,
        trace_name=Path(args.trace).name if args.trace else None,
        vocab_size=args.vocab_size,
        min_token_id=args.min_token_id,
        repeat_fraction=args.repeat_fraction,
        repeat_span=args.repeat_span,
        seed=args.seed,
    )
    workload = generate(spec)
    write_workload(Path(args.out), workload)
    print(f"wrote {len(workload)} requests to {args.out} (workload {workload.workload_hash[:12]})")


def _replay(args) -> int:
    from simulator.validation.replay import ReplayOptions, replay
    from simulator.validation.replay_files import read_results
    from simulator.validation.workload import read_workload

    workload = read_workload(Path(args.workload))
    options = ReplayOptions(
        base_url=args.url,
        model=args.model,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        temperature=args.temperature,
        retry_failed=args.retry_failed,
        request_token_ids=not args.no_token_ids,
        progress=not args.no_progress,
    )
    try:
        summary = replay(workload, Path(args.out), options)
    except KeyboardInterrupt:
        results = read_results(Path(args.out))
        saved = len(results.records) if results else 0
        print(f"interrupted: {saved} request records are saved in {args.out}; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if summary.get("session") is None:
        print(summary["note"])
        return EXIT_OK
    print(f"session {summary['session']}: sent {summary['sent']} requests in {summary['wall_s']:.1f} s; " + ", ".join(f"{k} {v}" for k, v in summary["statuses"].items()) + f"; length mismatches {summary['length_mismatches']}")
    overhead = summary["client_overhead"]
    print(f"client overhead: send lag p99 {overhead['send_lag_s']['p99'] * 1000:.2f} ms, event-loop lag p99 {overhead['event_loop_lag_s']['p99'] * 1000:.2f} ms, {overhead['chunk_handling_s_mean'] * 1e6:.1f} us per chunk")
    failed = sum(count for status, count in summary["statuses"].items() if status != "ok")
    code = EXIT_OK
    if failed:
        print(f"error: {failed} of {summary['sent']} requests failed; every record is kept in {args.out}; rerun with --retry-failed to resend them (exit {EXIT_REQUESTS_FAILED})", file=sys.stderr)
        code = EXIT_REQUESTS_FAILED
    if not summary["after_scrape"]:
        print(
            f"error: the closing /metrics scrape failed: {summary['after_scrape_error']}; every record is kept in {args.out}; "
            f"rerun replay once the server is back: its opening scrape closes this session, unless the server restarted (exit {EXIT_CLOSING_SCRAPE_FAILED})",
            file=sys.stderr,
        )
        code = EXIT_CLOSING_SCRAPE_FAILED
    return code


def _calibrate(args) -> None:
    from simulator.validation.calibrate import calibrate
    from simulator.validation.files import atomic_write_json, check_output_file

    out = check_output_file(Path(args.out) if args.out else Path(args.replay) / "calibration.json", "calibration file")
    record = calibrate(Path(args.replay), args.num_speculative_tokens)
    atomic_write_json(out, record)
    for dropped in record["sessions_dropped"]:
        print(f"warning: replay session {dropped['session']} left out of the calibration: {dropped['reason']}", file=sys.stderr)
    if record["num_speculative_tokens"]:
        print(f"k = {record['num_speculative_tokens']} ({record['engine']}): acceptance rate {record['acceptance_rate']:.4f}, mean acceptance length {record['mean_acceptance_length']:.4f}")
        if record["proposal_probability"] is not None:
            print(f"a draft at {record['proposal_probability']:.4f} of decode steps (drafts per decode chunk {record['drafts_per_decode_chunk']:.4f}); simulate passes it on as proposal_probability")
    else:
        print(record["method"])
    print(f"KV cache: {record['kv_cache']['num_gpu_blocks']} blocks of {record['kv_cache']['block_size']} tokens; wrote {out}")


def _simulate(args) -> None:
    from simulator.profiles.hardware import get_device
    from simulator.validation.calibrate import read_calibration
    from simulator.validation.simulate import build_run_config, simulate
    from simulator.validation.workload import read_workload

    get_device(args.device)  # an unknown SKU stops here, naming the known ones
    workload = read_workload(Path(args.workload))
    calibration = read_calibration(Path(args.calibration))
    config = build_run_config(workload, calibration, model=args.model, device=args.device, profile_dir=args.profile_dir, proposer=args.proposer, draft_model=args.draft_model, seed=args.seed)
    record = simulate(config, workload, calibration, Path(args.out))
    summary = record["summary"]
    print(f"simulated {summary.get('num_requests')} requests: TTFT p50 {summary.get('ttft_p50_s')}, E2E p50 {summary.get('e2e_p50_s')}; wrote {args.out}")


def _compare(args) -> None:
    from simulator.validation.report import compare_files

    report = compare_files(Path(args.workload), Path(args.replay), Path(args.calibration), Path(args.simulated), Path(args.out))
    for metric, values in report["metrics"].items():
        mape = values["mape_pct"]
        print(f"{metric}: {values['requests']} requests, MAPE {'n/a' if mape is None else f'{mape:.1f}%'}")
    print(f"wrote the report to {args.out}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulator.validation",
        description="Validate the simulator against a vLLM server, request by request: generate -> replay -> calibrate -> simulate -> compare.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = parser.add_subparsers(dest="step", required=True)

    g = steps.add_parser("generate", help="write a seeded workload file (exact lengths, prompts as token ids)")
    g.add_argument("--out", required=True, help="workload file to write (JSONL)")
    g.add_argument("--num-requests", type=int, default=100)
    g.add_argument("--arrival", choices=("poisson", "fixed"), default="poisson")
    g.add_argument("--rate", type=float, default=2.0, help="requests per second")
    g.add_argument("--lengths", choices=("fixed", "uniform", "trace"), help="default: trace with --trace, uniform with ranges, else fixed")
    g.add_argument("--prompt-tokens", type=int, default=512)
    g.add_argument("--output-tokens", type=int, default=128)
    g.add_argument("--prompt-range", type=int, nargs=2, metavar=("MIN", "MAX"))
    g.add_argument("--output-range", type=int, nargs=2, metavar=("MIN", "MAX"))
    g.add_argument("--trace", help="CSV with num_prefill_tokens,num_decode_tokens (Vidur's trace format)")
    g.add_argument("--max-total-tokens", type=int, help="drop trace rows longer than this (the server's context)")
    g.add_argument("--vocab-size", type=int, default=32000)
    g.add_argument("--min-token-id", type=int, default=1000)
    g.add_argument("--repeat-fraction", type=float, default=0.0, help="share of prompt spans copied from earlier in the prompt")
    g.add_argument("--repeat-span", type=int, default=16)
    g.add_argument("--seed", type=int, default=0)

    r = steps.add_parser("replay", help="replay a workload open-loop against /v1/completions (resumes)", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--workload", required=True)
    r.add_argument("--url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    r.add_argument("--out", required=True, help="replay directory (created; reused to resume)")
    r.add_argument("--model", help="served model name (default: the first in /v1/models)")
    r.add_argument("--concurrency", type=int, default=256, help="requests in flight at most")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds without data before a request is a timeout")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--retry-failed", action="store_true", help="also resend requests recorded as failed")
    r.add_argument("--no-token-ids", action="store_true", help="do not ask for return_token_ids (servers older than vLLM 0.10.2)")
    r.add_argument("--no-progress", action="store_true")

    c = steps.add_parser("calibrate", help="acceptance and KV budget from the replay's /metrics scrapes")
    c.add_argument("--replay", required=True, help="replay directory")
    c.add_argument("--num-speculative-tokens", type=int, help="k the server ran with; > 0 requires spec-decode counters, 0 = off")
    c.add_argument("--out", help="calibration file (default: REPLAY/calibration.json)")

    s = steps.add_parser("simulate", help="simulate the same workload with the calibration")
    s.add_argument("--workload", required=True)
    s.add_argument("--calibration", required=True)
    s.add_argument("--out", required=True, help="directory for simulated.csv and simulated.json")
    s.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    s.add_argument("--device", default="a100", help="GPU SKU the server ran on: a100, h100 or h200 (default: a100)")
    s.add_argument("--profile-dir", help="a Vidur-format profile directory measured on that GPU (default: the built-in profile)")
    s.add_argument("--proposer", choices=("ngram", "draft"), default="ngram")
    s.add_argument("--draft-model")
    s.add_argument("--seed", type=int, default=0)

    m = steps.add_parser("compare", help="join measured and simulated per request; write the report")
    m.add_argument("--workload", required=True)
    m.add_argument("--replay", required=True)
    m.add_argument("--calibration", required=True)
    m.add_argument("--simulated", required=True, help="the simulate step's output directory")
    m.add_argument("--out", required=True, help="report directory")

    return parser


STEPS = {"generate": _generate, "replay": _replay, "calibrate": _calibrate, "simulate": _simulate, "compare": _compare}


# The `validation` extra: the client that talks to a server and reads /metrics.
EXTRA_MODULES = {"httpx": "httpx", "httpx_sse": "httpx-sse", "prometheus_client": "prometheus-client"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return STEPS[args.step](args) or 0
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
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
