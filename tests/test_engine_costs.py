"""Costs outside Vidur's op set held to their declared evidence (data/calibration/engine_costs.toml):
the engine overhead per step, the fixed cost of a draft pass, and the verify-attention default."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.vidur.models import model_shape
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload
from simulator.engine.batch import SpeculativeBatch
from simulator.engine.proposers import ProposerCost, passes_fixed_seconds
from simulator.speculative import proposers
from simulator.speculative.proposers.base import ModelFacts, SpeculationSettings
from simulator.speculative.step import StepPlan
from simulator.util.errors import ConfigError
from simulator.engine import simulation
from simulator.engine.resolve import resolve_run
from simulator.profiling.engine_costs import draft_pass_fixed_ms, read_engine_costs, series_fit, series_lambda, source_draft_step_ms
from simulator.profiles.hardware import get_device
from simulator.vidur.entities import Request
from simulator.vidur.seam import mark_prefill_complete

from repo import DATA_DIR

CALIBRATION = DATA_DIR / "calibration" / "engine_costs.toml"
TARGET = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


@pytest.fixture(scope="module")
def costs():
    return read_engine_costs(CALIBRATION)


# --- the defaults equal what the calibration file declares ------------------------------

def test_engine_overhead_default_is_the_declared_constant(costs):
    # what a run gets when it names none, against the file (the one check of this default)
    assert RunConfig().engine_overhead_ms == costs.overhead_ms
    # the declared value is the source's fit rounded to 0.1 ms, not another number
    assert round(costs.overhead_source_ms, 1) == costs.overhead_ms
    assert costs.overhead_vllm_version == "0.10.1"


def test_draft_pass_default_is_the_declared_derivation(costs):
    d = costs.draft_pass
    assert round(d.derived_ms(), 2) == d.value_ms == SpeculationConfig().draft_pass_overhead_ms
    # the source's drafting step is flat in batch (its fixed term dominates): 2.14-2.29 ms
    assert 2.1 < min(d.source_draft_step_ms) and max(d.source_draft_step_ms) < 2.3


def test_the_draft_pass_constant_worked_by_hand_from_the_file(costs):
    """The declared 0.37 ms, worked by hand from engine_costs.toml's numbers (read here by tomllib,
    not through the loader): SpecDecode-Bench's drafting step c_kv x batch x kv + c_token x (passes + 1)
    + c_fixed at kv 300 and 3 passes, less the modelled passes, shared by the 3 passes, mean over batches."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the tomli backport (pyproject.toml)
        import tomli as tomllib

    raw = tomllib.loads(CALIBRATION.read_text(encoding="utf-8"))["draft_pass"]
    assert raw["passes"] == 3 and raw["kv_cache_size"] == 300 and raw["batch_sizes"] == [1, 8, 16, 32, 64]
    source = [raw["source_c_kv_ms"] * b * 300 + raw["source_c_token_ms"] * 4 + raw["source_c_fixed_ms"] for b in raw["batch_sizes"]]
    # 2.139341, 2.144334, 2.150040, 2.161453, 2.184279 ms: mean 2.155889; modelled 0.924 ... 1.262 ms: mean 1.0394
    by_hand = (sum(source) / 5 - sum(raw["modelled_draft_step_ms"]) / 5) / 3  # (2.155889 - 1.0394) / 3 = 0.372163 ms
    assert by_hand == pytest.approx(0.372163, abs=1e-6)
    assert costs.draft_pass.derived_ms() == pytest.approx(by_hand, rel=1e-12)
    assert round(by_hand, 2) == raw["value_ms"] == 0.37


@pytest.mark.slow
def test_the_declared_modelled_passes_are_what_the_model_gives_now(costs):
    """The derivation subtracts the simulator's own passes; when their costing changes, the
    constant must be derived again (update modelled_draft_step_ms and value_ms together)."""
    d = costs.draft_pass
    spec = SpeculationConfig(num_speculative_tokens=d.passes, acceptance_rate=0.7, proposer="eagle3", draft_model=EAGLE3, draft_pass_overhead_ms=0.0)
    config = RunConfig(workload=ClosedLoopWorkload.fixed(1, 1, 500, 256), model=TARGET, device="h100", speculation=spec)
    proposer = simulation.proposer(resolve_run(config))
    now = [1e3 * proposer.step_seconds(_decode_batch(d.passes, rows=b, kv=d.kv_cache_size)) for b in d.batch_sizes]
    for batch, declared, current in zip(d.batch_sizes, d.modelled_draft_step_ms, now):
        assert current == pytest.approx(declared, rel=0.15), (
            f"batch {batch}: the modelled EAGLE-3 passes now cost {current:.3f} ms, {declared} ms declared; derive [draft_pass] again"
        )


def test_verify_default_equals_the_declared_fit(costs):
    lam = series_lambda(costs.series[costs.default_series])
    spec = SpeculationConfig()
    assert spec.interpolation == round(lam, 2)
    # at lambda 0 interpolated is the lower bound: the default names it as such
    assert spec.attention == ("kv_once" if round(lam, 2) == 0 else "interpolated")


def test_the_two_kernels_disagree_and_the_default_series_fits_its_rows(costs):
    # the prefill-style kernel costs what one query per row does; the decode kernel does not
    prefill = series_fit(costs.series["flashinfer-prefill-kernel"])
    decode = series_fit(costs.series["trtllm-gen-decode-kernel"])
    assert abs(prefill.overall) < 0.05 and prefill.residual_max_pct < 3
    assert 0.3 < decode.overall < 0.8
    # the former default (lambda 0.5) misses the default series' rows by far more than the fit
    points = prefill.points
    at_half = (points.kv_once_ms + 0.5 * (points.per_token_ms - points.kv_once_ms)) / points.measured_ms - 1
    assert at_half.abs().max() > 0.5


# --- pure functions ---------------------------------------------------------------------

def test_draft_pass_fixed_ms_shares_the_unmodelled_time_per_pass():
    assert draft_pass_fixed_ms([2.0], [0.8], 3) == pytest.approx(0.4)
    assert draft_pass_fixed_ms([2.0, 2.0], [0.8, 1.4], 3) == pytest.approx(0.3)  # the mean over settings
    assert draft_pass_fixed_ms([1.0], [1.0], 2) == 0.0
    with pytest.raises(ValueError, match="passes"):
        draft_pass_fixed_ms([1.0], [0.5], 0)
    with pytest.raises(ValueError, match="one of each"):
        draft_pass_fixed_ms([1.0, 2.0], [0.5], 1)


def test_source_draft_step_is_the_sources_formula():
    assert source_draft_step_ms(1e-6, 1e-3, 2.0, batch=4, kv=1000, passes=3) == pytest.approx(4e-3 + 4e-3 + 2.0)


def test_passes_fixed_seconds_is_linear_in_passes():
    assert passes_fixed_seconds(0, 0.37) == 0.0
    assert passes_fixed_seconds(4, 0.25) == pytest.approx(1e-3)
    with pytest.raises(ValueError):
        passes_fixed_seconds(1, -0.1)


def test_series_lambda_is_held_to_the_bounds():
    rows = pd.DataFrame(
        [[1, 512, 1, 0.010], [4, 512, 1, 0.020], [1, 512, 4, 0.030]],  # verify above its upper bound
        columns=["batch_size", "kv_cache_size", "num_query_tokens", "ms"],
    )
    assert series_fit(rows).overall > 1
    assert series_lambda(rows) == 1.0


# --- a draft pass costs more with its fixed cost than without -------------------------

class _FixedPredictor:
    """A head predictor whose every forward pass costs 1 ms, whatever its batch."""

    def pass_seconds(self, batch, logits_rows):
        return 1e-3


def _decode_batch(k: int, rows: int = 2, kv: int = 200) -> SpeculativeBatch:
    """A step of ``rows`` decode rows, each verifying k + 1 tokens over ``kv`` cached ones, all accepted."""
    requests = []
    for _ in range(rows):
        r = Request(arrived_at=0.0, num_prefill_tokens=64, num_decode_tokens=32)
        mark_prefill_complete(r)
        requests.append(r)
    plan = StepPlan(requests, [k + 1] * rows, [kv + k + 1] * rows, [True] * rows, [k] * rows, [k] * rows, [k + 1] * rows)
    return SpeculativeBatch.of_plan(0, plan)


EAGLE3_FACTS = ModelFacts(EAGLE3, "LlamaForCausalLMEagle3", 4096, 32000, 1, drafter="eagle3", fc_inputs=3)


def _cost(name, pass_overhead_ms, draft=None):
    kind = proposers.kind(name)
    model = kind.step_cost(SpeculationSettings(k=4, draft=draft))
    return ProposerCost(model, _FixedPredictor(), model_shape(EAGLE3), 1, get_device("h100"), pass_overhead_ms=pass_overhead_ms)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_each_draft_pass_pays_the_fixed_cost(k):
    batch = _decode_batch(k)
    plain, fixed = _cost("draft", 0.0), _cost("draft", 0.37)
    assert plain.step_seconds(batch) == pytest.approx(k * 1e-3)
    assert fixed.step_seconds(batch) - plain.step_seconds(batch) == pytest.approx(k * 0.37e-3)


@pytest.mark.parametrize("k", [1, 4])
def test_each_eagle_pass_pays_the_fixed_cost(k):
    batch = _decode_batch(k)
    plain, fixed = _cost("eagle3", 0.0, EAGLE3_FACTS), _cost("eagle3", 0.37, EAGLE3_FACTS)
    assert fixed.step_seconds(batch) - plain.step_seconds(batch) == pytest.approx(k * 0.37e-3)
    assert fixed.step_seconds(batch) > plain.step_seconds(batch)


def test_no_proposals_one_catch_up_pass():
    """A step that drafts nothing still runs the drafter's first pass (vLLM >= 0.24,
    llm_base_proposer.py: the K = 0 early return comes after it): one pass, one fixed cost."""
    batch = _decode_batch(0)
    plain, fixed = _cost("draft", 0.0).step_seconds(batch), _cost("draft", 0.37).step_seconds(batch)
    assert plain == pytest.approx(1e-3)  # one pass of the fixed 1 ms predictor
    assert fixed - plain == pytest.approx(0.37e-3)


@pytest.mark.slow
@pytest.mark.simulation
def test_a_run_with_the_fixed_cost_is_slower_by_its_passes():
    from simulator import run

    def one(ms):
        spec = SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.7, proposer="eagle3", draft_model=EAGLE3, draft_pass_overhead_ms=ms)
        return run(RunConfig(workload=ClosedLoopWorkload.fixed(1, 2, 100, 64), model=TARGET, device="h100", speculation=spec))

    plain, fixed = one(0.0), one(0.37)
    assert plain.summary["forward_passes"] == fixed.summary["forward_passes"]  # same draws, same steps
    extra = (fixed.summary["makespan_s"] - plain.summary["makespan_s"]) / fixed.summary["forward_passes"]
    # three passes a decode step, fewer on the steps near a request's end
    assert 0.5 * 3 * 0.37e-3 < extra <= 3 * 0.37e-3 + 1e-9


# --- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize("value", [-0.1, float("nan"), True, "0.3"])
def test_a_bad_draft_pass_overhead_is_refused_naming_the_field(value):
    with pytest.raises(ConfigError, match="draft_pass_overhead_ms"):
        SpeculationConfig(draft_pass_overhead_ms=value)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("passes = 3 ", "passes = 0 "), "passes = 0"),
        (lambda t: t.replace('default_series = "flashinfer-prefill-kernel"', 'default_series = "nope"'), "default_series = 'nope'"),
        (lambda t: t.replace("[1, 1024, 1, 0.041]", "[1, 1024, 1, -0.041]"), "rows\\[0\\]"),
        (lambda t: t.replace("value_ms = 1.2\n", ""), "missing value_ms"),
    ],
)
def test_a_bad_calibration_file_names_the_key(tmp_path, edit, message):
    path = tmp_path / "engine_costs.toml"
    path.write_text(edit(CALIBRATION.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        read_engine_costs(path)


@pytest.mark.slow
def test_pass_zero_runs_its_rows_in_one_varlen_attention():
    """EAGLE's first pass runs the head over every verified token; its multi-token rows are
    costed like the target's verify rows, not one prompt chunk (and one kernel floor) per row:
    64 rows cost well under 64 times one row (costed per row they came to ~5x one row's pass)."""
    spec = SpeculationConfig(num_speculative_tokens=1, acceptance_rate=0.7, proposer="eagle3", draft_model=EAGLE3, draft_pass_overhead_ms=0.0)
    proposer = simulation.proposer(resolve_run(RunConfig(workload=ClosedLoopWorkload.fixed(1, 1, 500, 256), model=TARGET, device="h100", speculation=spec)))
    one, many = (proposer.step_seconds(_decode_batch(1, rows=b, kv=1000)) for b in (1, 64))
    assert one < many < 2.5 * one
