"""One forward pass of a model as vLLM V1 runs it: the built-in profile's step time (pure).

A step is the target's (or a draft's) forward over a batch of rows, then the LM head and the
sampler on the rows that produce logits.  The forward is the model's decoder layers, grouped by
kind (:class:`simulator.models.shapes.LayerKind`: full, sliding-window or linear attention; dense or
mixture-of-experts FFN): a group of ``n`` layers of one kind costs ``n`` times one such layer,
and a plain model is one group of ``L`` identical layers.  A layer of the Llama kind is the
kernels vLLM launches for a Llama-style layer (``vllm/model_executor/models/llama.py``):

=====================  ==========================================================================
kernel                 cost (one tensor-parallel worker)
=====================  ==========================================================================
fused_add_rms_norm x2  the residual add is fused into each norm (``RMSNorm.forward`` with a
                       residual): two kernels per layer, no separate add
QKV projection         GEMM [T, h] x [h, (q + 2 kv) * head_dim / TP]
rotary embedding       one in-place kernel over Q and K
KV-cache write         ``reshape_and_cache_flash``: K and V of the step's tokens into the cache
attention              one varlen kernel over every row (:mod:`simulator.profiles.attention`)
output projection      GEMM [T, q * head_dim / TP] x [.., h], then an all-reduce (TP > 1)
gate/up projection     GEMM [T, h] x [h, 2 f / TP]
SiLU-and-mul           one kernel (``SiluAndMul``)
down projection        GEMM [T, f / TP] x [.., h], then an all-reduce (TP > 1)
=====================  ==========================================================================

Other kinds swap the projections and the FFN for their own kernels (:mod:`simulator.profiles.layers`:
MLA's low-rank projections, Gated DeltaNet's, the fused MoE GEMMs with their router) and cost
attention as their kind reads it (:mod:`simulator.profiles.attention`: a window caps the keys, MLA
reads one latent per token, linear attention a constant-size state).  :meth:`StepModel.layer_cost`
gives one layer of a given kind on its own (an MTP module's decoder layer is one).

GEMMs, norms and element-wise kernels are :mod:`simulator.profiles.roofline`'s kernel models
(fitted on kernel durations measured in isolation, which carry no launch gaps); the all-reduce is
:mod:`simulator.profiles.collectives`.  A kernel's fixed time is therefore the same in every
issuing mode: the fitted intercepts (``gemm_launch_us`` and the others, despite their names) are
the kernels' own durations at vanishing size, which a CUDA graph replays unchanged (the project's
graph-timed H200 profile shows no smaller GEMM intercept); the custom all-reduce's constants are
in-graph measurements.  What the issuing mode adds is the GPU's gap between kernels and, where the
CPU is the slower side, its launches.  How the kernels are issued is the engine's
(:mod:`simulator.profiles.engines`): between two kernels the GPU idles ``graph_kernel_gap_us``
inside a CUDA graph or ``stream_kernel_gap_us`` when launched eagerly; the CPU spends, per layer,
nothing (one full graph for the whole step), one piece's replay and one eager attention call
(piecewise), or one launch per kernel and the attention call (eager).  A layer takes the longer
of its GPU time and its CPU time: the GPU cannot run ahead of the CPU that feeds it, and a CPU
that is ahead is hidden behind the GPU.  Graph-mode batches run padded to the capture size.

The LM head and the sampler run eagerly after the forward (``compute_logits`` and the sampler
are outside vLLM's captured graphs), on the rows that produce logits; at TP > 1 the vocabulary
shards' logits are gathered.  The engine's per-step CPU time outside the forward (scheduling,
input preparation, output processing) is the caller's (:mod:`simulator.engine.analytic`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import NamedTuple, Optional

import numpy as np

from simulator.profiles import collectives, roofline
from simulator.profiles.attention import AttentionRows, attention_ms, decode_lookup
from simulator.profiles.engines import EngineSpec
from simulator.profiles.hardware import DeviceSpec, NetworkSpec
from simulator.profiles.layers import layer_linear_ms
from simulator.models.shapes import LayerKind, ModelShape
from simulator.speculative.verify_cost import DEFAULT_ATTENTION, DEFAULT_INTERPOLATION

# Kernels of one Llama-style decoder layer outside attention and the all-reduces (table above),
# and the attention call itself (the KV-cache write runs inside it in eager and piecewise modes);
# other layer kinds count their own (simulator.profiles.layers)
LAYER_KERNELS = 9
ATTENTION_KERNELS = 1
ALL_REDUCES_PER_LAYER = 2


@dataclass(frozen=True)
class LayerCost:
    """One layer's milliseconds in a step, by term (as :class:`StepCost`'s, for one layer)."""

    linear_ms: float
    attention_ms: float
    all_reduce_ms: float
    gaps_ms: float
    cpu_bound_ms: float

    @property
    def total_ms(self) -> float:
        return self.linear_ms + self.attention_ms + self.all_reduce_ms + self.gaps_ms + self.cpu_bound_ms


class StepCost(NamedTuple):
    """A forward's milliseconds, by term (each already multiplied by the layers where it repeats).
    A NamedTuple: one is built per step and per draft pass."""

    mode: str  # "full", "piecewise" or "eager" (simulator.profiles.engines.EngineSpec.mode)
    padded_tokens: int
    linear_ms: float  # GEMMs, norms, rotary, KV write, activation of every layer
    attention_ms: float
    all_reduce_ms: float
    gaps_ms: float  # GPU idle between kernels
    cpu_bound_ms: float  # what the layers wait on the CPU beyond their GPU time
    outside_layers_ms: float  # embedding and final norm
    logits_ms: float  # LM head, sampler, logits gather

    @property
    def total_ms(self) -> float:
        return (
            self.linear_ms + self.attention_ms + self.all_reduce_ms + self.gaps_ms + self.cpu_bound_ms
            + self.outside_layers_ms + self.logits_ms
        )


@dataclass(frozen=True)
class StepModel:
    """The step-time model of one model shard on one device under one engine.

    ``shape`` is already sharded to the run's TP degree; ``network`` is the node's NVLink model
    (None at TP 1); ``max_tokens`` bounds the token counts its per-token tables cover (larger
    counts are computed on demand)."""

    shape: ModelShape
    num_layers: int
    device: DeviceSpec
    engine: EngineSpec
    network: Optional[NetworkSpec] = None
    attention_mode: str = DEFAULT_ATTENTION
    interpolation: float = DEFAULT_INTERPOLATION
    lm_head: bool = True
    max_tokens: int = 8192
    # memoised pure terms; not an init field, so dataclasses.replace gives the copy a memo of its own
    _memo: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    # --- per-token tables: everything in a layer that depends only on the step's token count ----
    @cached_property
    def groups(self) -> tuple[tuple[LayerKind, int], ...]:
        """(layer kind, layers of that kind); their counts sum to ``num_layers``."""
        groups = self.shape.layer_groups(self.num_layers)
        if sum(count for _, count in groups) != self.num_layers:
            raise ValueError(f"layer groups {[(k.label, n) for k, n in groups]} do not add up to {self.num_layers} layers")
        return groups

    def _linear(self, kind: LayerKind, tokens: np.ndarray) -> tuple[np.ndarray, int]:
        """Per layer of ``kind``, at each token count: the kernels whose time depends on the count
        alone, and how many kernels they are."""
        return layer_linear_ms(kind, tokens, self.shape, self.device)

    def _outside_ms(self, tokens: np.ndarray) -> np.ndarray:
        """Embedding gather and final norm, at each token count."""
        dev, h = self.device, self.shape.embedding_dim
        t = np.maximum(np.asarray(tokens, dtype=float), 1)
        return roofline.streaming_ms(t * 2 * h * roofline.BYTES, dev.constants.add_eff, dev) + roofline.rmsnorm_ms(t, h, dev)

    @cached_property
    def _tables(self) -> dict:
        tokens = np.arange(0, self.max_tokens + 1)
        tables = {"outside": self._outside_ms(tokens)}
        for kind, _ in self.groups:
            tables[kind], self._memo[("kernels", kind)] = self._linear(kind, tokens)
        return tables

    def _per_token(self, table, tokens: int) -> float:
        """One per-token table's value at ``tokens``: ``table`` is "outside" or a layer kind
        (beyond the table: computed once, kept)."""
        if tokens <= self.max_tokens:
            return float(self._tables[table][tokens])
        key = (table, tokens)
        if key not in self._memo:
            if table == "outside":
                self._memo[key] = float(self._outside_ms(np.array([tokens]))[0])
            else:
                self._memo[key] = float(self._linear(table, np.array([tokens]))[0][0])
        return self._memo[key]

    def layer_kernels(self, kind: LayerKind) -> int:
        """Kernels a layer of ``kind`` launches outside attention and the all-reduces."""
        key = ("kernels", kind)
        if key not in self._memo:
            self._memo[key] = self._linear(kind, np.array([1]))[1]
        return self._memo[key]

    def all_reduce_ms(self, tokens: int) -> float:
        """One layer's two all-reduces of the step's activations (0 at TP 1)."""
        tp = self.shape.tensor_parallel
        if tp == 1 or self.network is None:
            return 0.0
        size = tokens * self.shape.embedding_dim * roofline.BYTES
        engine, net = self.engine, self.network
        return ALL_REDUCES_PER_LAYER * collectives.all_reduce_ms(
            size, tp, net, engine.custom_all_reduce_limit(tp, per_tp=net.has_symm_mem), engine.symm_mem_limit(tp), engine.symm_mem_multimem_tp,
        )

    def collectives_ms(self, kind: LayerKind, tokens: int) -> tuple[float, int]:
        """One layer's collectives and how many: the TP group's two all-reduces, or for an MoE
        layer with data-parallel ranks (TP 1) the experts' all-gather and reduce-scatter over the
        ranks (:func:`simulator.profiles.collectives.moe_dispatch_combine_ms`)."""
        moe = self.shape.moe
        if kind.ffn == "moe" and moe is not None and moe.data_parallel > 1 and self.network is not None:
            key = ("dispatch", tokens)
            if key not in self._memo:
                self._memo[key] = collectives.moe_dispatch_combine_ms(tokens, self.shape.embedding_dim, moe.data_parallel, self.network)
            return self._memo[key], 2
        ms = self.all_reduce_ms(tokens)
        return ms, ALL_REDUCES_PER_LAYER if ms else 0

    def logits_ms(self, tokens: int) -> float:
        """LM head and sampler on ``tokens`` logits rows, and the gather of vocabulary shards."""
        if tokens <= 0 or not self.lm_head:
            return 0.0
        key = ("logits", tokens)
        if key not in self._memo:
            shape, dev = self.shape, self.device
            ms = float(roofline.lm_head_ms(tokens, shape, dev)) + float(roofline.sampler_ms(tokens, shape, dev))
            if shape.tensor_parallel > 1 and self.network is not None:
                ms += collectives.all_gather_ms(tokens * shape.vocab_size * roofline.BYTES, shape.tensor_parallel, self.network)
            self._memo[key] = ms
        return self._memo[key]

    # --- one forward ----------------------------------------------------------------------------
    def mode_and_padding(self, tokens: int, uniform_decode: bool) -> tuple[str, int]:
        """How the engine issues a forward of ``tokens`` and the token count it runs at."""
        mode = self.engine.mode(tokens, uniform_decode)
        return mode, tokens if mode == "eager" else self.engine.padded(tokens, uniform_decode if mode == "full" else False)

    @cached_property
    def decode_ms(self):
        """The attention backend's decode kernel, (batch, mean KV) -> ms, memoised: a pure function
        of its two numbers for this shape and device, asked once per layer kind per step."""
        return lru_cache(maxsize=None)(decode_lookup(self.shape, self.device))

    def attention_ms(self, rows: AttentionRows, kind: LayerKind) -> float:
        """One layer of ``kind``'s attention over ``rows`` under the run's verify assumption."""
        return attention_ms(rows, self.shape, self.device, self.attention_mode, self.interpolation, kind, self.decode_ms)

    def _fixed_terms(self, kind: LayerKind, padded: int, mode: str) -> tuple[float, float, float, float]:
        """What one layer of ``kind`` costs whatever the step's attention rows: (linear, all-reduce,
        gaps, CPU time) at ``padded`` tokens issued in ``mode``."""
        engine = self.engine
        linear = self._per_token(kind, padded)
        all_reduce, reduces = self.collectives_ms(kind, padded)
        layer_kernels = self.layer_kernels(kind)
        gap_us = engine.stream_kernel_gap_us if mode == "eager" else engine.graph_kernel_gap_us
        gaps = (layer_kernels + ATTENTION_KERNELS + reduces) * gap_us * 1e-3
        if mode == "full":
            cpu = 0.0
        elif mode == "piecewise":
            cpu = (engine.cpu_graph_launch_us + engine.cpu_attention_call_us) * 1e-3
        else:
            cpu = ((layer_kernels + reduces) * engine.cpu_kernel_launch_us + engine.cpu_attention_call_us) * 1e-3
        return linear, all_reduce, gaps, cpu

    def _step_shape(self, tokens: int, uniform_decode: bool) -> tuple:
        """Everything of a forward that its token count and graph condition fix, memoised (a run
        asks for a few thousand distinct ones, each many times): (mode, padded tokens, outside
        the layers, and per layer group (kind, count, its fixed terms))."""
        key = ("step", tokens, "uniform" if uniform_decode is True else uniform_decode)  # True == 1 as a key: keep them apart
        found = self._memo.get(key)
        if found is None:
            mode, padded = self.mode_and_padding(tokens, uniform_decode)
            groups = tuple((kind, count, self._fixed_terms(kind, padded, mode)) for kind, count in self.groups)
            found = self._memo[key] = (mode, padded, self._per_token("outside", padded), groups)
        return found

    @staticmethod
    def _layer_terms(fixed: tuple[float, float, float, float], attention: float) -> tuple[float, float, float, float, float]:
        """A layer's (linear, attention, all-reduce, gaps, CPU-bound) ms: it takes the longer of its
        GPU time and the CPU time that feeds it."""
        linear, all_reduce, gaps, cpu = fixed
        gpu = linear + attention + all_reduce + gaps
        return linear, attention, all_reduce, gaps, max(0.0, cpu - gpu)

    def layer_cost(self, kind: LayerKind, rows: AttentionRows, padded: int, mode: str) -> LayerCost:
        """One layer of ``kind`` in a forward issued in ``mode`` at ``padded`` tokens (from
        :meth:`mode_and_padding`): its kernels, its attention over ``rows``, its all-reduces, the
        GPU's gaps between its kernels and what it waits on the CPU."""
        return LayerCost(*self._layer_terms(self._fixed_terms(kind, padded, mode), self.attention_ms(rows, kind)))

    def forward(self, rows: AttentionRows, tokens: int, logits_tokens: int, uniform_decode: bool) -> StepCost:
        """The forward over ``rows`` (``tokens`` computed tokens in all), then logits for
        ``logits_tokens`` rows: each group of layers costs its count times one of its layers
        (:meth:`layer_cost`; groups that attend alike share one attention cost)."""
        mode, padded, outside, groups = self._step_shape(tokens, uniform_decode)
        linear = attention = all_reduce = gaps = cpu_bound = 0.0
        attention_by_kind = {}
        for kind, count, fixed in groups:
            seen = (kind.attention, kind.window)
            if seen not in attention_by_kind:
                attention_by_kind[seen] = self.attention_ms(rows, kind)
            layer = self._layer_terms(fixed, attention_by_kind[seen])
            linear += count * layer[0]
            attention += count * layer[1]
            all_reduce += count * layer[2]
            gaps += count * layer[3]
            cpu_bound += count * layer[4]
        return StepCost(mode, padded, linear, attention, all_reduce, gaps, cpu_bound, outside, self.logits_ms(logits_tokens))
