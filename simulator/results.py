"""Per-request results and the per-run summary (pure pandas, no simulation state)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.config import RunConfig

REQUEST_COLUMNS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "restarts",
    "verify_steps",
    "proposed_tokens",
    "accepted_tokens",
)
LATENCY_METRICS = ("ttft_s", "tpot_s", "e2e_s")
PERCENTILES = (50, 90, 99)


@dataclass
class RunResult:
    """``requests`` has :data:`REQUEST_COLUMNS`; ``summary`` and ``provenance`` are flat dicts.

    ``acceptance_logs`` maps request id to its (proposed, accepted) pair per verify step.
    """

    config: RunConfig
    requests: pd.DataFrame
    summary: dict
    provenance: dict
    acceptance_logs: dict = field(default_factory=dict)


def tpot(e2e_s: np.ndarray, ttft_s: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Time per output token after the first: (E2E - TTFT) / (output - 1); NaN for one-token outputs."""
    decode_tokens = np.asarray(output_tokens, dtype=float) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(decode_tokens > 0, (np.asarray(e2e_s) - np.asarray(ttft_s)) / decode_tokens, np.nan)


def summarize(requests: pd.DataFrame, makespan_s: float, extra: dict) -> dict:
    """p50/p90/p99 of each latency metric plus run-level counters.

    Acceptance follows vLLM: rate = accepted / proposed, mean acceptance length =
    1 + accepted / verify steps (the bonus token counts).
    """
    summary: dict = {"num_requests": int(len(requests))}
    for metric in LATENCY_METRICS:
        values = requests[metric].dropna().to_numpy(dtype=float)
        for p in PERCENTILES:
            summary[f"{metric[:-2]}_p{p}_s"] = float(np.percentile(values, p)) if len(values) else float("nan")
    proposed = int(requests["proposed_tokens"].sum())
    accepted = int(requests["accepted_tokens"].sum())
    steps = int(requests["verify_steps"].sum())
    summary["proposed_tokens"] = proposed
    summary["accepted_tokens"] = accepted
    summary["verify_steps"] = steps
    summary["acceptance_rate"] = accepted / proposed if proposed else float("nan")
    summary["mean_acceptance_length"] = 1 + accepted / steps if steps else float("nan")
    summary["makespan_s"] = float(makespan_s)
    summary["throughput_tok_s"] = float(requests["output_tokens"].sum() / makespan_s) if makespan_s > 0 else float("nan")
    summary["restarts"] = int(requests["restarts"].sum())
    summary.update(extra)
    return summary
