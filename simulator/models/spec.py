"""A Hugging Face ``config.json`` read as the cost model sees a model: pure checks, no I/O.

The simulator costs decoders built from the layers today's models use: grouped-query or
multi-head latent attention (MLA), full or sliding-window, or Gated DeltaNet linear attention;
a gated dense FFN or a mixture of experts; 16-bit, FP8 or 4-bit weights.  A config is accepted
only when every layer is one of those; anything the cost model would get silently wrong (a
routing scheme, attention variant or quantization method it does not cover, fields that
disagree) is refused with the field that says so, never approximated.  An explicit ``head_dim``
is kept even where it is not ``hidden_size / num_attention_heads`` (Qwen3-0.6B, -4B, -32B,
GPT-OSS): Vidur derives the head size from those two, so the shape
(:class:`simulator.models.shapes.ModelShape`) and the memory plan take it from here.

Architectures, by family (the field names are each family's own):

* dense: ``LlamaForCausalLM``, ``MistralForCausalLM`` (``sliding_window`` < context: every layer
  sliding, Mistral-7B-v0.1), ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``;
* Mixtral / Qwen MoE: ``MixtralForCausalLM`` (``num_local_experts``), ``Qwen2MoeForCausalLM`` and
  ``Qwen3MoeForCausalLM`` (``num_experts``, ``moe_intermediate_size``, ``decoder_sparse_step``,
  ``mlp_only_layers``, ``shared_expert_intermediate_size``);
* DeepSeek: ``DeepseekV2ForCausalLM`` / ``DeepseekV3ForCausalLM`` (MLA: ``kv_lora_rank``,
  ``q_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``; experts:
  ``n_routed_experts``, ``n_shared_experts``, ``first_k_dense_replace``, ``moe_layer_freq``);
* GPT-OSS: ``GptOssForCausalLM`` (``num_local_experts``, ``layer_types``, ``sliding_window``);
* Qwen3-Next: ``Qwen3NextForCausalLM`` (``layer_types`` or ``full_attention_interval``,
  ``linear_*`` Gated DeltaNet fields, gated attention).

Multi-token-prediction layers (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``) are kept
in the spec (``mtp_layers``) for an MTP proposer; they are not part of the target's forward.

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

from simulator.util.errors import ConfigError
from simulator.util.inputs import TYPE_NAMES, has_type
from simulator.models.shapes import LayerKind, LinearAttentionShape, MLAShape, MoEShape, Precision

# MiMoForCausalLM (XiaomiMiMo/MiMo-7B): a Qwen2 decoder (QKV bias) with MTP layers beside it
DENSE_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM")
QWEN_MOE_ARCHITECTURES = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")
DEEPSEEK_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
OTHER_ARCHITECTURES = ("MixtralForCausalLM", "GptOssForCausalLM", "Qwen3NextForCausalLM")
# architecture -> (EAGLE method, hidden states its fc layer takes in)
EAGLE_ARCHITECTURES = {
    "LlamaForCausalLMEagle": ("eagle", 2),
    "EagleLlamaForCausalLM": ("eagle", 2),
    "LlamaForCausalLMEagle3": ("eagle3", 3),
    "Eagle3LlamaForCausalLM": ("eagle3", 3),
}
# DFlash block drafters (vLLM's method "dflash"): several decoder layers at the target's width
DFLASH_ARCHITECTURES = ("DFlashDraftModel",)
SUPPORTED_ARCHITECTURES = (
    DENSE_ARCHITECTURES + QWEN_MOE_ARCHITECTURES + DEEPSEEK_ARCHITECTURES + OTHER_ARCHITECTURES + tuple(EAGLE_ARCHITECTURES) + DFLASH_ARCHITECTURES
)
# Qwen2 puts a bias on its Q, K and V projections (not costed; passed on to Vidur's config)
QKV_BIAS_ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "MiMoForCausalLM")
# the fields a target's multi-token-prediction layers are counted in, by model family (vLLM's
# SpeculativeConfig.hf_config_override reads the same ones)
MTP_LAYER_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
# any of these set (not null, not 0, not an empty list) marks a mixture-of-experts model
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")
# gated activations that cost what SiLU-and-mul does (one element-wise kernel over gate and up)
ACTIVATIONS = ("silu", "swiglu")
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear"}
# DeepSeek's routing methods: each picks experts_per_token experts per token (group-limited ones
# from a subset of groups); the cost model treats the resulting distribution as uniform
DEEPSEEK_TOPK_METHODS = ("greedy", "group_limited_greedy", "noaux_tc")
SCORING_FUNCS = ("softmax", "sigmoid")
# quantization methods: quant_method (and ModelOpt's quant_algo) -> the method's name here
QUANT_METHODS = ("fp8", "mxfp4", "modelopt")
MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}


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
    # (kind, count) per layer kind, in order of first appearance; () = every layer full + dense
    layers: tuple[tuple[LayerKind, int], ...] = ()
    moe: Optional[MoEShape] = None
    mla: Optional[MLAShape] = None
    linear: Optional[LinearAttentionShape] = None
    precision: Precision = Precision()  # from quantization_config; the run may set the KV cache's
    gated_attention: bool = False
    mtp_layers: int = 0  # the target's own multi-token-prediction layers (beside its forward)
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


def _non_negative(config: dict, key: str, source: str, default: int = 0) -> int:
    value = _field(config, key, int, source, default)
    if value < 0:
        raise ConfigError(f"{source}: field '{key}' = {value} must be an integer >= 0")
    return value


def _refuse(source: str, key: str, value: Any, why: str) -> None:
    raise ConfigError(f"{source}: field '{key}' = {value!r}: {why}")


def _architecture(config: dict, source: str) -> str:
    archs = _field(config, "architectures", list, source)
    if len(archs) != 1 or archs[0] not in SUPPORTED_ARCHITECTURES:
        _refuse(source, "architectures", archs, f"not a supported architecture; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    return archs[0]


def _check_no_experts(config: dict, source: str, architecture: str) -> None:
    for key in MOE_FIELDS:
        value = config.get(key)
        if value not in (None, 0, [], False):
            _refuse(source, key, value, f"a mixture-of-experts field on {architecture}, a dense architecture; name the MoE architecture the checkpoint uses")


# --- layers ---------------------------------------------------------------------------------------
def _group(kinds: list[LayerKind]) -> tuple[tuple[LayerKind, int], ...]:
    """(kind, count) in order of first appearance; () when every layer is full attention + dense."""
    counts: dict[LayerKind, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    groups = tuple(counts.items())
    return () if all(kind == LayerKind() for kind, _ in groups) else groups


def _window(config: dict, source: str) -> int:
    """The sliding window a config's sliding layers use (0: none set)."""
    return _positive(config, "sliding_window", source, None) or 0


def _attention_kinds(config: dict, architecture: str, layers: int, context: int, source: str) -> list[tuple[str, int]]:
    """(attention kind, window) of every layer."""
    layer_types = config.get("layer_types")
    if architecture == "Qwen3NextForCausalLM" and layer_types is None:
        interval = _positive(config, "full_attention_interval", source)
        layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != layers:
            _refuse(source, "layer_types", layer_types, f"must list one type per layer ({layers} = num_hidden_layers)")
        unknown = sorted({t for t in layer_types if t not in LAYER_TYPES}, key=str)
        if unknown:
            _refuse(source, "layer_types", unknown, f"not a modelled layer type; modelled: {', '.join(LAYER_TYPES)}")
        kinds = [LAYER_TYPES[t] for t in layer_types]
        if "linear" in kinds and architecture != "Qwen3NextForCausalLM":
            _refuse(source, "layer_types", "linear_attention", f"linear-attention layers are modelled as Qwen3-Next's Gated DeltaNet; {architecture} is not Qwen3-Next")
        if "sliding" in kinds and architecture in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
            _refuse(source, "layer_types", "sliding_attention", "Qwen2/Qwen3 sliding windows (use_sliding_window, max_window_layers) are not modelled")
        window = _window(config, source)
        if "sliding" in kinds and not window:
            _refuse(source, "sliding_window", config.get("sliding_window"), "layer_types has sliding_attention layers, which need a window")
        return [(kind, window if kind == "sliding" else 0) for kind in kinds]
    # no layer_types: a window applies to every layer (Mistral-7B-v0.1) or, for Qwen, is refused
    window = config.get("sliding_window")
    use = config.get("use_sliding_window")
    if architecture in ("Qwen2ForCausalLM", "Qwen3ForCausalLM", *QWEN_MOE_ARCHITECTURES):
        if use is True and window is not None and window < context:
            _refuse(source, "use_sliding_window", True, f"Qwen's sliding-window layers (window {window} < context {context}, max_window_layers) are not modelled")
        return [("full", 0)] * layers
    if architecture == "GptOssForCausalLM":
        _refuse(source, "layer_types", None, "GPT-OSS alternates sliding and full layers; its config must list them")
    if use is False:
        return [("full", 0)] * layers
    if window is not None and (not has_type(window, int) or window <= 0):
        _refuse(source, "sliding_window", window, "must be a positive integer (or null)")
    if window is not None and window < context:
        return [("sliding", window)] * layers
    return [("full", 0)] * layers


def _ffn_kinds(config: dict, architecture: str, layers: int, source: str) -> list[str]:
    """"dense" or "moe" for every layer, by each family's rule."""
    if architecture in ("MixtralForCausalLM", "GptOssForCausalLM"):
        return ["moe"] * layers
    if architecture in DEEPSEEK_ARCHITECTURES:
        first = _non_negative(config, "first_k_dense_replace", source, 0)
        freq = _positive(config, "moe_layer_freq", source, 1)
        if first > layers:
            _refuse(source, "first_k_dense_replace", first, f"exceeds num_hidden_layers {layers}")
        return ["moe" if i >= first and i % freq == 0 else "dense" for i in range(layers)]
    if architecture in QWEN_MOE_ARCHITECTURES or architecture == "Qwen3NextForCausalLM":
        step = _positive(config, "decoder_sparse_step", source, 1)
        only = _field(config, "mlp_only_layers", list, source, [])
        if not all(has_type(i, int) and 0 <= i < layers for i in only):
            _refuse(source, "mlp_only_layers", only, f"must list layer indices in [0, {layers})")
        return ["dense" if i in only or (i + 1) % step else "moe" for i in range(layers)]
    return ["dense"] * layers


# --- mixture of experts ---------------------------------------------------------------------------
def _moe(config: dict, architecture: str, source: str) -> MoEShape:
    if architecture in DEEPSEEK_ARCHITECTURES:
        experts_key, width_key = "n_routed_experts", "moe_intermediate_size"
        method = _field(config, "topk_method", str, source, "greedy")
        if method not in DEEPSEEK_TOPK_METHODS:
            _refuse(source, "topk_method", method, f"a routing scheme that is not modelled; modelled: {', '.join(DEEPSEEK_TOPK_METHODS)}")
        scoring = _field(config, "scoring_func", str, source, "softmax")
        if scoring not in SCORING_FUNCS:
            _refuse(source, "scoring_func", scoring, f"not modelled; modelled: {', '.join(SCORING_FUNCS)}")
        groups = _positive(config, "n_group", source, 1)
        chosen = _positive(config, "topk_group", source, 1)
        if chosen > groups:
            _refuse(source, "topk_group", chosen, f"exceeds n_group {groups}")
    elif architecture in ("MixtralForCausalLM", "GptOssForCausalLM"):
        experts_key, width_key = "num_local_experts", "intermediate_size"
    else:
        experts_key, width_key = "num_experts", "moe_intermediate_size"
    experts = _positive(config, experts_key, source)
    width = _positive(config, width_key, source)
    top_key = "num_experts_per_tok" if "num_experts_per_tok" in config or architecture != "GptOssForCausalLM" else "experts_per_token"
    top = _positive(config, top_key, source)
    if top > experts:
        _refuse(source, top_key, top, f"more experts per token than the {experts} experts ({experts_key})")
    if architecture in DEEPSEEK_ARCHITECTURES:
        shared = _non_negative(config, "n_shared_experts", source, 0) * width
    elif architecture in QWEN_MOE_ARCHITECTURES or architecture == "Qwen3NextForCausalLM":
        shared = _non_negative(config, "shared_expert_intermediate_size", source, 0)
    else:
        shared = 0
    if config.get("num_experts_per_tok") and config.get("experts_per_token") and config["num_experts_per_tok"] != config["experts_per_token"]:
        _refuse(source, "experts_per_token", config["experts_per_token"], f"disagrees with num_experts_per_tok {config['num_experts_per_tok']}")
    return MoEShape(num_experts=experts, experts_per_token=top, expert_hidden_dim=width, shared_hidden_dim=shared)


# --- attention variants ---------------------------------------------------------------------------
def _mla(config: dict, source: str) -> MLAShape:
    return MLAShape(
        kv_lora_rank=_positive(config, "kv_lora_rank", source),
        qk_rope_head_dim=_positive(config, "qk_rope_head_dim", source),
        qk_nope_head_dim=_positive(config, "qk_nope_head_dim", source),
        v_head_dim=_positive(config, "v_head_dim", source),
        q_lora_rank=_positive(config, "q_lora_rank", source, 0) or 0,
    )


def _linear_attention(config: dict, source: str) -> LinearAttentionShape:
    shape = LinearAttentionShape(
        num_key_heads=_positive(config, "linear_num_key_heads", source),
        num_value_heads=_positive(config, "linear_num_value_heads", source),
        key_head_dim=_positive(config, "linear_key_head_dim", source),
        value_head_dim=_positive(config, "linear_value_head_dim", source),
        conv_kernel=_positive(config, "linear_conv_kernel_dim", source),
    )
    if shape.num_value_heads % shape.num_key_heads:
        _refuse(source, "linear_num_value_heads", shape.num_value_heads, f"is not a multiple of linear_num_key_heads {shape.num_key_heads}")
    return shape


# --- precision ------------------------------------------------------------------------------------
def quantization_precision(method: str, has_experts: bool, where: str, field: str = "quantization_config") -> Precision:
    """The storage dtypes a quantization method gives a model's parts, as vLLM loads them: FP8
    (``fp8``, ModelOpt FP8): every linear layer of the decoder; MXFP4: the routed experts only
    (vLLM's Mxfp4Config quantizes FusedMoE layers; attention, router, embedding and LM head stay
    BF16); NVFP4 (ModelOpt): the FFNs, dense and experts, with attention in BF16.  The embedding,
    LM head and router stay 16-bit throughout."""
    if method == "fp8":
        return Precision(attention="fp8", ffn="fp8", experts="fp8", method="fp8")
    if method == "mxfp4":
        if not has_experts:
            raise ConfigError(f"{where}: {field} mxfp4 quantizes mixture-of-experts layers only, and the model has none")
        return Precision(experts="mxfp4", method="mxfp4")
    if method == "nvfp4":
        return Precision(ffn="nvfp4", experts="nvfp4", method="nvfp4")
    raise ConfigError(f"{where}: {field} {method!r} is not a modelled quantization method; modelled: fp8, mxfp4, nvfp4")


def _precision(config: dict, has_experts: bool, source: str) -> Precision:
    quant = config.get("quantization_config")
    if quant is None:
        return Precision()
    if not isinstance(quant, dict):
        _refuse(source, "quantization_config", quant, "must be a table")
    method = quant.get("quant_method")
    if method not in QUANT_METHODS:
        _refuse(source, "quantization_config", method, f"quant_method is not modelled; modelled: {', '.join(QUANT_METHODS)} (16-bit otherwise)")
    if method == "modelopt":
        algo = quant.get("quant_algo")
        if algo not in MODELOPT_ALGOS:
            _refuse(source, "quantization_config", algo, f"ModelOpt quant_algo is not modelled; modelled: {', '.join(MODELOPT_ALGOS)}")
        method = MODELOPT_ALGOS[algo]
    if method == "fp8" and quant.get("fmt", "e4m3") not in ("e4m3", "e5m2"):
        _refuse(source, "quantization_config", quant.get("fmt"), "fp8 fmt must be e4m3 or e5m2")
    return quantization_precision(method, has_experts, source)


# --- EAGLE heads ----------------------------------------------------------------------------------
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
    """(MTP layers, the field they were read from) for a target; (0, "") when it has none.  Two
    fields that disagree are refused."""
    counts = {key: _non_negative(config, key, source, 0) for key in MTP_LAYER_FIELDS}
    given = {key: n for key, n in counts.items() if n}
    if len(set(given.values())) > 1:
        first, other = MTP_LAYER_FIELDS
        _refuse(source, other, counts[other], f"disagrees with {first} {counts[first]}")
    for key, n in given.items():
        return n, key
    return 0, ""


def parse_config(config: Any, name: str, source: str) -> ModelSpec:
    """The model a ``config.json`` object describes, registered as ``name``; ``source`` names the file."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    context = _positive(config, "max_position_embeddings", source)
    architecture = _architecture(config, source)
    dense = architecture in DENSE_ARCHITECTURES or architecture in EAGLE_ARCHITECTURES
    if dense:
        _check_no_experts(config, source, architecture)
    hidden = _positive(config, "hidden_size", source)
    heads = _positive(config, "num_attention_heads", source)
    kv_heads = _positive(config, "num_key_value_heads", source, heads)
    if hidden % heads:
        _refuse(source, "num_attention_heads", heads, f"does not divide hidden_size {hidden}")
    if heads % kv_heads:
        _refuse(source, "num_key_value_heads", kv_heads, f"does not divide num_attention_heads {heads}")
    head_dim = _positive(config, "head_dim", source, None)
    act = _field(config, "hidden_act", str, source, "silu")
    if act not in ACTIVATIONS:
        _refuse(source, "hidden_act", act, "only the gated SiLU FFN of Llama, Mistral, Qwen, DeepSeek and GPT-OSS is modelled")
    eagle = _eagle(config, architecture, source)
    dflash = _dflash(config, architecture, source)
    mtp_layers, mtp_field = _mtp_layers(config, source)
    layers = _positive(config, "num_hidden_layers", source)
    attention = _attention_kinds(config, architecture, layers, context, source)
    ffn = _ffn_kinds(config, architecture, layers, source)
    has_experts = "moe" in ffn
    dense_width = _positive(config, "intermediate_size", source)
    moe = _moe(config, architecture, source) if has_experts else None
    mla = _mla(config, source) if architecture in DEEPSEEK_ARCHITECTURES else None
    linear = _linear_attention(config, source) if any(kind == "linear" for kind, _ in attention) else None
    kinds = [LayerKind(kind, f, window) for (kind, window), f in zip(attention, ffn)]
    vocab = _positive(config, "vocab_size", source)
    if eagle is not None and eagle.method == "eagle3":
        vocab = _positive(config, "draft_vocab_size", source, vocab)
    return ModelSpec(
        name=name,
        source=source,
        architecture=architecture,
        num_layers=layers,
        num_q_heads=heads,
        num_kv_heads=kv_heads,
        embedding_dim=hidden,
        mlp_hidden_dim=dense_width,
        vocab_size=vocab,
        max_model_len=context,
        head_dim=head_dim or hidden // heads,
        tie_word_embeddings=_field(config, "tie_word_embeddings", bool, source, False),
        rope_theta=float(_field(config, "rope_theta", float, source, 10000.0)),
        use_qkv_bias=architecture in QKV_BIAS_ARCHITECTURES,
        eagle=eagle,
        dflash=dflash,
        layers=_group(kinds),
        moe=moe,
        mla=mla,
        linear=linear,
        precision=_precision(config, has_experts, source),
        gated_attention=architecture == "Qwen3NextForCausalLM",
        mtp_layers=mtp_layers,
        mtp_field=mtp_field,
    )
