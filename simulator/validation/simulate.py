"""Simulate the replayed workload with the calibrated acceptance and the server's KV budget.

:func:`build_run_config` is pure: same arrivals, same exact lengths, the same k, the
conditional per-position acceptance, the measured probability of a draft at a decode step
(n-gram misses) and the server's block count and size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from simulator.profiles.hardware import DEFAULT_DEVICE
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ExplicitWorkload
from simulator.runs.deployment import Deployment, SchedulerLimits, Speculation, StepCosts
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.util.errors import ConfigError
from simulator.util.inputs import read_json
from simulator.validation.compare import simulated_metrics
from simulator.util.textio import atomic_write_bytes
from simulator.validation.files import atomic_write_json, check_output_dir, check_schema
from simulator.validation.workload import Workload

SCHEMA = "vidur-specdec/validation-simulated"
SCHEMA_VERSION = 1
REQUESTS_FILE = "simulated.csv"
SUMMARY_FILE = "simulated.json"
# Per request, the gaps between its token emissions (vLLM's ITL samples, seconds), in request
# order: what vllm bench serve saves as "itls", kept apart so simulated.json stays small.
ITLS_FILE = "simulated_itls.json"
ITLS_SCHEMA = "vidur-specdec/validation-simulated-itls"


def build_run_config(
    workload: Workload,
    calibration: dict,
    model: str = "meta-llama/Llama-2-7b-hf",
    device: str = DEFAULT_DEVICE,
    profile_dir: Optional[str] = None,
    proposer: str = "ngram",
    draft_model: Optional[str] = None,
    seed: int = 0,
) -> RunConfig:
    if calibration["workload_hash"] != workload.workload_hash:
        raise ConfigError(
            f"the calibration is for workload {calibration['workload_hash'][:12]}..., not {workload.workload_hash[:12]}... (a different workload file)"
        )
    k = int(calibration["num_speculative_tokens"])
    speculation = None  # k = 0: the baseline
    if k > 0:
        speculation = Speculation(
            proposer=proposer,
            k=k,
            acceptance=AcceptanceInput.given(per_position=calibration["acceptance_per_position"]),
            # absent (V0 counters, older calibration files): a draft at every step
            proposal_probability=float(calibration.get("proposal_probability") or 1.0),
            draft_model=draft_model,
        )
    kv = calibration.get("kv_cache") or {}
    requests = workload.requests
    deployment = Deployment(
        model=model, device=device, costs=StepCosts(profile_dir=profile_dir), speculation=speculation,
        limits=SchedulerLimits(num_kv_blocks=kv.get("num_gpu_blocks"), block_size=kv.get("block_size") or SchedulerLimits.block_size),
    )
    return deployment.run(
        ExplicitWorkload(
            arrival_s=tuple(r.arrival_s for r in requests),
            prompt_tokens=tuple(r.prompt_tokens for r in requests),
            output_tokens=tuple(r.output_tokens for r in requests),
        ),
        seed=seed,
    )


def simulate(config: RunConfig, workload: Workload, calibration: dict, out_dir: Path) -> dict:
    """Run the simulator and write ``simulated.csv`` (per request) and ``simulated.json``.

    The output directory is checked first, so a bad path fails before the simulation runs."""
    from simulator import run  # the simulator proper; imported here so the other steps work without it

    out_dir = check_output_dir(out_dir, "simulate output directory", files=(REQUESTS_FILE, SUMMARY_FILE, ITLS_FILE))
    result = run(config)
    frame = result.requests.sort_values("request_id").reset_index(drop=True)
    if len(frame) != len(workload) or list(frame["request_id"]) != list(range(len(workload))):
        raise ConfigError(f"the simulator returned {len(frame)} requests for a workload of {len(workload)}")
    itls = {rid: [round(float(g), 9) for g in np.diff(np.asarray(result.emission_times.get(rid, []), dtype=float))] for rid in range(len(workload))}
    record = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "workload_hash": workload.workload_hash,
        "calibration": {key: calibration.get(key) for key in ("engine", "num_speculative_tokens", "acceptance_rate", "mean_acceptance_length", "acceptance_per_position", "proposal_probability", "kv_cache")},
        "config": config.to_dict(),
        "summary": result.summary.as_dict(),
        # vllm bench serve's summary of the simulated run, from the per-request rows: ms, req/s, tok/s
        "metrics": simulated_metrics(frame, itls),
        "provenance": result.provenance,
    }
    atomic_write_bytes(out_dir / REQUESTS_FILE, frame.to_csv(index=False, lineterminator="\n").encode("utf-8"))
    atomic_write_json(out_dir / ITLS_FILE, {"schema": ITLS_SCHEMA, "schema_version": SCHEMA_VERSION, "workload_hash": workload.workload_hash, "units": "seconds", "itls": [itls[rid] for rid in range(len(workload))]})
    atomic_write_json(out_dir / SUMMARY_FILE, record)  # last: its presence means the set is complete
    return record


def read_simulated_itls(directory: Path, num_requests: int) -> dict:
    """request id -> the simulated gaps between its token emissions (seconds)."""
    path = Path(directory) / ITLS_FILE
    data = read_json(path, "simulated ITL file")
    check_schema(path, data, ITLS_SCHEMA, SCHEMA_VERSION)
    itls = data.get("itls")
    if not (isinstance(itls, list) and len(itls) == num_requests and all(isinstance(gaps, list) and all(isinstance(g, (int, float)) and not isinstance(g, bool) and g >= 0 for g in gaps) for gaps in itls)):
        raise ConfigError(f"simulated ITL file {path}: itls must be {num_requests} lists of gaps in seconds >= 0, one per request; run simulate again")
    return {rid: gaps for rid, gaps in enumerate(itls)}


def read_simulated(directory: Path):
    """(summary record, per-request DataFrame) from a simulate output directory."""
    import pandas as pd

    directory = Path(directory)
    record = read_json(directory / SUMMARY_FILE, "simulated summary")
    check_schema(directory / SUMMARY_FILE, record, SCHEMA, SCHEMA_VERSION)
    path = directory / REQUESTS_FILE
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not a readable CSV ({err}); run simulate again") from None
    for name in ("workload_hash",):
        if not isinstance(record.get(name), str):
            raise ConfigError(f"simulated summary {directory / SUMMARY_FILE}: {name} = {record.get(name)!r} has the wrong type, expected a string; run simulate again")
    for name in ("config", "summary", "calibration"):
        if not isinstance(record.get(name, {}), dict):
            raise ConfigError(f"simulated summary {directory / SUMMARY_FILE}: {name} has the wrong type, expected an object; run simulate again")
    required = ("request_id", "arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s")
    missing = set(required) - set(frame.columns)
    if missing:
        raise ConfigError(f"{path}: missing column(s) {sorted(missing)}; run simulate again")
    for name in required + (("accepted_tokens",) if "accepted_tokens" in frame.columns else ()):
        if not pd.api.types.is_numeric_dtype(frame[name]):
            bad = frame.loc[pd.to_numeric(frame[name], errors="coerce").isna() & frame[name].notna(), name].iloc[0]
            raise ConfigError(f"{path}: column {name} holds {bad!r}, not a number; run simulate again")
    return record, frame
