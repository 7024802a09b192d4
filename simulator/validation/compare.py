"""Measured vs simulated, request by request (pure pandas; :mod:`report` writes the files).

Errors are signed ``(simulated - measured) / measured`` in percent, so a positive error
means the simulator predicts slower than the server was.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.validation.workload import Workload

METRICS = ("ttft", "tpot", "e2e")


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
                "measured_e2e_s": record.get("e2e_s"),
            }
        )
    return pd.DataFrame(rows)


def join(measured: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """Per-request comparison; ``compared`` marks rows with a clean measurement."""
    sim = simulated[["request_id", "output_tokens", "ttft_s", "tpot_s", "e2e_s"]].rename(
        columns={"output_tokens": "simulated_output_tokens", **{f"{m}_s": f"simulated_{m}_s" for m in METRICS}}
    )
    frame = measured.merge(sim, on="request_id", how="left", validate="one_to_one")
    if frame["simulated_e2e_s"].isna().any():
        missing = frame.loc[frame["simulated_e2e_s"].isna(), "request_id"].tolist()[:5]
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


def error_summary(frame: pd.DataFrame) -> dict:
    """Per metric: medians of measured and simulated, the error of the medians, the median
    signed error and the mean absolute percentage error over compared requests."""
    summary = {}
    compared = frame[frame["compared"]]
    for metric in METRICS:
        rows = compared.dropna(subset=[f"measured_{metric}_s", f"simulated_{metric}_s", f"{metric}_err_pct"])
        measured, simulated = rows[f"measured_{metric}_s"], rows[f"simulated_{metric}_s"]
        n = len(rows)
        m50 = float(measured.median()) if n else None
        s50 = float(simulated.median()) if n else None
        summary[metric] = {
            "requests": n,
            "measured_p50_s": m50,
            "simulated_p50_s": s50,
            "p50_err_pct": (s50 - m50) / m50 * 100.0 if n and m50 > 0 else None,
            "median_signed_err_pct": float(rows[f"{metric}_err_pct"].median()) if n else None,
            "mape_pct": float(rows[f"{metric}_abs_err_pct"].mean()) if n else None,
            "p90_abs_err_pct": float(rows[f"{metric}_abs_err_pct"].quantile(0.9)) if n else None,
        }
    return summary


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
    simulated = {key: simulated_summary.get(key) for key in ("acceptance_rate", "mean_acceptance_length")}
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
