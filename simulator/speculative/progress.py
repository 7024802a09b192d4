"""Computed tokens versus progress tokens, and the closed form they must agree with.

A verify step computes k + 1 tokens for a request (k proposals plus the one the target would
have produced anyway) and advances it by accepted + 1.  Cost follows the first number,
request state follows the second.
"""

from __future__ import annotations

from typing import Sequence


def expected_progress(alpha: float, k: int) -> float:
    """Mean tokens of progress per verify step with i.i.d. acceptance alpha: (1 - a^(k+1)) / (1 - a)."""
    if k < 0:
        raise ValueError("k must be >= 0")
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_progress_per_position(conditional: Sequence[float]) -> float:
    """The same for per-position rates: 1 + sum over i of P(first i+1 proposals accepted)."""
    total, survive = 1.0, 1.0
    for p in conditional:
        survive *= p
        total += survive
    return total
