"""One speculative step, in one place: propose -> verify k' + 1 -> accept a prefix -> advance accepted + 1.

This module is the whole step; the Vidur scheduler and batch are thin adapters that call it
(:mod:`simulator.engine.scheduler`, :mod:`simulator.engine.batch`), and every consumer (the
target's predictor, the proposer's cost, the request's progress, the acceptance counters) reads
the :class:`StepPlan` it produces.  Nothing else decides k', acceptance or progress.

The step as vLLM V1 runs it, with the counterpart of each line:

1. **Propose.**  The proposer offers a draft of ``draw.length`` tokens for the row (a fixed k for
   most proposers; 0 on an n-gram miss; a per-request, per-step length for suffix decoding), read
   from the acceptance draws keyed by (request, output position) (:mod:`.acceptance`).
2. **Verify k' + 1.**  k' = min(k, offered length, remaining output - 1, budget left - 1): never
   past the request's last token, never past the step's token budget.  The target computes
   k' + 1 tokens for the row (vLLM: the scheduler schedules ``num_tokens_with_spec`` tokens and
   the runner builds ``SpecDecodeMetadata`` with ``num_draft_tokens`` = k' per request).  A draft
   tree of N drafted tokens computes N + 1 under a tree mask instead.
3. **Accept a prefix.**  accepted = min(accepted prefix of the draw, k') (vLLM's
   ``RejectionSampler``: draft tokens are accepted until the first rejection; a tree accepts a
   root-to-leaf path no longer than its depth).
4. **Advance accepted + 1.**  The request advances by accepted + 1 tokens, the bonus or
   corrected token included (vLLM's scheduler advances ``num_computed_tokens`` by what it
   scheduled and rolls the rejected ones back: ``num_computed_tokens -= num_rejected``; here
   progress = computed - rejected directly).  Cost follows ``computed``, request state follows
   ``progress``.

KV slots: Vidur counts the token fed this step as processed already, so a plain decode holds
``processed`` slots; a verify step also writes its k' proposals, and proposers with a draft KV
cache hold ``lookahead`` more (vLLM's ``num_lookahead_tokens``, owned by each proposer kind).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple, Optional, Sequence

import numpy as np

from simulator.speculative.acceptance import Draw
from simulator.speculative.adaptive_verification import VerifyBudget, admit


class RowPlan(NamedTuple):
    """One decode row's part of the step (a NamedTuple: one is built per row per step)."""

    proposals: int  # k' draft tokens the target verifies for the row
    computed: int  # tokens the target computes for the row: k' + 1 (a tree: N + 1)
    kv_slots: int  # KV token slots the request must hold once this step has written
    accepted: int  # accepted proposals, 0..k' (a tree: 0..depth)
    progress: int  # tokens the request advances by: accepted + 1


@dataclass(frozen=True)
class TreeShape:
    """A draft tree verified in one target pass: ``nodes`` drafted tokens (SGLang's
    ``speculative_num_draft_tokens`` less the root), at most ``depth`` of them on any path."""

    nodes: int
    depth: int


def plan_row(
    *,
    k: int,
    processed_tokens: int,
    remaining_output: int,
    budget_left: int,
    lookahead: int,
    draw: Draw,
    tree: Optional[TreeShape] = None,
) -> Optional[RowPlan]:
    """Steps 1-4 for one decode row, or None when the step has no budget left for it."""
    if budget_left <= 0:
        return None
    lead, length = draw
    if tree is None:
        proposals = max(0, min(k, length, remaining_output - 1, budget_left - 1))
        reach = proposals
    else:  # a tree pruned to the budget; a path accepts no deeper than the tree or the request allows
        proposals = max(0, min(tree.nodes, budget_left - 1)) if length else 0
        reach = max(0, min(tree.depth, proposals, remaining_output - 1))
    accepted = min(lead, reach)
    # RowPlan(proposals, computed, kv_slots, accepted, progress), by position: one per row per step
    return RowPlan(proposals, proposals + 1, processed_tokens + proposals + lookahead, accepted, accepted + 1)


@dataclass
class StepPlan:
    """The step as one record, row-aligned with the batch (vLLM's ``SpecDecodeMetadata`` plus the
    sampler's outcome): what every consumer reads, so nothing recomputes proposals or progress.

    ``kv_tokens`` is each row's KV length once the step has computed (Vidur's ``num_kv_tokens``):
    the context a row held before the step is ``kv_tokens - computed``.  Prefill rows carry
    ``proposals`` 0 and advance by the chunk they compute.
    """

    requests: Sequence
    computed: list[int]
    kv_tokens: list[int]
    decode: list[bool]  # the row was a decode / verify row (its prefill finished before this step)
    proposals: list[int]
    accepted: list[int]
    progress: list[int]

    @property
    def num_proposals(self) -> int:
        return sum(self.proposals)

    @property
    def max_proposals(self) -> int:
        return max(self.proposals, default=0)

    def finishes_prefill(self, i: int) -> bool:
        """Row ``i`` is a prefill chunk that completes its prompt (its last token is sampled)."""
        request = self.requests[i]
        return not self.decode[i] and request.num_processed_tokens + self.computed[i] >= request.num_prefill_tokens

    def samples(self, i: int) -> bool:
        """Row ``i`` samples a token this step (every decode row, and a prefill that finishes)."""
        return self.decode[i] or self.finishes_prefill(i)

    def context_after(self, i: int) -> int:
        """Row ``i``'s context once the step's sampled tokens are in, what a drafter drafts after: a
        decode row's cache before the step plus what it advances by (accepted + the bonus or
        corrected token); a prefill that finishes, its prompt and its first sampled token; a prefill
        chunk that does not, the tokens cached so far."""
        kv = self.kv_tokens[i]
        if self.decode[i]:
            return kv - self.computed[i] + self.progress[i]
        return kv + 1 if self.finishes_prefill(i) else kv


def step_plan(requests: Sequence, computed: Sequence[int], kv_tokens: Sequence[int], rows: dict) -> StepPlan:
    """The step's plan from the batch the scheduler formed and the decode rows it planned
    (``rows``: request id -> :class:`RowPlan`).  A row without a plan is a prefill chunk, or a
    decode row of a k = 0 step: it computes and advances by its scheduled tokens."""
    decode = [request.is_prefill_complete for request in requests]
    plans = [rows.get(request.id) if is_decode else None for request, is_decode in zip(requests, decode)]
    proposals = [0 if plan is None else plan.proposals for plan in plans]
    accepted = [0 if plan is None else plan.accepted for plan in plans]
    progress = [q if plan is None else plan.progress for plan, q in zip(plans, computed)]
    return StepPlan(list(requests), list(computed), list(kv_tokens), decode, proposals, accepted, progress)


def trim_to_budget(plan: StepPlan, budget: VerifyBudget) -> StepPlan:
    """Adaptive verification (vLLM 0.30's ``get_num_tokens`` and ``reallocate_drafts``): the step
    verifies only the draft budget its cost tables pick, each row a prefix of its drafts, and a row
    cut to n drafts computes n + 1 tokens and accepts at most n.  The drafter's work is not cut
    (Model Runner V2 drafts the full k); the KV the scheduler reserved for the full draft stays."""
    rows = [i for i, n in enumerate(plan.proposals) if n]
    if not rows:
        return plan
    scores = [budget.survival(first_step=not plan.requests[i].acceptance_log)[: plan.proposals[i]] for i in rows]
    chosen = budget.budget(
        np.concatenate(scores),
        sampling=sum(map(plan.samples, range(len(plan.requests)))),
        non_draft_tokens=sum(plan.computed) - plan.num_proposals,
        requests=len(plan.requests),
    )
    if chosen >= plan.num_proposals:
        return plan
    proposals, computed, kv_tokens = list(plan.proposals), list(plan.computed), list(plan.kv_tokens)
    accepted, progress = list(plan.accepted), list(plan.progress)
    for i, verified in zip(rows, admit(scores, chosen)):
        cut = proposals[i] - verified
        proposals[i], computed[i], kv_tokens[i] = verified, computed[i] - cut, kv_tokens[i] - cut
        accepted[i] = min(accepted[i], verified)
        progress[i] = accepted[i] + 1
    return replace(plan, computed=computed, kv_tokens=kv_tokens, proposals=proposals, accepted=accepted, progress=progress)


class StepPlanner:
    """The step's decisions over a run: this step's k (fixed, or vLLM's
    ``num_speculative_tokens_per_batch_size`` picked from the running batch) and each decode row's
    :class:`RowPlan`, drawn with common random numbers.  The scheduler calls :meth:`start`,
    :meth:`plan_decode_row` once per decode row, and :meth:`finish` with the batch it formed."""

    def __init__(self, *, k: int, sampler, lookahead: int, token_budget: int, k_table: Sequence[int] = (), tree: Optional[TreeShape] = None):
        if k <= 0:
            raise ValueError("a speculative step needs k >= 1; k = 0 runs Vidur's Sarathi unchanged")
        self.k = k
        self.step_k = k
        self._sampler = sampler
        self._lookahead = lookahead
        self._budget = token_budget
        self._k_table = tuple(k_table)
        self._tree = tree
        self._rows: dict[int, RowPlan] = {}

    @property
    def dynamic(self) -> bool:
        return bool(self._k_table)

    def pick_k(self, running: int) -> int:
        """The step's k for ``running`` requests (the schedule's, else the fixed k)."""
        table = self._k_table
        if not table:
            return self.k
        return table[min(running, len(table) - 1)]

    def start(self, running: int) -> None:
        """A new step is being planned with ``running`` requests holding KV."""
        if self._k_table:
            self.step_k = self.pick_k(running)

    def plan_decode_row(self, request, num_batch_tokens: int) -> Optional[RowPlan]:
        """Plan one decode row of this step (None: no budget left; it waits).  ``request`` needs
        ``id``, ``num_processed_tokens``, ``prompt_tokens``, ``total_tokens`` and ``output_tokens``."""
        processed = request.num_processed_tokens
        request_id = request.id
        position = processed - request.prompt_tokens - 1  # output tokens already emitted, less the first
        plan = plan_row(
            k=self.step_k,
            processed_tokens=processed,
            remaining_output=request.total_tokens - processed,
            budget_left=self._budget - num_batch_tokens,
            lookahead=self._lookahead,
            draw=self._sampler.draw(request_id, position, request.output_tokens),
            tree=self._tree,
        )
        if plan is not None:
            self._rows[request_id] = plan
        return plan

    def drop(self, request_id: int) -> None:
        """A request preempted while the step is planned is a new (prefill) request again."""
        self._rows.pop(request_id, None)

    def finish(self, batch_rows: Optional[tuple], budget: Optional[VerifyBudget] = None) -> Optional[StepPlan]:
        """The step's plan for the batch formed (``(requests, computed, kv_tokens)``, or None when
        no batch was formed), trimmed to ``budget`` under adaptive verification; verify steps are
        logged on their requests as (verified, accepted)."""
        rows, self._rows = self._rows, {}
        if batch_rows is None:
            return None
        plan = step_plan(*batch_rows, rows)
        if budget is not None:
            plan = trim_to_budget(plan, budget)
        for request, proposals, accepted in zip(plan.requests, plan.proposals, plan.accepted):
            if proposals:
                request.acceptance_log.append((proposals, accepted))
        return plan
