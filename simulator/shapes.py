"""A model's shape as the cost model sees it: the one type the catalog and the profiles share.

It sits apart from both so that neither imports the other for it: the catalog describes models
to Vidur, the profiles cost their kernels, and both speak of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


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
        """Width of one worker's fused QKV projection."""
        return (self.q_heads_per_worker + 2 * self.kv_heads_per_worker) * self.head_dim

    @property
    def gqa_group(self) -> int:
        return self.q_heads_per_worker // self.kv_heads_per_worker

    def sharded(self, tensor_parallel: int) -> "ModelShape":
        return replace(self, tensor_parallel=tensor_parallel)
