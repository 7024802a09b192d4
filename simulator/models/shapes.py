"""A model's shape as the cost model sees it: the one type the catalog and the profiles share.

It sits apart from both so that neither imports the other for it: the catalog describes models
to Vidur, the profiles cost their kernels, and both speak of shapes.

A shape is a dense Llama-style decoder by default.  The optional parts describe what today's
models add, each as plain data (the costs are :mod:`simulator.profiles`'):

* ``layers``: the decoder's layer kinds with their counts, in order of first appearance (a
  :class:`LayerKind` says which attention and which FFN a layer runs); empty = every layer full
  attention with the dense FFN;
* ``moe``: the mixture-of-experts FFN of the layers whose ``ffn`` is ``"moe"``;
* ``mla``: multi-head latent attention (DeepSeek-V2/V3): replaces the grouped-query projections
  and the per-head KV cache of every softmax-attention layer;
* ``linear``: the linear-attention (Gated DeltaNet) layers of a hybrid model (Qwen3-Next);
* ``precision``: the bytes of the weights and the KV cache, and the tensor-core dtype each GEMM
  computes in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

ATTENTION_KINDS = ("full", "sliding", "linear")
FFN_KINDS = ("dense", "moe")

# Bytes per element of each storage dtype.  The block-scaled 4-bit formats carry one scale per
# block: MXFP4 an 8-bit E8M0 scale per 32 E2M1 values (the OCP MX format: "MXFP4_SF_DTYPE =
# float8_e8m0fnu", "MXFP4_SF_VECTOR_SIZE = 32", https://docs.modular.com/max/api/kernels/linalg/fp4_utils/),
# NVFP4 an 8-bit E4M3 scale per 16 ("one FP8 scale value per 16 logical FP4 values",
# https://nvidia.github.io/cuda-rust/cutile/latest/tutorials/11-nvfp4-inference.html); their
# per-tensor scales are negligible.
# FP8 block scales (one fp32 per 128 x 128 block) are 0.02% of the bytes and left out.
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": (4 + 8 / 32) / 8, "nvfp4": (4 + 8 / 16) / 8}
# The tensor-core dtype a GEMM with weights of each dtype computes in, as vLLM runs it: FP8
# weights with dynamically quantized FP8 activations (W8A8), MXFP4 weights dequantized to BF16
# (W4A16, vLLM's MXFP4 MoE path), NVFP4 weights and activations (W4A4, FP4 tensor cores).
COMPUTE_DTYPE = {"bf16": "bf16", "fp8": "fp8", "mxfp4": "bf16", "nvfp4": "fp4"}
# The dtype of the activations a GEMM reads (bytes streamed per input element).
ACTIVATION_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": DTYPE_BYTES["nvfp4"]}


@dataclass(frozen=True)
class Precision:
    """Storage dtypes of a model's parts.  ``attention``: the attention projections; ``ffn``: the
    dense FFNs and shared experts; ``experts``: the routed experts; ``kv_cache``: the cache.
    ``method`` names the quantization method they came from ("" for none)."""

    attention: str = "bf16"
    ffn: str = "bf16"
    experts: str = "bf16"
    kv_cache: str = "bf16"
    method: str = ""

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv_cache]

    def weight_bytes(self, part: str) -> float:
        return DTYPE_BYTES[getattr(self, part)]

    def compute_dtype(self, part: str) -> str:
        return COMPUTE_DTYPE[getattr(self, part)]

    def activation_bytes(self, part: str) -> float:
        return ACTIVATION_BYTES[self.compute_dtype(part)]

    def compute_dtypes(self) -> set[str]:
        return {COMPUTE_DTYPE[d] for d in (self.attention, self.ffn, self.experts)}

    @property
    def is_default(self) -> bool:
        return self == Precision()


@dataclass(frozen=True)
class LayerKind:
    """One kind of decoder layer: its attention (``full``, ``sliding`` with a ``window`` of keys,
    or ``linear``) and its FFN (``dense`` or ``moe``)."""

    attention: str = "full"
    ffn: str = "dense"
    window: int = 0

    @property
    def label(self) -> str:
        attention = f"sliding({self.window})" if self.attention == "sliding" else self.attention
        return f"{attention}+{self.ffn}"


DENSE_LAYER = LayerKind()


@dataclass(frozen=True)
class MoEShape:
    """The routed experts of an MoE layer: ``num_experts`` experts of width ``expert_hidden_dim``,
    ``experts_per_token`` of them per token, plus shared experts of total width
    ``shared_hidden_dim`` (0: none) that every token runs.  ``routing_skew``: the exponent of the
    experts' Zipf popularity (0: uniform routing).  ``expert_parallel``: experts placed whole,
    ``num_experts / EP`` per GPU (vLLM's ``--enable-expert-parallel``), instead of every expert's
    width split over the TP group.  ``data_parallel``: the data-parallel ranks whose tokens the
    experts serve together (vLLM's ``--data-parallel-size``; EP = DP x TP)."""

    num_experts: int
    experts_per_token: int
    expert_hidden_dim: int
    shared_hidden_dim: int = 0
    routing_skew: float = 0.0
    expert_parallel: bool = False
    data_parallel: int = 1

    def expert_groups(self, tensor_parallel: int) -> int:
        """The GPUs the experts are spread over: DP x TP (vLLM flattens the two for the experts)."""
        return tensor_parallel * self.data_parallel


@dataclass(frozen=True)
class MLAShape:
    """Multi-head latent attention: K and V come from one cached latent of ``kv_lora_rank``
    elements plus a shared rotary key of ``qk_rope_head_dim``; queries from a low-rank
    ``q_lora_rank`` projection (0: a full-rank query projection)."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0

    @property
    def latent_dim(self) -> int:
        """Elements cached per token and layer, once for all heads."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class LinearAttentionShape:
    """Gated DeltaNet layers (Qwen3-Next): per value head a ``key_head_dim`` x ``value_head_dim``
    state, and a causal convolution of ``conv_kernel`` taps over the q, k and v channels."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers a profile depends on; the head and MLP counts are the whole model's.

    ``tensor_parallel`` is the number of workers the layer is sharded over (Megatron-style, as in
    vLLM and Vidur): each worker holds 1/TP of the query heads, of the MLP's hidden width and of
    the KV heads (at least one: with fewer KV heads than workers they are replicated), while the
    norms, residual adds and the embedding row gather stay full width.
    """

    num_q_heads: int
    num_kv_heads: int
    embedding_dim: int
    mlp_hidden_dim: int
    vocab_size: int
    use_gated_mlp: bool = True
    tensor_parallel: int = 1
    head_size: int = 0  # a config's explicit head_dim where it differs from embedding_dim / num_q_heads
    layers: tuple[tuple[LayerKind, int], ...] = ()
    moe: Optional[MoEShape] = None
    mla: Optional[MLAShape] = None
    linear: Optional[LinearAttentionShape] = None
    precision: Precision = Precision()
    # the attention output is gated by a sigmoid of a second query-width projection (Qwen3-Next)
    gated_attention: bool = False

    @property
    def head_dim(self) -> int:
        return self.head_size or self.embedding_dim // self.num_q_heads

    @property
    def q_heads_per_worker(self) -> int:
        return self.num_q_heads // self.tensor_parallel

    @property
    def kv_heads_per_worker(self) -> int:
        return -(-self.num_kv_heads // self.tensor_parallel)

    @property
    def mlp_hidden_per_worker(self) -> int:
        return self.mlp_hidden_dim // self.tensor_parallel

    @property
    def qkv_dim(self) -> int:
        """Width of one worker's fused QKV projection (the output gate's query-width half included)."""
        q = self.q_heads_per_worker * (2 if self.gated_attention else 1)
        return (q + 2 * self.kv_heads_per_worker) * self.head_dim

    @property
    def gqa_group(self) -> int:
        return self.q_heads_per_worker // self.kv_heads_per_worker

    def layer_groups(self, num_layers: int) -> tuple[tuple[LayerKind, int], ...]:
        """(kind, count) of every layer kind: ``layers``, or ``num_layers`` dense full-attention layers."""
        return self.layers or ((DENSE_LAYER, num_layers),)

    @property
    def is_plain(self) -> bool:
        """A dense Llama-style decoder in 16-bit: what a Vidur-format profile can describe."""
        return (
            all(kind == DENSE_LAYER for kind, _ in self.layers) and self.moe is None and self.mla is None
            and self.linear is None and self.precision.is_default and not self.gated_attention
        )

    def sharded(self, tensor_parallel: int) -> "ModelShape":
        return replace(self, tensor_parallel=tensor_parallel)

    def with_precision(self, precision: Precision) -> "ModelShape":
        return replace(self, precision=precision)

    def with_moe(self, **changes) -> "ModelShape":
        return replace(self, moe=replace(self.moe, **changes)) if self.moe is not None else self
