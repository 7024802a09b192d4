"""The speculation a command's flags ask for, checked in the flags' own names.

The rules on the proposer's flags live here, for every command that takes them: the kind
``--proposer`` names (:func:`kind_named`), its options (:func:`checked_options`), the draft model
it needs (:func:`require_draft_model`) and the acceptance inputs it takes
(:func:`check_acceptance_input`); :mod:`simulator.cli.proposer_flags` adds the flags to a parser
and reads them.  A :class:`SpeculationFlags` holds ``python -m simulator``'s speculation flags as
typed (a ``--speculative-config`` already expanded into the flags it sets), and
:meth:`SpeculationFlags.speculation` turns them into the deployment's
:class:`~simulator.runs.deployment.Speculation` in one pass: the kind and its options with the draft
model it needs, the acceptance given by exactly one of three flags and only with speculation, the
numbers in range, the k schedule against the running batch.  The configuration would refuse
most of these too, but in its field names; here a refusal names the flag the user typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from simulator.cli import vllm_serve
from simulator.cli.argtypes import check_folder, comma_floats
from simulator.runs.deployment import Speculation
from simulator.speculative import proposers
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.proposers.base import ProposerKind, SpeculationSettings, costs_from
from simulator.util.errors import ConfigError

# The CLI flag of an option whose engine has a flag of its own (SGLang's tree settings).
ENGINE_FLAGS = {"eagle_topk": "--speculative-eagle-topk", "num_draft_tokens": "--speculative-num-draft-tokens"}
ACCEPTANCE_FLAGS = {"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length"}

ACCEPTANCE_FORMS = {flag: form for form, flag in ACCEPTANCE_FLAGS.items()}  # each acceptance flag -> the AcceptanceInput form it gives
ACCEPTANCE_NAMES = {**ACCEPTANCE_FLAGS, "at_k": "-k"}  # how a refusal of AcceptanceInput.given names its inputs


def option_flag(name: str) -> str:
    """The flag of the proposer option ``name``."""
    return ENGINE_FLAGS.get(name, "--" + name.replace("_", "-"))


def kind_named(name: str) -> ProposerKind:
    """The kind ``--proposer name`` names, or a ConfigError naming the flag and the valid names."""
    try:
        return proposers.kind(name)
    except ConfigError as exc:
        raise ConfigError(f"--proposer {name}: {str(exc).split(': ', 1)[1]}") from None


def checked_options(given: tuple, kind: ProposerKind) -> tuple:
    """``given`` (name, value) option pairs, checked for ``kind``: a flag of another kind's option is
    refused naming the kinds that take it, a value the kind refuses names its flag."""
    for name, value in given:
        if kind.option(name) is None:
            takers = proposers.kinds_taking(name)
            raise ConfigError(
                f"{option_flag(name)} {value:g}: an option of --proposer {' / '.join(takers)}, not of --proposer {kind.name}; "
                f"drop it or use --proposer {takers[0]}"
            )
    try:
        kind.resolve_options(dict(given))
    except ConfigError as exc:
        name = str(exc).split(" = ", 1)[0]
        raise ConfigError(f"{option_flag(name)}: {exc}") from None
    return tuple(given)


def settings_for(kind: ProposerKind, k: int, options: tuple) -> SpeculationSettings:
    """What ``kind`` runs with at ``k`` and the ``options`` given (its defaults filled in)."""
    return SpeculationSettings(k=k, options=kind.resolve_options(dict(options)))


def check_acceptance_input(kind: ProposerKind, given: str) -> None:
    """``given`` ("rate", "per_position" or "length") is an acceptance input ``kind`` accepts."""
    if given in kind.acceptance_inputs:
        return
    accepted = " or ".join(ACCEPTANCE_FLAGS[i] for i in kind.acceptance_inputs)
    raise ConfigError(f"{ACCEPTANCE_FLAGS[given]}: --proposer {kind.name} takes {accepted} ({kind.acceptance_note})")


def require_draft_model(kind: ProposerKind, draft_model: Optional[str], flag: str = "--draft-model") -> None:
    """A draft network is named exactly when the kind runs one that is not the target's own."""
    if kind.needs_draft_model and not draft_model:
        raise ConfigError(f"--proposer {kind.name} needs {flag} (the {kind.drafts_with.value.split(' (')[0].removeprefix('a ').removeprefix('an ')} vLLM loads)")
    if not kind.needs_draft_model and draft_model:
        raise ConfigError(
            f"{flag} {draft_model}: --proposer {kind.name} uses no draft model (it drafts with {kind.drafts_with.value}); drop it or pick "
            f"--proposer {' / '.join(proposers.draft_model_names())}"
        )


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

    @cached_property
    def schedule_rows(self) -> Optional[tuple]:
        """The ``--k-schedule`` rows, read once (when first needed), not yet checked against -k or the batch."""
        if self.k_schedule is None:
            return None
        from simulator.speculative.k_schedule import parse_schedule

        return parse_schedule(self.k_schedule, None, "--k-schedule")

    def speculation(self, limits: vllm_serve.Limits) -> tuple[Speculation, Optional[str]]:
        """(the deployment's speculation on a server of ``limits``, the acceptance it uses in words
        or None), every refusal naming a flag, in this order: the kind and its options with the draft
        model it needs (:meth:`checked_kind`), the acceptance (:meth:`acceptance_of`), the numbers and
        folders in range, the k schedule against the running batch (:meth:`checked_schedule`)."""
        kind, options = self.checked_kind()
        acceptance, note = self.acceptance_of(kind, options)
        self.check_ranges()
        schedule = self.checked_schedule(limits)
        speculation = Speculation(
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
        return speculation, note

    def checked_kind(self) -> tuple[ProposerKind, tuple]:
        """(the kind ``--proposer`` names, its options checked); when speculating, the draft model it
        needs (and no other) and a k schedule only for a kind that drafts a chain."""
        kind = kind_named(self.proposer)
        options = checked_options(self.options, kind)
        if self.k > 0 or self.k_schedule:  # an empty --k-schedule '' is refused as JSON when it is read, not here
            require_draft_model(kind, self.draft_model)
            if self.k_schedule is not None and kind.tree(settings_for(kind, 1, options)) is not None:
                raise ConfigError(f"--k-schedule: --proposer {kind.name} drafts a tree at one depth ({kind.engine} has no k schedule); give -k")
        return kind, options

    def check_ranges(self) -> None:
        """A fraction in [0, 1], a cost not below 0 ms, a profile folder that exists."""
        for flag, value in (("--proposal-probability", self.proposal_probability), ("--interpolation", self.interpolation)):
            if not 0 <= value <= 1:
                raise ConfigError(f"{flag} {value:g}: must be in [0, 1]")
        for flag, value in (("--ngram-overhead-ms", self.ngram_overhead_ms), ("--draft-pass-overhead-ms", self.draft_pass_overhead_ms)):
            if value < 0:
                raise ConfigError(f"{flag} {value:g}: must be >= 0 milliseconds")
        check_folder("--draft-profile-dir", self.draft_profile_dir)

    def checked_schedule(self, limits: vllm_serve.Limits) -> Optional[tuple]:
        """The ``--k-schedule`` rows (:attr:`schedule_rows`): its last row must reach the running
        batch's largest size (``limits``); then -k, when given, bounds its k."""
        rows = self.schedule_rows
        if rows is None:
            return None
        from simulator.speculative.k_schedule import check_schedule

        seqs, last = limits.max_num_seqs, rows[-1]
        if last[1] < seqs:
            origin = "" if limits.seqs_given else f" (vllm serve {limits.version}'s default on {limits.device})"
            raise ConfigError(
                f"--k-schedule: its last row {list(last)} ends at batch size {last[1]}, below --max-num-seqs {seqs}{origin}; "
                f"extend it to {seqs} or pass --max-num-seqs {last[1]}"
            )
        return check_schedule(rows, self.k, "--k-schedule") if self.k > 0 else rows

    def acceptance_of(self, kind: ProposerKind, options: tuple) -> tuple[Optional[AcceptanceInput], Optional[str]]:
        """(the acceptance input, what the run used in words), checked as flags for ``kind`` with its
        checked ``options``; (None, None) without speculation.

        An acceptance without speculation, speculation without an acceptance, two acceptances, or a
        length outside [1, k + 1] is refused here, naming the flags rather than config fields.
        """
        k = self.k
        given = [
            (flag, value)
            for flag, value in (("--acceptance", self.acceptance), ("--acceptance-length", self.acceptance_length), ("--acceptance-per-position", self.acceptance_per_position))
            if value is not None
        ]
        if len(given) > 1:
            raise ConfigError(f"{' and '.join(flag for flag, _ in given)}: give one acceptance, not {len(given)}")
        if given and not self.speculating:
            flag, value = given[0]
            raise ConfigError(
                f"{flag} {value} without speculation (-k {k}): add -k N (N >= 1 proposals per step) or --k-schedule, "
                f"or drop {flag} to run without speculation"
            )
        if self.adaptive_verification and not self.speculating:
            raise ConfigError(f"--adaptive-verification without speculation (-k {k}): add -k N, or drop it")
        if not self.speculating:
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
            needed = k if k > 0 else max(row[2] for row in self.schedule_rows)
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
