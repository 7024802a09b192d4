"""GPU memory: how much KV cache is left for the target once weights (and a draft) are resident.

Follows Vidur's MemoryPlanner for the target: usable = total x (1 - margin) - the target's weight
bytes (embeddings and LM head excluded, as Vidur does; 2 bytes per parameter for a 16-bit model).  A draft model adds its weights
(including embedding and LM head, most of a small draft's size) and needs its own KV for every
cached token, so each token slot costs target + draft KV bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES = 2


@dataclass(frozen=True)
class ModelMemory:
    """One GPU's share of a model: its weights, and the cache it keeps.

    ``kv_bytes_per_token``: the layers that keep every token of a request (full attention, MLA);
    ``window_kv``: (bytes per token, window) of each group of sliding-window layers, which keep
    at most ``window`` tokens of a request; ``state_bytes_per_request``: the linear-attention
    layers' constant-size state, one per request."""

    weight_bytes: int
    kv_bytes_per_token: int
    window_kv: tuple[tuple[int, int], ...] = ()
    state_bytes_per_request: int = 0

    def bytes_per_token(self, request_tokens: int) -> float:
        """Cache bytes per token of a ``request_tokens``-token request: every token's full-attention
        KV, a window layer's KV for min(tokens, window) of them and the linear layers' state,
        spread over the request's tokens."""
        n = request_tokens
        windowed = sum(per_token * min(n, window) for per_token, window in self.window_kv)
        return self.kv_bytes_per_token + (windowed + self.state_bytes_per_request) / n


def kv_capacity_tokens(
    memory_bytes: float, margin_fraction: float, target: ModelMemory, draft: ModelMemory | None, request_tokens: int | None = None
) -> int:
    """Token slots that fit in the KV cache (target's and, if any, the draft's for each slot).

    A slot costs the full-attention layers' bytes per token; for a model with sliding-window or
    linear-attention layers it also carries its share of those layers' cache for a request of
    ``request_tokens`` (the workload's longest: Vidur's planner sizes the cache in whole
    requests of that length)."""
    usable = memory_bytes * (1 - margin_fraction) - target.weight_bytes
    n = request_tokens or 1
    per_token = target.bytes_per_token(n) if request_tokens else target.kv_bytes_per_token
    if draft is not None:
        usable -= draft.weight_bytes
        per_token += draft.bytes_per_token(n) if request_tokens else draft.kv_bytes_per_token
    return int(usable // per_token) if usable > 0 else 0


def kv_blocks(capacity_tokens: int, max_request_tokens: int, block_size: int) -> int:
    """Vidur's rule: whole maximum-length request slots, each of the blocks such a request needs."""
    slots = capacity_tokens // max_request_tokens
    return -(-max_request_tokens // block_size) * slots
