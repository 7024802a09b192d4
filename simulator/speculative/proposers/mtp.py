"""Multi-token prediction (MTP), vLLM's ``mtp``: the target drafts with its own MTP layers.

What it drafts with: the MTP layer(s) the target ships beside its decoder, counted in its
``config.json`` (``num_nextn_predict_layers`` in DeepSeek-V3, GLM-4.5 and MiMo,
``mtp_num_hidden_layers`` in Qwen3.5; :data:`simulator.models.drafters.MTP_LAYER_FIELDS`).  Each MTP
layer is an fc layer that projects the token embedding and the target's hidden state into one
(``eh_proj`` in DeepSeek-V3, ``input_proj`` in MiMo: 2h -> h) and one decoder layer at the target's
width; it scores the target's vocabulary with the target's own LM head and embedding (vLLM shares
them).

k > 1: vLLM V1 runs one MTP layer autoregressively, one pass per draft token: its EAGLE proposer
calls the MTP model without a step index, so every step uses layer 0 (vLLM warns "Enabling
num_speculative_tokens > 1 will run multiple times of forward on same MTP layer, which may result
in lower acceptance rate"; docs/sources/proposers.md §1.3).  So a step costs exactly as an
EAGLE-1 head's does (:class:`~simulator.speculative.proposers.eagle.EaglePasses`, fc in every
pass) with the MTP layer as the head, and the lower acceptance of the reused layer at later
positions is the acceptance input's to carry (e.g. per-position rates measured at k = 2).
vLLM requires a k above the layer count to be a multiple of it.

Memory: every MTP layer the checkpoint holds (decoder layer and fc), and one layer of KV per
cached token for each; no embedding or LM head (shared).  Lookahead: k slots (vLLM counts MTP as
EAGLE).  The model side must read the target's config: a mixture-of-experts or MLA target
(DeepSeek-V3) is refused there, naming the field, until the model side costs it.
"""

from __future__ import annotations

from simulator.util.errors import ConfigError
from simulator.models.drafters import MTP_LAYER_FIELDS
from simulator.speculative.memory import BYTES, ModelMemory
from simulator.speculative.proposers.base import DraftPassOptions, DraftSource, ModelFacts, NetworkMemory, ProposerKind, SpeculationSettings
from simulator.speculative.proposers.eagle import EaglePasses

# vLLM's model-specific MTP method names (its MTPModelTypes in vllm/config/speculative.py of a
# 2026 main, read_file commit 002e77c1); from vLLM 0.11.0 each is rewritten to "mtp"
MODEL_SPECIFIC_NAMES = (
    "deepseek_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "ernie_mtp", "qwen3_next_mtp", "qwen3_5_mtp",
    "longcat_flash_mtp", "pangu_ultra_moe_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "step3p5_mtp",
)
FC_INPUTS = 2  # the embedding and the target's hidden state, projected into one


class MtpKind(ProposerKind):
    name = "mtp"
    label = "MTP (the target's own layers)"
    vllm_method = "mtp"
    vllm_aliases = MODEL_SPECIFIC_NAMES
    vllm_version = "vLLM 0.11.0 for method 'mtp' (0.9.2 had deepseek_mtp; mimo_mtp from 0.11.0; docs/sources/proposers.md §1.1)"
    drafts_with = DraftSource.MTP_LAYERS
    Options = DraftPassOptions  # a draft network's fixed time per pass
    async_scheduling = True
    rank = 50

    def lookahead_slots(self, k: int) -> int:
        return k

    def check(self, settings: SpeculationSettings, target: ModelFacts, draft_tp: int, tp: int) -> None:
        if target.mtp_layers <= 0:
            where = f"field '{target.mtp_field}' = 0" if target.mtp_field else f"no field {' or '.join(repr(f) for f in MTP_LAYER_FIELDS)}"
            raise ConfigError(
                f"model {target.name}: its config.json has {where}, so it carries no multi-token-prediction layers for proposer = 'mtp'; "
                "use an MTP model (e.g. XiaomiMiMo/MiMo-7B-Base) or another proposer"
            )
        n, k = target.mtp_layers, settings.k
        if k > n and k % n:
            raise ConfigError(
                f"num_speculative_tokens = {k}: {target.name} has {n} MTP layers ({target.mtp_field}), and vLLM reuses them only for a k that "
                f"is a multiple of {n}; use k <= {n} or a multiple of {n}"
            )

    def draft_memory(self, network: NetworkMemory, settings: SpeculationSettings) -> ModelMemory:
        """Every MTP layer of the checkpoint: one decoder layer and its fc layer each, and their KV."""
        layers = settings.target.mtp_layers
        h, tp = network.hidden_size, network.tensor_parallel
        one = network.layers.weight_bytes + BYTES * FC_INPUTS * h * h // tp
        return ModelMemory(layers * one, layers * network.layers.kv_bytes_per_token)

    def step_cost(self, settings: SpeculationSettings):
        return EaglePasses(FC_INPUTS, fc_every_pass=True)


KIND = MtpKind()
