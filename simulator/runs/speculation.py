"""One speculative-decoding setting of a run (:class:`SpeculationConfig`), validated on construction:
the proposer kind and its options, k or a k schedule, the acceptance input, the draft network and
how the verify step's attention is priced.  The cross-field rules that need the rest of the run
(the draft-TP rule, a k schedule against the batch) are :class:`~simulator.runs.config.RunConfig`'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.runs.checks import is_int, probability, require
from simulator.speculative import proposers
from simulator.speculative.proposers.base import costs_from
from simulator.speculative.verify_cost import ATTENTION_MODES, DEFAULT_ATTENTION, DEFAULT_INTERPOLATION

# Verify attention: the evidence (data/calibration/engine_costs.toml [verify_attention]) puts
# the prefill-style kernel vLLM runs on Hopper at the lower bound, kv_once: its fitted lambda is
# 0 (held to [0, 1]).  The modes and defaults (ATTENTION_MODES, DEFAULT_ATTENTION,
# DEFAULT_INTERPOLATION) are defined once, beside the blend they name, in speculative/verify_cost.py.


@dataclass(frozen=True)
class SpeculationConfig:
    """One speculative-decoding setting.  ``num_speculative_tokens == 0`` means off.

    Acceptance is an input: either ``acceptance_rate`` (i.i.d. per proposed position) or
    ``acceptance_per_position`` (P(position i accepted | all before accepted), at least k
    entries; vLLM's per-position counters give this after conversion).

    ``proposer`` is any name of a registered kind (vLLM's method names included) and is stored as
    the simulator's; ``options`` are that kind's options as (name, value) pairs (a suffix
    decoder's tree depth, a draft tree's top-k), refused when the kind does not take them.

    ``ngram_overhead_ms`` and ``draft_pass_overhead_ms`` are the kinds' cost knobs as a run stores
    them: each is a field of the :attr:`~simulator.speculative.proposers.base.ProposerKind.Options`
    of the kinds that own it (the n-gram lookup's; every kind with a draft network's), which
    declares its default and its check; :attr:`costs` is the run's kind's, built from them.  They
    stay flat fields so that a run's keys (its cache key, its CSV rows) do not depend on the kind.
    """

    num_speculative_tokens: int = 0
    acceptance_rate: Optional[float] = None
    acceptance_per_position: Optional[tuple[float, ...]] = None
    proposer: str = "ngram"
    ngram_overhead_ms: float = proposers.cost_default("ngram_overhead_ms")  # the n-gram lookup's (LookupOptions)
    draft_model: Optional[str] = None
    draft_profile_dir: Optional[str] = None  # Vidur-format profile of the draft; None = built-in
    # GPUs the draft is sharded over: 1 (on the first GPU of the group) or the target's TP, as vLLM
    # allows; None = the target's (vLLM's default)
    draft_tensor_parallel_size: Optional[int] = None
    attention: str = DEFAULT_ATTENTION
    interpolation: float = DEFAULT_INTERPOLATION
    # fixed time of each pass of a draft network (DraftPassOptions; 0: only the profiled ops)
    draft_pass_overhead_ms: float = proposers.cost_default("draft_pass_overhead_ms")
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
        require(is_int(k) and k >= 0, "num_speculative_tokens", k, "must be an integer >= 0")
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
        require(self.attention in ATTENTION_MODES, "attention", self.attention, f"must be one of {ATTENTION_MODES}")
        require(isinstance(self.adaptive_verification, bool), "adaptive_verification", self.adaptive_verification, "must be true or false")
        if self.adaptive_verification and self.k_schedule:
            raise ConfigError("adaptive_verification with a k_schedule: the two together are not modelled; give one of them")
        probability("interpolation", self.interpolation)
        probability("proposal_probability", self.proposal_probability)
        for options in proposers.cost_options():  # every kind's knobs, each checked by the dataclass that owns it
            costs_from(options, vars(self))
        if k == 0:
            return
        given = (self.acceptance_rate is not None) + (self.acceptance_per_position is not None)
        require(given == 1, "acceptance", (self.acceptance_rate, self.acceptance_per_position), "give exactly one of acceptance_rate or acceptance_per_position")
        if self.acceptance_rate is not None:
            probability("acceptance_rate", self.acceptance_rate)
        else:
            vector = self.acceptance_per_position
            require(isinstance(vector, tuple) and len(vector) > 0, "acceptance_per_position", vector, "must be a non-empty tuple")
            require(len(vector) >= k, "acceptance_per_position", vector, f"needs at least k = {k} entries")
            for i, p in enumerate(vector):
                probability(f"acceptance_per_position[{i}]", p)
        if kind.needs_draft_model:
            require(bool(self.draft_model), "draft_model", self.draft_model, f"is required when proposer = '{self.proposer}'")
        elif self.draft_model:
            require(False, "draft_model", self.draft_model, f"proposer = '{self.proposer}' drafts with {kind.drafts_with.value}, not a draft model; drop it")
        if self.draft_profile_dir is not None:
            require(Path(self.draft_profile_dir).is_dir(), "draft_profile_dir", self.draft_profile_dir, "is not a directory")

    def _check_options(self, kind) -> None:
        options = self.options
        require(
            isinstance(options, tuple) and all(isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) for o in options),
            "options", options, "must be (name, value) pairs",
        )
        names = [name for name, _ in options]
        require(len(set(names)) == len(names), "options", options, "name an option once")
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
    def costs(self):
        """The proposer kind's cost knobs (an instance of its ``Options``), from the run's fields."""
        return costs_from(self.kind.Options, vars(self))

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
