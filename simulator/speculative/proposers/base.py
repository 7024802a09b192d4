"""What a proposer kind is: every fact about one kind of speculative proposer, in one object.

A kind (``n-gram``, ``draft model``, ``EAGLE-3 head``, ``MTP``, ``DFlash``, ...) owns:

* its names: the simulator's (the ``proposer`` of a run and of every CSV), vLLM's
  ``--speculative-config`` ``method`` and the aliases vLLM accepts, the first vLLM release that
  has it, and the options it takes with the config keys they become;
* what it drafts with (:class:`DraftSource`) and the draft architectures it reads;
* its compatibility check against the target and the draft (:meth:`ProposerKind.check`);
* its weights and KV cache per GPU (:meth:`ProposerKind.draft_memory`);
* its lookahead slots (vLLM's ``num_lookahead_tokens``, :meth:`ProposerKind.lookahead_slots`);
* its cost model: what a step's proposing runs, as :class:`DraftPass` forwards of the draft
  network, :class:`TokenScan` GPU kernels and host time (:meth:`ProposerKind.step_cost`);
* the acceptance inputs it accepts, and its recommended ``--speculative-config``.

Everything here is pure: a kind never looks a model up, reads a file or imports Vidur.  The
engine resolves the models into :class:`ModelFacts` and costs the passes a kind describes with
the draft side's predictor (:mod:`simulator.engine.proposers`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, Optional, Sequence

from simulator.util.errors import ConfigError
from simulator.speculative.memory import BYTES, ModelMemory
from simulator.speculative.step import StepPlan, TreeShape

# The acceptance a kind can be given: an i.i.d. rate per proposed token, conditional per-position
# rates, or a mean acceptance length at k (vLLM's and SGLang's figure, bonus token included).
ACCEPTANCE_INPUTS = ("rate", "per_position", "length")


class DraftSource(enum.Enum):
    """What a kind drafts with."""

    NOTHING = "nothing (a lookup in the tokens so far)"
    DRAFT_MODEL = "a draft model"
    EAGLE_HEAD = "an EAGLE head"
    MTP_LAYERS = "the target's own multi-token-prediction layers"
    PARALLEL_DRAFTER = "a parallel drafter (all k tokens in one pass)"


@dataclass(frozen=True)
class ModelFacts:
    """What a kind reads from a model's ``config.json``, resolved once by the engine.

    ``drafter`` is the speculative method a draft network's architecture serves ("eagle",
    "eagle3", "dflash"), None for an ordinary model; ``mtp_layers`` the multi-token-prediction
    layers a target carries and ``mtp_field`` the config field they were read from (empty when
    the architecture has none); ``block_size`` and ``target_layer_ids`` a parallel drafter's block
    and the target layers whose hidden states it reads; ``mask_token`` whether an EAGLE head was
    trained for parallel drafting (its config names the mask token).
    """

    name: str
    architecture: str
    hidden_size: int
    vocab_size: int
    num_layers: int
    drafter: Optional[str] = None
    fc_inputs: int = 0
    targets: tuple[str, ...] = ()
    mtp_layers: int = 0
    mtp_field: str = ""
    block_size: int = 0
    target_layer_ids: tuple[int, ...] = ()
    mask_token: bool = False  # an EAGLE head's config names a parallel-drafting mask token


@dataclass(frozen=True)
class NetworkMemory:
    """One GPU's share of a draft network, as the engine counts it (Vidur's ``ParamCounter``):
    its decoder layers (weights without embeddings, KV bytes per cached token), its own embedding
    and LM head, its width and its tensor-parallel degree."""

    layers: ModelMemory
    embeddings_bytes: int
    hidden_size: int
    tensor_parallel: int


class PassRow(NamedTuple):
    """One row of a draft pass: ``q`` query tokens over ``kv`` cached tokens (the pass's own
    included).  ``multi_query`` says how its attention runs: True for several queries of one
    sequence over its cache in one varlen kernel, as a verify row runs (costed by the verify
    model), False for a prompt chunk; None leaves it to Vidur's rule (one query: a decode, more:
    a prefill chunk).  A pass whose rows say nothing is costed exactly as Vidur costs a batch.
    A NamedTuple: a step builds one per request and pass."""

    request: Any
    q: int
    kv: int
    multi_query: Optional[bool] = None


class DraftPass(NamedTuple):
    """One forward of the draft network: its rows and the logits rows its LM head scores, plus the
    fc GEMM (``fc_inputs`` x hidden -> hidden) over ``fc_tokens`` tokens before it and a context
    K/V projection (hidden -> K and V, every draft layer) over ``context_kv_tokens`` tokens.
    Each pass also pays the fixed per-pass cost (launches and the draft loop's metadata updates).
    A NamedTuple: a step builds one per pass."""

    rows: tuple[PassRow, ...]
    logits_rows: int
    fc_inputs: int = 0
    fc_tokens: int = 0
    context_kv_tokens: int = 0


def catch_up_pass(step: StepPlan, fc_inputs: int = 0) -> StepWork:
    """A step that drafts nothing (k = 0: a dynamic-SD row, or no row left to draft for) still runs
    the drafter's first pass over every token the target computed, so the drafter's KV cache and
    hidden states stay in step with the target's; its LM head samples nothing.  vLLM: the first
    forward of ``propose`` in ``vllm/v1/spec_decode/llm_base_proposer.py`` runs before the check
    "No draft tokens requested (e.g. Dynamic SD decided K=0) ... return an empty tensor" (v0.24.0
    to v0.30.0).  A step with no row computes nothing and costs nothing."""
    if not step.requests:
        return StepWork()
    rows = tuple(map(PassRow, step.requests, step.computed, step.kv_tokens, step.decode))
    computed = sum(step.computed)
    return StepWork(passes=(DraftPass(rows, 0, fc_inputs, computed if fc_inputs else 0),))


@dataclass(frozen=True)
class TokenScan:
    """A memory-bound GPU kernel that streams ``bytes`` of token ids (the GPU n-gram matcher)."""

    bytes: float


@dataclass(frozen=True)
class StepWork:
    """What one step's proposing runs: host (CPU) time, GPU kernels and draft-network passes."""

    host_seconds: float = 0.0
    scans: tuple[TokenScan, ...] = ()
    passes: tuple[DraftPass, ...] = ()


@dataclass(frozen=True)
class Option:
    """An option a kind takes: its simulator name and CLI flag, type and default, the
    ``--speculative-config`` key it becomes (None: a simulation input vLLM has no key for), its
    range, and where a default taken from a published figure comes from."""

    name: str
    kind: type
    default: Any
    help: str
    vllm_key: Optional[str] = None
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    source: str = ""
    # written into the recommended config even at its default (else only when it differs from the
    # default, which is vLLM's own)
    always_in_config: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any, owner: str) -> Any:
        if value is None and self.default is None:
            return None
        integer = self.kind is int
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (not integer or isinstance(value, int))
        ok = ok and math.isfinite(value)
        ok = ok and (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)
        if not ok:
            bounds = [f">= {self.minimum:g}" if self.minimum is not None else "", f"<= {self.maximum:g}" if self.maximum is not None else ""]
            what = "an integer" if integer else "a number"
            raise ConfigError(f"{self.name} = {value!r}: proposer '{owner}' needs {what} {' and '.join(b for b in bounds if b)}".rstrip())
        return int(value) if integer else float(value)


def milliseconds(name: str, value: Any) -> float:
    """A kind's fixed cost in milliseconds: a finite number >= 0 (a bool is not one), or a
    ConfigError naming the run field it is stored as."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name} = {value!r}: must be a finite number of milliseconds >= 0")
    return value


@dataclass(frozen=True)
class NoOptions:
    """The cost knobs of a kind that has none (its proposing costs what its step work says)."""


# Fixed time of one draft pass (EAGLE head or draft model) outside the ops its profile holds:
# metadata updates between passes, graph and attention launches, the argmax (vLLM 0.10.1, H100).
# Declared with its derivation in data/calibration/engine_costs.toml [draft_pass] (value_ms).
DEFAULT_DRAFT_PASS_OVERHEAD_MS = 0.37


@dataclass(frozen=True)
class DraftPassOptions:
    """The cost knob of every kind that runs a draft network (a draft model, an EAGLE head, MTP
    layers, a parallel drafter): the fixed time each pass of that network pays beyond its profiled
    ops (0: only the profiled ops).  The engine adds it per pass (:mod:`simulator.engine.proposers`).

    A kind's options dataclass names its fields as the run stores them
    (:class:`~simulator.runs.speculation.SpeculationConfig`), so a run's keys do not depend on
    which kind owns a knob."""

    draft_pass_overhead_ms: float = DEFAULT_DRAFT_PASS_OVERHEAD_MS

    def __post_init__(self):
        milliseconds("draft_pass_overhead_ms", self.draft_pass_overhead_ms)


def costs_from(options: type, values: dict):
    """A cost-knob dataclass ``options`` (a kind's ``Options``) from a run's fields by name
    (``values`` may hold others; an absent field takes its default), checked on construction."""
    return options(**{f.name: values[f.name] for f in fields(options) if f.name in values})


@dataclass(frozen=True)
class SpeculationSettings:
    """A run's proposer settings, as a kind's models see them: ``options`` the kind's
    ``--speculative-config`` options, ``costs`` its cost knobs (an instance of its
    :attr:`ProposerKind.Options`; None: their defaults)."""

    k: int
    options: dict = field(default_factory=dict)
    costs: Any = None
    draft: Optional[ModelFacts] = None  # the network it drafts with (an MTP layer: the target's, alone)
    target: Optional[ModelFacts] = None


class ProposerKind:
    """One kind of proposer.  Subclasses set the class attributes and override what differs;
    the defaults describe a proposer that drafts with nothing and costs nothing."""

    name: str = ""  # the simulator's name (a run's ``proposer``, CSV columns)
    label: str = ""  # for people: "EAGLE-3 head"
    engine: str = "vllm"  # the engine whose names and behaviour the kind follows
    vllm_method: str = ""  # --speculative-config "method"
    vllm_aliases: tuple[str, ...] = ()  # other method names the engine accepts for it
    vllm_version: str = ""  # the first release that has it, and where that was read
    drafts_with: DraftSource = DraftSource.NOTHING
    drafter: Optional[str] = None  # the draft architecture family it reads (ModelFacts.drafter)
    draft_architectures: tuple[str, ...] = ()  # config.json architectures of such drafts
    acceptance_inputs: tuple[str, ...] = ACCEPTANCE_INPUTS
    acceptance_note: str = "the acceptance its engine reports is an accept length"  # why it takes only those
    options: tuple[Option, ...] = ()
    # the kind's cost knobs: a frozen dataclass whose fields are the run's fields of the same names
    # (the n-gram lookup's host time, a draft network's fixed time per pass); NoOptions: none
    Options: type = NoOptions
    # keys the kind's --speculative-config always carries besides method, model and k (EAGLE's
    # parallel drafting: {"parallel_drafting": True}); a kind with some shares its method with
    # another kind and answers to its own name only
    config_flags: dict = {}
    # whether vLLM's async scheduling (on by default from 0.14.0) runs with this kind: only
    # "EAGLE/MTP kind" methods (vllm/config/vllm.py of 0.14.0: method in EagleModelTypes, i.e.
    # eagle, eagle3 and the MTP types); it is switched off for every other method
    async_scheduling: bool = False
    rank: int = 100  # listing order (help texts, error messages)

    # --- names and options ----------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        """Every name the kind answers to: the simulator's, vLLM's method and its aliases."""
        method = (self.vllm_method,) if self.vllm_method and not self.config_flags else ()
        return tuple(dict.fromkeys((self.name,) + method + self.vllm_aliases))

    @property
    def needs_draft_model(self) -> bool:
        """A draft network named by ``draft_model`` runs next to the target."""
        return self.drafts_with in (DraftSource.DRAFT_MODEL, DraftSource.EAGLE_HEAD, DraftSource.PARALLEL_DRAFTER)

    @property
    def runs_network(self) -> bool:
        """Proposing runs a network (a draft model, a head, the target's MTP layers) with its own
        predictor, weights and KV cache."""
        return self.drafts_with is not DraftSource.NOTHING

    def costs(self, costs=None):
        """The kind's cost knobs as given (a run's ``settings.costs``), else their defaults."""
        if costs is None:
            return self.Options()
        if not isinstance(costs, self.Options):
            raise ConfigError(f"costs = {costs!r}: proposer '{self.name}' takes {self.Options.__name__}")
        return costs

    def option(self, name: str) -> Optional[Option]:
        return next((o for o in self.options if o.name == name), None)

    def resolve_options(self, given: dict) -> dict:
        """Every option of the kind, given or default, checked; an option the kind does not take
        is refused naming the kinds that do (the caller adds them)."""
        values = {}
        for opt in self.options:
            values[opt.name] = opt.check(given[opt.name], self.name) if opt.name in given else opt.default
        unknown = sorted(set(given) - set(values))
        if unknown:
            raise ConfigError(f"{unknown[0]}: not an option of proposer '{self.name}'" + (f" (its options: {', '.join(o.name for o in self.options)})" if self.options else " (it takes none)"))
        return values

    # --- the model ------------------------------------------------------------------------
    def lookahead_slots(self, k: int) -> int:
        """vLLM's ``num_lookahead_tokens``: KV slots held beyond the verified tokens for the next
        draft (0 for a proposer without a draft KV cache)."""
        return 0

    def tree(self, settings: SpeculationSettings) -> Optional[TreeShape]:
        """The draft tree a step verifies, or None for a chain."""
        return None

    def draft_length_pmf(self, settings: SpeculationSettings) -> tuple[float, ...]:
        """P(the proposer offers L tokens), L = 0, 1, ...; empty: it always offers k."""
        return ()

    def max_acceptance_length(self, settings: SpeculationSettings) -> int:
        """The most tokens one step can advance by (bonus included)."""
        return settings.k + 1

    def check(self, settings: SpeculationSettings, target: ModelFacts, draft_tp: int, tp: int) -> None:
        """Refuse a target / draft combination the engine would not run (ConfigError)."""
        if self.needs_draft_model:
            self._check_drafter(settings.draft, target)

    def _check_drafter(self, draft: Optional[ModelFacts], target: ModelFacts) -> None:
        """The draft network is of this kind's family, as wide as the target, trained for it."""
        if draft is None:
            raise ConfigError(f"draft_model = None: is required when proposer = '{self.name}'")
        if draft.drafter != self.drafter:
            if self.drafter is None:
                raise ConfigError(f"draft_model = '{draft.name}': {_article(draft.drafter)}, not a draft model; use proposer = '{draft.drafter}'")
            if draft.drafter is None:
                raise ConfigError(f"draft_model = '{draft.name}': not {_article(self.drafter)}, which proposer = '{self.name}' needs")
            raise ConfigError(f"draft_model = '{draft.name}': {_article(draft.drafter)}, but proposer = '{self.name}'")
        if self.drafter is None:
            return
        if draft.hidden_size != target.hidden_size:
            raise ConfigError(
                f"draft_model = '{draft.name}': {_article(draft.drafter)} of hidden size {draft.hidden_size} cannot serve "
                f"{target.name}, whose hidden size is {target.hidden_size}"
            )
        if draft.targets and target.name not in draft.targets:
            raise ConfigError(
                f"draft_model = '{draft.name}': {_article(draft.drafter)} trained for {', '.join(draft.targets)}; it was trained for another "
                f"target than {target.name}"
            )

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        """One GPU's weights and KV bytes per cached token of what the kind drafts with."""
        raise NotImplementedError(f"proposer '{self.name}' runs no network")

    def step_cost(self, settings: SpeculationSettings):
        """A per-run object whose ``work(step: StepPlan) -> StepWork`` says what a step's
        proposing runs."""
        return NoWork()

    # --- vLLM -----------------------------------------------------------------------------
    def speculative_config(self, settings: SpeculationSettings, draft_model: Optional[str], draft_tp: Optional[int]) -> dict:
        """vLLM's ``--speculative-config`` for the kind at ``settings.k`` (without a schedule)."""
        config = {"method": self.vllm_method}
        if draft_model and self.needs_draft_model:
            config["model"] = draft_model
        if draft_tp is not None and self.runs_network:
            config["draft_tensor_parallel_size"] = draft_tp
        config.update(self.config_flags)
        for opt in self.options:
            value = settings.options.get(opt.name, opt.default)
            if opt.vllm_key is not None and value is not None and (opt.always_in_config or value != opt.default):
                config[opt.vllm_key] = value
        config["num_speculative_tokens"] = settings.k
        return config

    def from_speculative_config(self, config: dict) -> tuple[SpeculationSettings, Optional[str], Optional[int]]:
        """The inverse of :meth:`speculative_config`: (settings, draft model, draft TP) from a
        ``--speculative-config`` object in vLLM's key names."""
        return (
            SpeculationSettings(k=int(config["num_speculative_tokens"]), options=self.resolve_options(self.options_from_speculative_config(config))),
            config.get("model") if self.needs_draft_model else None,
            config.get("draft_tensor_parallel_size"),
        )

    def options_from_speculative_config(self, config: dict) -> dict:
        """The kind's options a ``--speculative-config`` object sets, by the simulator's names (not
        checked): its option keys, as vLLM reads them (a kind whose absent keys vLLM fills in its
        own way says so here)."""
        by_key = {o.vllm_key: o.name for o in self.options if o.vllm_key}
        return {by_key[key]: value for key, value in config.items() if key in by_key}

    def serve_command(self, target: str, flags: Sequence[str], config: Optional[dict]) -> str:
        """The engine's launch command for ``target`` with ``flags`` and the config."""
        parts = [f"vllm serve {target}", *flags]
        if config:
            import json

            parts.append(f"--speculative-config '{json.dumps(config, separators=(',', ':'))}'")
        return " ".join(parts)


class NoWork:
    """Proposing that costs nothing."""

    def work(self, step: StepPlan) -> StepWork:
        return StepWork()


def _article(drafter: Optional[str]) -> str:
    label = {"eagle": "EAGLE head", "eagle3": "EAGLE3 head", "dflash": "DFlash drafter"}.get(drafter or "", "draft model")
    return ("an " if label[0] in "AEIOU" else "a ") + label


def fc_bytes(fc_inputs: int, hidden: int, tp: int) -> int:
    """The fc layer that projects ``fc_inputs`` hidden states into one, per GPU."""
    return BYTES * fc_inputs * hidden * hidden // tp
