"""Measured vs simulated, request by request (pure pandas; :mod:`report` writes the files).

Metrics are ``vllm bench serve``'s: TTFT, TPOT, ITL and E2EL, each summarised by its mean,
median and the percentiles of ``--metric-percentiles`` (default p99), plus request, output
and total-token throughput.  ITL is compared per request as the mean gap between content
chunks (measured) or between decode steps (simulated): with speculative decoding a chunk is
an engine step carrying 1 + accepted tokens.

Units, one policy as vLLM's: per-request values (``replay.jsonl``, ``simulated.csv``,
``comparison.csv``) are seconds, named ``*_s``; summaries (``report.json``, ``report.md``,
the printed lines) are milliseconds, named ``*_ms`` as in vLLM's result JSON.

Errors are signed ``(simulated - measured) / measured`` in percent, so a positive error
means the simulator predicts slower than the server was.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.validation.workload import Workload

METRICS = ("ttft", "tpot", "itl", "e2el")
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
DEFAULT_PERCENTILES = (99.0,)


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``--metric-percentiles``: comma-separated numbers in (0, 100), as vllm bench serve."""
    try:
        values = tuple(float(part) for part in str(text).split(","))
    except ValueError:
        raise ConfigError(f"--metric-percentiles {text!r}: expected comma-separated numbers such as 50,90,99") from None
    bad = [v for v in values if not 0 < v < 100]
    if bad:
        raise ConfigError(f"--metric-percentiles {text!r}: {bad[0]:g} is not a percentile strictly between 0 and 100")
    return tuple(sorted(set(values)))


def parse_percentile_metrics(text: str) -> tuple[str, ...]:
    """``--percentile-metrics``: which of ttft, tpot, itl, e2el get the percentiles."""
    names = tuple(part.strip().lower() for part in str(text).split(",") if part.strip())
    unknown = [n for n in names if n not in METRICS]
    if unknown or not names:
        raise ConfigError(f"--percentile-metrics {text!r}: expected a comma-separated subset of {','.join(METRICS)}")
    return names


def percentile_name(p: float) -> str:
    """vLLM's spelling: p99, p99.9."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


def latency_stats(values_s, percentiles=DEFAULT_PERCENTILES) -> dict:
    """Mean, median and percentiles in milliseconds (numpy's linear percentiles, as vLLM)."""
    values = np.asarray([v for v in values_s if v is not None and np.isfinite(v)], dtype=float) * 1000.0
    if not len(values):
        return {"mean_ms": None, "median_ms": None, **{f"{percentile_name(p)}_ms": None for p in percentiles}}
    stats = {"mean_ms": float(values.mean()), "median_ms": float(np.median(values))}
    stats.update({f"{percentile_name(p)}_ms": float(np.percentile(values, p)) for p in percentiles})
    return stats


def simulated_itl_s(frame: pd.DataFrame) -> pd.Series:
    """Per request, the mean time between decode steps: (E2E - TTFT) / steps, where the
    steps number output tokens - 1 - accepted tokens (a step emits 1 + its accepted tokens)."""
    if "accepted_tokens" not in frame.columns:
        return pd.Series(np.nan, index=frame.index)
    steps = frame["output_tokens"] - 1 - frame["accepted_tokens"]
    with np.errstate(divide="ignore", invalid="ignore"):
        return ((frame["e2e_s"] - frame["ttft_s"]) / steps).where(steps > 0)


def throughput(duration_s: Optional[float], completed: int, output_tokens: int, total_tokens: int) -> dict:
    """vllm bench serve's throughputs over a run's duration (first send to last finish)."""
    ok = duration_s is not None and duration_s > 0
    return {
        "duration_s": duration_s,
        "completed": completed,
        "request_throughput": completed / duration_s if ok else None,
        "output_throughput": output_tokens / duration_s if ok else None,
        "total_token_throughput": total_tokens / duration_s if ok else None,
    }


def simulated_metrics(frame: pd.DataFrame, percentiles=DEFAULT_PERCENTILES) -> dict:
    """The simulated run summarised the way vllm bench serve summarises a measured one."""
    columns = {"ttft": frame["ttft_s"], "tpot": frame["tpot_s"], "itl": simulated_itl_s(frame), "e2el": frame["e2e_s"]}
    duration = float((frame["arrival_s"] + frame["e2e_s"]).max() - frame["arrival_s"].min()) if len(frame) else None
    return {
        "latency": {metric: latency_stats(columns[metric].tolist(), percentiles) for metric in METRICS},
        "throughput": throughput(duration, int(len(frame)), int(frame["output_tokens"].sum()), int(frame["output_tokens"].sum() + frame["prompt_tokens"].sum())),
    }


def measured_metrics(records: list, duration_s: Optional[float], prompt_tokens: dict, percentiles=DEFAULT_PERCENTILES) -> dict:
    """A replay session summarised exactly as vllm bench serve summarises its run: successful
    requests only, ITL pooled over every gap between content chunks, TPOT over requests with
    more than one output token, throughput over the session's duration."""
    done = [r for r in records if r.get("status") == "ok"]
    gaps = [later[0] - earlier[0] for r in done for earlier, later in zip(r["chunks"], r["chunks"][1:])]
    output = sum(r["completion_tokens"] if r.get("completion_tokens") is not None else r["expected_output_tokens"] for r in done)
    columns = {"ttft": [r["ttft_s"] for r in done], "tpot": [r["tpot_s"] for r in done], "itl": gaps, "e2el": [r["e2e_s"] for r in done]}
    return {
        "latency": {metric: latency_stats(columns[metric], percentiles) for metric in METRICS},
        "throughput": throughput(duration_s, len(done), int(output), int(output + sum(prompt_tokens[r["request_id"]] for r in done))),
    }


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def summary_line(metrics: dict) -> str:
    """One printed line, in vllm bench serve's units (ms, req/s, tok/s)."""
    parts = []
    for metric in METRICS:
        stats = metrics["latency"][metric]
        parts.append(f"{LABELS[metric]} " + ", ".join(f"{key[:-3]} {_ms(value)}" for key, value in stats.items()))
    t = metrics["throughput"]
    if t["request_throughput"] is not None:
        parts.append(f"request throughput {t['request_throughput']:.2f} req/s, output throughput {t['output_throughput']:.1f} tok/s, total token throughput {t['total_token_throughput']:.1f} tok/s")
    return "; ".join(parts)


def check_same_workload(hashes: dict) -> str:
    """All inputs must come from one workload; ``hashes`` maps an input's name to its hash."""
    distinct = set(hashes.values())
    if len(distinct) != 1:
        listing = ", ".join(f"{name}: {str(value)[:12]}..." for name, value in hashes.items())
        raise ConfigError(f"the inputs come from different workloads ({listing})")
    return distinct.pop()


def measured_frame(workload: Workload, records: dict) -> pd.DataFrame:
    """One row per workload request; requests never replayed have status ``not_replayed``."""
    rows = []
    for request in workload.requests:
        record = records.get(request.request_id) or {}
        rows.append(
            {
                "request_id": request.request_id,
                "arrival_s": request.arrival_s,
                "prompt_tokens": request.prompt_tokens,
                "output_tokens": request.output_tokens,
                "status": record.get("status", "not_replayed"),
                "length_mismatch": bool(record.get("length_mismatch")),
                "measured_ttft_s": record.get("ttft_s"),
                "measured_tpot_s": record.get("tpot_s"),
                "measured_itl_s": _measured_itl(record),
                "measured_e2el_s": record.get("e2e_s"),
            }
        )
    return pd.DataFrame(rows)


def _measured_itl(record: dict) -> Optional[float]:
    """Mean gap between successive content chunks (vLLM's ITL values, averaged per request)."""
    chunks = record.get("chunks") or []
    if record.get("status") != "ok" or len(chunks) < 2:
        return None
    return (chunks[-1][0] - chunks[0][0]) / (len(chunks) - 1)


def join(measured: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """Per-request comparison; ``compared`` marks rows with a clean measurement."""
    sim = pd.DataFrame(
        {
            "request_id": simulated["request_id"],
            "simulated_output_tokens": simulated["output_tokens"],
            "simulated_ttft_s": simulated["ttft_s"],
            "simulated_tpot_s": simulated["tpot_s"],
            "simulated_itl_s": simulated_itl_s(simulated),
            "simulated_e2el_s": simulated["e2e_s"],
        }
    )
    frame = measured.merge(sim, on="request_id", how="left", validate="one_to_one")
    if frame["simulated_e2el_s"].isna().any():
        missing = frame.loc[frame["simulated_e2el_s"].isna(), "request_id"].tolist()[:5]
        raise ConfigError(f"the simulated results lack request(s) {missing}...")
    if (frame["simulated_output_tokens"] != frame["output_tokens"]).any():
        raise ConfigError("the simulated output lengths differ from the workload's")
    frame = frame.drop(columns="simulated_output_tokens")
    frame["compared"] = (frame["status"] == "ok") & ~frame["length_mismatch"]
    for metric in METRICS:
        measured_values = pd.to_numeric(frame[f"measured_{metric}_s"], errors="coerce").astype(float)
        frame[f"measured_{metric}_s"] = measured_values
        with np.errstate(divide="ignore", invalid="ignore"):
            signed = (frame[f"simulated_{metric}_s"] - measured_values) / measured_values * 100.0
        signed = signed.where(frame["compared"] & (measured_values > 0))
        frame[f"{metric}_err_pct"] = signed
        frame[f"{metric}_abs_err_pct"] = signed.abs()
    return frame


def error_summary(frame: pd.DataFrame, percentiles=DEFAULT_PERCENTILES, percentile_metrics=METRICS) -> dict:
    """Per metric over compared requests: measured and simulated mean, median and percentiles
    (ms), the error of each statistic, the median signed error, the mean absolute percentage
    error and the 90th percentile of the absolute error."""
    summary = {}
    compared = frame[frame["compared"]]
    for metric in METRICS:
        rows = compared.dropna(subset=[f"measured_{metric}_s", f"simulated_{metric}_s", f"{metric}_err_pct"])
        n = len(rows)
        chosen = percentiles if metric in percentile_metrics else ()
        measured = latency_stats(rows[f"measured_{metric}_s"].tolist(), chosen)
        simulated = latency_stats(rows[f"simulated_{metric}_s"].tolist(), chosen)
        summary[metric] = {
            "label": LABELS[metric],
            "requests": n,
            "measured": measured,
            "simulated": simulated,
            "error_pct": {key[:-3]: ((simulated[key] - measured[key]) / measured[key] * 100.0 if n and measured[key] else None) for key in measured},
            "median_signed_err_pct": float(rows[f"{metric}_err_pct"].median()) if n else None,
            "mape_pct": float(rows[f"{metric}_abs_err_pct"].mean()) if n else None,
            "p90_abs_err_pct": float(rows[f"{metric}_abs_err_pct"].quantile(0.9)) if n else None,
        }
    return summary


def measured_throughput(workload: Workload, records: dict, session_wall_s: list) -> dict:
    """Throughput of the replay: successful requests and their tokens over the sessions' wall
    time (first send to last finish, summed over sessions, as vllm bench serve's duration)."""
    done = [r for r in records.values() if r.get("status") == "ok"]
    prompts = {r.request_id: r.prompt_tokens for r in workload.requests}
    output = sum(r["completion_tokens"] if r.get("completion_tokens") is not None else r["expected_output_tokens"] for r in done)
    duration = float(sum(session_wall_s)) if session_wall_s else None
    return throughput(duration, len(done), int(output), int(output + sum(prompts[r["request_id"]] for r in done)))


def throughput_comparison(measured: dict, simulated: dict) -> dict:
    error = {}
    for key in ("request_throughput", "output_throughput", "total_token_throughput"):
        m, s = measured.get(key), simulated.get(key)
        error[key] = (s - m) / m * 100.0 if m and s is not None else None
    return {"measured": measured, "simulated": simulated, "error_pct": error}


def simulated_draft_probability(summary: dict, decode_tokens: int) -> Optional[float]:
    """Decode steps with a draft over all decode steps, as the simulator ran them.

    Every decode step emits 1 + its accepted tokens, so the steps number decode tokens minus
    accepted tokens; ``verify_steps`` counts those that carried a draft.
    """
    steps, accepted = summary.get("verify_steps"), summary.get("accepted_tokens")
    if steps is None or accepted is None or decode_tokens - accepted <= 0:
        return None
    return steps / (decode_tokens - accepted)


def acceptance_summary(calibration: dict, simulated_summary: dict, decode_tokens: int = 0, simulated_with: Optional[float] = None) -> dict:
    """Measured against simulated acceptance, and the probability of a draft at a decode step
    (measured: drafts per decode chunk; simulated: as run, and the input it ran with)."""
    measured = {
        "acceptance_rate": calibration.get("acceptance_rate"),
        "mean_acceptance_length": calibration.get("mean_acceptance_length"),
        "draft_probability": calibration.get("proposal_probability"),
    }
    # the summary calls the realised rate realized_acceptance_rate (older simulated.json files: acceptance_rate)
    realized = simulated_summary.get("realized_acceptance_rate", simulated_summary.get("acceptance_rate"))
    simulated = {"acceptance_rate": realized, "mean_acceptance_length": simulated_summary.get("mean_acceptance_length")}
    simulated["draft_probability"] = simulated_draft_probability(simulated_summary, decode_tokens) if calibration.get("num_speculative_tokens") else None
    return {
        "measured": measured,
        "simulated": simulated,
        "proposal_probability_input": simulated_with,
        "num_speculative_tokens": calibration.get("num_speculative_tokens"),
        "engine": calibration.get("engine"),
    }


def status_counts(frame: pd.DataFrame) -> dict:
    return {
        "total": int(len(frame)),
        "compared": int(frame["compared"].sum()),
        "length_mismatch": int(frame["length_mismatch"].sum()),
        "by_status": {k: int(v) for k, v in sorted(frame["status"].value_counts().items())},
    }
