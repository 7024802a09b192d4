"""Measured vs simulated, request by request (pure pandas; :mod:`report` writes the files).

Metrics are ``vllm bench serve``'s: TTFT, TPOT, ITL and E2EL, each summarised by its mean,
median, standard deviation and the percentiles of ``--metric-percentiles`` (default p99), plus
request, output and total-token throughput.

ITL has one definition everywhere, vLLM's: every gap between two consecutive content chunks
of a request (measured) or two consecutive token emissions (simulated: the end of each step
that gave the request tokens), pooled over the requests, its statistics taken over the pooled
gaps.  With speculative decoding a chunk is an engine step carrying 1 + accepted tokens, so
ITL is per step and TPOT per token.  A request has no single ITL value under this
definition, so ITL has no per-request error: its row compares the two pooled distributions.

Throughput counts what the client received: completed requests and the tokens they streamed
(never the tokens asked for), over the measured window (:func:`sessions.measured_window_s`).

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

from simulator.util.errors import ConfigError
from simulator.validation.replay_files import received_tokens
from simulator.validation.sessions import measured_window_s, total_active_s
from simulator.validation.workload import Workload

METRICS = ("ttft", "tpot", "itl", "e2el")
PER_REQUEST = ("ttft", "tpot", "e2el")  # metrics with one value per request (ITL's samples are gaps)
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
DEFAULT_PERCENTILES = (99.0,)
# what the measured throughput divides by, in words for report.json and report.md
WINDOW_WORDS = (
    "from the workload's first arrival to the last completed request's finish, each request placed at its "
    "arrival time, so a resend or resume session overlays the first run's timeline instead of adding its own span"
)


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``--metric-percentiles``: comma-separated numbers in [0, 100], as vllm bench serve takes
    them (``np.percentile``: 0 is the minimum, 100 the maximum)."""
    try:
        values = tuple(float(part) for part in str(text).split(","))
    except ValueError:
        raise ConfigError(f"--metric-percentiles {text!r}: expected comma-separated numbers such as 50,90,99") from None
    bad = [v for v in values if not 0 <= v <= 100]
    if bad:
        raise ConfigError(f"--metric-percentiles {text!r}: {bad[0]:g} is not a percentile from 0 to 100")
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
    """Mean, median, standard deviation and percentiles in milliseconds, as vLLM computes them
    (numpy's mean, median, population std and linear percentiles); None without samples."""
    values = np.asarray([v for v in values_s if v is not None and np.isfinite(v)], dtype=float) * 1000.0
    keys = ("mean_ms", "median_ms", "std_ms") + tuple(f"{percentile_name(p)}_ms" for p in percentiles)
    if not len(values):
        return dict.fromkeys(keys)
    stats = {"mean_ms": float(values.mean()), "median_ms": float(np.median(values)), "std_ms": float(values.std())}
    stats.update({f"{percentile_name(p)}_ms": float(np.percentile(values, p)) for p in percentiles})
    return stats


def chunk_gaps(chunks) -> list[float]:
    """vLLM's ITL samples of one measured request: the gap between each two consecutive content
    chunks (``chunks`` holds [seconds after send, tokens] pairs)."""
    return [later[0] - earlier[0] for earlier, later in zip(chunks, chunks[1:])]


def pooled(gaps_by_request: dict, request_ids) -> list[float]:
    """The ITL samples of ``request_ids``, pooled in request order (vLLM's ``itls += output.itl``)."""
    return [gap for rid in request_ids for gap in gaps_by_request.get(int(rid), ())]


def measured_itls(records: dict) -> dict:
    """request id -> its ITL samples, for the requests whose last record is a success."""
    return {rid: chunk_gaps(r.get("chunks") or []) for rid, r in records.items() if r.get("status") == "ok"}


def throughput(duration_s: Optional[float], completed: int, output_tokens: int, total_tokens: int) -> dict:
    """vllm bench serve's throughputs over a run's duration."""
    ok = duration_s is not None and duration_s > 0
    return {
        "duration_s": duration_s,
        "completed": completed,
        "total_output_tokens": output_tokens,
        "total_input_tokens": total_tokens - output_tokens,
        "request_throughput": completed / duration_s if ok else None,
        "output_throughput": output_tokens / duration_s if ok else None,
        "total_token_throughput": total_tokens / duration_s if ok else None,
    }


def simulated_duration(frame: pd.DataFrame) -> Optional[float]:
    """First arrival to last finish of the simulated run."""
    return float((frame["arrival_s"] + frame["e2e_s"]).max() - frame["arrival_s"].min()) if len(frame) else None


def simulated_metrics(frame: pd.DataFrame, itls: dict, percentiles=DEFAULT_PERCENTILES) -> dict:
    """The simulated run summarised the way vllm bench serve summarises a measured one
    (``itls``: request id -> the gaps between its token emissions, seconds)."""
    columns = {"ttft": frame["ttft_s"].tolist(), "tpot": frame["tpot_s"].tolist(), "itl": pooled(itls, frame["request_id"]), "e2el": frame["e2e_s"].tolist()}
    output = int(frame["output_tokens"].sum())
    return {
        "latency": {metric: latency_stats(columns[metric], percentiles) for metric in METRICS},
        "throughput": throughput(simulated_duration(frame), int(len(frame)), output, output + int(frame["prompt_tokens"].sum())),
    }


def measured_metrics(records: list, duration_s: Optional[float], prompt_tokens: dict, percentiles=DEFAULT_PERCENTILES) -> dict:
    """A replay session summarised as vllm bench serve summarises its run: successful requests
    only (a ``short`` stream is not one), ITL pooled over every gap between content chunks, TPOT
    over requests with more than one output token, output tokens as received, throughput over
    the session's active time."""
    done = [r for r in records if r.get("status") == "ok"]
    output = sum(received_tokens(r) for r in done)
    columns = {"ttft": [r["ttft_s"] for r in done], "tpot": [r["tpot_s"] for r in done], "itl": [g for r in done for g in chunk_gaps(r["chunks"])], "e2el": [r["e2e_s"] for r in done]}
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
                "measured_e2el_s": record.get("e2e_s"),
            }
        )
    return pd.DataFrame(rows)


def join(measured: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """Per-request comparison; ``compared`` marks rows with a clean measurement."""
    sim = pd.DataFrame(
        {
            "request_id": simulated["request_id"],
            "simulated_output_tokens": simulated["output_tokens"],
            "simulated_ttft_s": simulated["ttft_s"],
            "simulated_tpot_s": simulated["tpot_s"],
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
    for metric in PER_REQUEST:
        measured_values = pd.to_numeric(frame[f"measured_{metric}_s"], errors="coerce").astype(float)
        frame[f"measured_{metric}_s"] = measured_values
        with np.errstate(divide="ignore", invalid="ignore"):
            signed = (frame[f"simulated_{metric}_s"] - measured_values) / measured_values * 100.0
        signed = signed.where(frame["compared"] & (measured_values > 0))
        frame[f"{metric}_err_pct"] = signed
        frame[f"{metric}_abs_err_pct"] = signed.abs()
    return frame


def error_summary(frame: pd.DataFrame, measured_gaps: dict, simulated_gaps: dict, percentiles=DEFAULT_PERCENTILES, percentile_metrics=METRICS) -> dict:
    """Per metric over compared requests: measured and simulated mean, median, std and
    percentiles (ms) and the error of each statistic; for the per-request metrics also the
    median signed error, the mean absolute percentage error and the 90th percentile of the
    absolute error.  ITL pools the compared requests' gaps (``measured_gaps``,
    ``simulated_gaps``: request id -> seconds) on each side."""
    summary = {}
    compared = frame[frame["compared"]]
    for metric in METRICS:
        chosen = percentiles if metric in percentile_metrics else ()
        if metric == "itl":
            ids = compared["request_id"].tolist()
            measured, simulated = latency_stats(pooled(measured_gaps, ids), chosen), latency_stats(pooled(simulated_gaps, ids), chosen)
            n, rows = len(ids), None
        else:
            rows = compared.dropna(subset=[f"measured_{metric}_s", f"simulated_{metric}_s", f"{metric}_err_pct"])
            n = len(rows)
            measured = latency_stats(rows[f"measured_{metric}_s"].tolist(), chosen)
            simulated = latency_stats(rows[f"simulated_{metric}_s"].tolist(), chosen)
        summary[metric] = {
            "label": LABELS[metric],
            "requests": n,
            "measured": measured,
            "simulated": simulated,
            "error_pct": {key[:-3]: ((simulated[key] - measured[key]) / measured[key] * 100.0 if measured[key] and simulated[key] is not None else None) for key in measured},
            "median_signed_err_pct": float(rows[f"{metric}_err_pct"].median()) if rows is not None and n else None,
            "mape_pct": float(rows[f"{metric}_abs_err_pct"].mean()) if rows is not None and n else None,
            "p90_abs_err_pct": float(rows[f"{metric}_abs_err_pct"].quantile(0.9)) if rows is not None and n else None,
        }
    return summary


def measured_throughput(workload: Workload, records: dict, sessions: list) -> dict:
    """Throughput of the replay: requests whose last record is a success and the tokens they
    received, over the measured window (:func:`sessions.measured_window_s`: the completed
    requests on the workload's timeline, however many sessions ran them).  The sessions'
    own times (:func:`sessions.describe`) are listed beside it, not divided by."""
    done = [r for r in records.values() if r.get("status") == "ok"]
    prompts = {r.request_id: r.prompt_tokens for r in workload.requests}
    output = sum(received_tokens(r) for r in done)
    result = throughput(measured_window_s(workload, records), len(done), int(output), int(output + sum(prompts[r["request_id"]] for r in done)))
    result["duration_from"] = f"the measured window: {WINDOW_WORDS}"
    result["failed"] = len(workload) - len(done)
    result["sessions_active_s"] = total_active_s(sessions)
    result["wall_s"] = float(sum(s["wall_s"] for s in sessions if s["wall_s"] is not None)) if sessions else None
    result["stall_tail_s"] = float(sum(s["stall_tail_s"] for s in sessions)) if sessions else None
    result["sessions"] = len(sessions)
    return result


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
