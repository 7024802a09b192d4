"""The draft networks a ``config.json`` can describe, read as the cost model sees them (pure).

EAGLE draft heads are recognised by the architecture names their configs carry in SGLang and
vLLM (``LlamaForCausalLMEagle`` / ``EagleLlamaForCausalLM`` for EAGLE-1,
``LlamaForCausalLMEagle3`` / ``Eagle3LlamaForCausalLM`` for EAGLE-3); ``eagle_targets`` (this
project's key, not Hugging Face's) lists the targets a head was trained for: a head serves no
other, and nothing in a Hugging Face config says which, so a head's config must name them.
DFlash drafters (``DFlashDraftModel``) are read the same way, with their block size and the
target layers they read (``dflash_config.target_layer_ids``) and ``draft_targets`` naming their
targets.  A target's own multi-token-prediction layers are read from the field its family uses
(``num_nextn_predict_layers`` in DeepSeek-V3, GLM-4.5 and MiMo; ``mtp_num_hidden_layers`` in
Qwen3.5), whatever the architecture, so MTP works for any target the model side can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import has_type
from simulator.models.config_fields import non_negative, refuse, value_of

# architecture -> (EAGLE method, hidden states its fc layer takes in)
EAGLE_ARCHITECTURES = {
    "LlamaForCausalLMEagle": ("eagle", 2),
    "EagleLlamaForCausalLM": ("eagle", 2),
    "LlamaForCausalLMEagle3": ("eagle3", 3),
    "Eagle3LlamaForCausalLM": ("eagle3", 3),
}
# DFlash block drafters (vLLM's method "dflash"): several decoder layers at the target's width
DFLASH_ARCHITECTURES = ("DFlashDraftModel",)
# the fields a target's multi-token-prediction layers are counted in, by model family (vLLM's
# SpeculativeConfig.hf_config_override reads the same ones)
MTP_LAYER_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


@dataclass(frozen=True)
class EagleSpec:
    method: str  # "eagle" or "eagle3"
    fc_inputs: int
    targets: tuple[str, ...]  # the targets it was trained for: the only ones it can serve
    mask_token: bool = False  # trained for parallel drafting: the config names its mask token


# where a head trained for parallel drafting names its mask token (vLLM reads these)
PARALLEL_MASK_TOKEN_FIELDS = ("pard_token", "ptd_token_id")


@dataclass(frozen=True)
class DFlashSpec:
    block_size: int  # one anchor (bonus) token plus block_size - 1 mask slots: k <= block_size - 1
    target_layer_ids: tuple[int, ...]  # the target layers whose hidden states its fc layer reads
    targets: tuple[str, ...]


def _targets(config: dict, key: str, architecture: str, drafters, drafter: str, source: str) -> Optional[list]:
    """The targets a drafter's config names under ``key`` (this project's key); None when
    ``architecture`` is not one of ``drafters``, whose configs alone may name targets."""
    targets = value_of(config, key, list, source, [])
    if architecture not in drafters:
        if targets:
            refuse(source, key, targets, f"only {drafter} has targets, and {architecture} is not one")
        return None
    return targets


def read_eagle(config: dict, architecture: str, source: str) -> Optional[EagleSpec]:
    targets = _targets(config, "eagle_targets", architecture, EAGLE_ARCHITECTURES, "an EAGLE head", source)
    if targets is None:
        return None
    if not targets:
        raise ConfigError(
            f"{source}: missing field 'eagle_targets' (a list of strings): name the target model(s) this EAGLE head was "
            "trained for, as catalog names or paths (this project's key; Hugging Face configs do not carry it)"
        )
    if not all(isinstance(t, str) and t.strip() for t in targets):
        refuse(source, "eagle_targets", targets, "must be a list of model names or paths")
    method, fc_inputs = EAGLE_ARCHITECTURES[architecture]
    mask = any(has_type(config.get(key), int) for key in PARALLEL_MASK_TOKEN_FIELDS)
    return EagleSpec(method, fc_inputs, tuple(targets), mask)


def read_dflash(config: dict, architecture: str, source: str) -> Optional[DFlashSpec]:
    targets = _targets(config, "draft_targets", architecture, DFLASH_ARCHITECTURES, "a DFlash drafter", source)
    if targets is None:
        return None
    if not targets or not all(isinstance(t, str) and t.strip() for t in targets):
        raise ConfigError(
            f"{source}: missing field 'draft_targets' (a list of strings): name the target model(s) this DFlash drafter was trained for "
            "(this project's key; Hugging Face configs do not carry it)"
        )
    nested = value_of(config, "dflash_config", dict, source, {})
    block = nested.get("block_size", config.get("block_size"))
    if not has_type(block, int) or block < 2:
        refuse(source, "block_size", block, "a DFlash drafter needs its block size (an integer >= 2: one anchor token and the mask slots)")
    layers = nested.get("target_layer_ids")
    if not isinstance(layers, list) or not layers or not all(has_type(i, int) and i >= 0 for i in layers):
        refuse(source, "dflash_config.target_layer_ids", layers, "must list the target layers whose hidden states the drafter reads")
    return DFlashSpec(block, tuple(layers), tuple(targets))


def read_mtp_layers(config: dict, source: str) -> tuple[int, str]:
    """(MTP layers, the field they were read from) for a target; (0, "") when it has none.  Two
    fields that disagree are refused."""
    counts = {key: non_negative(config, key, source, 0) for key in MTP_LAYER_FIELDS}
    given = {key: n for key, n in counts.items() if n}
    if len(set(given.values())) > 1:
        first, other = MTP_LAYER_FIELDS
        refuse(source, other, counts[other], f"disagrees with {first} {counts[first]}")
    for key, n in given.items():
        return n, key
    return 0, ""
