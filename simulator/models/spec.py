"""A Hugging Face ``config.json`` read as the cost model sees a model: pure checks, no I/O.

The simulator costs dense decoders (every layer full attention, one gated SiLU MLP, 16-bit
weights), so a config is accepted only when it describes one; anything the cost model would get
silently wrong (experts, a sliding window shorter than the context, quantized weights) is refused
with the field that says so, never approximated.  An explicit ``head_dim`` is kept even where it is
not ``hidden_size / num_attention_heads`` (Qwen3-0.6B, -4B, -32B): Vidur derives the head size from
those two, so the shape (:class:`simulator.shapes.ModelShape`) and the memory plan take it from here.

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
from typing import Any, Optional

from simulator.errors import ConfigError
from simulator.inputs import TYPE_NAMES, has_type

# MiMoForCausalLM (XiaomiMiMo/MiMo-7B): a Qwen2 decoder (QKV bias) with MTP layers beside it
DENSE_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM")
# architecture -> (EAGLE method, hidden states its fc layer takes in)
EAGLE_ARCHITECTURES = {
    "LlamaForCausalLMEagle": ("eagle", 2),
    "EagleLlamaForCausalLM": ("eagle", 2),
    "LlamaForCausalLMEagle3": ("eagle3", 3),
    "Eagle3LlamaForCausalLM": ("eagle3", 3),
}
# DFlash block drafters (vLLM's method "dflash"): several decoder layers at the target's width
DFLASH_ARCHITECTURES = ("DFlashDraftModel",)
# Qwen2 puts a bias on its Q, K and V projections (not costed; passed on to Vidur's config)
QKV_BIAS_ARCHITECTURES = ("Qwen2ForCausalLM", "MiMoForCausalLM")
# the fields a target's multi-token-prediction layers are counted in, by model family (vLLM's
# SpeculativeConfig.hf_config_override reads the same ones)
MTP_LAYER_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
# any of these set (not null, not 0, not an empty list) marks a mixture-of-experts model
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")
# and these multi-head latent attention (DeepSeek-V2/V3's compressed KV), which the cost model
# does not cost either (MTP reads any target's MTP layers, so it must not take an MLA target for MHA)
MLA_FIELDS = ("kv_lora_rank", "q_lora_rank")


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


@dataclass(frozen=True)
class ModelSpec:
    """What a model's config tells the simulator.  ``vocab_size`` is the vocabulary its LM head
    scores: an EAGLE-3 head's draft vocabulary, everyone else's full one."""

    name: str
    source: str  # where it was read, for messages
    architecture: str
    num_layers: int
    num_q_heads: int
    num_kv_heads: int
    embedding_dim: int
    mlp_hidden_dim: int
    vocab_size: int
    max_model_len: int
    head_dim: int  # the config's head_dim, else embedding_dim / num_q_heads
    tie_word_embeddings: bool = False
    rope_theta: Optional[float] = None
    use_qkv_bias: bool = False
    eagle: Optional[EagleSpec] = None
    dflash: Optional[DFlashSpec] = None
    mtp_layers: int = 0  # the target's own multi-token-prediction layers
    mtp_field: str = ""  # the config field they were read from


def _field(config: dict, key: str, kind: type, source: str, default: Any = ...) -> Any:
    """``config[key]`` of type ``kind``; absent or null gives ``default`` (required when not given)."""
    value = config.get(key)
    if value is None:
        if default is ...:
            raise ConfigError(f"{source}: missing field '{key}' ({TYPE_NAMES[kind]})")
        return default
    if not has_type(value, kind):
        raise ConfigError(f"{source}: field '{key}' = {value!r} must be {TYPE_NAMES[kind]}")
    return value


def _positive(config: dict, key: str, source: str, default: Any = ...) -> int:
    value = _field(config, key, int, source, default)
    if value is not None and value <= 0:
        raise ConfigError(f"{source}: field '{key}' = {value} must be a positive integer")
    return value


def _refuse(source: str, key: str, value: Any, why: str) -> None:
    raise ConfigError(f"{source}: field '{key}' = {value!r}: {why}")


def _check_dense(config: dict, source: str, context: int) -> None:
    for key in MOE_FIELDS:
        value = config.get(key)
        if value not in (None, 0, [], False):
            _refuse(source, key, value, "a mixture-of-experts model; the simulator costs dense decoders only")
    for key in MLA_FIELDS:
        value = config.get(key)
        if value not in (None, 0):
            _refuse(source, key, value, "multi-head latent attention; the simulator costs multi-head and grouped-query attention only")
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is True and window is not None and window < context:
        _refuse(source, "use_sliding_window", True, f"sliding-window attention (window {window} < context {context}) is not modelled")
    if config.get("use_sliding_window") is None and has_type(window, int) and window < context:
        _refuse(source, "sliding_window", window, f"a sliding window shorter than the context ({context}) is not modelled")
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and any(t != "full_attention" for t in layer_types):
        _refuse(source, "layer_types", sorted(set(layer_types)), "only full-attention layers are modelled")
    if config.get("quantization_config") is not None:
        _refuse(source, "quantization_config", "…", "quantized weights are not modelled (16-bit weights only)")


def _architecture(config: dict, source: str) -> str:
    archs = _field(config, "architectures", list, source)
    supported = DENSE_ARCHITECTURES + tuple(EAGLE_ARCHITECTURES) + DFLASH_ARCHITECTURES
    if len(archs) != 1 or archs[0] not in supported:
        _refuse(source, "architectures", archs, f"not a supported architecture; supported: {', '.join(supported)}")
    return archs[0]


def _eagle(config: dict, architecture: str, source: str) -> Optional[EagleSpec]:
    targets = _field(config, "eagle_targets", list, source, [])
    if architecture not in EAGLE_ARCHITECTURES:
        if targets:
            _refuse(source, "eagle_targets", targets, f"only an EAGLE head has targets, and {architecture} is not one")
        return None
    if not targets:
        raise ConfigError(
            f"{source}: missing field 'eagle_targets' (a list of strings): name the target model(s) this EAGLE head was "
            "trained for, as catalog names or paths (this project's key; Hugging Face configs do not carry it)"
        )
    if not all(isinstance(t, str) and t.strip() for t in targets):
        _refuse(source, "eagle_targets", targets, "must be a list of model names or paths")
    method, fc_inputs = EAGLE_ARCHITECTURES[architecture]
    mask = any(has_type(config.get(key), int) for key in PARALLEL_MASK_TOKEN_FIELDS)
    return EagleSpec(method, fc_inputs, tuple(targets), mask)


def _dflash(config: dict, architecture: str, source: str) -> Optional[DFlashSpec]:
    targets = _field(config, "draft_targets", list, source, [])
    if architecture not in DFLASH_ARCHITECTURES:
        if targets:
            _refuse(source, "draft_targets", targets, f"only a DFlash drafter has targets, and {architecture} is not one")
        return None
    if not targets or not all(isinstance(t, str) and t.strip() for t in targets):
        raise ConfigError(
            f"{source}: missing field 'draft_targets' (a list of strings): name the target model(s) this DFlash drafter was trained for "
            "(this project's key; Hugging Face configs do not carry it)"
        )
    nested = _field(config, "dflash_config", dict, source, {})
    block = nested.get("block_size", config.get("block_size"))
    if not has_type(block, int) or block < 2:
        _refuse(source, "block_size", block, "a DFlash drafter needs its block size (an integer >= 2: one anchor token and the mask slots)")
    layers = nested.get("target_layer_ids")
    if not isinstance(layers, list) or not layers or not all(has_type(i, int) and i >= 0 for i in layers):
        _refuse(source, "dflash_config.target_layer_ids", layers, "must list the target layers whose hidden states the drafter reads")
    return DFlashSpec(block, tuple(layers), tuple(targets))


def _mtp_layers(config: dict, source: str) -> tuple[int, str]:
    """(MTP layers, the field they were read from) for a target; (0, "") when it has none."""
    for key in MTP_LAYER_FIELDS:
        if config.get(key) is not None:
            value = _field(config, key, int, source)
            if value < 0:
                _refuse(source, key, value, "must be a number of layers >= 0")
            return value, key
    return 0, ""


def parse_config(config: Any, name: str, source: str) -> ModelSpec:
    """The model a ``config.json`` object describes, registered as ``name``; ``source`` names the file."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    context = _positive(config, "max_position_embeddings", source)
    _check_dense(config, source, context)
    architecture = _architecture(config, source)
    hidden = _positive(config, "hidden_size", source)
    heads = _positive(config, "num_attention_heads", source)
    kv_heads = _positive(config, "num_key_value_heads", source, heads)
    if hidden % heads:
        _refuse(source, "num_attention_heads", heads, f"does not divide hidden_size {hidden}")
    if heads % kv_heads:
        _refuse(source, "num_key_value_heads", kv_heads, f"does not divide num_attention_heads {heads}")
    head_dim = _positive(config, "head_dim", source, None)
    act = _field(config, "hidden_act", str, source, "silu")
    if act != "silu":
        _refuse(source, "hidden_act", act, "only the gated SiLU MLP of Llama, Mistral and Qwen is modelled")
    eagle = _eagle(config, architecture, source)
    dflash = _dflash(config, architecture, source)
    mtp_layers, mtp_field = _mtp_layers(config, source)
    vocab = _positive(config, "vocab_size", source)
    if eagle is not None and eagle.method == "eagle3":
        vocab = _positive(config, "draft_vocab_size", source, vocab)
    return ModelSpec(
        name=name,
        source=source,
        architecture=architecture,
        num_layers=_positive(config, "num_hidden_layers", source),
        num_q_heads=heads,
        num_kv_heads=kv_heads,
        embedding_dim=hidden,
        mlp_hidden_dim=_positive(config, "intermediate_size", source),
        vocab_size=vocab,
        max_model_len=context,
        head_dim=head_dim or hidden // heads,
        tie_word_embeddings=_field(config, "tie_word_embeddings", bool, source, False),
        rope_theta=float(_field(config, "rope_theta", float, source, 10000.0)),
        use_qkv_bias=architecture in QKV_BIAS_ARCHITECTURES,
        eagle=eagle,
        dflash=dflash,
        mtp_layers=mtp_layers,
        mtp_field=mtp_field,
    )
