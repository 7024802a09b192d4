"""The measured ops, with random weights and inputs (random values time the same as trained
ones): one transformer layer's non-attention ops with the LM head and sampler (``Layer``),
decode, prefill and verify attention (``Attention``), and a whole decoder layer's verify step
(``VerifyLayer``)."""

from __future__ import annotations

import warnings

from simulator.profiling.measure.shapes import Shape
from simulator.profiling.measure.timing import Clock, Stopwatch, Timed, free_memory, is_out_of_memory
from simulator.profiles.vidur_format import MLP_OPS

ATTENTION_BACKENDS = ("auto", "fastest", "flash", "efficient", "cudnn", "math")
# Tried in this order by "auto": PyTorch's own preference among its fused kernels.
AUTO_BACKEND_ORDER = ("flash", "efficient", "math")
# "fastest" times each of these that accepts a shape and keeps the faster (math only if none does).
FASTEST_CANDIDATES = ("flash", "efficient")


class ShapeRejected(Exception):
    """A shape this device or PyTorch cannot run; recorded as skipped."""


class Layer:
    """One transformer layer's non-attention weights, with random values, run op by op as Vidur
    names them, then the model's head: the LM head GEMM and a greedy sampler (``vidur_format.LOGITS_OPS``, once per forward pass, not per layer)."""

    def __init__(self, torch, cfg, device, dtype, max_tokens: int):
        self.torch, self.cfg, self.device = torch, cfg, device
        self.F = torch.nn.functional
        h, f = cfg.embedding_dim, cfg.mlp_hidden_dim
        self.head_dim = h // cfg.num_q_heads
        self.q_width = cfg.num_q_heads * self.head_dim
        qkv = (cfg.num_q_heads + 2 * cfg.num_kv_heads) * self.head_dim
        up = 2 * f if cfg.use_gated_mlp else f

        def weight(*size):
            return torch.empty(*size, device=device, dtype=dtype).normal_(0.0, 0.02)

        def bias(size, present):
            return weight(size) if present else None

        self.emb = weight(cfg.vocab_size, h)
        self.norm_w, self.norm_b = torch.ones(h, device=device, dtype=dtype), torch.zeros(h, device=device, dtype=dtype)
        self.w_qkv, self.b_qkv = weight(qkv, h), bias(qkv, cfg.use_bias or cfg.use_qkv_bias)
        self.w_o, self.b_o = weight(h, self.q_width), bias(h, cfg.use_bias)
        self.w_up, self.b_up = weight(up, h), bias(up, cfg.use_bias)
        self.w_down, self.b_down = weight(h, f), bias(h, cfg.use_bias)
        self.w_lm = weight(cfg.vocab_size, h)  # [vocab / TP, hidden] at TP = 1; untied from emb
        self.rotary = int(self.head_dim * cfg.partial_rotary_factor) // 2 * 2
        half = self.rotary // 2
        inv_freq = 1.0 / (float(cfg.rope_theta or 10000.0) ** (torch.arange(half, device=device, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(max_tokens, device=device, dtype=torch.float32), inv_freq)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self.gelu = cfg.activation.name == "GELU"
        self.rms = cfg.norm.name == "RMS_NORM"

    def ops(self) -> tuple[str, ...]:
        """The ops this architecture runs; the others (e.g. a second norm) cost nothing."""
        return tuple(op for op in MLP_OPS if op != "post_attention_layernorm" or self.cfg.post_attn_norm)

    def activation_bytes(self, tokens: int, element_size: int) -> int:
        c = self.cfg
        per_token = 7 * c.embedding_dim + self.w_qkv.shape[0] + self.q_width + self.w_up.shape[0] + c.mlp_hidden_dim
        head = c.vocab_size * (element_size + 3 * 4)  # logits, the sampler's fp32 logits, probabilities and temporaries
        return tokens * (per_token * element_size + head)

    def _norm(self, x):
        h = self.cfg.embedding_dim
        if self.rms:
            return self.F.rms_norm(x, (h,), self.norm_w, eps=1e-6)
        return self.F.layer_norm(x, (h,), self.norm_w, self.norm_b, eps=1e-5)

    def _rope(self, qkv, positions):
        """Neox-style rotation of the query and key heads, in place (unfused eager kernels)."""
        c, half = self.cfg, self.rotary // 2
        heads = qkv.view(qkv.shape[0], -1, self.head_dim)[:, : c.num_q_heads + c.num_kv_heads]
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        x1, x2 = heads[..., :half], heads[..., half : self.rotary]
        rotated = self.torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        heads[..., : self.rotary] = rotated
        return qkv

    def _act(self, up):
        f = self.cfg.mlp_hidden_dim
        act = self.F.gelu if self.gelu else self.F.silu
        return act(up[:, :f]) * up[:, f:] if self.cfg.use_gated_mlp else act(up)

    def measure(self, tokens: int, clock: Clock, warmup: int, repeats: int) -> Timed:
        torch, F = self.torch, self.F
        ids = torch.randint(0, self.cfg.vocab_size, (tokens,), device=self.device)
        positions = torch.arange(tokens, device=self.device)
        attn_out = torch.randn(tokens, self.q_width, device=self.device, dtype=self.emb.dtype)
        # The sampler's input: fp32 logits, as vLLM's sampler upcasts them (the cast is not timed).
        logits_fp32 = torch.randn(tokens, self.cfg.vocab_size, device=self.device, dtype=torch.float32)
        post_norm = self.cfg.post_attn_norm

        def run(watch):
            # Vidur's layer: with a second norm the MLP follows the attention residual and "add"
            # is the MLP residual; without one (parallel blocks) "add" sums attention, MLP and input.
            x = watch.time("emb", lambda: F.embedding(ids, self.emb))
            normed = watch.time("input_layernorm", lambda: self._norm(x))
            qkv = watch.time("attn_pre_proj", lambda: F.linear(normed, self.w_qkv, self.b_qkv))
            watch.time("attn_rope", lambda: self._rope(qkv, positions))
            o = watch.time("attn_post_proj", lambda: F.linear(attn_out, self.w_o, self.b_o))
            if post_norm:
                residual = x + o
                normed = watch.time("post_attention_layernorm", lambda: self._norm(residual))
            up = watch.time("mlp_up_proj", lambda: F.linear(normed, self.w_up, self.b_up))
            act = watch.time("mlp_act", lambda: self._act(up))
            down = watch.time("mlp_down_proj", lambda: F.linear(act, self.w_down, self.b_down))
            out = watch.time("add", lambda: residual + down if post_norm else o + down + x)
            watch.time("lm_head", lambda: F.linear(out, self.w_lm))  # [tokens, hidden] x [hidden, vocab]
            watch.time("sampler", lambda: torch.softmax(logits_fp32, dim=-1).argmax(dim=-1))  # greedy

        return clock.measure(run, warmup, repeats)


class Attention:
    """Decode and prefill attention over K/V cut from two flat, randomly filled buffers.

    Each shape views the first ``batch x (kv + new)`` tokens of the buffers as contiguous
    (batch, kv_heads, tokens, head_dim) caches, so the grid needs one allocation and one fill.
    """

    def __init__(self, torch, cfg, device, dtype, capacity_tokens: int, backend: str):
        self.torch, self.device, self.dtype = torch, device, dtype
        self.F = torch.nn.functional
        self.q_heads, self.kv_heads = cfg.num_q_heads, cfg.num_kv_heads
        self.head_dim = cfg.embedding_dim // cfg.num_q_heads
        self.backend = backend
        self.chosen: dict[tuple[int, int, int], str] = {}  # (batch, new, kv) -> the backend "fastest" kept
        self.capacity, self.k_flat, self.v_flat = 0, None, None
        while capacity_tokens >= 1 and self.k_flat is None:
            try:
                size = capacity_tokens * self.kv_heads * self.head_dim
                self.k_flat = torch.randn(size, device=device, dtype=dtype)
                self.v_flat = torch.randn(size, device=device, dtype=dtype)
                self.capacity = capacity_tokens
            except Exception as exc:  # halve until the buffers fit; shapes beyond them are skipped
                if not is_out_of_memory(torch, exc):
                    raise
                self.k_flat = self.v_flat = None
                free_memory(torch, device)
                capacity_tokens //= 2

    def transient_bytes(self, shape: Shape, element_size: int) -> int:
        """Per-shape tensors beyond the buffers: queries, new K/V, the output and its reshaped copy."""
        return shape.new_tokens * (3 * self.q_heads + 2 * self.kv_heads) * self.head_dim * element_size

    def caches(self, batch: int, total: int):
        """(batch, kv_heads, total, head_dim) K and V caches viewed from the start of the buffers."""
        size = batch * self.kv_heads * total * self.head_dim
        shape = (batch, self.kv_heads, total, self.head_dim)
        return self.k_flat[:size].view(shape), self.v_flat[:size].view(shape)

    @staticmethod
    def mask(kind: str, new: int, kv: int) -> dict:
        """SDPA's mask arguments: none for one query per sequence; causal inside the new tokens,
        aligned to the bottom right (query i sees the cache and new tokens 0..i), for more."""
        from torch.nn.attention.bias import causal_lower_right

        if kind != "prefill" and new == 1:
            return {}
        return {"is_causal": True} if kv == 0 else {"attn_mask": causal_lower_right(new, kv + new)}

    def _candidates(self, names):
        from torch.nn.attention import SDPBackend

        members = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
        return [(name, members[name]) for name in names]

    def _accepting(self, run, names, clock: Clock, warmup: int, repeats: int, failures: list):
        """(backend, timings) for each backend of ``names`` that accepts ``run``, in order."""
        from torch.nn.attention import sdpa_kernel

        for name, member in self._candidates(names):
            with sdpa_kernel([member]):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the reasons a kernel declines a shape
                        run(Stopwatch(self.torch, self.device))
                except RuntimeError as exc:
                    if is_out_of_memory(self.torch, exc):
                        raise
                    failures.append(f"{name}: {str(exc).splitlines()[0]}")
                    continue
                timed = clock.measure(run, max(warmup - 1, 0), repeats)
            yield name, timed  # outside sdpa_kernel: a caller that stops here leaves no backend restricted

    def on_backend(self, run, op: str, key: tuple[int, int, int], clock: Clock, warmup: int, repeats: int) -> tuple[str, Timed]:
        """Time ``run`` under the SDPA backend ``--attention-backend`` asks for: a named one; the
        first of flash, efficient, math that accepts it (auto); or whichever of flash and efficient
        gives ``op`` the lower median (fastest; a shape whose attention already chose, as the
        verify layer after its attention, reuses that choice)."""
        failures: list[str] = []
        if self.backend == "fastest":
            names = (self.chosen[key],) if key in self.chosen else FASTEST_CANDIDATES
            timed = list(self._accepting(run, names, clock, warmup, repeats, failures))
            if timed:
                name, best = min(timed, key=lambda pair: pair[1].stats[op]["median"])
                self.chosen[key] = name
                return name, best
            names = ("math",)
        else:
            names = AUTO_BACKEND_ORDER if self.backend == "auto" else (self.backend,)
        for name, timed in self._accepting(run, names, clock, warmup, repeats, failures):
            return name, timed
        raise ShapeRejected("no scaled_dot_product_attention backend accepts this shape (" + "; ".join(failures) + ")")

    def measure(self, shape: Shape, clock: Clock, warmup: int, repeats: int) -> tuple[str, Timed]:
        """Returns the SDPA backend that ran and the per-op timings (the kernel's op is named
        ``attn_decode``, ``attn_prefill`` or ``verify_attention`` after the shape's kind)."""
        torch, F = self.torch, self.F
        batch, new, kv = (1, shape.a, shape.b) if shape.kind == "prefill" else (shape.a, shape.q, shape.b)
        hd, hq, hkv = self.head_dim, self.q_heads, self.kv_heads
        k_cache, v_cache = self.caches(batch, kv + new)
        q_flat = torch.randn(batch * new, hq * hd, device=self.device, dtype=self.dtype)
        k_new = torch.randn(batch * new, hkv * hd, device=self.device, dtype=self.dtype)
        v_new = torch.randn(batch * new, hkv * hd, device=self.device, dtype=self.dtype)
        mask = self.mask(shape.kind, new, kv)
        op = {"decode": "attn_decode", "prefill": "attn_prefill"}.get(shape.kind, shape.kind)
        gqa = hq != hkv

        def as_heads(flat, heads):
            return flat.view(batch, new, heads, hd).transpose(1, 2)

        def save():
            k_cache[:, :, kv:].copy_(as_heads(k_new, hkv))
            v_cache[:, :, kv:].copy_(as_heads(v_new, hkv))

        def run(watch):
            q = watch.time("attn_input_reshape", lambda: as_heads(q_flat, hq))
            watch.time("attn_kv_cache_save", save)
            out = watch.time(op, lambda: F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=gqa, **mask))
            watch.time("attn_output_reshape", lambda: out.transpose(1, 2).reshape(batch * new, hq * hd))

        return self.on_backend(run, op, (batch, new, kv), clock, warmup, repeats)


class VerifyLayer:
    """One decoder layer's whole verify step, timed as a single op (one CUDA graph on a GPU):
    ``batch`` sequences of ``q`` = k' + 1 new tokens each over ``kv`` cached tokens: norm, QKV
    projection, rotary embedding at positions kv..kv + q - 1, K/V written into the cache,
    attention (causal within the new tokens), output projection, residual, norm, MLP, residual.
    Uses the layer's weights and the attention's K/V buffers."""

    def __init__(self, layer: Layer, attention: Attention):
        self.layer, self.attention = layer, attention

    def transient_bytes(self, shape: Shape, element_size: int) -> int:
        return self.layer.activation_bytes(shape.new_tokens, element_size) + self.attention.transient_bytes(shape, element_size)

    def measure(self, shape: Shape, clock: Clock, warmup: int, repeats: int) -> tuple[str, Timed]:
        layer, attention = self.layer, self.attention
        torch, F, device, dtype = layer.torch, layer.F, layer.device, attention.dtype
        batch, new, kv = shape.a, shape.q, shape.b
        tokens, hd, hq, hkv = batch * new, attention.head_dim, attention.q_heads, attention.kv_heads
        k_cache, v_cache = attention.caches(batch, kv + new)
        mask = attention.mask(shape.kind, new, kv)
        x = torch.randn(tokens, layer.cfg.embedding_dim, device=device, dtype=dtype)
        positions = (kv + torch.arange(new, device=device)).repeat(batch)
        post_norm, gqa = layer.cfg.post_attn_norm, hq != hkv

        def as_heads(flat, heads):
            return flat.view(batch, new, heads, hd).transpose(1, 2)

        def step():
            normed = layer._norm(x)
            qkv = F.linear(normed, layer.w_qkv, layer.b_qkv)
            layer._rope(qkv, positions)
            q, k, v = qkv.split((hq * hd, hkv * hd, hkv * hd), dim=-1)
            k_cache[:, :, kv:].copy_(as_heads(k, hkv))
            v_cache[:, :, kv:].copy_(as_heads(v, hkv))
            out = F.scaled_dot_product_attention(as_heads(q, hq), k_cache, v_cache, enable_gqa=gqa, **mask)
            o = F.linear(out.transpose(1, 2).reshape(tokens, hq * hd), layer.w_o, layer.b_o)
            residual = x + o
            if post_norm:  # else parallel blocks: the MLP reads the same normed input as attention
                normed = layer._norm(residual)
            down = F.linear(layer._act(F.linear(normed, layer.w_up, layer.b_up)), layer.w_down, layer.b_down)
            return residual + down

        return attention.on_backend(lambda watch: watch.time("verify_layer", step), "verify_layer", (batch, new, kv), clock, warmup, repeats)


def measure_shape(layer: Layer, attention: Attention, clock: Clock, shape: Shape, warmup: int, repeats: int):
    """(backend or None, timings) for one shape; module-level so a test can stand in an OOM."""
    if shape.kind == "mlp":
        return None, layer.measure(shape.a, clock, warmup, repeats)
    if shape.kind == "verify_layer":
        return VerifyLayer(layer, attention).measure(shape, clock, warmup, repeats)
    return attention.measure(shape, clock, warmup, repeats)

