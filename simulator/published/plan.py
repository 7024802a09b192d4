"""One published row to the runs that reproduce it, or the reason it cannot be reproduced.

The mapping, the same for every row (no per-row tuning):

* load: ``batch_size`` B -> closed loop of B requests in flight (an offline batch, or
  ``max_num_seqs`` = B); ``concurrency`` N -> closed loop of N; ``qps`` -> Poisson arrivals.
* lengths: the row's own means, else its dataset's (``published_assumptions.toml``); each request's
  drawn around them from the dataset's declared distribution (``data/calibration/length_distributions.toml``,
  seeded, clipped to the model's context), or all at the means where the dataset or the row says ``fixed``.
* acceptance: the row's own (a mean length at its k, or per-position rates), else an
  assumption that names where it comes from; none at all -> not reproducible.
* metric: ``output_tokens_per_s`` = output tokens / makespan; ``requests_per_s`` = requests /
  makespan; ``decode_tokens_per_s`` = one request's decode rate, 1 / median TPOT (what a batch-1
  "decode throughput" counts); ``tpot_ms`` = median TPOT (or a TPOT whose statistic the source
  does not name); ``tpot_mean_ms`` and ``itl_mean_ms`` = the means ``vllm bench serve`` prints;
  ``speedup`` = the baseline's / the run's median E2E latency under Poisson load (the vLLM
  blog's definition) or output throughput ratio under closed-loop load (SpecDecode-Bench's).
* requests: the row's ``num_prompts`` where the source gives it (at most 400 under a request
  rate), else 200 under a rate and the batch itself (at least 4) in a closed loop; a rate row's
  arrivals are Poisson unless the source's generator sent them evenly spaced (``arrivals``).
* settings: device constants and documented defaults only (``RunConfig`` defaults: 1.2 ms
  engine overhead per step, LM head costed, KV-once verify attention; the scheduler limits the row
  states, else what ``vllm serve`` of its engine profile picks on its GPU (:mod:`simulator.cli.vllm_serve`), with ``max_num_seqs`` = B for an
  offline batch of B); a draft
  network's tensor parallelism is the row's ``draft_tp`` (any proposer with a network), else vLLM's default (the target's).
* engine: :func:`engine_identity`, one rule: the profile of the vLLM version the source states,
  else of the release current at its date; a V0 release, another engine, or a vLLM row of no
  version and no date runs on a named profile and is reported apart from the vLLM headline.
* proposer: the row's kind (:mod:`simulator.speculative.proposers`); a ``drafting = "tree"`` row
  runs its kind's tree variant with the row's ``eagle_topk`` and ``num_draft_tokens`` at depth
  ``k``, its acceptance the accept length the engine reported.
* settings a source leaves unknowable (``plausible``): the row is also run at each end of the
  range (each candidate GPU), so the table can say how much of its error that range accounts for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from packaging.version import Version

from simulator.vidur.models import model_config
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload, ExplicitWorkload, PoissonWorkload
from simulator.util.errors import ConfigError
from simulator.runs.results import speedup
from simulator.profiles.engines import engine_for_version, engines_of, get_engine, sglang_engine_for_version
from simulator.profiles.hardware import known_devices
from simulator.schemas import OTHER_ENGINE, VLLM, VLLM_UNKNOWN, VLLM_V0
from simulator.specs.measurements import FIXED_LENGTHS, NO_SPECULATION, TREE_FIELDS, Assumptions, LengthDistribution, Measurement
from simulator.runs.workloads import sampled_lengths
from simulator.speculative import proposers
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.runs.deployment import Deployment, Parallelism, SchedulerLimits, Speculation

SEED = 0
WORKLOAD_SEED = 42
POISSON_REQUESTS = 200
# a rate row simulates at most this many of the source's requests: enough for the queue to reach
# its steady state at the loads the rows report, few enough for the build's time budget
MAX_RATE_REQUESTS = 400
MIN_CLOSED_LOOP_REQUESTS = 4


@dataclass(frozen=True)
class Acceptance:
    conditional: tuple[float, ...]  # p_0..p_{k-1}
    description: str  # what was used, e.g. "length 2.10 at k = 2 (this row)"
    source: str  # where it comes from


@dataclass(frozen=True)
class Plan:
    measurement: Measurement
    run: Optional[RunConfig] = None  # the row's own setting
    baseline: Optional[RunConfig] = None  # no speculation, same workload (speedup rows)
    acceptance: Optional[Acceptance] = None
    reason: str = ""  # why not reproducible (run is None)
    # (label, run, baseline) at each end of each plausible range, e.g. ("output_len 170", ...)
    variants: tuple = ()


def _from_length(length: float, k_measured: int, k: int, what: str, source: str) -> Acceptance:
    figure = AcceptanceInput.given(length=length, at_k=k_measured)
    return Acceptance(figure.conditional(k), f"length {length:g} at k = {k_measured} ({what}): i.i.d. {figure.rate:.3f}", source)


def acceptance_for(m: Measurement, assumptions: Assumptions, rows: dict) -> Optional[Acceptance]:
    k = m.k or 0
    if m.acceptance_per_position is not None and len(m.acceptance_per_position) >= k:
        figure = AcceptanceInput.given(unconditional=m.acceptance_per_position)
        return Acceptance(figure.conditional(k), "per-position rates (this row)", m.source_url)
    if m.acceptance_length is not None:
        return _from_length(m.acceptance_length, k, k, "this row", m.source_url)
    assumed = assumptions.acceptance.get(m.id)
    if assumed is None:
        return None
    if assumed.from_measurement is not None:
        other = rows[assumed.from_measurement]
        if other.acceptance_length is None or not other.k:
            raise ConfigError(f"published assumptions: {m.id} borrows from {other.id}, which states no acceptance length")
        return _from_length(other.acceptance_length, other.k, k, f"from {other.id}", other.source_url)
    if assumed.acceptance_length is not None:
        return _from_length(assumed.acceptance_length, assumed.k, k, "assumed", assumed.source_url)
    return Acceptance(AcceptanceInput.given(rate=assumed.acceptance_rate).conditional(k), f"i.i.d. {assumed.acceptance_rate:g} (assumed)", assumed.source_url)


def _unreproducible(m: Measurement, devices, assumptions: Assumptions) -> str:
    """Why a row is out of reach, or '' when it can be simulated."""
    if m.gpu is None:
        return "the source does not state the GPU"
    for gpu in (m.gpu, *dict(m.plausible).get("gpu", ())):
        if gpu not in devices:
            return f"no device constants for {gpu} (known: {', '.join(sorted(devices))})"
    if m.proposer in proposers.NOT_MODELLED:
        return proposers.NOT_MODELLED[m.proposer]
    if m.drafting == "tree":
        if proposers.tree_kind(m.proposer) is None:
            return f"tree drafting with proposer {m.proposer}: not modelled"
        missing = [key for key in ("k",) + TREE_FIELDS if getattr(m, key) is None]
        if missing:
            return f"the source does not state the tree's {', '.join(missing)} (depth, top-k, tokens verified)"
    try:
        model_config(m.model)
    except ConfigError:
        return f"model {m.model} is not in the simulator's catalog"
    kind = _kind(m)
    if kind is not None and kind.needs_draft_model:
        if m.draft is None:
            return "the source does not name the draft model or head"
        try:
            model_config(m.draft)
        except ConfigError:
            return f"draft {m.draft} is not in the simulator's catalog"
    dataset = m.dataset or "unstated"
    if (m.input_len is None or m.output_len is None) and dataset not in assumptions.datasets:
        return f"no request lengths for dataset {dataset}"
    return ""


def _workload(m: Measurement, assumptions: Assumptions, override: Optional[dict] = None):
    """The row's requests: its load (a rate, a batch, a concurrency), its mean lengths (the row's,
    an override's, else its dataset's), and how lengths spread around them: drawn from the
    dataset's declared distribution (seeded with WORKLOAD_SEED, clipped to the model's context)
    unless the dataset or the row says ``fixed``.  A rate row keeps the arrivals it had with fixed
    lengths (Vidur's Poisson stream), so only its lengths change."""
    dataset = assumptions.datasets.get(m.dataset or "unstated")
    override = override or {}
    prompt = override.get("input_len") or m.input_len or dataset.input_len
    output = override.get("output_len") or m.output_len or dataset.output_len
    drawn = dataset.distribution if dataset is not None and m.lengths != FIXED_LENGTHS else None
    if m.qps is not None:
        requests = min(m.num_prompts or POISSON_REQUESTS, MAX_RATE_REQUESTS)
        if m.arrivals == "constant":  # evenly spaced, as a constant-rate load generator sends them
            return ExplicitWorkload(tuple(i / m.qps for i in range(requests)), *_lengths(m, drawn, prompt, output, requests))
        if drawn is None:
            return PoissonWorkload(num_requests=requests, prompt_tokens=prompt, output_tokens=output, arrival_rate=m.qps, seed=WORKLOAD_SEED)
        return ExplicitWorkload(_poisson_arrivals(requests, m.qps), *_lengths(m, drawn, prompt, output, requests))
    in_flight = m.batch_size or m.concurrency
    # drawn lengths make the request count matter (each run ends on its stragglers): the source's
    # count when the row does not give it; with fixed lengths every count measures the same
    unstated = dataset.num_prompts if drawn is not None and dataset.num_prompts else MIN_CLOSED_LOOP_REQUESTS
    return ClosedLoopWorkload(in_flight, *_lengths(m, drawn, prompt, output, max(in_flight, m.num_prompts or unstated)))


def _lengths(m: Measurement, drawn: Optional[LengthDistribution], prompt: int, output: int, requests: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if drawn is None:
        return (prompt,) * requests, (output,) * requests
    return sampled_lengths(drawn.input, drawn.output, prompt, output, requests, WORKLOAD_SEED, model_config(m.model).max_model_len)


def _poisson_arrivals(requests: int, rate: float) -> tuple[float, ...]:
    """The arrival times of the PoissonWorkload a fixed-length rate row runs (Vidur's own interval
    generator, seeded with WORKLOAD_SEED, its gaps capped at 3 / rate), read off that generator so
    the two cannot drift apart.  It seeds the global generators, so their states are put back."""
    import random

    import numpy as np

    from simulator.engine.generator import vidur_synthetic_config
    from simulator.vidur.runtime import synthetic_request_rows

    saved = random.getstate(), np.random.get_state()
    try:
        stream = PoissonWorkload(num_requests=requests, prompt_tokens=1, output_tokens=1, arrival_rate=rate, seed=WORKLOAD_SEED)
        rows = synthetic_request_rows(vidur_synthetic_config(stream, max_tokens=2))
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
    return tuple(float(t) for t, _, _ in rows)


def _kind(m: Measurement):
    """The proposer kind that simulates the row (a tree row: its kind's tree variant); None without speculation."""
    if m.proposer == NO_SPECULATION:
        return None
    return proposers.tree_kind(m.proposer) if m.drafting == "tree" else proposers.kind(m.proposer)


def _speculation(m: Measurement, acceptance: Optional[Acceptance]) -> Optional[Speculation]:
    """The row's speculation (None: no speculation)."""
    kind = _kind(m)
    if kind is None or not m.k:
        return None
    options = tuple((key, getattr(m, key)) for key in TREE_FIELDS if getattr(m, key) is not None) if m.drafting == "tree" else ()
    return Speculation(
        proposer=kind.name,
        k=m.k,
        acceptance=AcceptanceInput.given(per_position=acceptance.conditional),
        options=options,
        draft_model=m.draft,
        draft_tensor_parallel_size=m.draft_tp,  # the run's draft-TP rule decides, for every kind with a network
    )


# RunConfig fields -> the keys of a published.toml row that set them: a refusal names the row's key
ROW_KEYS = {"draft_tensor_parallel_size": "draft_tp", "tensor_parallel_size": "tp", "device": "gpu", "draft_model": "draft", "num_speculative_tokens": "k"}


def in_row_keys(message: str) -> str:
    """A configuration refusal in the row's own keys (``draft_tp = 2``, not ``draft_tensor_parallel_size = 2``):
    a field with an underscore wherever it is named, a plain word (``device``) only where it is assigned."""
    names = "|".join(sorted(ROW_KEYS, key=len, reverse=True))
    return re.sub(
        rf"(?<![\w'])({names})(?![\w])( = )?",
        lambda m: ROW_KEYS[m.group(1)] + (m.group(2) or "") if m.group(2) or "_" in m.group(1) else m.group(0),
        message,
    )


def plan(m: Measurement, assumptions: Assumptions, rows: dict, devices=None) -> Plan:
    """How row ``m`` is simulated, or why it cannot be.  A row whose engine no profile models
    (an SGLang version without one) is bad input, not an unreproducible row: it is refused, naming
    the row, before anything runs (its CSV row would need the engine identity too)."""
    try:
        engine_identity(m)
    except ConfigError as exc:
        raise ConfigError(f"data/published.toml row {m.id!r}: {exc}") from None
    devices = known_devices() if devices is None else devices
    reason = _unreproducible(m, devices, assumptions)
    if reason:
        return Plan(m, reason=reason)
    acceptance = acceptance_for(m, assumptions, rows) if m.proposer != NO_SPECULATION else None
    if m.proposer != NO_SPECULATION and acceptance is None:
        return Plan(m, reason="no published acceptance for this setting")
    try:
        run, baseline = _runs(m, acceptance, _workload(m, assumptions))
        variants = tuple(
            (f"{key} {value}", *_runs(m, acceptance, _workload(m, assumptions, {key: value}), **({key: value} if key in ("gpu", "tp") else {})))
            for key, values in m.plausible
            for value in values
        )
    except ConfigError as exc:
        return Plan(m, reason=f"the simulator refuses the setting: {in_row_keys(str(exc))}")
    return Plan(m, run=run, baseline=baseline, acceptance=acceptance, variants=variants)


def _runs(
    m: Measurement, acceptance: Optional[Acceptance], workload, gpu: Optional[str] = None, tp: Optional[int] = None
) -> tuple[RunConfig, Optional[RunConfig]]:
    from simulator.cli.vllm_serve import scheduler_defaults

    device, engine = gpu or m.gpu, engine_of(m)
    # vllm serve's limits for the row's vLLM version; another engine's row (an SGLang profile
    # included: its scheduler limits are not modelled) takes the proxy's
    limits_version = get_engine(engine if get_engine(engine).engine == "vllm" else PROXY_ENGINE).version
    seqs, tokens = scheduler_defaults(device, limits_version)
    deployment = Deployment(
        model=m.model, device=device, engine=engine, parallelism=Parallelism(tensor=tp or m.tp),
        # the source's limits, else what `vllm serve` of the row's engine profile picks on the GPU;
        # an offline batch of B runs with max_num_seqs = B
        limits=SchedulerLimits(max_num_batched_tokens=m.max_num_batched_tokens or tokens, max_num_seqs=m.max_num_seqs or m.batch_size or seqs),
        speculation=_speculation(m, acceptance),
    )
    run = deployment.run(workload, seed=SEED)
    return run, (deployment.without_speculation().run(workload, seed=SEED) if m.metric == "speedup" else None)


# ---- the engine that ran a row (issue 31): one rule, :func:`engine_identity` ----
# The proxy profile of another engine's rows that no profile of their own models (TensorRT-LLM;
# SGLang of neither a stated version nor a date on or after the oldest SGLang profile's release) and
# of a vLLM row whose source states neither a version nor a date: vLLM 0.10.1, the version the
# per-step overheads stand for (data/calibration/engine_costs.toml).  Such rows are simulated on the
# proxy and reported apart from the vLLM headline, labelled so.  An SGLang row of a stated version
# runs on its SGLang profile (:func:`_sglang`), one of a date on the newest out by then
# (:func:`_sglang_at`), still apart from the vLLM headline (engine class "other engine").
PROXY_ENGINE = "vllm-0.10.1"
# vLLM's V1 engine is the default from 0.8.0 on; before it the V0 engine (its own scheduler and
# model runner, multi-step scheduling from 0.6.0, FlashAttention-2), which no engine profile
# here models (every profile is V1's).
V1_SINCE = "0.8.0"
# The release dates: vLLM 0.8.0's (the first V1 default) and every engine profile's own
# (``released`` in simulator/profiles/engines.toml: the day its package was built for PyPI,
# docs/sources/engines.md "Release dates").  A row whose source states no vLLM version runs the
# release current at its source_date.
V1_SINCE_RELEASED = "2025-03-18"
VLLM_RELEASE_DATES = {V1_SINCE: V1_SINCE_RELEASED, **{e.version: e.released for e in engines_of("vllm")}}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM"}


@dataclass(frozen=True)
class EngineIdentity:
    profile: str  # the engine profile the row is simulated on (simulator/profiles/engines.toml)
    engine_class: str  # schemas.ENGINE_CLASSES: "vllm" rows make the headline, the rest are reported apart
    basis: str  # why, in words: the version stated, the release current at the source's date, or the proxy


def _release_at(date: str) -> Optional[str]:
    """The newest release of :data:`VLLM_RELEASE_DATES` out by ``date`` (ISO), None before all."""
    out = [v for v, released in VLLM_RELEASE_DATES.items() if released <= date]
    return max(out, key=Version) if out else None


def _vllm(version: str, how: str) -> EngineIdentity:
    """A vLLM release to its profile: the newest at or below it when that models its engine
    generation (V1); a V0 release runs on the oldest profile, informational."""
    profile = engine_for_version(version)
    if Version(version) < Version(V1_SINCE):
        return EngineIdentity(profile.name, VLLM_V0, f"{how}: the V0 engine (multi-step scheduling, FlashAttention-2), "
                              f"which no V1 profile models; run on the oldest profile, {profile.name}, and reported apart")
    if Version(profile.version) > Version(version):
        return EngineIdentity(profile.name, VLLM, f"{how}: V1, older than every profile; run on the oldest, {profile.name}, the nearest V1 profile")
    return EngineIdentity(profile.name, VLLM, f"{how}: {profile.name}, the newest profile at or below it")


def _sglang_basis(profile, how: str) -> str:
    carried = f", kernel gaps and CPU costs carried from {' and '.join(profile.carried_from)}" if profile.carried_from else ""
    return f"{how}; graph policy and overlap rule sourced from SGLang's source{carried}"


def _sglang(version: str) -> EngineIdentity:
    """An SGLang release to its profile: the newest SGLang profile at or below it in its minor
    series (simulator/profiles/engines.py sglang_engine_for_version); none: refused, naming it."""
    profile = sglang_engine_for_version(version)
    if profile is None:
        known = ", ".join(e.name for e in engines_of("sglang")) or "none"
        raise ConfigError(f"engine = \"sglang\", engine_version = {version!r}: no SGLang engine profile at or below it in its minor series "
                          f"(simulator/profiles/engines.toml has {known}); read that release's graph and overlap rules into a profile")
    return EngineIdentity(profile.name, OTHER_ENGINE, _sglang_basis(profile, f"SGLang {version} (stated): {profile.name}, the newest SGLang profile at or below it"))


def _sglang_at(date: str) -> Optional[EngineIdentity]:
    """An SGLang row of no version, by its source's date: the newest SGLang profile released by
    then (the rule vLLM rows follow); None before the oldest (the row stays on the proxy)."""
    out = [e for e in engines_of("sglang") if e.released and e.released <= date]
    if not out:
        return None
    profile = max(out, key=lambda e: Version(e.version))
    how = f"SGLang of {date} (version not stated): {profile.name} (released {profile.released}), the newest SGLang profile out by then"
    return EngineIdentity(profile.name, OTHER_ENGINE, _sglang_basis(profile, how))


def engine_identity(m: Measurement) -> EngineIdentity:
    """The engine profile a row runs under and its engine class, by one rule: a vLLM row runs the
    version its source states, else the release current at its source's date (the newest of
    :data:`VLLM_RELEASE_DATES` out by then), else the proxy; a V0 release (before :data:`V1_SINCE`)
    runs on the oldest profile as "vllm V0"; an SGLang row runs its stated version's SGLang
    profile, else the newest SGLang profile out by its source's date; another engine's row (or an
    SGLang row of neither, or one older than every profile) runs on :data:`PROXY_ENGINE`; all of
    these as "other engine"."""
    if m.engine == "sglang" and m.engine_version:
        return _sglang(m.engine_version)
    if m.engine == "sglang" and m.source_date:
        dated = _sglang_at(m.source_date)
        if dated is not None:
            return dated
        oldest = min(engines_of("sglang"), key=lambda e: Version(e.version))
        return EngineIdentity(PROXY_ENGINE, OTHER_ENGINE, f"SGLang of {m.source_date} (version not stated): before every SGLang profile "
                              f"({oldest.name}, released {oldest.released}); run on the proxy profile {PROXY_ENGINE}")
    if m.engine != VLLM:
        stated = f" {m.engine_version}" if m.engine_version else " (version not stated)"
        return EngineIdentity(PROXY_ENGINE, OTHER_ENGINE, f"{ENGINE_NAMES.get(m.engine, m.engine)}{stated}: no engine profile of its own; run on the proxy profile {PROXY_ENGINE}")
    if m.engine_version:
        return _vllm(m.engine_version, f"vLLM {m.engine_version} (stated)")
    if m.source_date:
        release = _release_at(m.source_date)
        if release is None:  # before 0.8.0: a V0 release, which one unknown
            oldest = engine_for_version("0")
            return EngineIdentity(oldest.name, VLLM_V0, f"vLLM of {m.source_date} (version not stated), before {V1_SINCE} ({VLLM_RELEASE_DATES[V1_SINCE]}): "
                                  f"the V0 engine, which no V1 profile models; run on the oldest profile, {oldest.name}, and reported apart")
        return _vllm(release, f"vLLM of {m.source_date} (version not stated): {release} (released {VLLM_RELEASE_DATES[release]}), the newest dated release out by then")
    return EngineIdentity(PROXY_ENGINE, VLLM_UNKNOWN, f"vLLM, neither version nor date stated: run on the proxy profile {PROXY_ENGINE}, and reported apart")


def engine_of(m: Measurement) -> str:
    """The engine profile a row runs under (:func:`engine_identity`)."""
    return engine_identity(m).profile


def simulated_value(m: Measurement, record: dict, baseline: Optional[dict]) -> float:
    """The simulated counterpart of the row's published figure, from sweep records."""
    if m.metric == "output_tokens_per_s":
        return record["throughput_tok_s"]
    if m.metric == "tpot_ms":
        return record["tpot_p50_s"] * 1e3
    if m.metric == "tpot_mean_ms":
        return record["tpot_mean_s"] * 1e3
    if m.metric == "itl_mean_ms":
        return record["itl_mean_s"] * 1e3
    if m.metric == "requests_per_s":
        return record["num_requests"] / record["makespan_s"]
    if m.metric == "decode_tokens_per_s":
        return 1.0 / record["tpot_p50_s"]
    if m.qps is not None:  # latency speedup under Poisson load
        return speedup(baseline, record, "e2e_p50_s")
    return speedup(baseline, record, "throughput_tok_s")
