"""Sarathi with speculative decoding: each decode row follows :func:`plan_verify_row`.

Everything else (ordering, chunked prefills, preemption of the newest running requests when
blocks run out) is Vidur's Sarathi scheduler unchanged; runs without speculation use
:class:`TrackedSarathiScheduler`, which is Vidur's Sarathi plus a KV-peak counter.

Decode rows are scheduled first, as in Sarathi.  For each the scheduler asks the pure
:mod:`simulator.speculative.verify_step` for the row's plan (k', KV slots, acceptance,
progress), reserves the KV blocks the plan needs, and once the batch is formed hands the
plans' progress to the batch.

With a k schedule (vLLM's ``num_speculative_tokens_per_batch_size``) k is picked once per
step from the requests running when the step is planned (those holding KV, before this step
admits new ones); a step whose k is 0 plans every decode row as plain decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vidur.config import SarathiSchedulerConfig
from vidur.scheduler.replica_scheduler.replica_scheduler_registry import ReplicaSchedulerRegistry

from simulator.engine.batch import SpecBatch
from simulator.engine.types import ExtensionType
from simulator.engine.vidur_seam import SarathiSeam
from simulator.speculative.acceptance import AcceptanceSampler
from simulator.speculative.k_schedule import k_table
from simulator.speculative.verify_step import VerifyRow, lookahead_slots, plan_verify_row


@dataclass
class SpecSarathiSchedulerConfig(SarathiSchedulerConfig):
    num_speculative_tokens: int = 0
    conditional_acceptance: tuple = field(default_factory=tuple)
    acceptance_seed: int = 0
    proposal_probability: float = 1.0
    proposer: str = "ngram"  # sets vLLM's num_lookahead_tokens (fixed at the largest k, as vLLM sizes it once)
    k_schedule: tuple = ()  # (start, end, k) rows; empty = k fixed at num_speculative_tokens

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


class SpecSarathiScheduler(TrackedSarathiScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = self.scheduler_config
        self._k = config.num_speculative_tokens
        if self._k <= 0:
            raise ValueError("SpecSarathiScheduler needs k >= 1; use TrackedSarathiScheduler for k = 0")
        self._sampler = AcceptanceSampler(config.conditional_acceptance, config.acceptance_seed, config.proposal_probability)
        self._plans: dict[int, VerifyRow] = {}  # decode rows planned this step
        self._k_table = k_table(config.k_schedule) if config.k_schedule else ()
        self._step_k = self._k
        self._lookahead = lookahead_slots(config.proposer, self._k)
        self.scheduled_k_steps = 0  # steps planned (with a k), and the sum of their k
        self.scheduled_k_sum = 0
        self._missing_blocks: dict[int, int] = {}  # decode rows planned this step -> blocks to add
        self._chunk_size = config.chunk_size
        self._kv_block_size = self.cache_config.block_size

    def next_num_q_tokens(self, request, num_batch_tokens: int) -> int:
        # once per decode row per step: locals instead of repeated attribute chains
        k = self._step_k
        if k == 0 or not request.is_prefill_complete:
            # prefill chunks, and every row of a k = 0 step: Vidur's Sarathi unchanged
            return super().next_num_q_tokens(request, num_batch_tokens)
        request_id = request.id
        processed = request.num_processed_tokens
        position = processed - request.prompt_tokens - 1  # output tokens already emitted, less the first
        plan = plan_verify_row(
            k=k,
            processed_tokens=processed,
            remaining_output=request.total_tokens - processed,
            budget_left=self._chunk_size - num_batch_tokens,
            lookahead=self._lookahead,
            draw=self._sampler.draw(request_id, position, request.output_tokens),
        )
        if plan is None:
            return 0  # no budget left: the request waits for the next step
        self._plans[request_id] = plan
        needed = -(-plan.kv_slots // self._kv_block_size)
        self._missing_blocks[request_id] = max(0, needed - self.blocks_held(request_id))
        return plan.computed

    def free(self, *request_ids) -> None:
        # a request preempted while this step is planned is a new (prefill) request again
        super().free(*request_ids)
        for request_id in request_ids:
            self._missing_blocks.pop(request_id, None)
            self._plans.pop(request_id, None)

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

    def pick_k(self, running: int) -> int:
        """This step's k for ``running`` requests (the schedule's, else the fixed k)."""
        table = self._k_table
        if not table:
            return self._k
        return table[min(running, len(table) - 1)]

    def next_batch(self, time: float):
        if self._k_table and self.stages_running == 0:
            self._step_k = self.pick_k(self.requests_holding_kv)
        batch = super().next_batch(time)
        plans, self._plans = self._plans, {}
        self._missing_blocks.clear()
        if batch is None:
            return batch
        self.scheduled_k_steps += 1
        self.scheduled_k_sum += self._step_k
        progress, decode_rows, proposals = [], [], 0
        for request, computed in zip(batch.requests, batch.num_q_tokens):
            is_decode = request.is_prefill_complete
            decode_rows.append(is_decode)
            plan = plans.get(request.id) if is_decode else None
            if plan is None:  # a prefill chunk, or a row of a k = 0 step (plain decode)
                progress.append(computed)
                continue
            if plan.proposals:
                request.acceptance_log.append((plan.proposals, plan.accepted))
                proposals += plan.proposals
            progress.append(plan.progress)
        return SpecBatch.adopt(batch, progress, decode_rows, proposals)


ReplicaSchedulerRegistry.register(ExtensionType.TRACKED_SARATHI, TrackedSarathiScheduler)
ReplicaSchedulerRegistry.register(ExtensionType.SPEC_SARATHI, SpecSarathiScheduler)
