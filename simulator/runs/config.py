"""What one simulation run is: plain frozen dataclasses, validated on construction.

Every check raises :class:`simulator.util.errors.ConfigError` with the field name and the
offending value, so a CLI can print it and exit non-zero before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Optional, Union

from simulator.util.errors import ConfigError
from simulator.profiles.engines import DEFAULT_ENGINE  # the newest vLLM release the engine profiles model
from simulator.profiles.hardware import DEFAULT_DEVICE
from simulator.profiles.step_scales import StepScales
from simulator.speculative import proposers
from simulator.speculative.verify_cost import ATTENTION_MODES, DEFAULT_ATTENTION, DEFAULT_INTERPOLATION

# The proposer kinds, by the simulator's name (each kind's facts: simulator.speculative.proposers)
PROPOSERS = proposers.names()
# Proposers that run a draft network named by draft_model (a draft model, an EAGLE head, a parallel drafter)
MODEL_PROPOSERS = proposers.draft_model_names()
SCHEDULERS = ("sarathi",)
DEFAULT_NGRAM_OVERHEAD_MS = 0.1
# The serving engine's CPU time per step outside the GPU's kernels (scheduling, input
# preparation, sampling bookkeeping, launches), for vLLM 0.10.1 on an H100: SpecDecode-Bench's
# constant, fitted on its own InstructCoder runs (no row of data/published.toml).  Declared in
# data/calibration/engine_costs.toml; see docs/model.md.  0 reproduces stock Vidur.
DEFAULT_ENGINE_OVERHEAD_MS = 1.2
# Fixed time of one draft pass (EAGLE head or draft model) outside the ops its profile holds:
# metadata updates between passes, graph and attention launches, the argmax (vLLM 0.10.1, H100).
# Declared with its derivation in data/calibration/engine_costs.toml.
DEFAULT_DRAFT_PASS_OVERHEAD_MS = 0.37
# Verify attention: the evidence (data/calibration/engine_costs.toml [verify_attention]) puts
# the prefill-style kernel vLLM runs on Hopper at the lower bound, kv_once: its fitted lambda is
# 0 (held to [0, 1]).  The modes and defaults (ATTENTION_MODES, DEFAULT_ATTENTION,
# DEFAULT_INTERPOLATION) are defined once, beside the blend they name, in speculative/verify_cost.py.
# The scheduler's limits a RunConfig gets when none are given: what `vllm serve` (vLLM 0.10.1, V1
# engine) picks on an A100 and on GPUs under 70 GiB.  The command lines take vLLM's own rule for
# the device and version instead (simulator/cli/vllm_serve.py, the one place it is written).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_MAX_NUM_SEQS = 256
# vLLM's --quantization methods the cost model covers, and its --kv-cache-dtype choices
QUANTIZATIONS = ("fp8", "mxfp4", "nvfp4")
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(condition: bool, name: str, value, what: str) -> None:
    if not condition:
        raise ConfigError(f"{name} = {value!r}: {what}")


def _probability(name: str, value) -> None:
    _require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) and 0 <= value <= 1,
        name,
        value,
        "must be a number in [0, 1]",
    )


@dataclass(frozen=True)
class PoissonWorkload:
    """Vidur's synthetic generator: Poisson arrivals, fixed prompt and output lengths.

    Arrivals come from Vidur's own interval generator, which caps each gap at 3/rate, so the
    realised rate is about 1.05x ``arrival_rate``; a stock Vidur run with the same seed sees
    the identical request stream.
    """

    num_requests: int = 300
    prompt_tokens: int = 1024
    output_tokens: int = 256
    arrival_rate: float = 4.0
    seed: int = 42

    def __post_init__(self):
        _require(_is_int(self.num_requests) and self.num_requests > 0, "num_requests", self.num_requests, "must be a positive integer")
        _require(_is_int(self.prompt_tokens) and self.prompt_tokens > 0, "prompt_tokens", self.prompt_tokens, "must be a positive integer")
        _require(_is_int(self.output_tokens) and self.output_tokens > 0, "output_tokens", self.output_tokens, "must be a positive integer")
        _require(
            isinstance(self.arrival_rate, (int, float)) and math.isfinite(self.arrival_rate) and self.arrival_rate > 0,
            "arrival_rate",
            self.arrival_rate,
            "must be a finite number of requests per second > 0",
        )
        _require(_is_int(self.seed) and self.seed >= 0, "seed", self.seed, "must be an integer >= 0")

    @property
    def max_request_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class ExplicitWorkload:
    """Exact requests (e.g. a validation workload): arrival seconds and token counts."""

    arrival_s: tuple[float, ...]
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]

    def __post_init__(self):
        n = len(self.arrival_s)
        _require(n > 0, "arrival_s", self.arrival_s, "must hold at least one request")
        _require(
            len(self.prompt_tokens) == n and len(self.output_tokens) == n,
            "prompt_tokens/output_tokens",
            (len(self.prompt_tokens), len(self.output_tokens)),
            f"must have the same length as arrival_s ({n})",
        )
        for i, t in enumerate(self.arrival_s):
            _require(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0, f"arrival_s[{i}]", t, "must be a finite time >= 0")
            if i:
                _require(t >= self.arrival_s[i - 1], f"arrival_s[{i}]", t, "arrivals must be sorted")
        for name, values in (("prompt_tokens", self.prompt_tokens), ("output_tokens", self.output_tokens)):
            for i, v in enumerate(values):
                _require(_is_int(v) and v > 0, f"{name}[{i}]", v, "must be a positive integer")

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def max_request_tokens(self) -> int:
        return max(p + o for p, o in zip(self.prompt_tokens, self.output_tokens))


@dataclass(frozen=True)
class ClosedLoopWorkload:
    """A fixed number of requests in flight: each finished request is replaced at once.

    Like ``vllm bench serve --max-concurrency N``, or an offline run capped by ``max_num_seqs``:
    ``concurrency`` requests arrive at time 0 and request i + concurrency arrives when one
    finishes.  Lengths are given per request (fixed, or drawn from a trace).
    """

    concurrency: int
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    # A real client's closed loop, as the fit against a server measures it: when the first
    # `concurrency` requests reached the server (seconds, default all at 0; a client sends them
    # one after another, so a server's first step often holds only the first), and how long after
    # a completion its replacement arrives (the client's round trip: a real replacement misses
    # the step that starts as its predecessor finishes)
    first_arrivals_s: tuple[float, ...] = ()
    turnaround_s: float = 0.0

    def __post_init__(self):
        _require(_is_int(self.concurrency) and self.concurrency > 0, "concurrency", self.concurrency, "must be a positive integer")
        _require(
            len(self.first_arrivals_s) in (0, min(self.concurrency, len(self.prompt_tokens)))
            and all(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in self.first_arrivals_s),
            "first_arrivals_s", self.first_arrivals_s, "must be empty or one time >= 0 (seconds) per request of the first wave",
        )
        _require(isinstance(self.turnaround_s, (int, float)) and math.isfinite(self.turnaround_s) and self.turnaround_s >= 0, "turnaround_s", self.turnaround_s, "must be a number of seconds >= 0")
        n = len(self.prompt_tokens)
        _require(n > 0, "prompt_tokens", self.prompt_tokens, "must hold at least one request")
        _require(len(self.output_tokens) == n, "output_tokens", len(self.output_tokens), f"must have one entry per request ({n})")
        for name, values in (("prompt_tokens", self.prompt_tokens), ("output_tokens", self.output_tokens)):
            for i, v in enumerate(values):
                _require(_is_int(v) and v > 0, f"{name}[{i}]", v, "must be a positive integer")

    @classmethod
    def fixed(cls, concurrency: int, num_requests: int, prompt_tokens: int, output_tokens: int) -> "ClosedLoopWorkload":
        _require(_is_int(num_requests) and num_requests > 0, "num_requests", num_requests, "must be a positive integer")
        return cls(concurrency, (prompt_tokens,) * num_requests, (output_tokens,) * num_requests)

    @property
    def num_requests(self) -> int:
        return len(self.prompt_tokens)

    @property
    def max_request_tokens(self) -> int:
        return max(p + o for p, o in zip(self.prompt_tokens, self.output_tokens))


Workload = Union[PoissonWorkload, ExplicitWorkload, ClosedLoopWorkload]


@dataclass(frozen=True)
class SpeculationConfig:
    """One speculative-decoding setting.  ``num_speculative_tokens == 0`` means off.

    Acceptance is an input: either ``acceptance_rate`` (i.i.d. per proposed position) or
    ``acceptance_per_position`` (P(position i accepted | all before accepted), at least k
    entries; vLLM's per-position counters give this after conversion).

    ``proposer`` is any name of a registered kind (vLLM's method names included) and is stored as
    the simulator's; ``options`` are that kind's options as (name, value) pairs (a suffix
    decoder's tree depth, a draft tree's top-k), refused when the kind does not take them.
    """

    num_speculative_tokens: int = 0
    acceptance_rate: Optional[float] = None
    acceptance_per_position: Optional[tuple[float, ...]] = None
    proposer: str = "ngram"
    ngram_overhead_ms: float = DEFAULT_NGRAM_OVERHEAD_MS
    draft_model: Optional[str] = None
    draft_profile_dir: Optional[str] = None  # Vidur-format profile of the draft; None = built-in
    # GPUs the draft is sharded over: 1 (on the first GPU of the group) or the target's TP, as vLLM
    # allows; None = the target's (vLLM's default)
    draft_tensor_parallel_size: Optional[int] = None
    attention: str = DEFAULT_ATTENTION
    interpolation: float = DEFAULT_INTERPOLATION
    # fixed time of each draft pass of a draft model or EAGLE head (0: only the profiled ops)
    draft_pass_overhead_ms: float = DEFAULT_DRAFT_PASS_OVERHEAD_MS
    # P(the proposer produces a draft at a decode step); an n-gram proposer finds no match
    # at some steps, which then run as plain decode.  Measured by the validation harness.
    proposal_probability: float = 1.0
    # Dynamic speculation (vLLM's num_speculative_tokens_per_batch_size): rows (start, end, k),
    # k picked at each step from the running batch size; None = k fixed.  With a schedule,
    # num_speculative_tokens is the maximum (0 = the schedule's largest k).
    k_schedule: Optional[tuple[tuple[int, int, int], ...]] = None
    # vLLM's enable_adaptive_verification (0.30.0, Model Runner V2): each step verifies the draft
    # budget its start-up cost tables pick; the drafter still drafts num_speculative_tokens
    adaptive_verification: bool = False
    # the proposer kind's options, (name, value) pairs; unset ones take the kind's defaults
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        k = self.num_speculative_tokens
        _require(_is_int(k) and k >= 0, "num_speculative_tokens", k, "must be an integer >= 0")
        if self.k_schedule is not None:
            from simulator.speculative.k_schedule import check_schedule, max_k

            schedule = check_schedule(self.k_schedule, k if k > 0 else None)
            object.__setattr__(self, "k_schedule", schedule)
            if k == 0:
                k = max_k(schedule)
                object.__setattr__(self, "num_speculative_tokens", k)
        kind = proposers.kind(self.proposer) if isinstance(self.proposer, str) else proposers.kind(repr(self.proposer))
        object.__setattr__(self, "proposer", kind.name)
        self._check_options(kind)
        _require(self.attention in ATTENTION_MODES, "attention", self.attention, f"must be one of {ATTENTION_MODES}")
        _require(isinstance(self.adaptive_verification, bool), "adaptive_verification", self.adaptive_verification, "must be true or false")
        if self.adaptive_verification and self.k_schedule:
            raise ConfigError("adaptive_verification with a k_schedule: the two together are not modelled; give one of them")
        _probability("interpolation", self.interpolation)
        _probability("proposal_probability", self.proposal_probability)
        for name in ("ngram_overhead_ms", "draft_pass_overhead_ms"):
            value = getattr(self, name)
            _require(
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0,
                name,
                value,
                "must be a finite number of milliseconds >= 0",
            )
        if k == 0:
            return
        given = (self.acceptance_rate is not None) + (self.acceptance_per_position is not None)
        _require(given == 1, "acceptance", (self.acceptance_rate, self.acceptance_per_position), "give exactly one of acceptance_rate or acceptance_per_position")
        if self.acceptance_rate is not None:
            _probability("acceptance_rate", self.acceptance_rate)
        else:
            vector = self.acceptance_per_position
            _require(isinstance(vector, tuple) and len(vector) > 0, "acceptance_per_position", vector, "must be a non-empty tuple")
            _require(len(vector) >= k, "acceptance_per_position", vector, f"needs at least k = {k} entries")
            for i, p in enumerate(vector):
                _probability(f"acceptance_per_position[{i}]", p)
        if kind.needs_draft_model:
            _require(bool(self.draft_model), "draft_model", self.draft_model, f"is required when proposer = '{self.proposer}'")
        elif self.draft_model:
            _require(False, "draft_model", self.draft_model, f"proposer = '{self.proposer}' drafts with {kind.drafts_with.value}, not a draft model; drop it")
        if self.draft_profile_dir is not None:
            _require(Path(self.draft_profile_dir).is_dir(), "draft_profile_dir", self.draft_profile_dir, "is not a directory")

    def _check_options(self, kind) -> None:
        options = self.options
        _require(
            isinstance(options, tuple) and all(isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) for o in options),
            "options", options, "must be (name, value) pairs",
        )
        names = [name for name, _ in options]
        _require(len(set(names)) == len(names), "options", options, "name an option once")
        for name in names:
            if kind.option(name) is None:
                takers = proposers.kinds_taking(name)
                owners = f"an option of proposer {' / '.join(repr(t) for t in takers)}" if takers else "not an option of any proposer"
                raise ConfigError(f"{name}: {owners}, not of proposer = '{kind.name}'; drop it or change the proposer")
        resolved = kind.resolve_options(dict(options))
        object.__setattr__(self, "options", tuple(sorted((name, resolved[name]) for name in names)))

    @property
    def enabled(self) -> bool:
        return self.num_speculative_tokens > 0

    @property
    def kind(self):
        """The proposer kind (:mod:`simulator.speculative.proposers`)."""
        return proposers.kind(self.proposer)

    @property
    def option_values(self) -> dict:
        """Every option of the proposer kind: the given ones and the kind's defaults."""
        return self.kind.resolve_options(dict(self.options))

    @property
    def uses_draft_network(self) -> bool:
        """A network (a draft model, an EAGLE head, MTP layers, a parallel drafter) runs, and holds
        weights and KV, next to the target."""
        return self.enabled and self.kind.runs_network

    def conditional_acceptance(self) -> tuple[float, ...]:
        """P(position i accepted | positions < i accepted) for i < k."""
        k = self.num_speculative_tokens
        if self.acceptance_per_position is not None:
            return tuple(float(p) for p in self.acceptance_per_position[:k])
        return (float(self.acceptance_rate),) * k


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one simulation's output (together with the vidur version)."""

    workload: Workload = field(default_factory=PoissonWorkload)
    speculation: SpeculationConfig = field(default_factory=SpeculationConfig)
    model: str = "meta-llama/Llama-2-7b-hf"
    device: str = DEFAULT_DEVICE
    profile_dir: Optional[str] = None  # a Vidur-format directory; None = built-in generator
    scheduler: str = "sarathi"
    # vLLM's max_num_batched_tokens: Sarathi's token budget per step (prompt chunks plus decode tokens)
    chunk_size: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    # vLLM's max_num_seqs: the most requests in the running batch
    batch_size_cap: int = DEFAULT_MAX_NUM_SEQS
    num_kv_blocks: Optional[int] = None  # override the memory planner (e.g. a server's block count)
    block_size: int = 16
    tensor_parallel_size: int = 1
    network_profile_dir: Optional[str] = None  # Vidur-format all_reduce.csv dir; None = the profile's own or built-in
    pipeline_stages: int = 1
    # the run's one seed besides the workload's (workload.seed: arrivals and lengths); what it seeds
    # is named below (acceptance_seed, vidur_seed).  Kept as one field: it is the CSVs' seed column,
    # part of every cache key, and --acceptance-seed on the command lines.
    seed: int = 0
    cache_dir: Optional[str] = None
    # Outside Vidur's op set: LM head + sampler on every logits token, and a fixed per-step
    # engine overhead.  lm_head=False with engine_overhead_ms=0 is stock Vidur's costing.
    lm_head: bool = True
    engine_overhead_ms: float = DEFAULT_ENGINE_OVERHEAD_MS
    # how the engine issues a step's kernels (CUDA graphs, launches): a profile of
    # simulator/profiles/engines.toml, named for the vLLM version it stands for
    engine: str = DEFAULT_ENGINE
    # a server's fitted multipliers on the built-in step model's terms (simulator/profiles/step_scales.py,
    # from python -m simulator.validation fit); None: the built-in profile as it stands
    step_scales: Optional[StepScales] = None
    # precision, as vLLM's --quantization and --kv-cache-dtype: None / "auto" = what the model's
    # config says (its quantization_config; the model's 16-bit dtype for the cache)
    quantization: Optional[str] = None
    kv_cache_dtype: str = "auto"
    # mixture-of-experts targets: vLLM's --enable-expert-parallel (whole experts, E / TP per GPU),
    # and the router's popularity skew (Zipf exponent; 0 = uniform routing, simulator/profiles/moe.py)
    expert_parallel: bool = False
    moe_routing_skew: float = 0.0
    # vLLM's --data-parallel-size for a mixture of experts with expert parallelism: the run is one
    # of this many ranks (each with its own requests: give it one rank's share of the load), whose
    # experts serve every rank's tokens (simulator/profiles/moe.py)
    data_parallel_size: int = 1

    def __post_init__(self):
        _require(isinstance(self.device, str) and self.device.strip() != "", "device", self.device, "must be a device name such as 'a100'")
        object.__setattr__(self, "device", self.device.strip().lower())  # device names are matched case-insensitively
        _require(
            self.scheduler in SCHEDULERS,
            "scheduler",
            self.scheduler,
            "only Vidur's Sarathi scheduler is modelled (speculative runs and their baselines alike)",
        )
        for name in ("chunk_size", "batch_size_cap", "block_size", "tensor_parallel_size", "pipeline_stages"):
            value = getattr(self, name)
            _require(_is_int(value) and value > 0, name, value, "must be a positive integer")
        if self.num_kv_blocks is not None:
            _require(_is_int(self.num_kv_blocks) and self.num_kv_blocks > 0, "num_kv_blocks", self.num_kv_blocks, "must be a positive integer")
        _require(_is_int(self.seed) and self.seed >= 0, "seed", self.seed, "must be an integer >= 0")
        _require(isinstance(self.lm_head, bool), "lm_head", self.lm_head, "must be true or false")
        _require(
            isinstance(self.engine_overhead_ms, (int, float)) and not isinstance(self.engine_overhead_ms, bool)
            and math.isfinite(self.engine_overhead_ms) and self.engine_overhead_ms >= 0,
            "engine_overhead_ms",
            self.engine_overhead_ms,
            "must be a finite number of milliseconds >= 0",
        )
        self._check_draft_tensor_parallel()
        schedule = self.speculation.k_schedule
        if schedule is not None and schedule[-1][1] < self.batch_size_cap:
            raise ConfigError(
                f"k_schedule row {len(schedule) - 1} {list(schedule[-1])}: ends at batch size {schedule[-1][1]}, but the batch "
                f"holds up to batch_size_cap = {self.batch_size_cap} requests; batch sizes {schedule[-1][1] + 1}..{self.batch_size_cap} have no k"
            )
        if self.network_profile_dir is not None:
            _require(Path(self.network_profile_dir).is_dir(), "network_profile_dir", self.network_profile_dir, "is not a directory")
        _require(self.pipeline_stages == 1, "pipeline_stages", self.pipeline_stages, "only pipeline parallelism 1 is modelled")
        if self.profile_dir is not None:
            _require(Path(self.profile_dir).is_dir(), "profile_dir", self.profile_dir, "is not a directory")
        _require(isinstance(self.engine, str) and self.engine.strip() != "", "engine", self.engine, "must name an engine profile such as 'vllm-0.10.1'")
        _require(self.step_scales is None or isinstance(self.step_scales, StepScales), "step_scales", self.step_scales, "must be a StepScales or None")
        if self.speculation.adaptive_verification and (self.profile_dir is not None or self.speculation.draft_profile_dir is not None):
            raise ConfigError(
                "adaptive_verification with a profile directory: its cost tables are profiled on the built-in step model "
                "(a Vidur-format profile cannot time a step outside a run); drop the profile directory or adaptive verification"
            )
        if self.step_scales is not None and (self.profile_dir is not None or self.speculation.draft_profile_dir is not None):
            raise ConfigError("step_scales with a profile directory: fitted scales multiply the built-in profile's terms, and a Vidur-format profile has tables of its own; drop one")
        _require(self.quantization is None or self.quantization in QUANTIZATIONS, "quantization", self.quantization, f"must be one of {QUANTIZATIONS} (or unset: the model's own)")
        _require(self.kv_cache_dtype in KV_CACHE_DTYPES, "kv_cache_dtype", self.kv_cache_dtype, f"must be one of {KV_CACHE_DTYPES}")
        _require(isinstance(self.expert_parallel, bool), "expert_parallel", self.expert_parallel, "must be true or false")
        _require(_is_int(self.data_parallel_size) and self.data_parallel_size > 0, "data_parallel_size", self.data_parallel_size, "must be a positive integer")
        if self.speculation.k_schedule and self.data_parallel_size > 1:
            # vllm/config/vllm.py (v0.30.0), _maybe_disable_dynamic_sd_for_data_parallel: ranks could pick different k and diverge
            raise ConfigError(
                f"k_schedule with data_parallel_size = {self.data_parallel_size}: vLLM drops num_speculative_tokens_per_batch_size under data "
                f"parallelism and runs the static num_speculative_tokens = {self.speculation.num_speculative_tokens}; simulate that k instead"
            )
        _require(
            isinstance(self.moe_routing_skew, (int, float)) and not isinstance(self.moe_routing_skew, bool)
            and math.isfinite(self.moe_routing_skew) and self.moe_routing_skew >= 0,
            "moe_routing_skew", self.moe_routing_skew, "must be a finite number >= 0 (0 = uniform routing)",
        )
        self._read_local_models()

    def _check_draft_tensor_parallel(self) -> None:
        """The draft-TP rule, written once for every front end (each maps the field names to its
        own flags or keys): vLLM shards a draft network over one GPU or over the target's GPUs, and
        a proposer without a network has nothing to shard."""
        draft_tp = self.speculation.draft_tensor_parallel_size
        if draft_tp is None:
            return
        _require(
            _is_int(draft_tp) and draft_tp in (1, self.tensor_parallel_size),
            "draft_tensor_parallel_size",
            draft_tp,
            f"must be 1 or the target's tensor_parallel_size ({self.tensor_parallel_size})",
        )
        kind = self.speculation.kind
        _require(
            kind.runs_network,
            "draft_tensor_parallel_size",
            draft_tp,
            f"proposer = '{kind.name}' runs no draft network (a draft model, a head, MTP layers, a drafter) to shard; drop it",
        )

    def _read_local_models(self) -> None:
        """A model or draft given as a local ``config.json`` path is read here, when the run is built
        (and again when a pickled run arrives in another process): resolution then looks both up as
        values (:func:`simulator.vidur.models.known_model`), and a bad file is refused before anything
        runs.  Catalog names need no reading (Vidur loads only for a path)."""
        from simulator.models.files import looks_like_path

        for name in (self.model, self.speculation.draft_model):
            if isinstance(name, str) and name and looks_like_path(name):
                from simulator.vidur.models import model_config

                model_config(name)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._read_local_models()

    @property
    def acceptance_seed(self) -> int:
        """The seed of the acceptance draws (:class:`simulator.speculative.acceptance.AcceptanceSampler`):
        the only randomness of a run besides its workload's."""
        return self.seed

    @property
    def vidur_seed(self) -> int:
        """The seed handed to Vidur's simulation config.  Vidur reads it only in its own entry point
        (vidur/main.py's set_seeds), which a run never calls, so it changes no number; it is the
        acceptance seed so a config printed from Vidur names the same seed as the run."""
        return self.seed

    @property
    def draft_tensor_parallel_size(self) -> int:
        """GPUs the draft model runs on (vLLM's default: the target's)."""
        draft_tp = self.speculation.draft_tensor_parallel_size
        return self.tensor_parallel_size if draft_tp is None else draft_tp

    def to_dict(self) -> dict:
        data = _as_dict(self)
        data["workload"]["kind"] = type(self.workload).__name__
        return data


_SCALARS = (int, float, str, bool, type(None))


def _as_dict(value):
    """What ``dataclasses.asdict`` gives for a config (frozen dataclasses, tuples, scalars), without
    its deep copy of every element: a closed loop's lengths are hundreds of numbers, and a sweep
    keys every run by its config.  Immutable tuples of scalars are returned as they are."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_dict(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        if hasattr(value, "_fields"):  # a named tuple, rebuilt as asdict rebuilds it
            return type(value)(*[_as_dict(v) for v in value])
        return value if all(type(v) in _SCALARS for v in value) else tuple(_as_dict(v) for v in value)
    if isinstance(value, list):
        return [_as_dict(v) for v in value]
    if isinstance(value, dict):
        return {_as_dict(k): _as_dict(v) for k, v in value.items()}
    return value
