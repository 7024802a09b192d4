"""What one GPU holds of a model: its weights' bytes and its KV cache's bytes per token (pure).

Weights are counted as Vidur's ``ParamCounter`` counts a dense layer (the four attention
projections and the three FFN matrices; no norms or biases), generalised to every layer kind, and
held at each part's storage dtype (:class:`simulator.models.shapes.Precision`), all on one worker of
``shape.tensor_parallel``:

=====================  ================================================================================
GQA attention          h hd (q + 2 kv) + h hd q, q and kv the worker's heads (the output gate's
                       second query projection counted too where the model has one)
MLA attention          replicated: h (q_lora + kv_lora + rope) (with a query LoRA; else h (kv_lora +
                       rope) and the query projection h heads (nope + rope) sharded); sharded:
                       q_lora heads (nope + rope) + kv_lora heads (nope + v) + heads v h
linear attention       h (2 key + 2 value + 2 value heads) + value h + conv taps (2 key + value), per worker
dense FFN              3 h f / TP (Vidur's integer division)
MoE FFN                router E h (replicated, 16-bit) + E 3 h f_e / TP (each expert's width split,
                       or E / TP whole experts with expert parallelism: the same bytes; E / DP whole
                       experts with DP data-parallel ranks) + shared 3 h s / TP
embedding, LM head     V h / TP each (vocabulary-parallel; one matrix when tied), 16-bit, where counted
=====================  ================================================================================

KV cache per token, per layer (``kv_bytes``: the cache dtype's bytes): full attention
2 hd kv_heads/worker kv_bytes; MLA (kv_lora_rank + qk_rope_head_dim) kv_bytes, the one latent
every worker holds whole (vLLM replicates it over the TP group); a sliding layer the same as full
but for at most ``window`` tokens of a request; a linear-attention layer none, but a constant state
per request.
"""

from __future__ import annotations

from simulator.models.shapes import DTYPE_BYTES, LayerKind, ModelShape

BF16 = DTYPE_BYTES["bf16"]


def _attention_params(kind: LayerKind, shape: ModelShape) -> float:
    h, tp = shape.embedding_dim, shape.tensor_parallel
    if kind.attention == "linear":
        lin = shape.linear
        key, value, heads = lin.key_dim // tp, lin.value_dim // tp, lin.num_value_heads // tp
        return h * (2 * key + 2 * value + 2 * heads) + value * h + lin.conv_kernel * (2 * key + value)
    if shape.mla is not None:
        mla, heads = shape.mla, shape.q_heads_per_worker
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank:
            query = h * mla.q_lora_rank + mla.q_lora_rank * heads * qk
        else:
            query = h * heads * qk
        return query + h * mla.latent_dim + mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim) + heads * mla.v_head_dim * h
    hd, q = shape.head_dim, shape.q_heads_per_worker
    return h * shape.qkv_dim + h * hd * q


def _dense_ffn_params(shape: ModelShape, width: int) -> int:
    matrices = 3 if shape.use_gated_mlp else 2
    return matrices * shape.embedding_dim * width // shape.tensor_parallel


def layer_weight_bytes(kind: LayerKind, shape: ModelShape) -> float:
    """One worker's bytes of one layer of ``kind``."""
    p = shape.precision
    total = _attention_params(kind, shape) * p.weight_bytes("attention")
    if kind.ffn == "dense":
        return total + _dense_ffn_params(shape, shape.mlp_hidden_dim) * p.weight_bytes("ffn")
    moe, h = shape.moe, shape.embedding_dim
    total += moe.num_experts * h * BF16  # router
    total += moe.num_experts * 3 * h * moe.expert_hidden_dim // moe.expert_groups(shape.tensor_parallel) * p.weight_bytes("experts")
    if moe.shared_hidden_dim:
        total += _dense_ffn_params(shape, moe.shared_hidden_dim) * p.weight_bytes("ffn")
    return total


def kv_bytes_per_token(kind: LayerKind, shape: ModelShape) -> float:
    """One worker's cache bytes per token for one layer of ``kind`` (0 for linear attention)."""
    if kind.attention == "linear":
        return 0.0
    if shape.mla is not None:
        return shape.mla.latent_dim * shape.precision.kv_bytes
    return 2 * shape.head_dim * shape.kv_heads_per_worker * shape.precision.kv_bytes


def linear_state_bytes(shape: ModelShape) -> float:
    """One worker's state for one request in one linear-attention layer: the recurrent state
    (value heads x key_head_dim x value_head_dim) and the convolution's last taps, 16-bit."""
    lin, tp = shape.linear, shape.tensor_parallel
    recurrent = lin.num_value_heads // tp * lin.key_head_dim * lin.value_head_dim
    conv = (lin.conv_kernel - 1) * (2 * lin.key_dim + lin.value_dim) // tp
    return (recurrent + conv) * BF16


def weight_bytes(shape: ModelShape, num_layers: int, include_embeddings: bool, tie_word_embeddings: bool = False) -> int:
    """One worker's weight bytes (``shape`` sharded to the run's TP degree)."""
    weights = sum(count * layer_weight_bytes(kind, shape) for kind, count in shape.layer_groups(num_layers))
    if include_embeddings:  # vocabulary-parallel embedding and LM head, as vLLM shards them; one matrix when tied
        matrices = 1 if tie_word_embeddings else 2
        weights += matrices * shape.vocab_size * shape.embedding_dim // shape.tensor_parallel * BF16
    return int(weights)


def kv_layout(shape: ModelShape, num_layers: int) -> tuple[int, tuple[tuple[int, int], ...], int]:
    """One worker's cache: (bytes per token of the layers that keep every token, (bytes per token,
    window) of each group of sliding layers, state bytes per request of the linear layers)."""
    full, windows, state = 0.0, [], 0.0
    for kind, count in shape.layer_groups(num_layers):
        per_token = count * kv_bytes_per_token(kind, shape)
        if kind.attention == "sliding":
            windows.append((int(per_token), kind.window))
        else:
            full += per_token
        if kind.attention == "linear":
            state += count * linear_state_bytes(shape)
    return int(full), tuple(windows), int(state)
