"""``python -m simulator``'s printed summary: ``vllm bench serve``'s layout and names (latencies in
ms), then the speculation, the simulator's own figures, the limits and where they came from, and
the ``vllm serve`` and ``vllm bench serve`` lines of what was simulated.  Pure: a result in, text out.
"""

from __future__ import annotations

import math
from typing import Optional

from simulator.cli import vllm_serve

WIDTH = 50


def _rule(title: str = "", fill: str = "-") -> str:
    return f"{' ' + title + ' ' if title else '':{fill}^{WIDTH}}"


def _line(label: str, value) -> str:
    if isinstance(value, float):
        value = "n/a" if math.isnan(value) else f"{value:.2f}"
    return f"{label:<40} {value}"


LATENCY_SECTIONS = (
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2e", "E2EL", "End-to-end Latency"),
)


def format_summary(result, acceptance_note: Optional[str] = None, inputs=None, serve: Optional[str] = None) -> str:
    """The summary in ``vllm bench serve``'s layout and names (latencies in ms), then the
    speculation, the simulator's own figures, the limits and where they came from, and the
    ``vllm serve`` line of what was simulated (``inputs``: a run from flags,
    :class:`simulator.cli.simulate.Inputs`; ``serve``: its ``vllm serve`` line, None for another engine's proposer)."""
    s, config = result.summary, result.config
    lines = [
        _rule("Simulated Serving Result", "="),
        _line("Successful requests:", s.num_requests),
        _line("Benchmark duration (s):", s.makespan_s),
        _line("Total input tokens:", s.total_input_tokens),
        _line("Total generated tokens:", s.total_output_tokens),
        _line("Request throughput (req/s):", s.request_throughput_req_s),
        _line("Output token throughput (tok/s):", s.throughput_tok_s),
        _line("Total Token throughput (tok/s):", s.total_token_throughput_tok_s),
    ]
    for key, short, title in LATENCY_SECTIONS:
        lines.append(_rule(title))
        for stat, label in (("mean", "Mean"), ("p50", "Median"), ("p90", "P90"), ("p99", "P99")):
            lines.append(_line(f"{label} {short} (ms):", s[f"{key}_{stat}_s"] * 1e3))
    lines += _speculation_lines(s, config.speculation, acceptance_note)
    lines.append(_rule("Simulator"))
    lines.append(f"peak KV {s.peak_kv_blocks} / {s.kv_blocks_total} blocks ({100 * s.peak_kv_fraction:.1f}%), preemptions {s.preemptions}")
    if inputs is None:
        lines.append(f"max_num_seqs {config.batch_size_cap}, max_num_batched_tokens {config.chunk_size}")
    else:
        lines.append(f"scheduler: {inputs.limits.describe()}")
        lines.append(f"vLLM {inputs.vllm_version}, engine profile {config.engine} (simulator/profiles/engines.toml)")
        if inputs.fitted is not None:
            lines.append(f"step costs {inputs.fitted.describe()} (--engine-profile)")
    burst = result.startup_burst
    if burst:
        frame = result.requests.sort_values("request_id")
        first, rest = frame["ttft_s"].iloc[:burst], frame["ttft_s"].iloc[burst:]
        rest_text = f"{rest.median() * 1e3:.2f} ms for the other {len(rest)}" if len(rest) else "no other requests"
        lines.append(
            f"start-up burst: the first {burst} requests arrive together at t = 0 and are included above (as in vllm bench serve); "
            f"their median TTFT is {first.median() * 1e3:.2f} ms, {rest_text} (column startup_burst in --requests-csv)"
        )
    lines.append("provenance: " + ", ".join(f"{k}={v}" for k, v in result.provenance.items() if k != "profile_sha256"))
    if inputs is not None:
        lines += _command_lines(inputs, config.speculation, serve)
    lines.append(_rule(fill="="))
    return "\n".join(lines)


def _speculation_lines(s, spec, acceptance_note: Optional[str]) -> list[str]:
    """The speculation section: the proposer, k or schedule, what was verified and accepted."""
    lines = [_rule("Speculative Decoding")]
    if not spec.enabled:
        lines.append("speculation off")
    else:
        k = f"k = {spec.num_speculative_tokens}" + (f" at most (schedule {[list(r) for r in spec.k_schedule]})" if spec.k_schedule else "")
        lines.append(f"{spec.proposer}, {k}, mean scheduled k {s.mean_scheduled_k:.2f}")
        if spec.adaptive_verification and s.verify_steps:
            lines.append(f"adaptive verification: {s.proposed_tokens / s.verify_steps:.2f} of {spec.num_speculative_tokens} drafts verified per step on average "
                         "(the drafter drafts all of them)")
        if acceptance_note:
            lines.append(f"ran with: {acceptance_note}")
        if s.verify_steps == 0:
            lines.append("no drafts were proposed (the k schedule chose k = 0 at every step)")
        else:
            lines += [
                _line("Acceptance rate (%):", 100 * s.realized_acceptance_rate),
                _line("Acceptance length:", s.mean_acceptance_length),
                _line("Drafts:", s.verify_steps),
                _line("Draft tokens:", s.proposed_tokens),
                _line("Accepted tokens:", s.accepted_tokens),
                "(acceptance rate = accepted / draft tokens, as vLLM reports it: below the per-token rate, because a "
                "rejection ends the chain and the positions after it count as rejected)",
            ]
    return lines


def _command_lines(inputs, spec, serve: Optional[str]) -> list[str]:
    """The ``vllm serve`` and ``vllm bench serve`` lines of what was simulated."""
    lines = []
    if serve:
        lines.append(f"as vllm serve: {serve}")
        hint = vllm_serve.served_name_hint(inputs.served_model_name)
        if hint:
            lines.append(hint)
    if inputs.bench_serve:
        lines.append(f"the same workload as vllm bench serve: {inputs.bench_serve}")
        if spec.k_schedule and not vllm_serve.at_least(inputs.vllm_version, vllm_serve.DYNAMIC_SD_VERSION):
            lines.append(
                f"note: num_speculative_tokens_per_batch_size needs vLLM {vllm_serve.DYNAMIC_SD_VERSION} or later; this run "
                f"names vLLM {inputs.vllm_version} (--vllm-version), which refuses the key"
            )
    else:
        lines.append(f"no vllm serve line: --proposer {spec.proposer} is {spec.kind.engine}'s")
    return lines
