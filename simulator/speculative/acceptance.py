"""Acceptance is an input, drawn with common random numbers.

Each request owns a stream of uniforms seeded by (seed, request id); its s-th decode step reads
row s.  Position i of a draft is accepted when u[s, i] < p[i] and every earlier position was,
so two runs that differ only in cost assumptions see identical draws for every
(request, step): the comparison isolates the assumption.  A step that may propose only
k' < k tokens (request end, token budget) reads the first k' uniforms of the same row.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class AcceptanceSampler:
    def __init__(self, conditional_acceptance: Sequence[float], seed: int):
        self._p = np.asarray(conditional_acceptance, dtype=float)
        self._seed = int(seed)
        self._leads: dict[int, list[int]] = {}

    @property
    def max_proposals(self) -> int:
        return len(self._p)

    def _lead_row(self, request_id: int, step: int) -> int:
        """Length of the accepted prefix if all k proposals were made at this step."""
        leads = self._leads.get(request_id)
        if leads is None or step >= len(leads):
            rows = max(256, 2 * (step + 1))  # regenerated identically (same seed) when outgrown
            rng = np.random.default_rng([self._seed, request_id])
            uniforms = rng.random((rows, len(self._p)))
            accepted = uniforms < self._p
            # first rejected position = accepted-prefix length
            leads = np.where(accepted.all(axis=1), len(self._p), np.argmin(accepted, axis=1)).tolist()
            self._leads[request_id] = leads
        return leads[step]

    def accepted(self, request_id: int, step: int, proposals: int) -> int:
        """Accepted proposals (0..proposals) at this request's ``step``-th decode step."""
        if proposals <= 0:
            return 0
        return min(self._lead_row(request_id, step), proposals)
