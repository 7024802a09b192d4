"""Per-request results, the per-run summary and the one speedup rule (pure numpy/pandas, no simulation state).

The summary is a typed dataclass, :class:`RunSummary`, with one name per quantity: the
*realised* acceptance rate is ``realized_acceptance_rate`` (the input rate lives in the
configuration as ``acceptance_rate``), and preempted requests are counted once, as
``preemptions``.  It is also a read-only mapping, so sweeps and tests can keep reading
``summary["tpot_p50_s"]``; :meth:`RunSummary.as_dict` is what gets serialised.

Latency names follow ``vllm bench serve`` (TTFT, TPOT, ITL, E2EL), in seconds here (the
``_s`` suffix); the CLI prints them in milliseconds, as vLLM does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

import numpy as np

from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload

if TYPE_CHECKING:  # annotations only
    import pandas as pd

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
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 99)
STATISTICS = ("mean",) + tuple(f"p{p}" for p in PERCENTILES)


@dataclass(frozen=True)
class RunSummary(Mapping):
    """One run's figures, each under one name.  Seconds unless the name says otherwise.

    TPOT is per request, (E2E - TTFT) / (output tokens - 1), as ``vllm bench serve``
    computes it; ITL is every gap between two token emissions of a request (a verify step
    that accepts several tokens emits them at once, so it is one gap), pooled over requests.
    """

    num_requests: int
    total_input_tokens: int
    total_output_tokens: int
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    itl_mean_s: float
    itl_p50_s: float
    itl_p90_s: float
    itl_p99_s: float
    e2e_mean_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p99_s: float
    # vLLM's spec-decode counters: drafts = verify steps, draft tokens = proposed
    proposed_tokens: int
    accepted_tokens: int
    verify_steps: int
    realized_acceptance_rate: float  # accepted / proposed (vLLM's "acceptance rate"); NaN without speculation
    mean_acceptance_length: float  # 1 + accepted / verify steps (the bonus token counts); NaN without speculation
    makespan_s: float  # first arrival to last completion ("benchmark duration")
    throughput_tok_s: float  # output tokens per second
    request_throughput_req_s: float
    total_token_throughput_tok_s: float  # (input + output) tokens per second
    preemptions: int  # requests restarted after their KV cache was taken (vLLM's recompute preemption)
    peak_kv_blocks: int = 0
    kv_blocks_total: int = 0
    peak_kv_fraction: float = math.nan
    forward_passes: int = 0
    mean_scheduled_k: float = math.nan  # the fixed k, or a k schedule's average pick over planned steps
    # the median TPOT's 95% sampling interval over the requests (distribution-free: :func:`median_interval`)
    tpot_p50_low_s: float = math.nan
    tpot_p50_high_s: float = math.nan

    def as_dict(self) -> dict:
        return asdict(self)

    def __getitem__(self, key: str):
        if key not in _FIELD_NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(_FIELD_NAMES)

    def __len__(self) -> int:
        return len(_FIELD_NAMES)


_FIELD_NAMES = tuple(f.name for f in fields(RunSummary))


@dataclass
class RunResult:
    """``requests`` has :data:`REQUEST_COLUMNS`; ``provenance`` is a flat dict.

    ``acceptance_logs`` maps request id to its (proposed, accepted) pair per verify step;
    ``emission_times`` maps request id to the end of every step that gave the client tokens
    (seconds of simulated time), so a caller can pool the inter-token gaps of any subset of
    requests (the validation harness compares ITL over the requests a server completed).
    """

    config: RunConfig
    requests: pd.DataFrame
    summary: RunSummary
    provenance: dict
    acceptance_logs: dict = field(default_factory=dict)
    emission_times: dict = field(default_factory=dict)

    @property
    def startup_burst(self) -> int:
        """Requests released together at t = 0 by a closed loop (its first ``concurrency``); 0 otherwise."""
        return startup_burst(self.config)


def startup_burst(config: RunConfig) -> int:
    workload = config.workload
    return min(workload.concurrency, workload.num_requests) if isinstance(workload, ClosedLoopWorkload) else 0


def tpot(e2e_s: np.ndarray, ttft_s: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Time per output token after the first: (E2E - TTFT) / (output - 1); NaN for one-token outputs."""
    decode_tokens = np.asarray(output_tokens, dtype=float) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(decode_tokens > 0, (np.asarray(e2e_s) - np.asarray(ttft_s)) / decode_tokens, np.nan)


def inter_token_gaps(emission_times: Iterable[Sequence[float]]) -> np.ndarray:
    """Every request's gaps between consecutive token emissions, pooled (vLLM's ITL samples)."""
    gaps = [np.diff(np.asarray(times, dtype=float)) for times in emission_times if len(times) > 1]
    return np.concatenate(gaps) if gaps else np.empty(0)


def request_frame(requests) -> pd.DataFrame:
    """One row per simulated request (:data:`REQUEST_COLUMNS`), read off the requests Vidur ran."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    frame = pd.DataFrame(
        {
            "request_id": [r.id for r in requests],
            "arrival_s": [r.arrived_at for r in requests],
            "prompt_tokens": [r.total_tokens - r.output_tokens for r in requests],
            "output_tokens": [r.output_tokens for r in requests],
            "ttft_s": [r.prefill_completed_at - r.arrived_at for r in requests],
            "e2e_s": [r.completed_at - r.arrived_at for r in requests],
            "restarts": [r.num_restarts for r in requests],
            "verify_steps": [r.verify_steps for r in requests],
            "proposed_tokens": [r.proposed_tokens for r in requests],
            "accepted_tokens": [r.accepted_tokens for r in requests],
        }
    )
    frame["tpot_s"] = tpot(frame.e2e_s, frame.ttft_s, frame.output_tokens)
    return frame[list(REQUEST_COLUMNS)]


def _statistics(values: np.ndarray) -> dict:
    values = values[~np.isnan(values)]
    if not len(values):
        return {name: math.nan for name in STATISTICS}
    return {"mean": float(values.mean()), **{f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES}}


MEDIAN_CONFIDENCE_Z = 1.96  # a 95% interval


def median_interval(values: np.ndarray, z: float = MEDIAN_CONFIDENCE_Z) -> tuple[float, float]:
    """The median's distribution-free 95% interval: the order statistics at ranks n/2 -+ z sqrt(n)/2
    (the binomial method; no assumption on the latency's distribution).  A run of a few requests
    has a wide one: its median could move that far with another draw of acceptance and lengths, so
    two runs whose medians differ by less are not told apart (the pays-off sweep's ties)."""
    values = np.sort(values[~np.isnan(values)])
    n = len(values)
    if not n:
        return math.nan, math.nan
    half = z * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)  # 0-based ranks
    high = min(n - 1, math.ceil(n / 2 + half))
    return float(values[low]), float(values[high])


def summarize(requests: pd.DataFrame, makespan_s: float, extra: dict, itl_s: Optional[np.ndarray] = None) -> RunSummary:
    """Mean and p50/p90/p99 of each latency metric plus run-level counters.

    Acceptance follows vLLM: rate = accepted / proposed, mean acceptance length =
    1 + accepted / verify steps (the bonus token counts).  ``itl_s`` holds the pooled
    inter-token gaps (:func:`inter_token_gaps`); without them ITL is NaN.
    """
    values: dict = {}
    samples = {
        "ttft": requests["ttft_s"].to_numpy(dtype=float),
        "tpot": requests["tpot_s"].to_numpy(dtype=float),
        "itl": np.asarray(itl_s if itl_s is not None else [], dtype=float),
        "e2e": requests["e2e_s"].to_numpy(dtype=float),
    }
    for metric in LATENCY_METRICS:
        for name, value in _statistics(samples[metric]).items():
            values[f"{metric}_{name}_s"] = value
    values["tpot_p50_low_s"], values["tpot_p50_high_s"] = median_interval(samples["tpot"])
    proposed = int(requests["proposed_tokens"].sum())
    accepted = int(requests["accepted_tokens"].sum())
    steps = int(requests["verify_steps"].sum())
    inputs = int(requests["prompt_tokens"].sum())
    outputs = int(requests["output_tokens"].sum())
    per_second = (lambda amount: float(amount / makespan_s)) if makespan_s > 0 else (lambda amount: math.nan)
    return RunSummary(
        num_requests=int(len(requests)),
        total_input_tokens=inputs,
        total_output_tokens=outputs,
        proposed_tokens=proposed,
        accepted_tokens=accepted,
        verify_steps=steps,
        realized_acceptance_rate=accepted / proposed if proposed else math.nan,
        mean_acceptance_length=1 + accepted / steps if steps else math.nan,
        makespan_s=float(makespan_s),
        throughput_tok_s=per_second(outputs),
        request_throughput_req_s=per_second(len(requests)),
        total_token_throughput_tok_s=per_second(inputs + outputs),
        preemptions=int(requests["restarts"].sum()),
        **values,
        **extra,
    )


# Summary metrics where more is better; every other metric (a latency, "..._s") is better lower.
HIGHER_IS_BETTER = ("throughput_tok_s", "request_throughput_req_s", "total_token_throughput_tok_s")


def speedup(baseline: Mapping, run: Mapping, metric: str = "tpot_p50_s") -> float:
    """How many times better ``run`` is than ``baseline`` on one summary metric.

    The project's one speedup rule, used by every sweep and reproduction: baseline / run for
    a latency (``tpot_p50_s``, ``e2e_p50_s``, ...), run / baseline for a throughput.  Both
    arguments are summaries or flat records that hold ``metric``.
    """
    if metric in HIGHER_IS_BETTER:
        return run[metric] / baseline[metric]
    if not metric.endswith("_s"):
        raise ValueError(f"speedup: {metric!r} is neither a latency (..._s) nor one of {HIGHER_IS_BETTER}")
    return baseline[metric] / run[metric]
