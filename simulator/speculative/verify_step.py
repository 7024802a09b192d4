"""One request's row in one speculative step: the whole plan as a pure function.

The scheduler asks :func:`plan_verify_row` once per decode row and does what it says; there is
no other place where k', KV slots, acceptance or progress are decided.

* k' = min(k, remaining output - 1, budget left - 1): never past the request's last output
  token (the step emits up to k' + 1), never past the step's token budget (the row computes
  k' + 1 tokens); 0 when the proposer produced no draft this step (an n-gram miss).
  With no budget left the row waits for the next step (Sarathi's rule), and the plan is None.
* KV slots: Vidur counts the token fed this step as processed already, so a plain decode
  needs ``processed`` slots; a verify step also writes its k' proposals, and draft-model or
  EAGLE proposers write ``lookahead`` more (vLLM's ``num_lookahead_tokens`` = k for them,
  0 for n-gram).
* accepted = min(accepted prefix of the draw, k'); progress = accepted + 1 (the bonus or
  corrected token), which is what the request advances by.  Cost follows ``computed``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from simulator.speculative.acceptance import Draw


class VerifyRow(NamedTuple):
    proposals: int  # k' proposed tokens verified this step
    computed: int  # tokens the target computes for the row: k' + 1
    kv_slots: int  # KV token slots the request must hold once this step has written
    accepted: int  # accepted proposals, 0..k'
    progress: int  # tokens the request advances by: accepted + 1


def plan_verify_row(
    *,
    k: int,
    processed_tokens: int,
    remaining_output: int,
    budget_left: int,
    lookahead: int,
    draw: Draw,
) -> Optional[VerifyRow]:
    """The plan for one decode row, or None when the step has no budget left for it."""
    if budget_left <= 0:
        return None
    proposals = max(0, min(k, remaining_output - 1, budget_left - 1)) if draw.drafted else 0
    accepted = min(draw.lead, proposals)
    return VerifyRow(
        proposals=proposals,
        computed=proposals + 1,
        kv_slots=processed_tokens + proposals + lookahead,
        accepted=accepted,
        progress=accepted + 1,
    )


def lookahead_slots(proposer: str, k: int) -> int:
    """vLLM's ``num_lookahead_tokens``: draft-model and EAGLE proposers write their next draft's
    KV ahead of verification; n-gram proposers keep no KV."""
    return 0 if proposer == "ngram" else k
