"""The pays-off answer's error bar and the rule that switches speculation off (issue 30 item 5).

Every expected number here is worked by hand from the rule in simulator/sweep/error_bar.py's
docstring, not read back from the code."""

from __future__ import annotations

import pytest

from repo import DATA_DIR
from simulator.published import speedup_checks
from simulator.specs import measurements as published_measurements
from simulator.sweep.crossover import best_fixed_k, guarded_best_k, recommended_schedule
from simulator.sweep.error_bar import LOAD_FEW, LOAD_MANY, LOAD_ONE, ErrorBar, Regime, SpeedupCheck, error_bar, load_range, safe
from simulator.sweep.crossover import pick


def _regime(load=LOAD_MANY, proposer_class="draft network", engine="vllm", version="vllm >= 0.11", tp="TP 1"):
    return Regime(load, proposer_class, engine, version, tp)


def _check(name, error, **regime):
    return SpeedupCheck(name, name.split("-")[0], _regime(**regime), error)


def test_load_ranges_follow_requests_in_flight_or_rate():
    assert [load_range(in_flight=x) for x in (1, 2, 7, 8, 128)] == [LOAD_ONE, LOAD_FEW, LOAD_FEW, LOAD_MANY, LOAD_MANY]
    assert [load_range(qps=q) for q in (1.0, 2.0, 10.0)] == [LOAD_FEW, LOAD_MANY, LOAD_MANY]
    with pytest.raises(ValueError):
        load_range()


def test_regime_reads_the_proposer_kind_and_the_version_series():
    r = Regime.of(proposer="ngram", engine="vllm", version="0.10.1", tensor_parallel_size=4, in_flight=32)
    assert (r.load, r.proposer_class, r.version_series, r.tensor_parallel) == (LOAD_MANY, "lookup", "vllm < 0.11", "TP >= 2")
    r = Regime.of(proposer="mtp", engine="vllm", version="0.30.0", tensor_parallel_size=1, in_flight=1)
    assert (r.load, r.proposer_class, r.version_series, r.tensor_parallel) == (LOAD_ONE, "draft network", "vllm >= 0.11", "TP 1")
    assert Regime.of(proposer="eagle", engine="vllm", version=None, tensor_parallel_size=1, in_flight=4).version_series == "vllm (version unstated)"


def test_error_bar_uses_every_key_when_enough_rows_match():
    checks = [_check("a-1", 10.0), _check("b-1", -5.0), _check("c-1", 30.0), _check("d-1", 99.0, tp="TP >= 2")]
    bar = error_bar(checks, _regime())
    assert (bar.low_pct, bar.high_pct, bar.rows, bar.sources) == (-5.0, 30.0, 3, 3)
    assert bar.matched == ("load", "proposer_class", "engine", "version_series", "tensor_parallel")


def test_error_bar_drops_the_least_important_key_first():
    # two rows at TP 1, one at TP 2: the TP key is dropped (not the version), so all three count
    checks = [_check("a-1", 10.0), _check("b-1", -5.0), _check("c-1", 40.0, tp="TP >= 2"), _check("e-1", 80.0, version="vllm < 0.11")]
    bar = error_bar(checks, _regime())
    assert bar.matched == ("load", "proposer_class", "engine", "version_series") and (bar.low_pct, bar.high_pct, bar.rows) == (-5.0, 40.0, 3)
    assert "tensor parallelism" not in bar.describe() and "engine version" in bar.describe()


def test_no_bar_without_enough_rows():
    assert error_bar([_check("a-1", 10.0), _check("b-1", 5.0)], _regime()) is None


def test_guarded_band_divides_by_one_plus_the_error():
    bar = ErrorBar(-20.0, 25.0, 5, 2, ("load",), ())
    low, high = bar.guarded(1.5, 2.0)
    assert low == pytest.approx(1.5 / 1.25) and high == pytest.approx(2.0 / 0.8)


def _safe_best(options, bar):
    """The guarded choice as the sweep makes it: the safe k (error_bar.safe), then crossover.pick."""
    return pick([(0, 1.0, 0.0)] + [(k, s, 0.0) for k, s, low in options if safe(bar, low)])


def test_safe_best_skips_a_k_whose_guarded_low_is_below_one():
    bar = ErrorBar(0.0, 50.0, 5, 2, ("load",), ())  # simulated speedups up to 50% too high
    # k = 3 is fastest (1.6x) but its band's low 1.4 / 1.5 = 0.93 < 1; k = 1 has low 1.5 / 1.5 = 1.0: safe
    assert _safe_best([(1, 1.55, 1.5), (3, 1.6, 1.4)], bar) == (1, 1.55)
    assert _safe_best([(1, 1.2, 1.1), (3, 1.3, 1.2)], bar) == (0, 1.0)
    assert _safe_best([(1, 1.2, 1.1), (3, 1.3, 1.2)], None) == (3, 1.3)  # no bar: the simulated band alone
    # no speculation is an option at 1x: a k within the tie of it, or below it, does not win
    assert _safe_best([(2, 1.003, 1.003)], None) == (0, 1.0)
    assert _safe_best([(2, 0.95, 0.95)], ErrorBar(-20.0, -10.0, 5, 2, ("load",), ())) == (0, 1.0)
    # a NaN speedup never wins
    assert _safe_best([(2, float("nan"), 1.5)], None) == (0, 1.0)


def test_a_bar_needs_two_sources_and_sane_errors():
    one_source = [SpeedupCheck(f"a-{i}", "a", _regime(), e) for i, e in enumerate((1.0, 2.0, 3.0))]
    assert error_bar(one_source, _regime()) is None
    with pytest.raises(ValueError, match="above -100%"):
        ErrorBar(-100.0, 10.0, 3, 2, (), ())


def test_a_k_with_an_unknown_bound_is_unsafe():
    """A bound that gave NaN leaves the band unknown: that k is not recommended there, and nothing fails."""
    rows = [_row(1, 8, 1.5), _row(1, 8, float("nan"), "per_token"), _row(2, 8, 1.4), _row(2, 8, 1.3, "per_token")]
    guarded = guarded_best_k(rows, "kv_once", lambda mode, acceptance, x: None)
    assert guarded[("closed_loop", "a", "kv_once", 8)] == (2, 1.4)


def _row(k, x, speedup, attention="kv_once", acceptance="a"):
    return {"mode": "closed_loop", "concurrency": x, "arrival_rate": None, "acceptance": acceptance, "attention": attention,
            "k_schedule": "", "num_speculative_tokens": k, "tpot_speedup": speedup}


def test_the_schedule_switches_off_where_the_guarded_band_reaches_below_one():
    # two k at three concurrencies, under the primary setting and a bound that is 10% lower
    primary = {(1, 1): 1.5, (2, 1): 1.8, (1, 16): 1.4, (2, 16): 1.45, (1, 64): 1.15, (2, 64): 1.1}
    rows = [_row(k, x, s) for (k, x), s in primary.items()] + [_row(k, x, s * 0.9, "per_token") for (k, x), s in primary.items()]
    bar = ErrorBar(-10.0, 20.0, 4, 2, ("load",), ())

    def bars(mode, acceptance, x):
        return bar

    guarded = guarded_best_k(rows, "kv_once", bars)
    # at 1: k = 2's low 1.62 / 1.2 = 1.35 >= 1 -> k = 2; at 16: k = 2 low 1.305 / 1.2 = 1.09 -> k = 2 (1.45 > 1.4);
    # at 64: k = 1 low 1.035 / 1.2 = 0.86, k = 2 low 0.99 / 1.2 = 0.83 -> off
    assert {x: guarded[("closed_loop", "a", "kv_once", x)][0] for x in (1, 16, 64)} == {1: 2, 16: 2, 64: 0}
    assert recommended_schedule(guarded, "a", "kv_once", 128) == ((1, 63, 2), (64, 128, 0))
    # the fixed k: no k is safe at 64, so none is recommended; without the guard k = 2 wins on average
    assert best_fixed_k(rows, "a", "kv_once", bars)[0] == 0
    assert best_fixed_k(rows, "a", "kv_once")[0] == 2


def test_recorded_speedup_checks_are_the_published_csvs():
    """The package's table is what the build derives from the recorded published rows (so the command's
    error bar and the site's are the same rows)."""
    text = (DATA_DIR / "results" / "published.csv").read_text(encoding="utf-8")
    measurements, _ = published_measurements.load(DATA_DIR / "published.toml", DATA_DIR / "published_assumptions.toml")
    derived = speedup_checks.derive_from_csv(text, {m.id: m.baseline_id for m in measurements if m.baseline_id})
    assert speedup_checks.csv_text(derived) == speedup_checks.SPEEDUP_CHECKS_FILE.read_text(encoding="utf-8")
    assert len(derived) >= 20


def test_an_absolute_pair_gives_the_speedup_error_it_implies():
    rows = [
        {"id": "s-base", "role": "check", "status": "simulated", "proposer": "none", "metric": "tpot_ms", "published": "10", "simulated": "12",
         "error_pct": "20", "source": "s", "engine": "vllm", "engine_version": "0.15.1", "tp": "1", "batch_size": "", "concurrency": "32", "qps": ""},
        {"id": "s-spec", "role": "check", "status": "simulated", "proposer": "eagle3", "metric": "tpot_ms", "published": "5", "simulated": "5",
         "error_pct": "0", "source": "s", "engine": "vllm", "engine_version": "0.15.1", "tp": "1", "batch_size": "", "concurrency": "32", "qps": ""},
    ]
    (check,) = speedup_checks.derive(rows, {"s-spec": "s-base"})
    # measured speedup 10 / 5 = 2.0, simulated 12 / 5 = 2.4: +20%
    assert check.id == "s-spec" and check.error_pct == pytest.approx(20.0) and check.regime.load == LOAD_MANY
    # a calibration row gives no error
    rows[1]["role"] = "calibration"
    assert speedup_checks.derive(rows, {"s-spec": "s-base"}) == []
