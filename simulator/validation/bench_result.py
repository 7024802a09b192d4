"""The ``bench`` result in ``vllm bench serve``'s terms: its flat JSON keys and its printed table.

The measured side uses vLLM's keys at the top level (``completed``, ``failed``, ``duration``,
``total_input_tokens``, ``request_throughput``, ``output_throughput``, ``mean_ttft_ms``,
``p99_itl_ms``, ``std_tpot_ms``, ... and, with ``--save-detailed``, the per-request arrays), so
a tool that reads vLLM's result files reads this one; ``simulated`` holds the same keys for the
simulated run and ``error_pct`` the signed error (simulated - measured) / measured in percent.

Definitions are vLLM's: TTFT, TPOT and E2EL per request; ITL every gap between consecutive
chunks (simulated: token emissions), pooled; goodput the requests meeting every ``--goodput``
SLO (a request of one output token has TPOT 0 there), per second.  Latency statistics on both
sides are over the requests the server completed, so they compare like with like; the
throughputs are each run's own: the measured one over the measured window (the completed
requests on the workload's timeline, from its first arrival to the last finish, however many
replay sessions ran them), the simulated one over every request from the first arrival to the
last finish.  Where vLLM
differs: a short stream is a failure here (vLLM counts it successful), mean, median and std are
given for all four metrics (vLLM gives a metric only when it is in ``--percentile-metrics``),
``start_times`` are seconds after the replay session's start (vLLM: its process clock), and
``generated_texts``, ``rps_change_events`` (wall-clock times) and ``rtfx`` are not written.
``max_output_tokens_per_s`` and ``max_concurrent_requests`` are vLLM's (:func:`peak_output`),
on both sides.  The only wall-clock value in the file is vLLM's own ``date``; everything under
``simulated`` is a pure function of the workload, the calibration and the seeds.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simulator.validation.compare import METRICS, chunk_gaps, latency_stats, percentile_name, pooled, simulated_duration
from simulator.validation.random_dataset import json_rate
from simulator.validation.replay_files import received_tokens

GOODPUT_METRICS = ("ttft", "tpot", "e2el")
# per-request arrays vLLM keeps without --save-detailed, and the ones --save-detailed adds
ARRAYS = ("latencies", "queue_times")
DETAILED = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "errors")
TITLES = {"ttft": "Time to First Token", "tpot": "Time per Output Token (excl. 1st token)", "itl": "Inter-token Latency", "e2el": "End-to-end Latency"}


def latency_keys(values: dict, percentiles, percentile_metrics) -> dict:
    """vLLM's flat latency keys (``mean_ttft_ms``, ``p99_itl_ms``, ...) from samples in seconds."""
    flat = {}
    for metric in METRICS:
        stats = latency_stats(values[metric], percentiles if metric in percentile_metrics else ())
        flat.update({f"{key[:-3]}_{metric}_ms": value for key, value in stats.items()})
    return flat


def goodput(per_request: list[dict], slos_ms: dict, duration_s: Optional[float]) -> Optional[float]:
    """Requests meeting every SLO (milliseconds) per second, as vLLM counts them; None without SLOs."""
    if not slos_ms:
        return None
    good = sum(all((r[m] if r[m] is not None else 0.0) * 1000 <= slo for m, slo in slos_ms.items()) for r in per_request)
    return good / duration_s if duration_s else None


def peak_output(requests: list) -> dict:
    """vllm bench serve's ``max_output_tokens_per_s`` and ``max_concurrent_requests``, computed
    as its ``calculate_metrics`` computes them, from (start, chunk times after start, latency)
    per successful request: one-second buckets from the earliest start; a bucket counts one
    output event per content chunk (vLLM adds one per ITL gap, so with speculative decoding a
    chunk of several tokens counts once) and the requests active in it; each is the largest
    bucket's, taken apart (the busiest second for tokens need not be the most crowded one)."""
    if not requests:
        return {"max_output_tokens_per_s": 0.0, "max_concurrent_requests": 0}
    first = min(start for start, _, _ in requests)
    last = max(start + latency for start, _, latency in requests)
    seconds = int(np.ceil(last - first)) + 1
    tokens, active = np.zeros(seconds), np.zeros(seconds)
    for start, chunk_times, latency in requests:
        for t in chunk_times:
            bucket = int(start + t - first)
            if 0 <= bucket < seconds:
                tokens[bucket] += 1
        active[int(start - first) : int(start + latency - first) + 1] += 1
    return {"max_output_tokens_per_s": float(tokens.max()), "max_concurrent_requests": int(active.max())}


def _spec_decode(drafts, draft_tokens, accepted, per_position) -> dict:
    if not draft_tokens:
        return {}
    return {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100,
        "spec_decode_acceptance_length": 1 + accepted / drafts if drafts else 0.0,
        "spec_decode_num_drafts": int(drafts or 0),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
        "spec_decode_per_position_acceptance_rates": per_position,
    }


def _measured_timing(arrival_s: float, record: dict) -> tuple:
    """(start, chunk times after it, latency) of one measured request, its start placed on the
    workload's timeline (its arrival plus how late it was sent), so requests of several replay
    sessions share one clock, as :func:`sessions.measured_window_s` places them."""
    start = arrival_s + (record.get("send_lag_s") or 0.0)
    return start, [c[0] for c in record["chunks"]], record["e2e_s"]


def measured_side(workload, records: dict, throughput: dict, calibration: dict, completed_ids: list, slos_ms: dict, percentiles, percentile_metrics, detailed: bool) -> dict:
    done = [records[rid] for rid in completed_ids]
    values = {
        "ttft": [r["ttft_s"] for r in done],
        "tpot": [r["tpot_s"] for r in done],
        "itl": [g for r in done for g in chunk_gaps(r["chunks"])],
        "e2el": [r["e2e_s"] for r in done],
    }
    duration = throughput["duration_s"]
    result = {
        "duration": duration,
        "completed": len(done),
        "failed": len(workload) - len(done),
        "total_input_tokens": throughput["total_input_tokens"],
        "total_output_tokens": throughput["total_output_tokens"],
        "request_throughput": throughput["request_throughput"],
        "request_goodput": goodput([{"ttft": r["ttft_s"], "tpot": r["tpot_s"], "e2el": r["e2e_s"]} for r in done], slos_ms, duration),
        "output_throughput": throughput["output_throughput"],
        "total_token_throughput": throughput["total_token_throughput"],
        **peak_output([_measured_timing(workload.requests[rid].arrival_s, records[rid]) for rid in completed_ids]),
    }
    ok = {rid: records.get(rid) or {} for rid in range(len(workload))}
    arrays = {
        "input_lens": [r.prompt_tokens for r in workload.requests],
        "output_lens": [received_tokens(ok[rid]) if ok[rid].get("status") == "ok" else 0 for rid in range(len(workload))],
        "ttfts": [ok[rid].get("ttft_s") or 0.0 if ok[rid].get("status") == "ok" else 0.0 for rid in range(len(workload))],
        "itls": [chunk_gaps(ok[rid]["chunks"]) if ok[rid].get("status") == "ok" else [] for rid in range(len(workload))],
        "latencies": [ok[rid].get("e2e_s") or 0.0 if ok[rid].get("status") == "ok" else 0.0 for rid in range(len(workload))],
        "start_times": [ok[rid].get("send_s") for rid in range(len(workload))],
        "queue_times": [ok[rid].get("send_lag_s") for rid in range(len(workload))],
        "errors": ["" if ok[rid].get("status") == "ok" else (ok[rid].get("error") or "not sent") for rid in range(len(workload))],
    }
    result.update({key: arrays[key] for key in (ARRAYS + DETAILED if detailed else ARRAYS)})
    # as the calibrated k counts them (under --force another k than the server's; V0: drafts are draft tokens / k)
    counts = calibration.get("counts_at_k") or calibration.get("counts") or {}
    if calibration.get("num_speculative_tokens"):
        result.update(_spec_decode(counts.get("drafts"), counts.get("draft_tokens"), counts.get("accepted_tokens"), list(calibration.get("acceptance_per_position_unconditional") or [])))
    result.update(latency_keys(values, percentiles, percentile_metrics))
    return result


def _simulated_timing(row, gaps: list) -> tuple:
    """(start, emission times after it, latency) of one simulated request: it starts at its
    arrival, emits its first token at its TTFT and then after each gap, as vLLM times chunks."""
    times = list(np.cumsum([float(row.ttft_s)] + [float(g) for g in gaps]))
    return float(row.arrival_s), times, float(row.e2e_s)


def simulated_side(frame: pd.DataFrame, itls: dict, summary: dict, completed_ids: list, slos_ms: dict, percentiles, percentile_metrics, detailed: bool, speculating: bool) -> dict:
    by_id = frame.set_index("request_id")
    chosen = by_id.loc[completed_ids] if completed_ids else by_id.iloc[0:0]
    values = {
        "ttft": chosen["ttft_s"].tolist(),
        "tpot": chosen["tpot_s"].tolist(),
        "itl": pooled(itls, completed_ids),
        "e2el": chosen["e2e_s"].tolist(),
    }
    duration = simulated_duration(frame)
    output, prompt = int(frame["output_tokens"].sum()), int(frame["prompt_tokens"].sum())
    rows = [{"ttft": t, "tpot": (p if p == p else 0.0), "e2el": e} for t, p, e in zip(frame["ttft_s"], frame["tpot_s"], frame["e2e_s"])]
    result = {
        "duration": duration,
        "completed": int(len(frame)),
        "failed": 0,
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "request_throughput": len(frame) / duration if duration else None,
        "request_goodput": goodput(rows, slos_ms, duration),
        "output_throughput": output / duration if duration else None,
        "total_token_throughput": (output + prompt) / duration if duration else None,
        **peak_output([_simulated_timing(row, itls.get(int(row.request_id), [])) for row in frame.itertuples()]),
    }
    arrays = {
        "input_lens": frame["prompt_tokens"].astype(int).tolist(),
        "output_lens": frame["output_tokens"].astype(int).tolist(),
        "ttfts": frame["ttft_s"].tolist(),
        "itls": [itls.get(int(rid), []) for rid in frame["request_id"]],
        "latencies": frame["e2e_s"].tolist(),
        "start_times": frame["arrival_s"].tolist(),
        "queue_times": [0.0] * len(frame),
        "errors": [""] * len(frame),
    }
    result.update({key: arrays[key] for key in (ARRAYS + DETAILED if detailed else ARRAYS)})
    if speculating:
        result.update(_spec_decode(summary.get("verify_steps"), summary.get("proposed_tokens"), summary.get("accepted_tokens"), None))
    result.update(latency_keys(values, percentiles, percentile_metrics))
    return result


def error_pct(measured: dict, simulated: dict) -> dict:
    """(simulated - measured) / measured in percent for every rate and latency key both sides have."""
    keys = ["duration", "request_throughput", "request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests",
            "spec_decode_acceptance_rate", "spec_decode_acceptance_length"]
    keys += [key for key in measured if key.endswith("_ms")]
    errors = {}
    for key in keys:
        m, s = measured.get(key), simulated.get(key)
        if key in measured or key in simulated:
            errors[key] = (s - m) / m * 100.0 if isinstance(m, (int, float)) and isinstance(s, (int, float)) and m else None
    return errors


def header(date: str, backend: str, label: Optional[str], model_id: str, num_prompts: int, request_rate: float, burstiness: float, max_concurrency: Optional[int],
           tokenizer: Optional[str] = None, metadata: Optional[dict] = None, ramp_up: Optional[tuple] = None) -> dict:
    """vLLM's leading keys, in its order: the setup, ``--metadata``'s pairs, then the traffic
    (and the ramp-up, when there is one)."""
    head = {
        "date": date,
        "endpoint_type": backend,
        "backend": backend,
        "label": label,
        "model_id": model_id,
        "tokenizer_id": tokenizer,  # recorded only: prompts are token ids, no tokenizer is loaded
        "num_prompts": num_prompts,
    }
    head.update(metadata or {})
    head.update({"request_rate": json_rate(request_rate), "burstiness": json_rate(burstiness), "max_concurrency": max_concurrency})
    if ramp_up is not None:
        head.update(dict(zip(("ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"), ramp_up)))
    return head


def _cell(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _error(value) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def render(result: dict, percentiles, percentile_metrics) -> str:
    """vllm bench serve's summary table, with a simulated and an error column."""
    sim, err = result["simulated"] or {}, result["error_pct"]  # no simulated side when nothing completed
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=78, c="="), f"{'':<40} {'measured':>11} {'simulated':>11} {'error':>9}"]

    def row(label: str, key: str, digits: int = 2) -> None:
        lines.append(f"{label:<40} {_cell(result.get(key), digits):>11} {_cell(sim.get(key), digits):>11} {_error(err.get(key)) if key in err else '':>9}")

    row("Successful requests:", "completed")
    row("Failed requests:", "failed")
    if result.get("max_concurrency") is not None:
        lines.append(f"{'Maximum request concurrency:':<40} {result['max_concurrency']:>11}")
    if result.get("request_rate") != "inf":
        lines.append(f"{'Request rate configured (RPS):':<40} {result['request_rate']:>11.2f}")
    row("Benchmark duration (s):", "duration")
    row("Total input tokens:", "total_input_tokens")
    row("Total generated tokens:", "total_output_tokens")
    row("Request throughput (req/s):", "request_throughput")
    if result.get("request_goodput") is not None:
        row("Request goodput (req/s):", "request_goodput")
    row("Output token throughput (tok/s):", "output_throughput")
    row("Peak output token throughput (tok/s):", "max_output_tokens_per_s")
    row("Peak concurrent requests:", "max_concurrent_requests")
    row("Total token throughput (tok/s):", "total_token_throughput")
    for metric in METRICS:
        lines.append("{s:{c}^{n}}".format(s=TITLES[metric], n=78, c="-"))
        name = metric.upper()
        row(f"Mean {name} (ms):", f"mean_{metric}_ms")
        row(f"Median {name} (ms):", f"median_{metric}_ms")
        row(f"Std {name} (ms):", f"std_{metric}_ms")
        if metric in percentile_metrics:
            for p in percentiles:
                word = percentile_name(p)
                row(f"P{word[1:]} {name} (ms):", f"{word}_{metric}_ms")
    if "spec_decode_acceptance_rate" in result:
        lines.append("{s:{c}^{n}}".format(s="Speculative Decoding", n=78, c="-"))
        row("Acceptance rate (%):", "spec_decode_acceptance_rate")
        row("Acceptance length:", "spec_decode_acceptance_length")
        row("Drafts:", "spec_decode_num_drafts")
        row("Draft tokens:", "spec_decode_draft_tokens")
        row("Accepted tokens:", "spec_decode_accepted_tokens")
    lines.append("=" * 78)
    return "\n".join(lines)
