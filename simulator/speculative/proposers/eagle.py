"""EAGLE and EAGLE-3 heads, vLLM's ``eagle`` and ``eagle3``: one decoder layer at the target's
width that drafts from the target's hidden states.

Cost per step, as vLLM V1 runs it: pass 0 runs the head over every token the target computed this
step (it consumes their hidden states), its decode rows' attention in one varlen kernel as the
target's verify rows are; passes 1..k'-1 run one token for every request that sampled a token
(vLLM drafts for all of them, whatever k' verification allowed), its context grown by the tokens
this step accepted and the drafts so far.  Every pass scores one token per request with the head's
LM head (EAGLE-1: the target's vocabulary; EAGLE-3: its draft vocabulary) and pays the fixed
per-pass cost.  The fc layer that projects hidden states into one (EAGLE-1: the embedding and the
target's hidden state, 2h -> h, in every pass; EAGLE-3: three target layers, 3h -> h, in pass 0)
is a GEMM of the built-in physical model, whatever profile the run uses.

Memory: one layer and the fc layer (and EAGLE-3's draft-vocabulary LM head; EAGLE-1 shares the
target's embedding and LM head), plus one layer of KV per cached token.  Lookahead: k slots.
"""

from __future__ import annotations

from simulator.speculative.memory import BYTES, ModelMemory
from simulator.speculative.proposers.base import DraftPass, DraftPassOptions, DraftSource, NetworkMemory, PassRow, ProposerKind, SpeculationSettings, StepWork, catch_up_pass
from simulator.speculative.step import StepPlan


class EagleKind(ProposerKind):
    drafts_with = DraftSource.EAGLE_HEAD
    Options = DraftPassOptions  # a draft network's fixed time per pass
    async_scheduling = True

    def __init__(self, name: str, label: str, fc_every_pass: bool, own_lm_head: bool, architectures: tuple[str, ...], rank: int):
        self.name = self.vllm_method = self.drafter = name
        self.label = label
        self.fc_every_pass = fc_every_pass
        self.own_lm_head = own_lm_head
        self.draft_architectures = architectures
        self.rank = rank
        self.vllm_version = "vLLM V1 from its first release (0.9.2 and earlier; docs/sources/proposers.md §1.1)"

    def lookahead_slots(self, k: int) -> int:
        return k

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        draft, h, tp = settings.draft, network.hidden_size, network.tensor_parallel
        params = draft.fc_inputs * h * h + (draft.vocab_size * h if self.own_lm_head else 0)
        return ModelMemory(network.layers.weight_bytes + BYTES * params // tp, network.layers.kv_bytes_per_token)

    def step_cost(self, settings: SpeculationSettings):
        return EaglePasses(settings.draft.fc_inputs, self.fc_every_pass)


class EaglePasses:
    """The passes of an EAGLE head (and of MTP layers, which vLLM runs the same way)."""

    def __init__(self, fc_inputs: int, fc_every_pass: bool):
        self.fc_inputs = fc_inputs
        self.fc_every_pass = fc_every_pass

    def work(self, step: StepPlan) -> StepWork:
        depth = step.max_proposals
        if depth == 0:
            return catch_up_pass(step, self.fc_inputs)
        rows = tuple(map(PassRow, step.requests, step.computed, step.kv_tokens, step.decode))
        passes = [DraftPass(rows, len(rows), self.fc_inputs, sum(step.computed))]
        # the rows that sample a token (step.samples: every decode row, and a prefill that finishes)
        sampled = [(r, step.context_after(i)) for i, r in enumerate(step.requests) if step.samples(i)]
        for j in range(1, depth):
            step_rows = tuple(PassRow(r, 1, context + j) for r, context in sampled)
            passes.append(DraftPass(step_rows, len(step_rows), self.fc_inputs if self.fc_every_pass else 0, len(step_rows)))
        return StepWork(passes=tuple(passes))


EAGLE = EagleKind("eagle", "EAGLE head", fc_every_pass=True, own_lm_head=False, architectures=("LlamaForCausalLMEagle", "EagleLlamaForCausalLM"), rank=30)
EAGLE3 = EagleKind("eagle3", "EAGLE-3 head", fc_every_pass=False, own_lm_head=True, architectures=("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"), rank=40)
KINDS = (EAGLE, EAGLE3)
