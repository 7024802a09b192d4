"""Fitting lambda of the interpolated verify mode: synthetic tables where lambda is known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from simulator.profiling import verify_fit
from simulator.profiling.__main__ import main as profiles_main

BATCHES = [1, 2, 4, 8, 16, 32]
KVS = [128, 512, 2048]
QUERIES = range(1, 6)


def decode_ms(batch, kv):
    """A decode kernel: launch floor, KV bandwidth, a per-sequence cost."""
    return 0.01 + 2e-6 * batch * kv + 0.002 * batch


def verify_table(lam, noise=0.0, seed=0, batches=BATCHES) -> pd.DataFrame:
    """A verify_attention table as measure writes it: one-query rows for both bounds, and
    verify rows at (1 - lam) x kv_once + lam x per_token, times (1 + noise x N(0, 1))."""
    rng = np.random.default_rng(seed)
    lam_of = lam if callable(lam) else (lambda b, kv, q: lam)
    rows = {}
    for kv in KVS:
        for b in batches:
            for q in QUERIES:
                rows[(b * q, kv, 1)] = decode_ms(b * q, kv)
                rows[(b, kv, 1)] = decode_ms(b, kv)
                if q > 1:
                    lo, hi = decode_ms(b, kv), decode_ms(b * q, kv)
                    rows[(b, kv, q)] = ((1 - lam_of(b, kv, q)) * lo + lam_of(b, kv, q) * hi) * (1 + noise * rng.standard_normal())
    return pd.DataFrame(
        [{"batch_size": b, "kv_cache_size": kv, "num_query_tokens": q, "num_speculative_tokens": q - 1, "time_stats.attention.median": t} for (b, kv, q), t in sorted(rows.items())]
    )


def test_a_known_lambda_is_recovered_and_a_wrong_one_is_not():
    fit = verify_fit.fit_lambda(verify_fit.same_run_bounds(verify_table(0.3, noise=0.02)))
    assert fit.overall == pytest.approx(0.3, abs=0.02)
    assert fit.residual_rms_pct == pytest.approx(2.0, abs=0.6)  # what is left is the noise
    assert fit.rows == len(BATCHES) * len(KVS) * (len(QUERIES) - 1)
    assert abs(fit.overall - 0.6) > 0.25
    wrong = verify_fit.fit_lambda(verify_fit.same_run_bounds(verify_table(0.6, noise=0.02)))
    assert wrong.overall == pytest.approx(0.6, abs=0.02) and abs(wrong.overall - fit.overall) > 0.25


@pytest.mark.parametrize("lam", [0.0, 1.0, 0.45])
def test_without_noise_the_fit_is_exact(lam):
    fit = verify_fit.fit_lambda(verify_fit.same_run_bounds(verify_table(lam)))
    assert fit.overall == pytest.approx(lam, abs=1e-9) and fit.residual_max_pct == pytest.approx(0, abs=1e-6)
    assert np.allclose(fit.points.lambda_point, lam)
    for frame in fit.groups.values():
        assert np.allclose(frame["lambda"], lam)


def test_lambda_that_varies_with_batch_shows_per_batch_and_in_the_residual():
    truth = {1: 0.9, 2: 0.8, 4: 0.6, 8: 0.4, 16: 0.2, 32: 0.1}
    fit = verify_fit.fit_lambda(verify_fit.same_run_bounds(verify_table(lambda b, kv, q: truth[b])))
    by_batch = fit.groups["batch"].set_index("batch_size")["lambda"]
    assert by_batch.to_dict() == pytest.approx(truth, abs=1e-9)
    assert (fit.groups["batch"].residual_rms_pct < 1e-6).all()
    assert fit.residual_rms_pct > 5  # one lambda cannot describe it, and the residual says so
    by_kv = fit.groups["kv"].set_index("kv_cache_size")["lambda"]
    assert set(by_kv.index) == set(KVS) and len(fit.groups["batch_kv"]) == len(BATCHES) * len(KVS)


def test_rows_whose_bounds_were_not_measured_are_left_out():
    table = verify_table(0.3)
    table = table[~((table.batch_size == 32 * 5) & (table.num_query_tokens == 1))]  # per-token bound of (32, q = 5)
    points = verify_fit.same_run_bounds(table)
    assert len(points) == len(BATCHES) * len(KVS) * (len(QUERIES) - 1) - len(KVS)
    assert not ((points.batch_size == 32) & (points.num_query_tokens == 5)).any()


def test_a_table_of_one_query_rows_cannot_be_fitted():
    table = verify_table(0.3)
    with pytest.raises(ValueError, match="no verify rows with two distinct bounds"):
        verify_fit.fit_lambda(verify_fit.same_run_bounds(table[table.num_query_tokens == 1]))


def decode_profile(batches=range(1, 129), kvs=(64, 128, 256, 512, 1024, 2048, 4096)) -> pd.DataFrame:
    return pd.DataFrame([{"batch_size": b, "kv_cache_size": kv, "ms": decode_ms(b, kv)} for b in batches for kv in kvs])


def test_decode_lookup_interpolates_and_runs_big_batches_as_full_batches():
    lookup = verify_fit.decode_lookup(decode_profile(batches=[1, 2, 4, 8, 16, 32, 64]))
    assert lookup(4, 512) == pytest.approx(decode_ms(4, 512))
    assert lookup(3, 384) == pytest.approx(decode_ms(3, 384))  # decode_ms is bilinear between grid points
    assert lookup(150, 1024) == pytest.approx(2 * decode_ms(64, 1024) + decode_ms(22, 1024))


def test_chart_table_against_the_decode_profile_the_simulator_uses():
    verify = verify_table(0.25, batches=[1, 4, 16])
    chart = verify_fit.chart_table(verify, decode_profile())
    assert set(chart.columns) >= {"batch_size", "kv_cache_size", "num_query_tokens", "measured_ms", "kv_once_ms", "per_token_ms", "lambda_point", "bounds"}
    assert (chart.bounds == "decode profile").all() and len(chart) == 3 * len(KVS) * (len(QUERIES) - 1)
    assert np.allclose(chart.lambda_point, 0.25) and (chart.kv_once_ms <= chart.measured_ms).all() and (chart.measured_ms <= chart.per_token_ms).all()
    same_run = verify_fit.chart_table(verify)
    assert (same_run.bounds == "same run").all() and np.allclose(same_run.lambda_point, 0.25)


def write_verify_dir(directory, table: pd.DataFrame):
    directory.mkdir()
    table.to_csv(directory / "verify_attention.csv.xz", index=False, compression="xz")
    return directory


def test_fit_verify_command_prints_and_writes_the_fit(tmp_path, capsys):
    profile = write_verify_dir(tmp_path / "h200", verify_table(0.4, noise=0.01))
    out = tmp_path / "fit.json"
    assert profiles_main(["fit-verify", "--profile-dir", str(profile), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("lambda = 0.4") and "## lambda by batch" in printed and "## lambda by KV length" in printed
    fit = json.loads(out.read_text())
    assert fit["lambda"] == pytest.approx(0.4, abs=0.02) and fit["bounds"] == "same run"
    assert [row["batch_size"] for row in fit["by"]["batch"]] == BATCHES
    before = out.read_bytes()
    assert profiles_main(["fit-verify", "--profile-dir", str(profile), "--json", str(out)]) == 0
    assert out.read_bytes() == before  # no clock in the output


def test_fit_verify_names_a_missing_table(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert profiles_main(["fit-verify", "--profile-dir", str(tmp_path / "empty")]) == 2
    assert "no verify_attention.csv" in capsys.readouterr().err
    assert profiles_main(["fit-verify", "--profile-dir", str(tmp_path / "absent")]) == 2
    assert "does not exist" in capsys.readouterr().err
    broken = write_verify_dir(tmp_path / "broken", verify_table(0.3).drop(columns=["num_query_tokens"]))
    assert profiles_main(["fit-verify", "--profile-dir", str(broken)]) == 2
    assert "missing columns ['num_query_tokens']" in capsys.readouterr().err


def test_fit_verify_fits_the_declared_calibration_series(tmp_path, capsys):
    from repo import DATA_DIR

    out = tmp_path / "series.json"
    assert profiles_main(["fit-verify", "--calibration", str(DATA_DIR / "calibration" / "engine_costs.toml"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "# flashinfer-prefill-kernel (sets the default)" in printed and "# trtllm-gen-decode-kernel" in printed
    assert "simulator default: attention = 'kv_once', interpolation = 0" in printed
    fits = json.loads(out.read_text())["series"]
    assert fits["flashinfer-prefill-kernel"]["lambda"] == pytest.approx(0.0, abs=0.02)
    assert fits["trtllm-gen-decode-kernel"]["lambda"] == pytest.approx(0.53, abs=0.02)


def test_fit_verify_needs_one_source_and_names_a_bad_calibration_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        profiles_main(["fit-verify"])
    assert "one of the arguments --profile-dir --calibration is required" in capsys.readouterr().err
    assert profiles_main(["fit-verify", "--calibration", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml: file not found" in capsys.readouterr().err
