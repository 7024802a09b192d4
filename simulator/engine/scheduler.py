"""Sarathi with speculative decoding: Vidur's callbacks as thin adapters to the one step module.

The step (k', acceptance, progress, the batch's plan) is :mod:`simulator.speculative.step`; this
module only connects it to Vidur's Sarathi: ``next_num_q_tokens`` asks the planner for a decode
row's plan, the KV hooks reserve the blocks the plan needs (vLLM's lookahead slots included), and
``next_batch`` hands the formed batch its :class:`~simulator.speculative.step.StepPlan`.
Everything else (ordering, chunked prefills, preemption of the newest running requests when
blocks run out) is Vidur's Sarathi scheduler unchanged; runs without speculation use
:class:`TrackedSarathiScheduler`, which is Vidur's Sarathi plus a KV-peak counter.

With a k schedule k is picked once per step from the requests running when the step is planned
(those holding KV, before this step admits new ones); a step whose k is 0 plans every decode row
as plain decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from simulator.engine.batch import SpeculativeBatch
from simulator.engine.types import ExtensionType
from simulator.engine.verify_budget import profiled_budget
from simulator.speculative.acceptance import AcceptanceSampler
from simulator.speculative.k_schedule import k_table
from simulator.speculative.step import StepPlanner, TreeShape
from simulator.vidur.configs import SarathiSchedulerConfig
from simulator.vidur.runtime import ReplicaSchedulerRegistry
from simulator.vidur.seam import SarathiSeam, retoken


@dataclass
class SpeculativeSarathiSchedulerConfig(SarathiSchedulerConfig):
    num_speculative_tokens: int = 0
    conditional_acceptance: tuple = field(default_factory=tuple)
    acceptance_seed: int = 0
    proposal_probability: float = 1.0
    # vLLM's num_lookahead_tokens, fixed at the largest k (vLLM sizes it once): the proposer kind's
    lookahead_slots: int = 0
    k_schedule: tuple = ()  # (start, end, k) rows; empty = k fixed at num_speculative_tokens
    draft_length_pmf: tuple = ()  # P(the proposer offers L tokens), L = 0, 1, ...; empty = always k
    tree: Optional[TreeShape] = None  # a draft tree verified in one pass; None = a chain
    # vLLM's enable_adaptive_verification: each step verifies the draft budget its start-up cost
    # tables pick (simulator.speculative.adaptive_verification); the drafter still drafts the full k
    adaptive_verification: bool = False

    @staticmethod
    def get_type():
        return ExtensionType.SPEC_SARATHI


@dataclass
class TrackedSarathiSchedulerConfig(SarathiSchedulerConfig):
    @staticmethod
    def get_type():
        return ExtensionType.TRACKED_SARATHI


class TrackedSarathiScheduler(SarathiSeam):
    """Vidur's Sarathi, unchanged, plus two counters: peak allocated KV blocks and forward passes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.peak_allocated_blocks = 0
        self.forward_passes = 0  # batches run: target-model iterations

    @property
    def num_blocks(self) -> int:
        return int(self.cache_config.num_blocks)

    def allocate(self, request_id: int, num_blocks: int) -> None:
        super().allocate(request_id, num_blocks)
        self.peak_allocated_blocks = max(self.peak_allocated_blocks, self.allocated_blocks)

    def on_batch_end(self, batch) -> None:
        super().on_batch_end(batch)
        self.forward_passes += 1


class SpeculativeSarathiScheduler(TrackedSarathiScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = self.scheduler_config
        sampler = AcceptanceSampler(config.conditional_acceptance, config.acceptance_seed, config.proposal_probability, config.draft_length_pmf or None)
        self.step = StepPlanner(
            k=config.num_speculative_tokens,
            sampler=sampler,
            lookahead=config.lookahead_slots,
            token_budget=config.chunk_size,
            k_table=k_table(config.k_schedule) if config.k_schedule else (),
            tree=config.tree,
        )
        self.scheduled_k_steps = 0  # steps planned (with a k), and the sum of their k
        self.scheduled_k_sum = 0
        self._missing_blocks: dict[int, int] = {}  # decode rows planned this step -> blocks to add
        self._kv_block_size = self.cache_config.block_size
        self._budget = None  # adaptive verification's tables, profiled before the first step (as vLLM does at start-up)

    def next_num_q_tokens(self, request, num_batch_tokens: int) -> int:
        if self.step.step_k == 0 or not request.is_prefill_complete:
            # prefill chunks, and every row of a k = 0 step: Vidur's Sarathi unchanged
            return super().next_num_q_tokens(request, num_batch_tokens)
        plan = self.step.plan_decode_row(request, num_batch_tokens)
        if plan is None:
            return 0  # no budget left: the request waits for the next step
        request_id = request.id
        needed = -(-plan.kv_slots // self._kv_block_size)
        self._missing_blocks[request_id] = max(0, needed - self.blocks_held(request_id))
        return plan.computed

    def free(self, *request_ids) -> None:
        super().free(*request_ids)
        for request_id in request_ids:
            self._missing_blocks.pop(request_id, None)
            self.step.drop(request_id)

    def can_allocate(self, request) -> bool:
        missing = self._missing_blocks.get(request.id)
        if missing is None:
            return super().can_allocate(request)
        return self.cache_config.num_blocks - self.allocated_blocks >= missing

    def allocate_for(self, request) -> None:
        missing = self._missing_blocks.get(request.id)
        if missing is None:
            return super().allocate_for(request)
        if missing:
            self.allocate(request.id, missing)

    def next_batch(self, time: float):
        if self.step.dynamic and self.stages_running == 0:
            self.step.start(self.requests_holding_kv)
        batch = super().next_batch(time)
        self._missing_blocks.clear()
        budget = self.verify_budget()
        plan = self.step.finish(None if batch is None else (batch.requests, batch.num_q_tokens, batch.num_kv_tokens), budget)
        if batch is None:
            return batch
        if budget is not None and plan.computed != batch.num_q_tokens:  # adaptive verification cut verify rows
            retoken(batch, plan.computed, plan.kv_tokens)
        self.scheduled_k_steps += 1
        self.scheduled_k_sum += self.step.step_k
        return SpeculativeBatch.adopt(batch, plan)


    def verify_budget(self):
        """Adaptive verification's budget (None when the run verifies every draft)."""
        config = self.scheduler_config
        if not config.adaptive_verification:
            return None
        if self._budget is None:
            self._budget = profiled_budget(
                self.execution_time_predictor, k=config.num_speculative_tokens, confidences=config.conditional_acceptance,
                max_num_reqs=config.batch_size_cap, max_num_batched_tokens=config.chunk_size,
            )
        return self._budget


ReplicaSchedulerRegistry.register(ExtensionType.TRACKED_SARATHI, TrackedSarathiScheduler)
ReplicaSchedulerRegistry.register(ExtensionType.SPEC_SARATHI, SpeculativeSarathiScheduler)
