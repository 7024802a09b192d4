"""A fitted engine profile: one server's step costs, as a file a run can be answered from.

``python -m simulator.validation fit`` measures a vLLM server at a few closed-loop levels and fits
the free terms of the built-in step model to what the server's own histograms report: the
engine's CPU time per step and the scales of :mod:`simulator.profiles.step_scales`.  The result is
this file: the terms with their uncertainty, the held-out error that is the answer's error bar,
and the provenance of the measurement (the server's vLLM version, GPU, model, TP, date and the
plan that measured it).  ``--engine-profile FILE`` on ``python -m simulator`` and
``python -m simulator.paysoff`` answers for that server; a run on another GPU, model or TP than
the one measured is refused, since the scales say how *that* deployment's kernels ran.

This module is the file's one reader and one writer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from simulator.profiles.step_scales import SCALE_TERMS, StepScales
from simulator.util.errors import ConfigError

FORMAT = 1
TERMS = ("cpu_ms",) + SCALE_TERMS  # cpu_ms: the engine's CPU time per step (a run's engine_overhead_ms)


@dataclass(frozen=True)
class FittedTerm:
    value: float
    uncertainty: Optional[float]  # one standard error, in the term's units (ms, or a fraction of the scale); None: not placed
    placed: bool  # False: the measurements could not tell this term (left at its starting value)
    note: str = ""


@dataclass(frozen=True)
class FittedProfile:
    """One server's fitted step costs and where they came from."""

    engine: str  # the engine profile the fit scales (simulator/profiles/engines.toml)
    vllm_version: str  # what the server said it runs (GET /version)
    model: str
    device: str
    tensor_parallel_size: int
    terms: dict  # name -> FittedTerm, every name of TERMS
    held_out_error_pct: Optional[float]  # the largest |error| at the held-out levels; None: nothing held out
    plan: dict = field(default_factory=dict)  # how it was measured (levels, lengths, requests, speculation)
    measured_on: str = ""  # the date of the measurement (UTC)
    warnings: tuple = ()

    @property
    def scales(self) -> StepScales:
        return StepScales(**{name: self.terms[name].value for name in SCALE_TERMS})

    @property
    def engine_overhead_ms(self) -> float:
        return self.terms["cpu_ms"].value

    def check_run(self, model: str, device: str, tensor_parallel_size: int, source: str) -> None:
        """Refuse a run of another deployment than the one measured."""
        for what, fitted, asked in (("model", self.model, model), ("device", self.device, device), ("tensor_parallel_size", self.tensor_parallel_size, tensor_parallel_size)):
            if str(fitted).lower() != str(asked).lower():
                raise ConfigError(
                    f"{source}: fitted on {self.model} on {self.device} at TP {self.tensor_parallel_size}, but this run asks {what} = {asked!r}; "
                    "a fitted profile holds one deployment's step costs: fit the other deployment, or drop --engine-profile"
                )

    def describe(self) -> str:
        """One line for an answer's provenance."""
        placed = ", ".join(f"{name} {term.value:.3g}" for name, term in self.terms.items() if term.placed)
        held = f"held-out error {self.held_out_error_pct:.1f}%" if self.held_out_error_pct is not None else "nothing held out"
        return f"fitted to vLLM {self.vllm_version} on {self.device} ({self.measured_on}): {placed}; {held}"


HEADER = (
    "# A step-cost profile fitted to one vLLM server by `python -m simulator.validation fit`.\n"
    "# Use it with --engine-profile on python -m simulator and python -m simulator.paysoff.\n"
)


def profile_text(profile: FittedProfile) -> str:
    """The TOML file; the same fit gives the same bytes (NaN where a value is absent)."""
    import tomli_w

    nan = float("nan")
    document = {
        "format": FORMAT,
        "server": {
            "vllm_version": profile.vllm_version, "engine": profile.engine, "model": profile.model, "device": profile.device,
            "tensor_parallel_size": profile.tensor_parallel_size, "measured_on": profile.measured_on,
        },
        "fit": {"held_out_error_pct": nan if profile.held_out_error_pct is None else float(profile.held_out_error_pct), "warnings": list(profile.warnings)},
        "terms": {
            name: {"value": float(t.value), "uncertainty": nan if t.uncertainty is None else float(t.uncertainty), "placed": t.placed, "note": t.note}
            for name, t in ((name, profile.terms[name]) for name in TERMS)
        },
        "plan": dict(profile.plan),
    }
    return HEADER + tomli_w.dumps(document)


def read_fitted_profile(path) -> FittedProfile:
    """The file at ``path``; anything wrong is a ConfigError naming the file, the table and the key."""
    from simulator.util.inputs import check_table, read_toml

    what = "--engine-profile"
    data = read_toml(Path(path), what)
    where = f"{what} {path}"
    if data.get("format") != FORMAT:
        raise ConfigError(f"{where}: format = {data.get('format')!r}; this version reads format {FORMAT} files written by python -m simulator.validation fit")
    server = check_table(data.get("server"), {"vllm_version": str, "engine": str, "model": str, "device": str, "tensor_parallel_size": int, "measured_on": str}, f"{where} [server]")
    fit = check_table(data.get("fit"), {"held_out_error_pct": float, "warnings": list}, f"{where} [fit]")
    terms_table = check_table(data.get("terms"), {name: dict for name in TERMS}, f"{where} [terms]")
    terms = {}
    for name in TERMS:
        table = check_table(terms_table[name], {"value": float, "uncertainty": float, "placed": bool, "note": str}, f"{where} [terms.{name}]")
        value, uncertainty = float(table["value"]), float(table["uncertainty"])
        if not math.isfinite(value) or value < 0 or (name != "cpu_ms" and value == 0):
            raise ConfigError(f"{where} [terms.{name}]: value = {value!r} must be a finite number {'>= 0 (ms)' if name == 'cpu_ms' else '> 0'}")
        terms[name] = FittedTerm(value, uncertainty if math.isfinite(uncertainty) else None, table["placed"], table["note"])
    if server["tensor_parallel_size"] < 1:
        raise ConfigError(f"{where} [server]: tensor_parallel_size = {server['tensor_parallel_size']} must be >= 1")
    held = float(fit["held_out_error_pct"])
    return FittedProfile(
        engine=server["engine"], vllm_version=server["vllm_version"], model=server["model"], device=server["device"].lower(),
        tensor_parallel_size=server["tensor_parallel_size"], terms=terms, held_out_error_pct=held if math.isfinite(held) else None,
        plan=dict(data.get("plan") or {}), measured_on=server["measured_on"], warnings=tuple(str(w) for w in fit["warnings"]),
    )
