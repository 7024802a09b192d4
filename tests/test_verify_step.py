"""The one verify-step plan: k', KV slots, acceptance and progress from one pure function."""

import numpy as np
import pytest

from simulator.speculative.acceptance import AcceptanceSampler, Draw
from simulator.speculative.verify_step import lookahead_slots, plan_verify_row

ALL = Draw(lead=8, drafted=True)  # every proposal would be accepted


def plan(draw=ALL, k=4, processed=100, remaining=50, budget=512, lookahead=0):
    return plan_verify_row(k=k, processed_tokens=processed, remaining_output=remaining, budget_left=budget, lookahead=lookahead, draw=draw)


def test_k_prime_never_passes_the_last_token_or_the_budget():
    assert plan().proposals == 4
    assert plan(remaining=3).proposals == 2  # emits at most k' + 1 = 3 tokens
    assert plan(remaining=1).proposals == 0  # the last token: plain decode
    assert plan(budget=3).proposals == 2  # k' + 1 = 3 computed tokens fit the budget
    assert plan(budget=1).proposals == 0
    assert plan(budget=0) is None  # waits for the next step


def test_cost_and_progress_are_different_quantities():
    row = plan(draw=Draw(lead=1, drafted=True))
    assert (row.computed, row.accepted, row.progress) == (5, 1, 2)
    row = plan(draw=Draw(lead=0, drafted=True))
    assert (row.computed, row.accepted, row.progress) == (5, 0, 1)
    assert plan(draw=Draw(lead=3, drafted=True), remaining=3).accepted == 2  # never more than k'


def test_no_draft_this_step_is_a_plain_decode():
    row = plan(draw=Draw(lead=4, drafted=False))
    assert (row.proposals, row.computed, row.accepted, row.progress, row.kv_slots) == (0, 1, 0, 1, 100)


def test_kv_slots_are_what_vllm_allocates():
    # Vidur counts the token fed this step as processed: a plain decode holds `processed` slots,
    # a verify step adds its k' proposals, and draft/EAGLE proposers add k lookahead slots.
    assert plan(k=4, lookahead=lookahead_slots("ngram", 4)).kv_slots == 104
    assert plan(k=4, lookahead=lookahead_slots("draft", 4)).kv_slots == 108
    assert plan(k=4, lookahead=lookahead_slots("eagle", 4)).kv_slots == 108
    assert plan(k=4, remaining=2, lookahead=0).kv_slots == 101


def test_draws_are_keyed_by_output_position_not_by_step():
    # Two runs that reach output position 37 after different step histories read the same draw.
    a = AcceptanceSampler([0.7] * 4, seed=5)
    b = AcceptanceSampler([0.7] * 4, seed=5)
    _ = [b.draw(3, pos) for pos in range(0, 37, 3)]  # b walked a different path first
    assert a.draw(3, 37) == b.draw(3, 37)
    assert a.draw(3, 37, expected_positions=10) == a.draw(3, 37)  # table size does not matter


def test_proposal_probability_sets_the_draft_share_without_moving_acceptance():
    full = AcceptanceSampler([0.6] * 3, seed=2, proposal_probability=1.0)
    sparse = AcceptanceSampler([0.6] * 3, seed=2, proposal_probability=0.3)
    draws = [(full.draw(r, p), sparse.draw(r, p)) for r in range(50) for p in range(200)]
    assert all(f.drafted for f, _ in draws)
    assert np.mean([s.drafted for _, s in draws]) == pytest.approx(0.3, abs=0.02)
    assert all(f.lead == s.lead for f, s in draws)  # acceptance draws are common to both runs
