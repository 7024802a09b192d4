"""A draft model, vLLM's ``draft_model``: a small ordinary LM of the target's vocabulary.

Cost per step: k' sequential single-token passes over the speculating rows (pass j covers the
rows proposing more than j tokens, with j more tokens of context), plus the draft's prefill of
this step's prompt chunks (it needs their KV too), each pass with the fixed per-pass cost.
Approximations: the first pass after a verification really re-reads the accepted tokens (costed
as one token); very short drafts are dominated by launch overheads a profile only roughly holds.

Memory: the draft's weights with its own embedding and LM head, and its KV for every cached
token.  Lookahead: k slots (vLLM's ``num_lookahead_tokens`` for draft models).
"""

from __future__ import annotations

from simulator.speculative.memory import ModelMemory
from simulator.speculative.proposers.base import DraftPass, DraftPassOptions, DraftSource, NetworkMemory, PassRow, ProposerKind, SpeculationSettings, StepWork, catch_up_pass
from simulator.speculative.step import StepPlan


class DraftModelKind(ProposerKind):
    name = "draft"
    label = "draft model"
    vllm_method = "draft_model"
    vllm_version = "vLLM 0.15.0 (V1 has no draft-model proposer from 0.10.0 to 0.14.0; docs/sources/proposers.md §1.1)"
    drafts_with = DraftSource.DRAFT_MODEL
    Options = DraftPassOptions  # a draft network's fixed time per pass
    rank = 20

    def lookahead_slots(self, k: int) -> int:
        return k

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        return ModelMemory(network.layers.weight_bytes + network.embeddings_bytes, network.layers.kv_bytes_per_token)

    def step_cost(self, settings: SpeculationSettings):
        return _DraftModelPasses()


class _DraftModelPasses:
    def work(self, step: StepPlan) -> StepWork:
        prefill, drafting = [], []
        for i, request in enumerate(step.requests):
            q, kv = step.computed[i], step.kv_tokens[i]
            if not step.decode[i]:
                prefill.append((PassRow(request, q, kv), step.finishes_prefill(i)))
            elif step.proposals[i] > 0:
                drafting.append((request, kv - q, step.proposals[i]))
        passes = []
        depth = max((p for _, _, p in drafting), default=0)
        if depth == 0:  # nothing to draft: the draft model still ingests what the target computed
            return catch_up_pass(step)
        for j in range(max(depth, 1 if prefill else 0)):
            rows = [PassRow(r, 1, context + j + 1) for r, context, p in drafting if p > j]
            logits_rows = len(rows)
            if j == 0:
                rows += [row for row, _ in prefill]
                logits_rows += sum(finishing for _, finishing in prefill)
            if rows:
                passes.append(DraftPass(tuple(rows), logits_rows))
        return StepWork(passes=tuple(passes))


KIND = DraftModelKind()
