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
"""

from __future__ import annotations

from typing import Mapping, Sequence

from simulator.util.errors import ConfigError
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
