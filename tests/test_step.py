"""The one step module: k', KV slots, acceptance and progress from one pure function, and the
step's plan every consumer reads."""

from types import SimpleNamespace

import numpy as np
import pytest

from simulator.speculative import proposers
from simulator.speculative.acceptance import AcceptanceSampler, Draw
from simulator.speculative.step import StepPlanner, TreeShape, plan_row

ALL = Draw(lead=8, length=8)  # every proposal would be accepted


def plan(draw=ALL, k=4, processed=100, remaining=50, budget=512, lookahead=0, tree=None):
    return plan_row(k=k, processed_tokens=processed, remaining_output=remaining, budget_left=budget, lookahead=lookahead, draw=draw, tree=tree)


def test_k_prime_never_passes_the_last_token_or_the_budget():
    assert plan().proposals == 4
    assert plan(remaining=3).proposals == 2  # emits at most k' + 1 = 3 tokens
    assert plan(remaining=1).proposals == 0  # the last token: plain decode
    assert plan(budget=3).proposals == 2  # k' + 1 = 3 computed tokens fit the budget
    assert plan(budget=1).proposals == 0
    assert plan(budget=0) is None  # waits for the next step


def test_cost_and_progress_are_different_quantities():
    row = plan(draw=Draw(lead=1, length=8))
    assert (row.computed, row.accepted, row.progress) == (5, 1, 2)
    row = plan(draw=Draw(lead=0, length=8))
    assert (row.computed, row.accepted, row.progress) == (5, 0, 1)
    assert plan(draw=Draw(lead=3, length=8), remaining=3).accepted == 2  # never more than k'


def test_no_draft_this_step_is_a_plain_decode():
    row = plan(draw=Draw(lead=4, length=0))
    assert (row.proposals, row.computed, row.accepted, row.progress, row.kv_slots) == (0, 1, 0, 1, 100)


def test_kv_slots_are_what_vllm_allocates():
    # Vidur counts the token fed this step as processed: a plain decode holds `processed` slots,
    # a verify step adds its k' proposals, and draft/EAGLE proposers add k lookahead slots.
    assert plan(k=4, lookahead=proposers.kind("ngram").lookahead_slots(4)).kv_slots == 104
    assert plan(k=4, lookahead=proposers.kind("draft").lookahead_slots(4)).kv_slots == 108
    assert plan(k=4, lookahead=proposers.kind("eagle").lookahead_slots(4)).kv_slots == 108
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


def test_an_offered_length_below_k_caps_the_proposals():
    assert plan(draw=Draw(lead=8, length=2)).proposals == 2  # suffix decoding offered two tokens
    assert plan(draw=Draw(lead=1, length=2)).accepted == 1


def test_a_tree_verifies_its_nodes_and_accepts_no_deeper_than_its_depth():
    tree = TreeShape(nodes=63, depth=8)
    row = plan(tree=tree, remaining=50)
    assert (row.proposals, row.computed, row.accepted, row.progress) == (63, 64, 8, 9)
    assert plan(tree=tree, budget=10).computed == 10  # pruned to the budget
    assert plan(tree=tree, draw=Draw(lead=3, length=8)).progress == 4
    assert plan(tree=tree, remaining=3).accepted == 2  # never past the request's last token
    assert plan(tree=tree, draw=Draw(lead=8, length=0)).computed == 1  # no draft: plain decode


def _request(rid, processed, prompt=64, output=32):
    return SimpleNamespace(id=rid, num_processed_tokens=processed, prompt_tokens=prompt, total_tokens=prompt + output, output_tokens=output,
                           num_prefill_tokens=prompt, is_prefill_complete=processed >= prompt, acceptance_log=[])


def test_the_step_plan_is_what_every_consumer_reads():
    planner = StepPlanner(k=3, sampler=AcceptanceSampler([1.0] * 3, seed=0), lookahead=3, token_budget=512)
    decode, prefill = _request(0, 70), _request(1, 0)
    row = planner.plan_decode_row(decode, num_batch_tokens=0)
    assert (row.proposals, row.computed, row.accepted, row.progress, row.kv_slots) == (3, 4, 3, 4, 76)
    step = planner.finish(([decode, prefill], [row.computed, 64], [74, 64]))
    assert step.decode == [True, False] and step.proposals == [3, 0] and step.progress == [4, 64]
    assert step.num_proposals == 3 and step.max_proposals == 3
    assert step.samples(0) and step.finishes_prefill(1) and step.samples(1)
    assert decode.acceptance_log == [(3, 3)] and prefill.acceptance_log == []
    assert planner.finish(None) is None  # no batch formed: nothing planned carries over


def test_the_context_after_a_step_is_one_rule_for_every_row():
    from simulator.speculative.step import StepPlan

    decode = SimpleNamespace(num_processed_tokens=100, num_prefill_tokens=50)
    finishing = SimpleNamespace(num_processed_tokens=0, num_prefill_tokens=64)  # computes its whole 64-token prompt
    chunk = SimpleNamespace(num_processed_tokens=0, num_prefill_tokens=512)  # computes 64 of 512
    plan = StepPlan([decode, finishing, chunk], computed=[4, 64, 64], kv_tokens=[104, 64, 64], decode=[True, False, False],
                    proposals=[3, 0, 0], accepted=[1, 0, 0], progress=[2, 64, 64])
    # decode: 100 cached before the step + 1 accepted + the bonus token; finishing prefill: its prompt +
    # its first sampled token; a chunk that does not finish: what it has cached
    assert [plan.context_after(i) for i in range(3)] == [102, 65, 64]
    assert [plan.samples(i) for i in range(3)] == [True, True, False]
