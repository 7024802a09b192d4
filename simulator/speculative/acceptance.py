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

    def leads(self, request_id: int, steps: int) -> list[int]:
        """Accepted-prefix length at each of the request's first ``steps`` decode steps, were all
        k proposals made.  Draws fill row by row, so a longer list extends a shorter one."""
        cached = self._leads.get(request_id)
        if cached is None or len(cached) < steps:
            rows = max(steps, 2 * len(cached) if cached else 0)
            uniforms = np.random.default_rng([self._seed, request_id]).random((rows, len(self._p)))
            accepted = uniforms < self._p
            cached = np.where(accepted.all(axis=1), len(self._p), np.argmin(accepted, axis=1)).tolist()
            self._leads[request_id] = cached
        return cached

    def accepted(self, request_id: int, step: int, proposals: int) -> int:
        """Accepted proposals (0..proposals) at this request's ``step``-th decode step."""
        if proposals <= 0:
            return 0
        return min(self.leads(request_id, step + 1)[step], proposals)
