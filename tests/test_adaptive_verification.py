"""Adaptive verification (vLLM 0.30's enable_adaptive_verification): the start-up tables, the
per-step budget and the trimmed step, at hand-worked points; then a run that uses it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from simulator.speculative.adaptive_verification import VerifyBudget, admit, cost_table, profile_rows, profile_token_counts
from simulator.speculative.step import StepPlan, trim_to_budget
from simulator.util.errors import ConfigError


def test_profiled_token_counts_are_the_capture_sizes_then_1_5x_and_doublings():
    # largest capture 8: 8 * 1.5 = 12, then 16 and 32 -> capped at 20
    assert profile_token_counts([1, 2, 4, 8], 20) == (1, 2, 4, 8, 12, 16, 20)
    assert profile_token_counts([1, 2, 4, 8], 8) == (1, 2, 4, 8)
    assert profile_token_counts([], 64) == ()


def test_profiling_requests_share_the_tokens_up_to_max_num_reqs():
    assert profile_rows(10, 4) == [3, 3, 2, 2]
    assert profile_rows(3, 8) == [1, 1, 1]


def test_cost_table_pads_below_the_capture_limit_and_interpolates_above_it():
    curve = [(1, 1.0), (4, 2.0), (8, 3.0), (12, 4.0), (16, 5.0)]
    table = cost_table(curve, 20, capture_limit=8)
    # at or below 8 a count pays the next profiled point at or above it
    assert list(table[:9]) == [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]
    # above 8: a line between the points above the limit only (12 and 16), none blended with 8
    assert table[9] == pytest.approx(4.0) and table[12] == pytest.approx(4.0) and table[14] == pytest.approx(4.5)
    # past 16: the last segment's slope, 0.25 ms a token
    assert list(table[17:]) == pytest.approx([5.25, 5.5, 5.75, 6.0])


def test_cost_table_takes_the_running_maximum():
    assert list(cost_table([(1, 2.0), (2, 1.0), (4, 3.0)], 4, capture_limit=4)) == [2.0, 2.0, 2.0, 3.0, 3.0]


def _budget(confidences=(0.9, 0.5)) -> VerifyBudget:
    # drafter 1 ms whatever the batch; forward 1 ms + 0.5 ms a token
    return VerifyBudget(np.ones(9), 1.0 + 0.5 * np.arange(65), tuple(confidences))


def test_budget_maximises_expected_tokens_per_millisecond():
    # two requests at depth 2, scores 0.9, 0.45 each; 2 sampling rows, 2 non-draft tokens.
    # B:        0     1     2     3     4
    # tokens:   2    2.9   3.8   4.25  4.7
    # ms:       3    3.5    4    4.5    5     -> tokens / ms peaks at B = 2 (0.95)
    budget = _budget()
    scores = np.concatenate([budget.survival(first_step=False)] * 2)
    assert budget.budget(scores, sampling=2, non_draft_tokens=2, requests=2) == 2


def test_budget_verifies_everything_when_the_tokens_are_free():
    flat = VerifyBudget(np.ones(9), np.ones(65), (0.9, 0.5))
    scores = np.concatenate([flat.survival(first_step=False)] * 2)
    assert flat.budget(scores, sampling=2, non_draft_tokens=2, requests=2) == 4


def test_admit_takes_the_best_slots_as_prefixes_and_breaks_ties_by_request():
    rows = [np.array([0.9, 0.45]), np.array([0.9, 0.45])]
    assert admit(rows, 2) == [1, 1]
    assert admit(rows, 3) == [2, 1]
    assert admit(rows, 0) == [0, 0]
    assert admit([np.array([0.9, 0.45]), np.array([1.0, 1.0])], 3) == [1, 2]


def _request(first_step: bool):
    return SimpleNamespace(acceptance_log=[] if first_step else [(2, 1)], is_prefill_complete=True, num_processed_tokens=100, num_prefill_tokens=50)


def test_trimmed_step_verifies_a_prefix_and_advances_by_what_it_verified():
    requests = [_request(False), _request(False)]
    plan = StepPlan(requests, computed=[3, 3], kv_tokens=[103, 103], decode=[True, True], proposals=[2, 2], accepted=[2, 0], progress=[3, 1])
    trimmed = trim_to_budget(plan, _budget())
    assert trimmed.proposals == [1, 1]
    assert trimmed.computed == [2, 2]
    assert trimmed.kv_tokens == [102, 102]
    assert trimmed.accepted == [1, 0]
    assert trimmed.progress == [2, 1]


def test_a_request_on_its_first_verify_step_scores_every_slot_one():
    # request 0 has verified before (scores 0.9, 0.45), request 1 not (1.0, 1.0):
    # B:      0    1    2    3     4
    # tokens: 2    3    4   4.9   5.35
    # ms:     3   3.5   4   4.5    5    -> B = 3: request 1 verifies both, request 0 one
    plan = StepPlan([_request(False), _request(True)], [3, 3], [103, 103], [True, True], [2, 2], [2, 2], [3, 3])
    trimmed = trim_to_budget(plan, _budget())
    assert trimmed.proposals == [1, 2]
    assert trimmed.progress == [2, 3]


def test_a_step_without_drafts_is_left_alone():
    plan = StepPlan([_request(False)], [1], [101], [True], [0], [0], [1])
    assert trim_to_budget(plan, _budget()) is plan


# --- a run -------------------------------------------------------------------------------------
from simulator.runs.config import RunConfig  # noqa: E402
from simulator.runs.speculation import SpeculationConfig  # noqa: E402
from simulator.runs.workload_kinds import ClosedLoopWorkload  # noqa: E402

EAGLE3 = dict(proposer="eagle3", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")


def _config(concurrency: int, adaptive: bool, engine: str = "vllm-0.30.0", **speculation) -> RunConfig:
    spec = SpeculationConfig(num_speculative_tokens=3, acceptance_per_position=(0.8, 0.6, 0.5), adaptive_verification=adaptive, **(EAGLE3 | speculation))
    return RunConfig(
        workload=ClosedLoopWorkload.fixed(concurrency, 2 * concurrency, 256, 64), speculation=spec,
        model="meta-llama/Llama-3.1-8B-Instruct", device="h100", engine=engine, batch_size_cap=64,
    )


@pytest.mark.simulation
def test_a_run_under_adaptive_verification_trims_verify_rows_and_keeps_every_token():
    from simulator import run

    plain, adaptive = run(_config(16, False)), run(_config(16, True))
    verified = [n for log in adaptive.acceptance_logs.values() for n, _ in log]
    assert min(verified) < 3, "the budget never cut a row at 16 in flight"
    assert all(0 <= accepted <= n for log in adaptive.acceptance_logs.values() for n, accepted in log)
    # cost and progress differ, output does not: every request still emits all its tokens
    assert adaptive.summary.total_output_tokens == plain.summary.total_output_tokens
    assert adaptive.summary.mean_acceptance_length < plain.summary.mean_acceptance_length


@pytest.mark.simulation
def test_a_budget_that_never_cuts_runs_the_plain_step(monkeypatch):
    from simulator import run
    from simulator.speculative import adaptive_verification

    monkeypatch.setattr(adaptive_verification.VerifyBudget, "budget", lambda self, scores, **_: len(scores))
    plain, adaptive = run(_config(8, False)), run(_config(8, True))
    assert adaptive.acceptance_logs == plain.acceptance_logs
    assert adaptive.summary.forward_passes == plain.summary.forward_passes
    # the one difference: Model Runner V2's drafter drafts the full k also where a request's last
    # tokens verify fewer (a fixed-k run drafts what it verifies), so it costs at least as much
    assert plain.summary.tpot_mean_s <= adaptive.summary.tpot_mean_s < 1.01 * plain.summary.tpot_mean_s


@pytest.mark.simulation
def test_a_budget_of_nothing_verifies_no_draft_but_still_drafts(monkeypatch):
    from simulator import run
    from simulator.speculative import adaptive_verification

    monkeypatch.setattr(adaptive_verification.VerifyBudget, "budget", lambda self, scores, **_: 0)
    result = run(_config(4, True))
    assert result.summary.accepted_tokens == 0 and result.summary.proposed_tokens == 0
    baseline = run(replace(_config(4, False), speculation=SpeculationConfig()))
    # every step pays the drafter's full k on top of a plain step
    assert result.summary.tpot_mean_s > baseline.summary.tpot_mean_s


@pytest.mark.parametrize("change, message", [
    (dict(engine="vllm-0.24.0"), "has no enable_adaptive_verification"),
    (dict(proposer="ngram", draft_model=None), "V1 model runner"),
])
def test_refused_where_vllm_has_no_adaptive_verification(change, message):
    from simulator.engine.resolve import resolve_run

    engine = change.pop("engine", "vllm-0.30.0")
    with pytest.raises(ConfigError, match=message):
        resolve_run(_config(4, True, engine=engine, **change))


def test_refused_with_a_k_schedule():
    with pytest.raises(ConfigError, match="adaptive_verification"):
        SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.7, adaptive_verification=True, k_schedule=((1, 64, 3),), **EAGLE3)


# --- the command line --------------------------------------------------------------------------
def _parse_config(*argv):
    from simulator.cli import simulate as cli

    return cli.config_from_args(cli.build_parser().parse_args(list(argv)))[0]


def test_the_speculative_config_key_and_the_flag_set_the_same_run():
    from simulator.cli import simulate as cli

    common = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100", "--acceptance-per-position", "0.8,0.6,0.5"]
    eagle = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}
    by_key = _parse_config(*common, "--speculative-config", json.dumps(eagle | {"enable_adaptive_verification": True}))
    by_flag = _parse_config(*common, "--speculative-config", json.dumps(eagle), "--adaptive-verification")
    assert by_key == by_flag and by_key.speculation.adaptive_verification
    # the printed serve line carries the key back, as vllm serve takes it
    inputs = cli.inputs_from_args(cli.build_parser().parse_args(common + ["--speculative-config", json.dumps(eagle), "--adaptive-verification"]))
    assert '"enable_adaptive_verification":true' in cli.serve_command(inputs)


@pytest.mark.parametrize("argv, message", [
    (["--adaptive-verification"], "--adaptive-verification without speculation"),
    (["--speculative-config", '{"method":"ngram","num_speculative_tokens":3,"enable_adaptive_verification":"yes"}', "--acceptance", "0.5"],
     "enable_adaptive_verification = \"yes\" must be true or false"),
])
def test_bad_adaptive_verification_input_is_refused_naming_it(argv, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _parse_config(*argv)


def test_paysoff_refuses_the_key_it_decides_itself(capsys):
    from simulator.paysoff import command as paysoff

    code = paysoff.main(["--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100", "--acceptance", "0.7", "--speculative-config",
                         '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3,"enable_adaptive_verification":true}'])
    assert code == 2
    assert "enable_adaptive_verification" in capsys.readouterr().err


@pytest.mark.parametrize("extra, says", [
    (["--vllm-version", "0.24.0"], "--adaptive-verification: vLLM 0.24.0 has no enable_adaptive_verification"),
    (["--k-schedule", "[[1,1024,3]]"], "--adaptive-verification with a --k-schedule"),
])
def test_the_command_exits_2_with_one_line_naming_the_flag(extra, says, capsys):
    from simulator.cli import simulate as cli

    argv = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100", "--proposer", "eagle3", "--draft-model",
            "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "--acceptance", "0.7", "--adaptive-verification", "--num-prompts", "4"]
    argv += [] if "--k-schedule" in extra else ["-k", "3"]
    assert cli.main(argv + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]
