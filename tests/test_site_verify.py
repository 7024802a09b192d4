"""The modeling page's measured-verify section: pending without a table, the fit with one."""

import dataclasses

import pandas as pd

from simulator.website.render import SiteSources, render_site

from repo import site_dirs


def _verify_table(directory, lam):
    """A synthetic verify table whose verify steps sit at ``lam`` between its own bounds."""
    rows = []
    for batch in (1, 4, 16):
        for kv in (256, 1024):
            one_query = lambda b: 0.01 + 1e-5 * b * kv  # noqa: E731  (a bandwidth-bound decode kernel)
            rows.append((batch, kv, 1, one_query(batch)))
            for q in (2, 4):
                lower, upper = one_query(batch), one_query(batch * q)
                rows.append((batch, kv, q, lower + lam * (upper - lower)))
    for batch in (2, 8, 32, 64):  # the one-query rows the per-token bound of a batch x q needs
        for kv in (256, 1024):
            rows.append((batch, kv, 1, 0.01 + 1e-5 * batch * kv))
    frame = pd.DataFrame(rows, columns=["batch_size", "kv_cache_size", "num_query_tokens", "time_stats.attention.median"])
    directory.mkdir(parents=True, exist_ok=True)
    frame.drop_duplicates(["batch_size", "kv_cache_size", "num_query_tokens"]).to_csv(directory / "verify_attention.csv", index=False)
    return directory


def test_without_a_measurement_the_page_says_it_is_pending(tmp_path, committed_csvs):
    out = tmp_path / "site"
    render_site(SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], **site_dirs(), verify_tables_dir=tmp_path / "none"), out)
    page = (out / "modeling.html").read_text()
    assert "Not measured yet" in page and "bash bench/measure_verify_h200.sh" in page


def test_a_measured_table_shows_its_fitted_lambda(tmp_path, committed_csvs):
    sources = SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], **site_dirs())
    out = tmp_path / "site"
    render_site(dataclasses.replace(sources, verify_tables_dir=_verify_table(tmp_path / "verify", 0.3)), out)
    page = (out / "modeling.html").read_text()
    assert "Not measured yet" not in page
    assert "Fitted λ of the interpolated mode: <strong>0.3</strong>" in page
    assert 'id="verify-figure"' in page
