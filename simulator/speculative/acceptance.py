"""Acceptance is an input, drawn with common random numbers keyed by (request, output position).

Each request owns a stream of uniforms seeded by (seed, request id), one row per output
position.  When a request stands at output position ``pos`` (tokens already generated), row
``pos`` decides this step: column ``i < k_max`` accepts position i of the draft when
``u < p[i]`` and every earlier position was accepted; the last column decides whether the
proposer produced a draft at all (``u < proposal_probability``; n-gram proposers miss).

Keying by output position rather than by step index keeps two runs in step whenever they
reach the same point of a request: runs that differ in cost assumptions, in how the token
budget truncated an earlier step, or in k (a schedule), see the same draws there.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np


class Draw(NamedTuple):
    """What the random inputs say at one (request, output position).  A NamedTuple: one is made
    per decode row per step, and a frozen dataclass costs several times more to build."""

    lead: int  # accepted-prefix length were all k_max positions proposed
    drafted: bool  # did the proposer produce a draft at this step


class AcceptanceSampler:
    def __init__(self, conditional_acceptance: Sequence[float], seed: int, proposal_probability: float = 1.0):
        self._p = np.asarray(conditional_acceptance, dtype=float)
        self._proposal_probability = float(proposal_probability)
        self._seed = int(seed)
        self._rows: dict[int, tuple[list[int], list[bool]]] = {}

    def _fill(self, request_id: int, positions: int) -> tuple[list[int], list[bool]]:
        cached = self._rows.get(request_id)
        if cached is None or len(cached[0]) < positions:
            rows = max(positions, 2 * len(cached[0]) if cached else 0)
            # one generator per request: a longer table extends a shorter one row by row
            uniforms = np.random.default_rng([self._seed, request_id]).random((rows, len(self._p) + 1))
            accepted = uniforms[:, :-1] < self._p
            leads = np.where(accepted.all(axis=1), len(self._p), np.argmin(accepted, axis=1)).tolist()
            drafted = (uniforms[:, -1] < self._proposal_probability).tolist()
            cached = (leads, drafted)
            self._rows[request_id] = cached
        return cached

    def draw(self, request_id: int, position: int, expected_positions: int = 0) -> Draw:
        """The draw for ``request_id`` at output ``position`` (0-based).  ``expected_positions``
        sizes the first table (the request's output length) so it is drawn once."""
        cached = self._rows.get(request_id)
        if cached is None or position >= len(cached[0]):
            cached = self._fill(request_id, max(position + 1, expected_positions))
        return Draw(cached[0][position], cached[1][position])

    def accepted(self, request_id: int, position: int, proposals: int) -> int:
        """Accepted proposals (0..proposals) at this request's output ``position``."""
        if proposals <= 0:
            return 0
        return min(self.draw(request_id, position).lead, proposals)
