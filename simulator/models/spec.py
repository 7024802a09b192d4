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

The draft networks a config can describe (EAGLE heads, DFlash drafters, a target's MTP layers)
are read in :mod:`.drafters`, and the checkpoint's precision in :mod:`.precision`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import has_type
from simulator.models.config_fields import non_negative, positive, refuse, value_of
from simulator.models.drafters import DFLASH_ARCHITECTURES, EAGLE_ARCHITECTURES, DFlashSpec, EagleSpec, read_dflash, read_eagle, read_mtp_layers
from simulator.models.precision import checkpoint_precision
from simulator.models.shapes import LayerKind, LinearAttentionShape, MLAShape, MoEShape, Precision

# MiMoForCausalLM (XiaomiMiMo/MiMo-7B): a Qwen2 decoder (QKV bias) with MTP layers beside it
DENSE_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM")
QWEN_MOE_ARCHITECTURES = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")
DEEPSEEK_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
OTHER_ARCHITECTURES = ("MixtralForCausalLM", "GptOssForCausalLM", "Qwen3NextForCausalLM")
SUPPORTED_ARCHITECTURES = (
    DENSE_ARCHITECTURES + QWEN_MOE_ARCHITECTURES + DEEPSEEK_ARCHITECTURES + OTHER_ARCHITECTURES + tuple(EAGLE_ARCHITECTURES) + DFLASH_ARCHITECTURES
)
# Qwen2 puts a bias on its Q, K and V projections (not costed; passed on to Vidur's config)
QKV_BIAS_ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "MiMoForCausalLM")
# any of these set (not null, not 0, not an empty list) marks a mixture-of-experts model
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")
# gated activations that cost what SiLU-and-mul does (one element-wise kernel over gate and up)
ACTIVATIONS = ("silu", "swiglu")
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear"}
# DeepSeek's routing methods: each picks experts_per_token experts per token (group-limited ones
# from a subset of groups); the cost model treats the resulting distribution as uniform
DEEPSEEK_TOPK_METHODS = ("greedy", "group_limited_greedy", "noaux_tc")
SCORING_FUNCS = ("softmax", "sigmoid")


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

def _architecture(config: dict, source: str) -> str:
    archs = value_of(config, "architectures", list, source)
    if len(archs) != 1 or archs[0] not in SUPPORTED_ARCHITECTURES:
        refuse(source, "architectures", archs, f"not a supported architecture; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    return archs[0]


def _check_no_experts(config: dict, source: str, architecture: str) -> None:
    for key in MOE_FIELDS:
        value = config.get(key)
        if value not in (None, 0, [], False):
            refuse(source, key, value, f"a mixture-of-experts field on {architecture}, a dense architecture; name the MoE architecture the checkpoint uses")


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
    return positive(config, "sliding_window", source, None) or 0


def _attention_kinds(config: dict, architecture: str, layers: int, context: int, source: str) -> list[tuple[str, int]]:
    """(attention kind, window) of every layer."""
    layer_types = config.get("layer_types")
    if architecture == "Qwen3NextForCausalLM" and layer_types is None:
        interval = positive(config, "full_attention_interval", source)
        layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != layers:
            refuse(source, "layer_types", layer_types, f"must list one type per layer ({layers} = num_hidden_layers)")
        unknown = sorted({t for t in layer_types if t not in LAYER_TYPES}, key=str)
        if unknown:
            refuse(source, "layer_types", unknown, f"not a modelled layer type; modelled: {', '.join(LAYER_TYPES)}")
        kinds = [LAYER_TYPES[t] for t in layer_types]
        if "linear" in kinds and architecture != "Qwen3NextForCausalLM":
            refuse(source, "layer_types", "linear_attention", f"linear-attention layers are modelled as Qwen3-Next's Gated DeltaNet; {architecture} is not Qwen3-Next")
        if "sliding" in kinds and architecture in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
            refuse(source, "layer_types", "sliding_attention", "Qwen2/Qwen3 sliding windows (use_sliding_window, max_window_layers) are not modelled")
        window = _window(config, source)
        if "sliding" in kinds and not window:
            refuse(source, "sliding_window", config.get("sliding_window"), "layer_types has sliding_attention layers, which need a window")
        return [(kind, window if kind == "sliding" else 0) for kind in kinds]
    # no layer_types: a window applies to every layer (Mistral-7B-v0.1) or, for Qwen, is refused
    window = config.get("sliding_window")
    use = config.get("use_sliding_window")
    if architecture in ("Qwen2ForCausalLM", "Qwen3ForCausalLM", *QWEN_MOE_ARCHITECTURES):
        if use is True and window is not None and window < context:
            refuse(source, "use_sliding_window", True, f"Qwen's sliding-window layers (window {window} < context {context}, max_window_layers) are not modelled")
        return [("full", 0)] * layers
    if architecture == "GptOssForCausalLM":
        refuse(source, "layer_types", None, "GPT-OSS alternates sliding and full layers; its config must list them")
    if use is False:
        return [("full", 0)] * layers
    if window is not None and (not has_type(window, int) or window <= 0):
        refuse(source, "sliding_window", window, "must be a positive integer (or null)")
    if window is not None and window < context:
        return [("sliding", window)] * layers
    return [("full", 0)] * layers


def _ffn_kinds(config: dict, architecture: str, layers: int, source: str) -> list[str]:
    """"dense" or "moe" for every layer, by each family's rule."""
    if architecture in ("MixtralForCausalLM", "GptOssForCausalLM"):
        return ["moe"] * layers
    if architecture in DEEPSEEK_ARCHITECTURES:
        first = non_negative(config, "first_k_dense_replace", source, 0)
        freq = positive(config, "moe_layer_freq", source, 1)
        if first > layers:
            refuse(source, "first_k_dense_replace", first, f"exceeds num_hidden_layers {layers}")
        return ["moe" if i >= first and i % freq == 0 else "dense" for i in range(layers)]
    if architecture in QWEN_MOE_ARCHITECTURES or architecture == "Qwen3NextForCausalLM":
        step = positive(config, "decoder_sparse_step", source, 1)
        only = value_of(config, "mlp_only_layers", list, source, [])
        if not all(has_type(i, int) and 0 <= i < layers for i in only):
            refuse(source, "mlp_only_layers", only, f"must list layer indices in [0, {layers})")
        return ["dense" if i in only or (i + 1) % step else "moe" for i in range(layers)]
    return ["dense"] * layers


# --- mixture of experts ---------------------------------------------------------------------------
def _moe(config: dict, architecture: str, source: str) -> MoEShape:
    if architecture in DEEPSEEK_ARCHITECTURES:
        experts_key, width_key = "n_routed_experts", "moe_intermediate_size"
        method = value_of(config, "topk_method", str, source, "greedy")
        if method not in DEEPSEEK_TOPK_METHODS:
            refuse(source, "topk_method", method, f"a routing scheme that is not modelled; modelled: {', '.join(DEEPSEEK_TOPK_METHODS)}")
        scoring = value_of(config, "scoring_func", str, source, "softmax")
        if scoring not in SCORING_FUNCS:
            refuse(source, "scoring_func", scoring, f"not modelled; modelled: {', '.join(SCORING_FUNCS)}")
        groups = positive(config, "n_group", source, 1)
        chosen = positive(config, "topk_group", source, 1)
        if chosen > groups:
            refuse(source, "topk_group", chosen, f"exceeds n_group {groups}")
    elif architecture in ("MixtralForCausalLM", "GptOssForCausalLM"):
        experts_key, width_key = "num_local_experts", "intermediate_size"
    else:
        experts_key, width_key = "num_experts", "moe_intermediate_size"
    experts = positive(config, experts_key, source)
    width = positive(config, width_key, source)
    top_key = "num_experts_per_tok" if "num_experts_per_tok" in config or architecture != "GptOssForCausalLM" else "experts_per_token"
    top = positive(config, top_key, source)
    if top > experts:
        refuse(source, top_key, top, f"more experts per token than the {experts} experts ({experts_key})")
    if architecture in DEEPSEEK_ARCHITECTURES:
        shared = non_negative(config, "n_shared_experts", source, 0) * width
    elif architecture in QWEN_MOE_ARCHITECTURES or architecture == "Qwen3NextForCausalLM":
        shared = non_negative(config, "shared_expert_intermediate_size", source, 0)
    else:
        shared = 0
    if config.get("num_experts_per_tok") and config.get("experts_per_token") and config["num_experts_per_tok"] != config["experts_per_token"]:
        refuse(source, "experts_per_token", config["experts_per_token"], f"disagrees with num_experts_per_tok {config['num_experts_per_tok']}")
    return MoEShape(num_experts=experts, experts_per_token=top, expert_hidden_dim=width, shared_hidden_dim=shared)


# --- attention variants ---------------------------------------------------------------------------
def _mla(config: dict, source: str) -> MLAShape:
    return MLAShape(
        kv_lora_rank=positive(config, "kv_lora_rank", source),
        qk_rope_head_dim=positive(config, "qk_rope_head_dim", source),
        qk_nope_head_dim=positive(config, "qk_nope_head_dim", source),
        v_head_dim=positive(config, "v_head_dim", source),
        q_lora_rank=positive(config, "q_lora_rank", source, 0) or 0,
    )


def _linear_attention(config: dict, source: str) -> LinearAttentionShape:
    shape = LinearAttentionShape(
        num_key_heads=positive(config, "linear_num_key_heads", source),
        num_value_heads=positive(config, "linear_num_value_heads", source),
        key_head_dim=positive(config, "linear_key_head_dim", source),
        value_head_dim=positive(config, "linear_value_head_dim", source),
        conv_kernel=positive(config, "linear_conv_kernel_dim", source),
    )
    if shape.num_value_heads % shape.num_key_heads:
        refuse(source, "linear_num_value_heads", shape.num_value_heads, f"is not a multiple of linear_num_key_heads {shape.num_key_heads}")
    return shape



def parse_config(config: Any, name: str, source: str) -> ModelSpec:
    """The model a ``config.json`` object describes, registered as ``name``; ``source`` names the file."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    context = positive(config, "max_position_embeddings", source)
    architecture = _architecture(config, source)
    dense = architecture in DENSE_ARCHITECTURES or architecture in EAGLE_ARCHITECTURES
    if dense:
        _check_no_experts(config, source, architecture)
    hidden = positive(config, "hidden_size", source)
    heads = positive(config, "num_attention_heads", source)
    kv_heads = positive(config, "num_key_value_heads", source, heads)
    if hidden % heads:
        refuse(source, "num_attention_heads", heads, f"does not divide hidden_size {hidden}")
    if heads % kv_heads:
        refuse(source, "num_key_value_heads", kv_heads, f"does not divide num_attention_heads {heads}")
    head_dim = positive(config, "head_dim", source, None)
    act = value_of(config, "hidden_act", str, source, "silu")
    if act not in ACTIVATIONS:
        refuse(source, "hidden_act", act, "only the gated SiLU FFN of Llama, Mistral, Qwen, DeepSeek and GPT-OSS is modelled")
    eagle = read_eagle(config, architecture, source)
    dflash = read_dflash(config, architecture, source)
    mtp_layers, mtp_field = read_mtp_layers(config, source)
    layers = positive(config, "num_hidden_layers", source)
    attention = _attention_kinds(config, architecture, layers, context, source)
    ffn = _ffn_kinds(config, architecture, layers, source)
    has_experts = "moe" in ffn
    dense_width = positive(config, "intermediate_size", source)
    moe = _moe(config, architecture, source) if has_experts else None
    mla = _mla(config, source) if architecture in DEEPSEEK_ARCHITECTURES else None
    linear = _linear_attention(config, source) if any(kind == "linear" for kind, _ in attention) else None
    kinds = [LayerKind(kind, f, window) for (kind, window), f in zip(attention, ffn)]
    vocab = positive(config, "vocab_size", source)
    if eagle is not None and eagle.method == "eagle3":
        vocab = positive(config, "draft_vocab_size", source, vocab)
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
        tie_word_embeddings=value_of(config, "tie_word_embeddings", bool, source, False),
        rope_theta=float(value_of(config, "rope_theta", float, source, 10000.0)),
        use_qkv_bias=architecture in QKV_BIAS_ARCHITECTURES,
        eagle=eagle,
        dflash=dflash,
        layers=_group(kinds),
        moe=moe,
        mla=mla,
        linear=linear,
        precision=checkpoint_precision(config, has_experts, source),
        gated_attention=architecture == "Qwen3NextForCausalLM",
        mtp_layers=mtp_layers,
        mtp_field=mtp_field,
    )
