"""Published acceptance figures to the simulator's input (conditional per-position rates).

Papers and engines report acceptance three ways:

* a mean acceptance length L at k proposals (vLLM's definition: tokens per verify step,
  the bonus token included, so 1 <= L <= k + 1);
* per-position rates a_i = P(position i accepted) over all drafts (vLLM's per-position
  counters divided by the number of drafts): unconditional, non-increasing;
* mean acceptance lengths at several k for the same head.

The simulator wants p_i = P(position i accepted | positions < i accepted).  The conversions
below are exact inverses of :func:`acceptance_length` / :func:`unconditional_rates` (tested
round trip); where a figure under-determines the profile (one length at one k) the i.i.d.
profile is used and the docs say so.

:class:`AcceptanceInput` is the one value for an acceptance figure as it was given, in any of
these forms: every front end (the command lines, the pays-off spec, the published rows, a
server's counters) builds one with :meth:`AcceptanceInput.given`, so each form is checked and
converted here alone, and a rising unconditional rate is refused wherever it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Optional, Sequence

from simulator.util.errors import ConfigError
from simulator.util.inputs import positive_int, probability
from simulator.speculative.progress import expected_progress_per_position


def acceptance_length(conditional: Sequence[float]) -> float:
    """Mean tokens per verify step (bonus included) for conditional rates p_0..p_{k-1}."""
    return expected_progress_per_position(conditional)


def unconditional_rates(conditional: Sequence[float]) -> tuple[float, ...]:
    """a_i = p_0 * ... * p_i: what vLLM's per-position counters report."""
    rates, survive = [], 1.0
    for p in conditional:
        survive *= p
        rates.append(survive)
    return tuple(rates)


def conditional_from_unconditional(rates: Sequence[float], name: str = "acceptance_per_position") -> tuple[float, ...]:
    """p_i = a_i / a_{i-1} (a_{-1} = 1); a position after a never-accepted one gets 0.  The one
    conversion for every input of vLLM's unconditional rates (a spec's, a published row's, a
    server's counters, ``name`` saying which in a refusal): a rate above the one before it is
    refused, since a chain accepts position i only after i - 1."""
    previous, out = 1.0, []
    for i, a in enumerate(rates):
        if not 0 <= a <= 1:
            raise ConfigError(f"{name}[{i}] = {a}: must be in [0, 1]")
        if a > previous + 1e-9:
            raise ConfigError(
                f"{name}[{i}] = {a}: exceeds position {i - 1}'s {previous}; unconditional rates cannot increase"
            )
        out.append(min(1.0, a / previous) if previous > 0 else 0.0)
        previous = a
    return tuple(out)


def iid_rate_from_length(length: float, k: int, tolerance: float = 1e-12) -> float:
    """The i.i.d. rate alpha with (1 - alpha^(k+1)) / (1 - alpha) = ``length`` (bisection)."""
    if k < 1:
        raise ConfigError(f"k = {k}: an acceptance length needs at least one proposal")
    if not 1 <= length <= k + 1:
        raise ConfigError(f"acceptance length {length} at k = {k}: must be between 1 and k + 1 = {k + 1} (bonus token included)")
    lo, hi = 0.0, 1.0
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        # the sum 1 + a + ... + a^k, not the closed form, which cancels badly near a = 1
        if sum(mid**i for i in range(k + 1)) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def conditional_from_lengths(lengths_by_k: Mapping[int, float]) -> tuple[float, ...]:
    """Per-position rates from mean acceptance lengths measured at consecutive k.

    L(k) - L(k-1) = a_{k-1} (the chance that all of the first k proposals are accepted), so
    lengths at k = m..n give a_{m-1}..a_{n-1}; the positions below m, which the lengths do not
    separate, share the i.i.d. rate that reproduces L(m).  Returns p_0..p_{n-1}.
    """
    ks = sorted(lengths_by_k)
    if not ks or ks != list(range(ks[0], ks[-1] + 1)):
        raise ConfigError(f"acceptance lengths at k = {ks}: need consecutive k values")
    first = ks[0]
    alpha = iid_rate_from_length(lengths_by_k[first], first)
    unconditional = [alpha ** (i + 1) for i in range(first)]
    for k in ks[1:]:
        unconditional.append(max(0.0, lengths_by_k[k] - lengths_by_k[k - 1]))
    # measurement noise can make a later gain exceed an earlier one; cap to keep rates non-increasing
    for i in range(1, len(unconditional)):
        unconditional[i] = min(unconditional[i], unconditional[i - 1])
    return conditional_from_unconditional(unconditional)


# The forms an acceptance figure comes in, and the keyword :meth:`AcceptanceInput.given` takes each by
FORMS = ("rate", "per_position", "length", "lengths", "unconditional")
# how a refusal names each input when the caller gives no spelling of its own (the pays-off spec's keys)
KEYS = {"rate": "rate", "per_position": "per_position", "length": "acceptance_length", "at_k": "at_k",
        "lengths": "acceptance_lengths", "from_k": "from_k", "unconditional": "unconditional_per_position"}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class AcceptanceInput:
    """One acceptance figure in the form it was reported, checked, and what a run takes from it.

    ``form`` is one of :data:`FORMS`: an i.i.d. ``rate`` per proposed token; ``per_position``
    conditional rates p_i; vLLM's mean acceptance ``length`` at ``at_k`` proposals (bonus token
    included); mean ``lengths`` at consecutive k from ``at_k``; vLLM's ``unconditional``
    per-position rates (accepted_per_pos[i] / num_drafts).  A run takes either the i.i.d.
    :attr:`rate` (the rate and length forms) or the conditional :attr:`per_position` rates (the
    others): the pair a :class:`~simulator.runs.speculation.SpeculationConfig` stores.
    """

    form: str
    values: tuple[float, ...]
    at_k: Optional[int] = None

    @classmethod
    def given(cls, *, rate=None, per_position=None, length=None, at_k=None, lengths=None, from_k=None, unconditional=None,
              names: Optional[Mapping[str, str]] = None, where: str = "") -> "AcceptanceInput":
        """Exactly one form, checked.  ``names`` maps the keywords to how the user spelled them
        (flags or spec keys; default :data:`KEYS`), so a refusal names the input that was typed:
        with names a value reads ``--acceptance 1.5``, as typed; ``where`` prefixes the refusal."""
        spell = {**KEYS, **(names or {})}
        typed = names is not None
        where = f"{where}: " if where else ""

        def said(key: str, value) -> str:
            return f"{spell[key]} {value:g}" if typed and _number(value) else f"{spell[key]} = {value!r}"

        forms = {"rate": rate, "per_position": per_position, "length": length, "lengths": lengths, "unconditional": unconditional}
        present = [form for form, value in forms.items() if value is not None]
        if len(present) != 1:
            listed = " / ".join(spell[form] for form in forms if form != "unconditional" or typed and "unconditional" in (names or {}))
            raise ConfigError(f"{where}give exactly one of {listed} (got {', '.join(spell[f] for f in present) or 'none'})")
        form = present[0]
        if form == "rate":
            if not probability(rate):
                raise ConfigError(f"{where}{said('rate', rate)}{':' if typed else ''} must be a probability in [0, 1] (accepted / proposed tokens)")
            return cls("rate", (float(rate),))
        if form == "length":
            if at_k is None or not positive_int(at_k):
                raise ConfigError(f"{where}{said('length', length)} needs {spell['at_k']}, the k it was measured at (a positive integer), got {at_k!r}")
            if not _number(length) or not 1 <= length <= at_k + 1:
                raise ConfigError(
                    f"{where}{said('length', length)} at {said('at_k', at_k)} is outside [1, {at_k + 1}]; vLLM's mean acceptance "
                    f"length counts the bonus token, so it lies between 1 and k + 1: check the value or the k it was measured at"
                )
            return cls("length", (float(length),), at_k)
        if form == "lengths":
            if from_k is None or not positive_int(from_k):
                raise ConfigError(f"{where}{spell['lengths']} needs {spell['from_k']}, the k of its first value (a positive integer), got {from_k!r}")
            for j, value in enumerate(lengths):
                k = from_k + j
                if not _number(value) or not 1 <= value <= k + 1:
                    raise ConfigError(f"{where}{spell['lengths']}[{j}] = {value!r} (k = {k}) is outside [1, {k + 1}]")
            if not lengths:
                raise ConfigError(f"{where}{spell['lengths']} is empty")
            return cls("lengths", tuple(float(v) for v in lengths), from_k)
        values = list(forms[form])
        if not values:
            raise ConfigError(f"{where}{spell[form]} is empty; give P(position i accepted{' | earlier accepted' if form == 'per_position' else ''}) for i = 1..k")
        for j, p in enumerate(values):
            if not probability(p):
                raise ConfigError(f"{where}{spell[form]}[{j}] = {p!r} must be a probability in [0, 1]")
        if form == "unconditional":  # a rising rate is refused now, naming the input as the user spelled it
            try:
                conditional_from_unconditional(values, spell["unconditional"])
            except ConfigError as exc:
                raise ConfigError(f"{where}{exc}") from None
        return cls(form, tuple(float(p) for p in values))

    def __post_init__(self):
        if self.form not in FORMS:
            raise ConfigError(f"acceptance form {self.form!r}: must be one of {FORMS}")

    @property
    def rate(self) -> Optional[float]:
        """The i.i.d. rate a run takes (the rate and length forms; None for the others)."""
        if self.form == "rate":
            return self.values[0]
        return self._length_rate if self.form == "length" else None

    @cached_property
    def _length_rate(self) -> float:
        return iid_rate_from_length(self.values[0], self.at_k)

    @cached_property
    def per_position(self) -> Optional[tuple[float, ...]]:
        """The conditional rates p_0.. a run takes (per-position, lengths and vLLM's unconditional
        forms; None for the i.i.d. ones)."""
        if self.form == "per_position":
            return self.values
        if self.form == "lengths":
            return conditional_from_lengths({self.at_k + j: v for j, v in enumerate(self.values)})
        if self.form == "unconditional":
            return conditional_from_unconditional(self.values, KEYS["unconditional"])
        return None

    def conditional(self, k: int) -> tuple[float, ...]:
        """p_0..p_{k-1}: the i.i.d. rate k times, or the first k conditional rates (refused when
        the figure has fewer positions than k)."""
        if self.per_position is None:
            return (self.rate,) * k
        if len(self.per_position) < k:
            raise ConfigError(f"acceptance with {len(self.per_position)} per-position rates at k = {k}: needs one rate per proposed position")
        return self.per_position[:k]

    def length(self, k: int) -> float:
        """The mean acceptance length this figure gives at k (bonus included): what vLLM would log."""
        return acceptance_length(self.conditional(k))

    @property
    def derivation(self) -> str:
        """How the figure became what the run takes, in words (recorded beside a recommendation)."""
        if self.form == "rate":
            return f"i.i.d. acceptance rate {self.values[0]:g} per proposed token, as given"
        if self.form == "per_position":
            return "per-position conditional rates P(position i accepted | earlier accepted), as given"
        if self.form == "length":
            return (
                f"mean acceptance length {self.values[0]:g} at k = {self.at_k} (vLLM's, bonus token included) -> i.i.d. rate {self.rate:.4f}, the rate "
                f"that reproduces it (1 + a + ... + a^k = L, solved by simulator.speculative.acceptance_convert.iid_rate_from_length)"
            )
        if self.form == "lengths":
            last = self.at_k + len(self.values) - 1
            return (
                f"mean acceptance lengths {', '.join(f'{v:g}' for v in self.values)} at k = {self.at_k}..{last} -> per-position "
                f"rates (L(k) - L(k-1) is P(first k accepted); positions below k = {self.at_k} share the i.i.d. rate that reproduces L({self.at_k}); "
                "simulator.speculative.acceptance_convert.conditional_from_lengths)"
            )
        return (
            f"vLLM per-position rates {', '.join(f'{v:g}' for v in self.values)} (accepted_per_pos[i] / num_drafts) -> conditional rates "
            f"{', '.join(f'{v:.4f}' for v in self.per_position)} (p_i = a_i / a_(i-1); acceptance_convert.conditional_from_unconditional)"
        )
