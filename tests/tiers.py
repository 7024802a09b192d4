"""A test's tier and the skip that goes with it, declared in one place.

The tiers (``torch``, ``shared``; see tests/conftest.py) are markers a test carries by hand, never
read from the wording of its skip reason: ``requires("torch", torch is None, "...")`` marks the
test ``torch`` and skips it when PyTorch is missing, so rewording the reason moves nothing.
"""

from __future__ import annotations

import pytest

TIERS = ("simulation", "browser", "torch", "shared")


def requires(tier: str, missing: bool, reason: str):
    """A decorator: the test is in ``tier`` and is skipped with ``reason`` when ``missing``."""
    if tier not in TIERS:
        raise ValueError(f"tier {tier!r}: one of {TIERS}")
    tier_mark, skip = getattr(pytest.mark, tier), pytest.mark.skipif(missing, reason=reason)

    def apply(test):
        return tier_mark(skip(test))

    return apply
