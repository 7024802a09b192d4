"""Adaptive verification: how many of a step's drafts the target verifies, as vLLM 0.30 decides it.

vLLM's ``enable_adaptive_verification`` (Model Runner V2; ``v1/worker/gpu/spec_decode/
adaptive_verification.py`` of v0.30.0, docs/sources/engines.md) keeps the drafter drafting the full
k but lets the target verify only a *budget* B of the step's draft slots, chosen per step to
maximise expected tokens per millisecond:

    B* = argmax over B in 0..(drafts scheduled) of
         (sampling requests + the B highest survival scores)
         / (drafter time at the step's request count + target forward time at non-draft tokens + B)

A slot (request, position j) scores the running product of the request's per-position
confidences, so scores fall along a request and the B best slots are a prefix of each request's
draft.  The two times come from tables vLLM profiles at start-up (:func:`profile_token_counts`,
:func:`cost_table`); ties go to the smaller budget (``np.argmax`` takes the first maximum).

What the simulator can give it: acceptance is an input per position (no per-token confidence), so
the confidence of position j is its conditional acceptance rate and every request is cut at about
the same depth.  vLLM's per-token confidences would cut requests unevenly and gain more; the
budget here is a lower bound of that gain.  A request's first verify step scores every slot 1.0
(vLLM resets a new request's confidences to 1.0).  Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

# envs.py VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN: every dummy request's context while profiling
PROFILE_CONTEXT_LEN = 8192


def profile_token_counts(capture_sizes: Sequence[int], max_num_batched_tokens: int) -> tuple[int, ...]:
    """The target-token counts vLLM profiles (``batches_to_profile``): every capture size, then
    1.5x the largest and doublings of it up to ``max_num_batched_tokens`` (real steps run there
    eagerly or piecewise, which a line through the captured sizes would underestimate)."""
    sizes = sorted(int(s) for s in capture_sizes)
    if not sizes:
        return ()
    largest = size = sizes[-1]
    tail = {min(largest + largest // 2, max_num_batched_tokens)}
    while size < max_num_batched_tokens:
        size = min(2 * size, max_num_batched_tokens)
        tail.add(size)
    return tuple(sizes) + tuple(sorted(tail - set(sizes)))


def profile_rows(tokens: int, max_num_reqs: int) -> list[int]:
    """Query tokens per dummy request of a profiling step: ``min(tokens, max_num_reqs)`` requests
    sharing ``tokens`` evenly, the first ones one more (``_dummy_run``)."""
    requests = max(1, min(tokens, max_num_reqs))
    base, extra = divmod(tokens, requests)
    return [base + (1 if i < extra else 0) for i in range(requests)]


def cost_table(curve: Sequence[tuple[int, float]], size: int, capture_limit: int) -> np.ndarray:
    """Milliseconds for 0..``size`` (tokens or requests) from profiled (count, ms) points, as
    ``build_cost_tables_from_curves`` builds it: the running maximum of the points; up to the
    capture limit a count pays the next profiled point at or above it (a graph pads up to its
    size); above the limit a line between the points above it (nothing pads there, and crossing the
    limit loses the graphs: no blend across it); past the last point the last segment's slope."""
    xs, ys = (np.asarray(column, dtype=float) for column in zip(*sorted(curve)))
    ys = np.maximum.accumulate(ys)
    counts = np.arange(size + 1)
    table = ys[np.minimum(np.searchsorted(xs, counts, side="left"), len(xs) - 1)]
    if capture_limit:
        smooth, above = counts > capture_limit, xs > capture_limit
        if smooth.any() and above.any():
            table[smooth] = np.interp(counts[smooth], xs[above], ys[above])
    if len(xs) > 1:
        past = counts > xs[-1]
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        table[past] = ys[-1] + slope * (counts[past] - xs[-1])
    return table


def _median_by_count(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """One point per count, the median of its samples (``set_initial_cost_curves``): the request
    counts of the drafter's curve repeat once the tokens outnumber ``max_num_reqs``."""
    grouped: dict[int, list[float]] = {}
    for count, ms in points:
        grouped.setdefault(count, []).append(ms)
    return [(count, float(np.median(values))) for count, values in sorted(grouped.items())]


@dataclass(frozen=True)
class VerifyBudget:
    """The start-up tables (milliseconds; ``draft_ms`` by request count, ``verify_ms`` by target
    tokens) and the per-position confidences, deciding each step's draft budget."""

    draft_ms: np.ndarray
    verify_ms: np.ndarray
    confidences: tuple[float, ...]

    @classmethod
    def profiled(cls, forward_ms: Callable[[list[int]], float], drafter_ms: Callable[[list[int]], float], *,
                 capture_sizes: Sequence[int], max_num_reqs: int, max_num_batched_tokens: int, confidences: Sequence[float]) -> "VerifyBudget":
        """The tables from the run's own costs: ``forward_ms(rows)`` and ``drafter_ms(rows)`` time one
        profiling step whose requests hold ``rows`` query tokens each at :data:`PROFILE_CONTEXT_LEN`.
        The drafter's curve takes only the steps up to the capture limit (vLLM prices it from full
        graph replays only)."""
        limit = max(capture_sizes, default=0)
        verify, draft = [], []
        for tokens in profile_token_counts(capture_sizes, max_num_batched_tokens):
            rows = profile_rows(tokens, max_num_reqs)
            verify.append((tokens, forward_ms(rows)))
            if tokens <= limit:
                draft.append((len(rows), drafter_ms(rows)))
        if not draft:  # no capture sizes: the eager steps price it (the tables need a point)
            draft = [(len(profile_rows(t, max_num_reqs)), drafter_ms(profile_rows(t, max_num_reqs))) for t, _ in verify[:1]]
        return cls(
            np.maximum(cost_table(_median_by_count(draft), max_num_reqs, limit), 0.0),
            np.maximum(cost_table(_median_by_count(verify), max_num_batched_tokens, limit), 1e-6),
            tuple(float(c) for c in confidences),
        )

    def survival(self, first_step: bool) -> np.ndarray:
        """Each position's score for one request (1.0 everywhere on its first verify step)."""
        if first_step:
            return np.ones(len(self.confidences))
        return np.cumprod(self.confidences)

    def budget(self, scores: np.ndarray, *, sampling: int, non_draft_tokens: int, requests: int) -> int:
        """B*: the draft slots to verify, given every scheduled slot's score."""
        ranked = np.sort(np.asarray(scores, dtype=float))[::-1]
        expected = sampling + np.concatenate(([0.0], np.cumsum(ranked)))
        costs = self._draft(requests) + self._verify(non_draft_tokens + np.arange(len(ranked) + 1))
        return int(np.argmax(expected / costs))

    def _draft(self, requests: int) -> float:
        table = self.draft_ms
        return float(table[min(requests, len(table) - 1)])

    def _verify(self, tokens: np.ndarray) -> np.ndarray:
        table = self.verify_ms
        inside = np.minimum(tokens, len(table) - 1)
        past = tokens - inside  # a step past the table (a larger step than profiled): its last slope
        slope = table[-1] - table[-2] if len(table) > 1 else 0.0
        return table[inside] + slope * past


def admit(scores: Sequence[np.ndarray], budget: int) -> list[int]:
    """Drafts verified per request: the ``budget`` globally best slots (``scores[r]`` holds request
    r's scheduled slots, non-increasing).  Equal scores go to the earlier request, then position."""
    lengths = [len(row) for row in scores]
    if budget >= sum(lengths):
        return lengths
    flat = np.concatenate([np.asarray(row, dtype=float) for row in scores]) if scores else np.zeros(0)
    owner = np.repeat(np.arange(len(scores)), lengths)
    position = np.concatenate([np.arange(n) for n in lengths]) if scores else np.zeros(0, dtype=int)
    best = np.lexsort((position, owner, -flat))[:budget]
    return np.bincount(owner[best], minlength=len(scores)).tolist()
