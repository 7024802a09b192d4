"""Acceptance is an input, drawn with common random numbers keyed by (request, output position).

Each request owns a stream of uniforms seeded by (seed, request id), one row per output
position.  When a request stands at output position ``pos`` (tokens already generated), row
``pos`` decides this step: column ``i < k_max`` accepts position i of the draft when
``u < p[i]`` and every earlier position was accepted; the last column decides whether the
proposer produced a draft at all (``u < proposal_probability``; n-gram proposers miss).

A proposer whose draft length varies per request and step (suffix decoding) draws that length
from a second stream of the same request, seeded by (seed, request id, 1), through the inverse
of the length distribution it was given: the acceptance columns above are the same draws with or
without it, so a varying length moves no acceptance draw.

Keying by output position rather than by step index keeps two runs in step whenever they
reach the same point of a request: runs that differ in cost assumptions, in how the token
budget truncated an earlier step, or in k (a schedule), see the same draws there.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np


class Draw(NamedTuple):
    """What the random inputs say at one (request, output position).  A NamedTuple: one is made
    per decode row per step, and a frozen dataclass costs several times more to build."""

    lead: int  # accepted-prefix length were all k_max positions proposed
    length: int  # draft tokens the proposer offers at this step (0: no draft, e.g. an n-gram miss)

    @property
    def drafted(self) -> bool:
        return self.length > 0


class AcceptanceSampler:
    """``length_pmf``: P(the proposer offers L tokens) for L = 0, 1, ... when its draft length
    varies (suffix decoding); None for a proposer that always offers k_max = len(acceptance)."""

    def __init__(self, conditional_acceptance: Sequence[float], seed: int, proposal_probability: float = 1.0, length_pmf: Optional[Sequence[float]] = None):
        self._p = np.asarray(conditional_acceptance, dtype=float)
        self._proposal_probability = float(proposal_probability)
        self._seed = int(seed)
        self._rows: dict[int, tuple[list[int], list[int]]] = {}
        self._length_cdf = None if length_pmf is None else np.cumsum(np.asarray(length_pmf, dtype=float) / float(np.sum(length_pmf)))

    def _lengths(self, request_id: int, drafted: np.ndarray) -> list[int]:
        k_max = len(self._p)
        if self._length_cdf is None:
            return np.where(drafted, k_max, 0).tolist()
        uniforms = np.random.default_rng([self._seed, request_id, 1]).random(len(drafted))
        offered = np.minimum(np.searchsorted(self._length_cdf, uniforms, side="right"), len(self._length_cdf) - 1)
        return np.where(drafted, offered, 0).tolist()

    def _fill(self, request_id: int, positions: int) -> tuple[list[int], list[int]]:
        cached = self._rows.get(request_id)
        if cached is None or len(cached[0]) < positions:
            rows = max(positions, 2 * len(cached[0]) if cached else 0)
            # one generator per request: a longer table extends a shorter one row by row
            uniforms = np.random.default_rng([self._seed, request_id]).random((rows, len(self._p) + 1))
            accepted = uniforms[:, :-1] < self._p
            leads = np.where(accepted.all(axis=1), len(self._p), np.argmin(accepted, axis=1)).tolist()
            cached = (leads, self._lengths(request_id, uniforms[:, -1] < self._proposal_probability))
            self._rows[request_id] = cached
        return cached

    def draw(self, request_id: int, position: int, expected_positions: int = 0) -> Draw:
        """The draw for ``request_id`` at output ``position`` (0-based).  ``expected_positions``
        sizes the first table (the request's output length) so it is drawn once."""
        cached = self._rows.get(request_id)
        if cached is None or position >= len(cached[0]):
            cached = self._fill(request_id, max(position + 1, expected_positions))
        return Draw(cached[0][position], cached[1][position])
