"""The linear part of one decoder layer, per layer kind: every kernel whose time depends on the
step's token count alone (pure numpy, no I/O).

A layer is two fused residual-add + RMSNorm kernels, its attention's projections and its FFN.
Each function returns (milliseconds at each token count, kernels launched), for one
tensor-parallel worker (``shape`` already sharded):

=======================  ===============================================================================
attention projections    GQA (``full`` / ``sliding``): QKV GEMM, rotary, KV-cache write, output GEMM
                         (Qwen3-Next: the QKV GEMM also projects the output gate, then one gating kernel);
                         MLA: the down-projections (``fused_qkv_a_proj`` with a query LoRA, else the query
                         and KV-A projections), their RMSNorms, the query up-projection, rotary, the latent's
                         cache write, the per-head absorbed BMMs of W_UK and W_UV (BF16, as vLLM keeps them)
                         and the output GEMM;
                         linear attention (Gated DeltaNet): the QKVZ and BA input projections, the causal
                         convolution, the gated RMSNorm and the output GEMM (the recurrence is attention's)
FFN                      dense: gate/up GEMM, SiLU-and-mul, down GEMM;
                         MoE (:mod:`simulator.profiles.moe`): router GEMM (16-bit, replicated), top-k,
                         the routing alignment, the two fused-MoE GEMMs around the activation, the sum over
                         the k experts; shared experts as a dense FFN of their width
=======================  ===============================================================================

Precision (:class:`simulator.models.shapes.Precision`): each GEMM streams its weights at their storage
bytes and computes at its compute dtype's tensor peak; a GEMM computing in FP8 or FP4 first
quantizes its input with one more kernel (vLLM's dynamic per-token or per-group activation
quantization), except the fused MoE GEMMs, which quantize inside the kernel.
"""

from __future__ import annotations

import numpy as np

from simulator.profiles import moe as moe_model
from simulator.profiles import roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import LayerKind, ModelShape

BF16 = roofline.BYTES


def _gemm(t, n: int, k: int, shape: ModelShape, dev: DeviceSpec, part: str) -> tuple[np.ndarray, int]:
    """A linear layer of ``part``'s precision ("attention" or "ffn"), with its input's quantization."""
    p = shape.precision
    dtype = p.compute_dtype(part)
    ms = roofline.gemm_ms(t, n, k, dev, p.weight_bytes(part), p.activation_bytes(part), dtype)
    if dtype == "bf16":
        return ms, 1
    quant = roofline.streaming_ms(t * k * (BF16 + p.activation_bytes(part)), dev.constants.act_eff, dev)
    return ms + quant, 2


def _bf16_gemm(t, n: int, k: int, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    return roofline.gemm_ms(t, n, k, dev), 1


def _sum(*terms: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
    return sum(ms for ms, _ in terms), sum(kernels for _, kernels in terms)


def _stream(total_bytes, efficiency: float, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    return roofline.streaming_ms(total_bytes, efficiency, dev), 1


def gqa_projections(t, shape: ModelShape, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    c, h, hd = dev.constants, shape.embedding_dim, shape.head_dim
    q, kv = shape.q_heads_per_worker, shape.kv_heads_per_worker
    rope_bytes = t * 2 * (q + kv) * hd * BF16
    kv_write = t * 2 * kv * hd * (BF16 + shape.precision.kv_bytes)  # read K and V, write them to the cache
    terms = [
        _gemm(t, shape.qkv_dim, h, shape, dev, "attention"),
        _stream(rope_bytes, c.rope_eff, dev),
        _stream(kv_write, c.add_eff, dev),
        _gemm(t, h, q * hd, shape, dev, "attention"),
    ]
    if shape.gated_attention:  # sigmoid(gate) * attention output, before the output projection
        terms.append(_stream(t * 3 * q * hd * BF16, c.act_eff, dev))
    return _sum(*terms)


def mla_projections(t, shape: ModelShape, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    mla, c, h = shape.mla, dev.constants, shape.embedding_dim
    heads = shape.q_heads_per_worker
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    terms = []
    if mla.q_lora_rank:
        terms += [
            _gemm(t, mla.q_lora_rank + mla.latent_dim, h, shape, dev, "attention"),  # fused_qkv_a_proj, replicated
            (roofline.rmsnorm_ms(t, mla.q_lora_rank, dev), 1),
            _gemm(t, heads * qk, mla.q_lora_rank, shape, dev, "attention"),
        ]
    else:
        terms += [_gemm(t, heads * qk, h, shape, dev, "attention"), _gemm(t, mla.latent_dim, h, shape, dev, "attention")]
    terms += [
        (roofline.rmsnorm_ms(t, mla.kv_lora_rank, dev), 1),
        _stream(t * 2 * (heads + 1) * mla.qk_rope_head_dim * BF16, c.rope_eff, dev),
        _bf16_gemm(t, heads * mla.kv_lora_rank, mla.qk_nope_head_dim, dev),  # q_nope absorbed into the latent (W_UK)
        _stream(t * mla.latent_dim * (BF16 + shape.precision.kv_bytes), c.add_eff, dev),  # the latent into the cache
        _bf16_gemm(t, heads * mla.v_head_dim, mla.kv_lora_rank, dev),  # the latent output up to V (W_UV)
        _gemm(t, h, heads * mla.v_head_dim, shape, dev, "attention"),
    ]
    return _sum(*terms)


def linear_attention_projections(t, shape: ModelShape, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    lin, c, h, tp = shape.linear, dev.constants, shape.embedding_dim, shape.tensor_parallel
    key, value, heads = lin.key_dim // tp, lin.value_dim // tp, lin.num_value_heads // tp
    return _sum(
        _gemm(t, 2 * key + 2 * value, h, shape, dev, "attention"),  # in_proj_qkvz
        _gemm(t, 2 * heads, h, shape, dev, "attention"),  # in_proj_ba
        _stream(t * (2 * key + value) * 2 * BF16, c.act_eff, dev),  # causal conv1d over q, k, v
        (roofline.rmsnorm_ms(t, value, dev), 1),  # gated RMSNorm
        _gemm(t, h, value, shape, dev, "attention"),
    )


def dense_ffn(t, shape: ModelShape, dev: DeviceSpec, width: int) -> tuple[np.ndarray, int]:
    """A gated FFN of ``width`` (this worker's share) in the FFN's precision."""
    c, h = dev.constants, shape.embedding_dim
    up = 2 * width if shape.use_gated_mlp else width
    return _sum(
        _gemm(t, up, h, shape, dev, "ffn"),
        _stream(t * (up + width) * BF16, c.act_eff, dev),  # read gate and up, write the product
        _gemm(t, h, width, shape, dev, "ffn"),
    )


def moe_ffn(t, shape: ModelShape, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    """The routed experts (and shared experts) on one worker (:mod:`simulator.profiles.moe`)."""
    moe, c, h, tp, p = shape.moe, dev.constants, shape.embedding_dim, shape.tensor_parallel, shape.precision
    width = moe.expert_hidden_dim if moe.expert_parallel else moe.expert_hidden_dim // tp
    # with data-parallel ranks the experts serve every rank's tokens (all alike: DP x T of them)
    served = t * moe.data_parallel
    touched, rows = moe_model.expected_touched(served, moe_model.local_probabilities(moe, tp))
    kernel = moe_model.expert_kernel(dev, p)  # the fused-MoE kernel vLLM runs (moe_kernels.toml)
    block = moe_model.block_rows(served, moe.num_experts, moe.experts_per_token, kernel.block_rule)
    wb, ab = p.weight_bytes("experts"), p.activation_bytes("experts")
    terms = [
        _bf16_gemm(t, moe.num_experts, h, dev),  # router logits
        _stream(t * moe.num_experts * 4 + t * moe.experts_per_token * 8, c.act_eff, dev),  # softmax / sigmoid top-k
        _stream(t * moe.experts_per_token * 4, c.add_eff, dev),  # moe_align_block_size: sort rows by expert
        (moe_model.grouped_gemm_ms(touched, rows, 2 * width, h, block, dev, wb, ab, kernel), 1),
        _stream(rows * 3 * width * BF16, c.act_eff, dev),
        (moe_model.grouped_gemm_ms(touched, rows, h, width, block, dev, wb, ab, kernel), 1),
        _stream(rows * h * BF16 + served * h * BF16, c.add_eff, dev),  # weighted sum over each token's k experts
    ]
    if moe.shared_hidden_dim:  # on the rank's own tokens
        terms.append(dense_ffn(t, shape, dev, moe.shared_hidden_dim // tp))
    return _sum(*terms)


def layer_linear_ms(kind: LayerKind, tokens, shape: ModelShape, dev: DeviceSpec) -> tuple[np.ndarray, int]:
    """(ms per layer at each token count, kernels per layer) of a layer of ``kind``, outside attention."""
    t = np.maximum(np.asarray(tokens, dtype=float), 1)
    h = shape.embedding_dim
    if kind.attention == "linear":
        projections = linear_attention_projections(t, shape, dev)
    elif shape.mla is not None:
        projections = mla_projections(t, shape, dev)
    else:
        projections = gqa_projections(t, shape, dev)
    ffn = moe_ffn(t, shape, dev) if kind.ffn == "moe" else dense_ffn(t, shape, dev, shape.mlp_hidden_per_worker)
    norms = (2 * roofline.rmsnorm_ms(t, h, dev), 2)
    return _sum(norms, projections, ffn)
