"""Parallel drafters: all k draft tokens from one forward pass, with k query positions per sequence.

* **DFlash** (vLLM's ``dflash``, vLLM 0.20.0 or later): a block drafter of several decoder layers
  at the target's width.  After verification it projects the hidden states the target computed
  this step (the target layers in ``dflash_config.target_layer_ids``, through an fc layer) into
  its cache as context K/V, then fills a block of 1 + k positions (the anchor token and k mask
  slots) in one non-causal pass over that context; it shares the target's embedding and LM head.
  Its draft config fixes the block: k <= ``block_size`` - 1.  Lookahead: k + 1 slots (vLLM 0.23
  and later: "a query for the last sampled token plus queries for each draft token"; k in 0.20-0.22).
* **EAGLE-3 with parallel drafting** (P-EAGLE: ``eagle3`` with ``parallel_drafting: true``, vLLM
  0.16.0 or later): an EAGLE-3 head trained for it runs its first pass over the verified tokens
  plus k - 1 mask slots per request and stops there.  vLLM reads the mask token from the head's
  config (``pard_token`` or ``ptd_token_id``), so a head without one is refused.  Lookahead: k.

Cost per step: one draft pass with the fixed per-pass cost (DFlash: the context K/V projection
of this step's computed tokens through every draft layer, the fc layer over them, and the block's
1 + k queries through the layers; P-EAGLE: EAGLE's first pass with k - 1 more queries on every row
that sampled), scoring k logits rows per sampling request.  Acceptance per position is an input,
as for every proposer; parallel drafters trade lower per-position acceptance for a draft cost
that no longer grows with k (docs/sources/proposers.md §2).
"""

from __future__ import annotations

from simulator.util.errors import ConfigError
from simulator.models.drafters import DFLASH_ARCHITECTURES
from simulator.speculative.memory import BYTES, ModelMemory
from simulator.speculative.proposers.base import DraftPass, DraftPassOptions, DraftSource, ModelFacts, NetworkMemory, PassRow, ProposerKind, SpeculationSettings, StepWork, catch_up_pass
from simulator.speculative.proposers.eagle import EAGLE3
from simulator.speculative.step import StepPlan


class DFlashKind(ProposerKind):
    name = vllm_method = drafter = "dflash"
    label = "DFlash block drafter"
    vllm_version = "vLLM 0.20.0 (lookahead k + 1 from 0.23.0; docs/sources/proposers.md §1.1, §1.4)"
    drafts_with = DraftSource.PARALLEL_DRAFTER
    Options = DraftPassOptions  # a draft network's fixed time per pass
    draft_architectures = DFLASH_ARCHITECTURES
    rank = 60

    def lookahead_slots(self, k: int) -> int:
        return k + 1

    def check(self, settings: SpeculationSettings, target: ModelFacts, draft_tp: int, tp: int) -> None:
        self._check_drafter(settings.draft, target)
        draft = settings.draft
        if settings.k > draft.block_size - 1:
            raise ConfigError(
                f"num_speculative_tokens = {settings.k}: draft_model '{draft.name}' fills blocks of block_size = {draft.block_size} "
                f"(one anchor token and {draft.block_size - 1} mask slots), so k must be at most {draft.block_size - 1}"
            )
        beyond = [i for i in draft.target_layer_ids if i >= target.num_layers]
        if beyond:
            raise ConfigError(f"draft_model '{draft.name}': dflash_config.target_layer_ids {beyond} are not layers of {target.name} ({target.num_layers} layers)")

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        """Its decoder layers and its fc layer (taps x h -> h); KV for every cached token in every
        layer (the projected context); no embedding or LM head (the target's)."""
        h, tp = network.hidden_size, network.tensor_parallel
        return ModelMemory(network.layers.weight_bytes + BYTES * settings.draft.fc_inputs * h * h // tp, network.layers.kv_bytes_per_token)

    def step_cost(self, settings: SpeculationSettings):
        return _BlockPass(settings.draft.fc_inputs)


class _BlockPass:
    def __init__(self, fc_inputs: int):
        self.fc_inputs = fc_inputs

    def work(self, step: StepPlan) -> StepWork:
        """One pass of 1 + k queries a sampling request over the context the target's hidden states
        project (``context_kv_tokens``); at k = 0 the same pass with one query a request and no
        logits (vLLM's ``v1/spec_decode/dflash.py`` runs 1 + K queries; its first forward runs at K = 0)."""
        if not step.requests:
            return StepWork()
        k = step.max_proposals
        rows = []
        for i, r in enumerate(step.requests):
            if step.samples(i):
                rows.append(PassRow(r, k + 1, step.context_after(i) + k + 1, True))
        computed = sum(step.computed)
        return StepWork(passes=(DraftPass(tuple(rows), k * len(rows), self.fc_inputs, computed, context_kv_tokens=computed),))


class ParallelEagleKind(ProposerKind):
    name = "eagle3_parallel"
    label = "EAGLE-3 head, parallel drafting (P-EAGLE)"
    vllm_method = "eagle3"
    config_flags = {"parallel_drafting": True}
    async_scheduling = True
    vllm_version = "vLLM 0.16.0 (parallel_drafting; PR #32887; docs/sources/proposers.md §1.2, §2.1)"
    drafts_with = DraftSource.EAGLE_HEAD
    Options = DraftPassOptions  # a draft network's fixed time per pass
    drafter = "eagle3"
    draft_architectures = EAGLE3.draft_architectures
    rank = 45

    def lookahead_slots(self, k: int) -> int:
        return k

    def check(self, settings: SpeculationSettings, target: ModelFacts, draft_tp: int, tp: int) -> None:
        self._check_drafter(settings.draft, target)
        if not settings.draft.mask_token:
            raise ConfigError(
                f"draft_model '{settings.draft.name}': no 'pard_token' or 'ptd_token_id' in its config, so it was not trained for parallel "
                "drafting (vLLM reads the mask token from there); use proposer = 'eagle3'"
            )

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        return EAGLE3.draft_memory(network, settings)

    def step_cost(self, settings: SpeculationSettings):
        return _ParallelEaglePass(settings.draft.fc_inputs)


class _ParallelEaglePass:
    def __init__(self, fc_inputs: int):
        self.fc_inputs = fc_inputs

    def work(self, step: StepPlan) -> StepWork:
        k = step.max_proposals
        if k == 0:
            return catch_up_pass(step, self.fc_inputs)
        rows, logits = [], 0
        for i, (r, q, kv, d) in enumerate(zip(step.requests, step.computed, step.kv_tokens, step.decode)):
            masks = k - 1 if step.samples(i) else 0
            rows.append(PassRow(r, q + masks, kv + masks, d))
            logits += k if step.samples(i) else 0
        return StepWork(passes=(DraftPass(tuple(rows), logits, self.fc_inputs, sum(row.q for row in rows)),))


DFLASH = DFlashKind()
PARALLEL_EAGLE = ParallelEagleKind()
KINDS = (DFLASH, PARALLEL_EAGLE)
