"""The speculation ``python -m simulator``'s flags ask for, checked in the flags' own names.

A :class:`SpeculationFlags` holds the flags as typed (a ``--speculative-config`` already expanded
into the flags it sets).  The rules here turn it into the deployment's
:class:`~simulator.runs.deployment.Speculation`: the proposer kind and its options with the draft
model it needs (:func:`checked_kind`), the acceptance, given by exactly one of three flags and
only with speculation (:func:`acceptance_of`), and the k schedule against the running batch
(:func:`checked_schedule`).  The configuration would refuse most of these too, but in its field
names; here a refusal names the flag the user typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.cli import vllm_serve
from simulator.cli.argtypes import comma_floats
from simulator.cli.proposer_flags import (
    ACCEPTANCE_FLAGS,
    check_acceptance_input,
    checked_options,
    kind_named,
    require_draft_model,
    settings_for,
)
from simulator.runs.deployment import Speculation
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.proposers.base import ProposerKind, costs_from
from simulator.util.errors import ConfigError

ACCEPTANCE_FORMS = {flag: form for form, flag in ACCEPTANCE_FLAGS.items()}  # each acceptance flag -> the AcceptanceInput form it gives
ACCEPTANCE_NAMES = {**ACCEPTANCE_FLAGS, "at_k": "-k"}  # how a refusal of AcceptanceInput.given names its inputs


@dataclass(frozen=True)
class SpeculationFlags:
    """The speculation flags as given: the proposer by name, -k or a ``--k-schedule`` (JSON rows),
    one acceptance flag, the option flags given (name, value), and what the deployment takes as is."""

    proposer: str
    k: int
    k_schedule: Optional[str]  # JSON rows, as typed
    adaptive_verification: bool
    acceptance: Optional[float]
    acceptance_length: Optional[float]
    acceptance_per_position: Optional[str]  # comma-separated rates, as typed
    options: tuple
    draft_model: Optional[str]
    draft_tensor_parallel_size: Optional[int]
    draft_profile_dir: Optional[str]
    proposal_probability: float
    attention: str
    interpolation: float
    # the cost flags, each a field of the Options of the kinds that own it (named as the fields)
    ngram_overhead_ms: float
    draft_pass_overhead_ms: float

    @property
    def speculating(self) -> bool:
        """-k proposals a step, or a k schedule (which may pick k = 0 at some batch sizes)."""
        return self.k > 0 or self.k_schedule is not None

    def schedule(self) -> Optional[tuple]:
        """The ``--k-schedule`` rows, checked, -k (when given) their largest k."""
        if self.k_schedule is None:
            return None
        from simulator.speculative.k_schedule import parse_schedule

        return parse_schedule(self.k_schedule, self.k if self.k > 0 else None, "--k-schedule")

    def for_deployment(self, kind: ProposerKind, options: tuple, acceptance: Optional[AcceptanceInput], schedule: Optional[tuple]) -> Speculation:
        """The deployment's speculation: these flags with the kind, options, acceptance and schedule the rules checked."""
        return Speculation(
            proposer=kind.name,
            k=self.k,
            schedule=schedule,
            acceptance=acceptance,
            options=options,
            draft_model=self.draft_model,
            draft_tensor_parallel_size=self.draft_tensor_parallel_size,
            draft_profile_dir=self.draft_profile_dir,
            adaptive_verification=self.adaptive_verification,
            proposal_probability=self.proposal_probability,
            attention=self.attention,
            interpolation=self.interpolation,
            costs=costs_from(kind.Options, vars(self)),  # the cost flags of the knobs the kind owns
        )


def checked_kind(flags: SpeculationFlags) -> tuple[ProposerKind, tuple]:
    """(the kind ``--proposer`` names, its options checked); when speculating, the draft model it
    needs (and no other) and a k schedule only for a kind that drafts a chain."""
    kind = kind_named(flags.proposer)
    options = checked_options(flags.options, kind)
    if flags.k > 0 or flags.k_schedule:  # an empty --k-schedule '' is refused as JSON when it is read, not here
        require_draft_model(kind, flags.draft_model)
        if flags.k_schedule is not None and kind.tree(settings_for(kind, 1, options)) is not None:
            raise ConfigError(f"--k-schedule: --proposer {kind.name} drafts a tree at one depth ({kind.engine} has no k schedule); give -k")
    return kind, options


def acceptance_of(flags: SpeculationFlags, kind: ProposerKind, options: tuple) -> tuple[Optional[AcceptanceInput], Optional[str]]:
    """(the acceptance input, what the run used in words), checked as flags for ``kind`` with its
    checked ``options`` (:func:`checked_kind`); (None, None) without speculation.

    An acceptance without speculation, speculation without an acceptance, two acceptances, or a
    length outside [1, k + 1] is refused here, naming the flags rather than config fields.
    """
    k = flags.k
    given = [
        (flag, value)
        for flag, value in (("--acceptance", flags.acceptance), ("--acceptance-length", flags.acceptance_length), ("--acceptance-per-position", flags.acceptance_per_position))
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(flag for flag, _ in given)}: give one acceptance, not {len(given)}")
    if given and not flags.speculating:
        flag, value = given[0]
        raise ConfigError(
            f"{flag} {value} without speculation (-k {k}): add -k N (N >= 1 proposals per step) or --k-schedule, "
            f"or drop {flag} to run without speculation"
        )
    if flags.adaptive_verification and not flags.speculating:
        raise ConfigError(f"--adaptive-verification without speculation (-k {k}): add -k N, or drop it")
    if not flags.speculating:
        return None, None
    if not given:
        shown = f"-k {k}" if k > 0 else "--k-schedule"
        raise ConfigError(
            f"{shown}: speculation needs an acceptance; give --acceptance RATE (per token), --acceptance-length L "
            f"(vLLM's mean acceptance length at -k) or --acceptance-per-position P1,P2,..."
        )
    flag, value = given[0]
    check_acceptance_input(kind, ACCEPTANCE_FORMS[flag])
    if flag == "--acceptance-length":
        _check_length_reachable(value, k, kind, options)
    per_position = comma_floats(value, flag, example="0.8,0.7,0.6") if flag == "--acceptance-per-position" else None
    acceptance = AcceptanceInput.given(
        rate=value if flag == "--acceptance" else None, per_position=per_position, length=value if flag == "--acceptance-length" else None,
        at_k=k, names=ACCEPTANCE_NAMES,
    )
    if per_position is not None:
        needed = k if k > 0 else max(row[2] for row in flags.schedule())
        if len(per_position) < needed:
            raise ConfigError(f"--acceptance-per-position {value}: {len(per_position)} rate(s), but k = {needed} proposals need one per position")
    return acceptance, f"{acceptance.derivation} ({flag})"


def _check_length_reachable(length: float, k: int, kind: ProposerKind, options: tuple) -> None:
    """An ``--acceptance-length`` needs the -k it was measured at, and a tree cannot advance more
    tokens a step than its depth or its nodes allow."""
    if k == 0:
        raise ConfigError(f"--acceptance-length {length:g}: give -k, the number of proposals it was measured at")
    settings = settings_for(kind, k, options)
    top = kind.max_acceptance_length(settings)
    if kind.tree(settings) is not None and not 1 <= length <= top:
        raise ConfigError(  # its depth or its nodes bound a step
            f"--acceptance-length {length:g}: a tree of depth {k} (-k) verifying {settings.options['num_draft_tokens']} tokens "
            f"(--speculative-num-draft-tokens, N + 1) advances at most {top} tokens a step; give an accept length in [1, {top}]"
        )


def checked_schedule(flags: SpeculationFlags, limits: vllm_serve.Limits) -> Optional[tuple]:
    """The k schedule's rows: its last row must reach the running batch's largest size (``limits``);
    then -k, when given, bounds its k (:meth:`SpeculationFlags.schedule`)."""
    if flags.k_schedule is None:
        return None
    from simulator.speculative.k_schedule import parse_schedule

    seqs = limits.max_num_seqs
    last = parse_schedule(flags.k_schedule, None, "--k-schedule")[-1]
    if last[1] < seqs:
        origin = "" if limits.seqs_given else f" (vllm serve {limits.version}'s default on {limits.device})"
        raise ConfigError(
            f"--k-schedule: its last row {list(last)} ends at batch size {last[1]}, below --max-num-seqs {seqs}{origin}; "
            f"extend it to {seqs} or pass --max-num-seqs {last[1]}"
        )
    return flags.schedule()
