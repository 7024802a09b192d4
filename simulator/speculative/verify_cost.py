"""Verify attention costed from decode profiles under three assumptions.

A verify row is a request with q = k' + 1 query tokens over ``kv`` cached tokens.  Decode
profiles only know one query per sequence, so:

* ``kv_once`` (lower bound): the row's KV is read once for all q queries, so it costs what
  one decode query does: the step is a decode batch of (rows) sequences.
* ``per_token`` (upper bound): each query pays a full decode read: the step is a decode batch
  of (sum of q) sequences.
* ``interpolated``: (1 - lambda) * kv_once + lambda * per_token.

``decode_ms(batch, mean_kv)`` is the profile lookup, with the mean KV length over the
sequences it is charged for: per row for ``kv_once``, per query for ``per_token``.
"""

from __future__ import annotations

import operator
from typing import Callable, Sequence

DecodeLookup = Callable[[int, float], float]

# The verify assumptions and the default every front end, predictor and step model takes: one
# definition (docs/model.md "What decided the default: kv_once").
ATTENTION_MODES = ("kv_once", "per_token", "interpolated")
DEFAULT_ATTENTION = "kv_once"
DEFAULT_INTERPOLATION = 0.0


def blend(kv_once: float, per_token: float, mode: str, interpolation: float = DEFAULT_INTERPOLATION) -> float:
    """A verify row's attention under ``mode`` from its two bounds (``interpolated``: lambda of
    the way from the lower bound to the upper)."""
    if mode == "kv_once":
        return kv_once
    if mode == "per_token":
        return per_token
    if mode == "interpolated":
        return (1 - interpolation) * kv_once + interpolation * per_token
    raise ValueError(f"unknown attention mode {mode!r}")


_KV = operator.itemgetter(1)


def _mean_kv(rows: Sequence[tuple[int, int]], weighted: bool) -> float:
    if weighted:
        return sum(q * kv for q, kv in rows) / sum(q for q, _ in rows)
    return sum(map(_KV, rows)) / len(rows)


def kv_once_ms(rows: Sequence[tuple[int, int]], decode_ms: DecodeLookup) -> float:
    return decode_ms(len(rows), _mean_kv(rows, weighted=False)) if rows else 0.0


def per_token_ms(rows: Sequence[tuple[int, int]], decode_ms: DecodeLookup) -> float:
    return decode_ms(sum(q for q, _ in rows), _mean_kv(rows, weighted=True)) if rows else 0.0


def verify_attention_ms(rows: Sequence[tuple[int, int]], decode_ms: DecodeLookup, mode: str, interpolation: float = DEFAULT_INTERPOLATION) -> float:
    """Decode-kernel time of one step whose decode rows are ``rows`` = [(queries, kv), ...]."""
    if mode == "kv_once":
        return kv_once_ms(rows, decode_ms)
    if mode == "per_token":
        return per_token_ms(rows, decode_ms)
    return blend(kv_once_ms(rows, decode_ms), per_token_ms(rows, decode_ms), mode, interpolation)


def extrapolate_batch(decode_ms: DecodeLookup, max_batch: int) -> DecodeLookup:
    """Decode cost beyond the profiled batch range: run the excess as further full batches.

    t(B) = floor(B / Bmax) * t(Bmax) + t(B mod Bmax).  Decode attention at the largest
    profiled batch is bandwidth-bound, so more sequences cost proportionally more; this is
    exact there and never below the profiled value.
    """

    def lookup(batch: int, mean_kv: float) -> float:
        if batch <= max_batch:
            return decode_ms(batch, mean_kv)
        full, rest = divmod(batch, max_batch)
        return full * decode_ms(max_batch, mean_kv) + (decode_ms(rest, mean_kv) if rest else 0.0)

    return lookup
