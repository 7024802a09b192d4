"""Each proposer kind owns its cost knobs (issue 34 item 3): the n-gram lookup's host time is the
n-gram kind's, a draft pass's fixed time belongs to every kind that runs a draft network, and a
run stores them under the same flat keys whichever kind owns them."""

from dataclasses import fields

import pytest

from simulator.runs.deployment import Deployment, Speculation
from simulator.runs.speculation import SpeculationConfig
from simulator.speculative import proposers
from simulator.speculative.acceptance_convert import AcceptanceInput
from simulator.speculative.proposers.base import DraftPassOptions, NoOptions, SpeculationSettings
from simulator.speculative.proposers.ngram import LookupOptions
from simulator.speculative.step import StepPlan
from simulator.util.errors import ConfigError


def _knobs(kind) -> set:
    return {f.name for f in fields(kind.Options)}


def test_a_draft_pass_knob_exactly_where_a_network_runs():
    """The engine adds the per-pass cost only when a draft network runs, so exactly those kinds own it."""
    for kind in proposers.KINDS:
        assert ("draft_pass_overhead_ms" in _knobs(kind)) == kind.runs_network, kind.name


def test_only_the_cpu_lookup_owns_the_lookup_time():
    owners = [kind.name for kind in proposers.KINDS if "ngram_overhead_ms" in _knobs(kind)]
    assert owners == ["ngram"]
    assert proposers.kind("suffix").Options is NoOptions


def _step(proposals: int) -> StepPlan:
    """One decode row proposing ``proposals`` tokens (none accepted)."""
    return StepPlan(requests=(0,), computed=[1 + proposals], kv_tokens=[11 + proposals], decode=[True], proposals=[proposals], accepted=[0], progress=[1])


def test_the_lookup_time_is_paid_at_steps_that_propose():
    """0.25 ms of lookup per proposing step: 0.25e-3 s host time; a step without proposals pays none."""
    kind = proposers.kind("ngram")
    cost = kind.step_cost(SpeculationSettings(k=3, options=kind.resolve_options({}), costs=LookupOptions(ngram_overhead_ms=0.25)))
    assert cost.work(_step(3)).host_seconds == pytest.approx(0.25e-3)
    assert cost.work(_step(0)).host_seconds == 0.0


def test_the_run_gives_its_kind_the_knobs_it_owns():
    lookup = SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.5, ngram_overhead_ms=0.3, draft_pass_overhead_ms=0.9)
    assert lookup.costs == LookupOptions(ngram_overhead_ms=0.3)
    head = SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.5, proposer="eagle3", draft_model="x", draft_pass_overhead_ms=0.9)
    assert head.costs == DraftPassOptions(draft_pass_overhead_ms=0.9)


def test_a_deployment_refuses_another_kinds_knobs():
    with pytest.raises(ConfigError, match=r"proposer 'eagle3' takes DraftPassOptions"):
        Deployment(speculation=Speculation(proposer="eagle3", k=2, acceptance=AcceptanceInput.given(rate=0.5), draft_model="x",
                                           costs=LookupOptions(ngram_overhead_ms=0.2))).run()


def test_a_deployment_stores_a_knob_under_the_runs_key():
    """0.2 ms of lookup time: the run's ngram_overhead_ms; the draft-pass key keeps its default (the
    n-gram kind runs no network)."""
    given = Deployment(speculation=Speculation(proposer="ngram", k=2, acceptance=AcceptanceInput.given(rate=0.5), costs=LookupOptions(0.2)))
    data, default = given.to_dict(), Deployment().to_dict()
    assert data["ngram_overhead_ms"] == 0.2
    assert data["draft_pass_overhead_ms"] == default["draft_pass_overhead_ms"]
    assert data["options"] == ()  # the knobs are not --speculative-config options


@pytest.mark.parametrize("options, name", [(LookupOptions, "ngram_overhead_ms"), (DraftPassOptions, "draft_pass_overhead_ms")])
@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf"), True])
def test_a_knob_refuses_what_is_not_a_time(options, name, value):
    with pytest.raises(ConfigError, match=rf"^{name} = .*: must be a finite number of milliseconds >= 0$"):
        options(**{name: value})
