"""The pays-off spec (``data/paysoff.toml``): for each deployment, where speculation stops paying and which k to run.

A deployment is what a serving engineer runs: a target model on a GPU at a tensor-parallel size,
a proposer (any kind of :mod:`simulator.speculative.proposers` that vLLM runs with a k schedule:
n-gram, a draft model, an EAGLE head, MTP, a parallel drafter, ...) with its options, and one or
more acceptance inputs for it.  Every deployment shares the workload, the concurrency grid and the k range, so the site
compares like with like.  ``python -m simulator.paysoff`` builds the same :class:`PaysoffSpec`
from its flags (:func:`single_deployment`), so the command and the build run one implementation.

Acceptance comes as the user has it: an i.i.d. ``rate``, per-position conditional rates, vLLM's
mean acceptance length at one k (converted to the i.i.d. rate that reproduces it), or mean
lengths at consecutive k (converted to per-position rates), or vLLM's unconditional per-position
rates: one :class:`~simulator.speculative.acceptance_convert.AcceptanceInput`, which records how.

The verify-attention cost is not a spec key: the primary answer uses the simulator's default
(:class:`simulator.runs.speculation.SpeculationConfig`), and the two bounds are always simulated as the
answer's uncertainty band (:func:`verify_settings`).

Strict like the seed sweep's spec: unknown sections or keys, wrong types, repeated values and
acceptance profiles too short for the largest k are :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from simulator.profiles.engines import DEFAULT_ENGINE
from simulator.profiles.hardware import DEFAULT_DEVICE
from simulator.profiles.step_scales import StepScales
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.util.errors import ConfigError
from simulator.speculative import proposers
from simulator.util.inputs import (
    check_table,
    distinct_values,
    non_empty_str,
    non_negative_int,
    parse_toml,
    positive_int,
    positive_number,
    probability,
    read_text,
)
from simulator.runs.deployment import Deployment, Parallelism, Precision, SchedulerLimits, Speculation, StepCosts
from simulator.speculative.acceptance_convert import AcceptanceInput

BOUNDS = ("kv_once", "per_token")  # the verify-attention cost's lower and upper bound: the band

_SECTIONS = {
    "run": ({"seed": int, "max_num_seqs": int, "max_num_batched_tokens": int}, None),
    "workload": ({"prompt_tokens": int, "output_tokens": int, "length_spread": float, "seed": int}, None),
    "closed_loop": ({"concurrency": list, "requests_per_slot": int, "min_requests": int}, None),
    "poisson": ({"arrival_rate": list, "num_requests": int, "num_speculative_tokens": list}, ()),
    "grid": ({"num_speculative_tokens": list}, None),
}
_DEPLOYMENT_FIELDS = {
    "name": str,
    "label": str,
    "model": str,
    "device": str,
    "tensor_parallel_size": int,
    "proposer": str,
    "draft_model": str,
    "draft_tensor_parallel_size": int,
    "poisson": bool,
    "options": dict,  # the proposer kind's options, e.g. suffix_max_tree_depth
    "acceptance": list,
}
_DEPLOYMENT_REQUIRED = ("name", "label", "model", "device", "proposer", "acceptance")
_ACCEPTANCE_FIELDS = {
    "name": str,
    "label": str,
    "source": str,
    "note": str,
    "rate": float,
    "per_position": list,
    "acceptance_length": float,
    "at_k": int,
    "acceptance_lengths": list,
    "from_k": int,
}
_ACCEPTANCE_REQUIRED = ("name", "label", "source")
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


@dataclass(frozen=True)
class AcceptanceProfile:
    """One deployment with one acceptance input: the unit the sweep recommends a schedule for.

    ``name`` is the CSV key (unique in a spec); ``rate`` or ``per_position`` is what the
    simulator runs with, ``derivation`` says how it came from the user's figure.
    """

    name: str
    label: str
    acceptance: AcceptanceInput
    source: str = ""
    note: str = ""  # the spec's own words on the figure, recorded after its derivation
    # the deployment
    deployment: str = ""
    deployment_label: str = ""
    model: str = "meta-llama/Llama-2-7b-hf"
    device: str = DEFAULT_DEVICE
    tensor_parallel_size: int = 1
    proposer: str = dataclasses.field(default_factory=lambda: SpeculationConfig().proposer)
    draft_model: Optional[str] = None
    draft_tensor_parallel_size: Optional[int] = None  # 1 or the target's (None: the target's, vLLM's default)
    poisson: bool = True  # also run the open-loop (Poisson) grid
    options: tuple = ()  # the proposer kind's options, (name, value) pairs
    # P(the proposer drafts at a decode step): below 1 for n-gram misses (SpeculationConfig.proposal_probability)
    proposal_probability: float = 1.0
    served_model_name: Optional[str] = None  # the name a printed vllm serve line gives the model (None: its own)

    @property
    def kind(self):
        """The proposer kind (:mod:`simulator.speculative.proposers`)."""
        return proposers.kind(self.proposer)

    @property
    def rate(self) -> Optional[float]:
        """The i.i.d. rate the runs take (None: per-position rates)."""
        return self.acceptance.rate

    @property
    def per_position(self) -> Optional[tuple[float, ...]]:
        """The conditional per-position rates the runs take (None: an i.i.d. rate)."""
        return self.acceptance.per_position

    @property
    def given(self) -> str:
        """Which of a proposer kind's acceptance inputs the figure is ("rate", "per_position",
        "length" or "lengths"; vLLM's unconditional rates are per-position ones)."""
        return "per_position" if self.acceptance.form == "unconditional" else self.acceptance.form

    @property
    def derivation(self) -> str:
        """How the figure became the runs' acceptance, and the spec's note on it."""
        return self.acceptance.derivation + (f"; {self.note}" if self.note else "")

    @property
    def method(self) -> str:
        """vLLM's speculative_config method."""
        return self.kind.vllm_method

    @property
    def system(self) -> tuple[str, str, int]:
        """What the no-speculation baseline depends on."""
        return (self.model, self.device, self.tensor_parallel_size)


@dataclass(frozen=True)
class PaysoffSpec:
    seed: int
    batch_size_cap: int  # vLLM's max_num_seqs
    chunk_size: int  # vLLM's max_num_batched_tokens (Sarathi's token budget per step)
    prompt_tokens: int
    output_tokens: int
    length_spread: float  # closed-loop lengths uniform in [(1 - s) x, (1 + s) x]
    workload_seed: int
    concurrency: tuple[int, ...]
    requests_per_slot: int
    min_requests: int
    arrival_rates: tuple[float, ...]
    poisson_requests: int
    poisson_k: tuple[int, ...]
    speculative_tokens: tuple[int, ...]
    profiles: tuple[AcceptanceProfile, ...]
    trace: Optional[str] = None  # draw request lengths from this Vidur trace instead of the means
    engine: str = DEFAULT_ENGINE  # the engine profile every run uses (RunConfig.engine: the vLLM version it stands for)
    attention: str = dataclasses.field(default_factory=lambda: SpeculationConfig().attention)
    interpolation: float = dataclasses.field(default_factory=lambda: SpeculationConfig().interpolation)
    # vLLM's --quantization and --kv-cache-dtype for every run (None / "auto": the model's own)
    quantization: Optional[str] = None
    kv_cache_dtype: str = "auto"
    # a server's fitted step costs (python -m simulator.validation fit, --engine-profile): the
    # engine's CPU time per step and the step model's scales, and the fit's held-out error (%)
    engine_overhead_ms: Optional[float] = None
    step_scales: Optional[StepScales] = None
    fit_error_pct: Optional[float] = None

    @property
    def attention_modes(self) -> tuple[str, ...]:
        """The primary verify-cost setting first, then the bounds that make its band."""
        return (self.attention,) + tuple(b for b in BOUNDS if b != self.attention)

    @property
    def systems(self) -> tuple[tuple[str, str, int], ...]:
        return tuple(dict.fromkeys(p.system for p in self.profiles))

    def deployment(self, system: tuple[str, str, int], profile_dir: Optional[str] = None) -> Deployment:
        """A system's server without speculation, as every run of the sweep configures it: the
        spec's limits, precision, engine profile and (a fitted server's) step costs."""
        model, device, tp = system
        fitted = {} if self.engine_overhead_ms is None else {"engine_overhead_ms": self.engine_overhead_ms}
        return Deployment(
            model=model, device=device, engine=self.engine, parallelism=Parallelism(tensor=tp),
            limits=SchedulerLimits(max_num_batched_tokens=self.chunk_size, max_num_seqs=self.batch_size_cap),
            precision=Precision(quantization=self.quantization, kv_cache_dtype=self.kv_cache_dtype),
            costs=StepCosts(step_scales=self.step_scales, profile_dir=profile_dir, **fitted),
        )


def verify_settings() -> tuple[str, float, str]:
    """(attention, interpolation, why): the primary verify-cost setting, read from the simulator's default."""
    default = SpeculationConfig()
    why = (
        f"the simulator's default (simulator.runs.speculation.SpeculationConfig.attention = '{default.attention}'"
        + (f", interpolation = {default.interpolation:g}" if default.attention == "interpolated" else "")
        + "), chosen from published verify-attention kernel timings (docs/model.md, 'What decided the default'); the bounds kv_once (each request's KV read once per verify step) and per_token (read once per verified token) are simulated as the band"
    )
    return default.attention, default.interpolation, why


def acceptance_profile(name: str, label: str, source: str, *, rate=None, per_position=None, length=None, at_k=None, lengths=None, from_k=None,
                       unconditional=None, where: str = "acceptance", flags: Optional[dict] = None, **deployment) -> AcceptanceProfile:
    """One deployment with one acceptance input (:meth:`AcceptanceInput.given`: exactly one of
    ``rate``, ``per_position``, ``length`` with ``at_k``, ``lengths`` with ``from_k``, or vLLM's
    ``unconditional`` per-position rates).  ``flags`` maps the argument names to how the user
    spelled them (CLI flags or spec keys), so a refusal names the input the user gave; an empty
    ``where`` adds no prefix (the command adds its own once)."""
    acceptance = AcceptanceInput.given(
        rate=rate, per_position=per_position, length=length, at_k=at_k, lengths=lengths, from_k=from_k, unconditional=unconditional, names=flags, where=where,
    )
    return AcceptanceProfile(name, label, acceptance, source=source, **deployment)


def profile_length(profile: AcceptanceProfile, k: int) -> float:
    """The mean acceptance length the profile gives at k (bonus included): what vLLM would log."""
    return profile.acceptance.length(k)


def check_spec(spec: PaysoffSpec, where: str = "pays-off spec") -> PaysoffSpec:
    """Cross-field rules shared by the file and the command."""
    if not spec.concurrency and not spec.arrival_rates:
        raise ConfigError(f"{where}: the grid is empty: give at least one concurrency or request rate")
    if not spec.speculative_tokens:
        raise ConfigError(f"{where}: the k range is empty: give at least one k >= 1")
    too_big = [c for c in spec.concurrency if c > spec.batch_size_cap]
    if too_big:
        raise ConfigError(
            f"{where}: concurrency {too_big} exceeds max_num_seqs = {spec.batch_size_cap}, so those requests would queue rather than run: "
            f"raise max_num_seqs to {max(too_big)} or drop those concurrencies"
        )
    extra = [k for k in spec.poisson_k if k not in spec.speculative_tokens]
    if extra:
        raise ConfigError(f"{where}: Poisson k {extra} are not in the k range {list(spec.speculative_tokens)}")
    names = [p.name for p in spec.profiles]
    if not names:
        raise ConfigError(f"{where}: no deployment with an acceptance input")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: acceptance names repeat: {names}; each must be unique in the spec")
    for p in spec.profiles:
        at = f"{where}: deployment {p.deployment!r}"
        kind = proposers.kind(p.proposer, f"{at}: proposer")
        if kind.needs_draft_model and not p.draft_model:
            raise ConfigError(f"{at}: proposer = {p.proposer!r} needs draft_model (the network vLLM loads for it)")
        if kind.tree(kind_settings(p, 1)) is not None:
            raise ConfigError(f"{at}: proposer = {p.proposer!r} drafts a tree at one depth, and {kind.engine} has no k schedule to recommend; simulate it with python -m simulator")
        accepted = "length" if p.given == "lengths" else p.given
        if p.given and accepted not in kind.acceptance_inputs:
            raise ConfigError(
                f"{at}: acceptance {p.name!r} is given as {p.given}, but proposer = {p.proposer!r} takes {' or '.join(kind.acceptance_inputs)}"
                + (" (its draft length varies per step)" if kind.draft_length_pmf(kind_settings(p, max(spec.speculative_tokens))) else "")
            )
        if p.per_position is not None and len(p.per_position) < max(spec.speculative_tokens):
            raise ConfigError(
                f"{where}: acceptance {p.name!r} has {len(p.per_position)} per-position rates; k up to {max(spec.speculative_tokens)} needs "
                f"{max(spec.speculative_tokens)}: give more positions or lower the k range"
            )
        try:  # the deployment's cross-field rules (the draft-TP rule) are the run configuration's, in this file's keys
            Deployment(
                model=p.model, device=p.device, parallelism=Parallelism(tensor=p.tensor_parallel_size),
                speculation=Speculation(proposer=kind.name, draft_tensor_parallel_size=p.draft_tensor_parallel_size),
            ).checked()
        except ConfigError as exc:
            raise ConfigError(f"{at}: {exc}") from None
        if not kind.needs_draft_model and p.draft_model:
            raise ConfigError(f"{at}: proposer = {p.proposer!r} takes no draft_model ({p.draft_model!r}); it drafts with {kind.drafts_with.value}")
    return spec


def kind_settings(profile: AcceptanceProfile, k: int):
    """The deployment's proposer settings at ``k``, its options checked by its kind."""
    from simulator.speculative.proposers.base import SpeculationSettings

    kind = profile.kind
    return SpeculationSettings(k=k, options=kind.resolve_options(dict(profile.options)))


def load_paysoff_spec(path) -> PaysoffSpec:
    path = Path(path)
    return parse_paysoff_spec(read_text(path, "pays-off spec"), str(path))


def parse_paysoff_spec(text: str, source: str = "<spec>") -> PaysoffSpec:
    """The spec a TOML text describes, every key checked section by section (sections, the grid, the
    Poisson grid, each deployment and its acceptance, then the shared run and workload scalars):
    the first refusal names the first wrong key in that order."""
    doc = parse_toml(text, source, "pays-off spec")
    where = f"pays-off spec {source}"
    _check_sections(doc, where)
    read = _SectionReader(doc, where)
    ks = read.values("grid", "num_speculative_tokens", positive_int, "is not a positive integer (k = 0 runs are the baselines)")
    poisson = doc.get("poisson", {})
    if poisson and set(poisson) != set(_SECTIONS["poisson"][0]):
        raise ConfigError(f"{where}: [poisson] needs arrival_rate, num_requests and num_speculative_tokens (or leave the section out)")
    rates = read.values("poisson", "arrival_rate", positive_number, "is not a positive number of requests per second", float) if poisson else ()
    poisson_k = read.values("poisson", "num_speculative_tokens", positive_int, "is not a positive integer") if poisson else ()
    profiles = _deployment_profiles(doc.get("deployment"), where)
    spec = PaysoffSpec(
        seed=read.scalar("run", "seed", non_negative_int, "must be an integer >= 0"),
        batch_size_cap=read.scalar("run", "max_num_seqs", positive_int, "must be a positive integer"),
        chunk_size=read.scalar("run", "max_num_batched_tokens", positive_int, "must be a positive integer"),
        prompt_tokens=read.scalar("workload", "prompt_tokens", positive_int, "must be a positive integer"),
        output_tokens=read.scalar("workload", "output_tokens", lambda v: positive_int(v) and v > 1, "must be an integer > 1"),
        length_spread=float(read.scalar("workload", "length_spread", lambda v: 0 <= v < 1, "must be in [0, 1)")),
        workload_seed=read.scalar("workload", "seed", non_negative_int, "must be an integer >= 0"),
        concurrency=read.values("closed_loop", "concurrency", positive_int, "is not a positive integer"),
        requests_per_slot=read.scalar("closed_loop", "requests_per_slot", positive_int, "must be a positive integer"),
        min_requests=read.scalar("closed_loop", "min_requests", positive_int, "must be a positive integer"),
        arrival_rates=rates,
        poisson_requests=poisson.get("num_requests", 1) if poisson else 1,
        poisson_k=poisson_k,
        speculative_tokens=ks,
        profiles=profiles,
    )
    if poisson and not positive_int(spec.poisson_requests):
        raise ConfigError(f"{where}: [poisson] num_requests = {spec.poisson_requests!r} must be a positive integer")
    return check_spec(spec, where)


def _check_sections(doc: dict, where: str) -> None:
    """Only known sections, each required one present, each table's keys and types as declared
    (``required == ()`` marks an optional section: [poisson])."""
    for section in doc:
        if section not in _SECTIONS and section != "deployment":
            raise ConfigError(f"{where}: unknown section [{section}]; expected {sorted(list(_SECTIONS) + ['deployment'])}")
    for section, (fields, required) in _SECTIONS.items():
        if section not in doc:
            if required == ():
                continue
            raise ConfigError(f"{where}: missing section [{section}]")
        check_table(doc[section], fields, f"{where}: [{section}]", required)


@dataclass(frozen=True)
class _SectionReader:
    """Reads one checked key of a section, so every refusal names the file, section and key."""

    doc: dict
    where: str

    def scalar(self, section: str, key: str, check, what: str):
        """One value that ``check`` accepts; ``what`` says what it must be."""
        value = self.doc[section][key]
        if not check(value):
            raise ConfigError(f"{self.where}: [{section}] {key} = {value!r} {what}")
        return value

    def values(self, section: str, key: str, check, what: str, convert=lambda v: v) -> tuple:
        """A list of distinct values that ``check`` accepts (:func:`distinct_values`)."""
        return distinct_values(self.doc[section][key], f"{self.where}: [{section}] {key}", check, what, convert)


def _deployment_profiles(deployments, where: str) -> tuple[AcceptanceProfile, ...]:
    """Every [[deployment]]'s acceptance profiles, in file order (at least one deployment)."""
    if not isinstance(deployments, list) or not deployments:
        raise ConfigError(f"{where}: no [[deployment]]; add at least one (model, device, proposer and its acceptance)")
    profiles = []
    for i, table in enumerate(deployments):
        at = f"{where}: [[deployment]] {i}"
        deployment = _deployment_fields(table, at)
        if not table["acceptance"]:
            raise ConfigError(f"{at}: acceptance is empty; give at least one [[deployment.acceptance]]")
        for j, acc in enumerate(table["acceptance"]):
            profiles.append(_acceptance_entry(acc, f"{at} acceptance {j}", deployment))
    return tuple(profiles)


def _deployment_fields(table: dict, at: str) -> dict:
    """One [[deployment]] table as :class:`AcceptanceProfile`'s deployment fields: its name,
    strings and sizes checked, the proposer resolved to its kind and its options checked by it."""
    check_table(table, _DEPLOYMENT_FIELDS, at, _DEPLOYMENT_REQUIRED)
    name = table["name"]
    if not _NAME.match(name):
        raise ConfigError(f"{at}: name = {name!r} must be lower-case letters, digits, '.' and '-'")
    tp = table.get("tensor_parallel_size", 1)
    if not positive_int(tp):
        raise ConfigError(f"{at}: tensor_parallel_size = {tp!r} must be a positive integer")
    for key in ("label", "model", "device"):
        if not non_empty_str(table[key]):
            raise ConfigError(f"{at}: {key} must be a non-empty string")
    kind = proposers.kind(table["proposer"], f"{at}: proposer")
    try:
        options = SpeculationConfig(proposer=kind.name, options=tuple(sorted(table.get("options", {}).items()))).options
    except ConfigError as exc:
        raise ConfigError(f"{at}: options: {exc}") from None
    return dict(
        deployment=name, deployment_label=table["label"], model=table["model"], device=table["device"], tensor_parallel_size=tp,
        proposer=kind.name, draft_model=table.get("draft_model"), draft_tensor_parallel_size=table.get("draft_tensor_parallel_size"),
        poisson=table.get("poisson", True), options=options,
    )


def _acceptance_entry(acc: dict, where_acc: str, deployment: dict) -> AcceptanceProfile:
    """One [[deployment.acceptance]] table with its deployment: the spec's keys mapped onto
    :func:`acceptance_profile`'s inputs, and the spec's note kept after the derivation."""
    check_table(acc, _ACCEPTANCE_FIELDS, where_acc, _ACCEPTANCE_REQUIRED)
    if not _NAME.match(acc["name"]):
        raise ConfigError(f"{where_acc}: name = {acc['name']!r} must be lower-case letters, digits, '.' and '-'")
    for key in ("label", "source"):
        if not non_empty_str(acc[key]):
            raise ConfigError(f"{where_acc}: {key} must be a non-empty string")
    profile = acceptance_profile(
        acc["name"], acc["label"], acc["source"], rate=acc.get("rate"), per_position=acc.get("per_position"),
        length=acc.get("acceptance_length"), at_k=acc.get("at_k"), lengths=acc.get("acceptance_lengths"), from_k=acc.get("from_k"),
        where=where_acc, **deployment,
    )
    if acc.get("note"):
        profile = dataclasses.replace(profile, note=acc["note"])
    return profile


def single_deployment(profile: AcceptanceProfile, *, ks: Sequence[int], concurrency: Sequence[int], arrival_rates: Sequence[float] = (),
                      max_num_seqs: int, max_num_batched_tokens: int, prompt_tokens: int, output_tokens: int, length_spread: float,
                      requests_per_slot: int = 2, min_requests: int = 8, poisson_requests: int = 64, seed: int = 0, workload_seed: int = 42,
                      trace: Optional[str] = None, engine: str = DEFAULT_ENGINE, where: str = "pays-off", quantization: Optional[str] = None,
                      kv_cache_dtype: str = "auto", fitted=None) -> PaysoffSpec:
    """The spec of one deployment, as ``python -m simulator.paysoff`` builds it from its flags."""
    ks = tuple(sorted(set(ks)))
    spec = PaysoffSpec(
        seed=seed, batch_size_cap=max_num_seqs, chunk_size=max_num_batched_tokens, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        length_spread=length_spread, workload_seed=workload_seed, concurrency=tuple(sorted(set(concurrency))), requests_per_slot=requests_per_slot,
        min_requests=min_requests, arrival_rates=tuple(sorted(set(arrival_rates))), poisson_requests=poisson_requests, poisson_k=ks if arrival_rates else (),
        speculative_tokens=ks, profiles=(profile,), trace=trace, engine=engine, quantization=quantization, kv_cache_dtype=kv_cache_dtype,
        engine_overhead_ms=fitted.engine_overhead_ms if fitted else None, step_scales=fitted.scales if fitted else None,
        fit_error_pct=fitted.held_out_error_pct if fitted else None,
    )
    return check_spec(spec, where)
