"""GPU memory: how much KV cache is left for the target once weights (and a draft) are resident.

Follows Vidur's MemoryPlanner for the target: usable = total x (1 - margin) - 2 bytes x target
parameters (embeddings and LM head excluded, as Vidur does).  A draft model adds its weights
(including embedding and LM head, most of a small draft's size) and needs its own KV for every
cached token, so each token slot costs target + draft KV bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES = 2


@dataclass(frozen=True)
class ModelMemory:
    weight_bytes: int
    kv_bytes_per_token: int


def kv_capacity_tokens(memory_bytes: float, margin_fraction: float, target: ModelMemory, draft: ModelMemory | None) -> int:
    """Token slots that fit in the KV cache (target's and, if any, the draft's for each slot)."""
    usable = memory_bytes * (1 - margin_fraction) - target.weight_bytes
    per_token = target.kv_bytes_per_token
    if draft is not None:
        usable -= draft.weight_bytes
        per_token += draft.kv_bytes_per_token
    return int(usable // per_token) if usable > 0 else 0


def kv_blocks(capacity_tokens: int, max_request_tokens: int, block_size: int) -> int:
    """Vidur's rule: whole maximum-length request slots, each of the blocks such a request needs."""
    slots = capacity_tokens // max_request_tokens
    return -(-max_request_tokens // block_size) * slots
