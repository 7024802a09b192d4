"""The rendered site, read as files: pages, escaping, links, offline-ness, and the numbers it shows."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from simulator.errors import ConfigError
from repo import REPO_ROOT, site_dirs
from simulator.sweep.runner import OVERLOAD_TTFT_GROWTH, PROGRESS_COLUMNS, SWEEP_COLUMNS
from simulator.website.recorded import load_recorded
from simulator.website.render import PAGES, SiteSources, render_site


class Links(HTMLParser):
    """Every URL a page refers to, by attribute."""

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.urls.append((tag, name, value))


def page_links(path: Path) -> list[tuple[str, str, str]]:
    parser = Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.urls


def test_site_has_every_page_local_plotly_and_the_csvs(built_site, committed_csvs):
    for page in PAGES:
        assert (built_site / page).stat().st_size > 1000
    assert (built_site / "plotly.min.js").stat().st_size > 1_000_000
    assert (built_site / "sweep.csv").read_bytes() == committed_csvs[0].read_bytes()
    assert (built_site / "progress.csv").read_bytes() == committed_csvs[1].read_bytes()


def test_pages_request_nothing_remote(built_site):
    for page in PAGES:
        for tag, attr, url in page_links(built_site / page):
            if attr == "src" or tag == "link":
                assert not re.match(r"^(https?:)?//", url), f"{page}: <{tag} {attr}={url}> would leave the machine"
        text = (built_site / page).read_text()
        assert "cdn." not in text and "fonts.googleapis" not in text


def test_relative_links_resolve_to_site_or_repository_files(built_site):
    """Site links point at pages/files of the site; `../` links at source files in the repository."""
    for page in PAGES:
        for tag, attr, url in page_links(built_site / page):
            if url.startswith(("#", "data:")) or re.match(r"^[a-z]+:", url):
                continue
            target = url.split("#")[0]
            if target.startswith("../"):
                assert (REPO_ROOT / target[3:]).is_file(), f"{page} links to missing repository file {target}"
            else:
                assert (built_site / target).is_file(), f"{page} links to missing site file {target}"


def test_model_cards_link_the_implementing_sources(built_site):
    html = (built_site / "index.html").read_text()
    for source in ("speculative/acceptance.py", "speculative/verify_cost.py", "speculative/progress.py", "speculative/memory.py", "engine/scheduler.py", "engine/batch.py", "engine/predictor.py"):
        assert f'href="../simulator/{source}"' in html


def test_default_selection_table_shows_the_csv_values(built_site, committed_csvs):
    recorded = load_recorded(committed_csvs[0])
    html = (built_site / "index.html").read_text()
    block = re.search(r'<div class="table-wrap" data-selection="4\|0.7">(.*?)</div>', html, re.S).group(1)
    rows = recorded.selection(4.0, 0.7).sort_values(["num_speculative_tokens", "attention"])
    for _, row in rows.iterrows():
        label = {"kv_once": "KV read once", "per_token": "Per-token cost"}[row["attention"]]
        cells = f'<th scope="row">k = {row["num_speculative_tokens"]}</th><td>{label}</td><td class="num">{row["tpot_p50_s"] * 1000:.2f} ms</td>'
        assert cells in block
        assert f'{row["tpot_speedup"]:.2f}×' in block
    assert len(re.findall(r'data-selection="', html)) == len(recorded.loads) * len(recorded.acceptances)
    assert html.count('data-selection="4|0.7" hidden') == 0 and 'data-selection="2|0.5" hidden' in html


def test_setup_and_provenance_are_stated_next_to_results(built_site, committed_csvs):
    csv = pd.read_csv(committed_csvs[0])
    html = (built_site / "index.html").read_text()
    results = html[html.index('id="results"') : html.index('id="explore"')]
    for value in ("Llama-2-7B", "A100 profile", "300 requests per run", csv["profile_id"][0], f"Vidur {csv['vidur_version'][0]}", csv["simulator_source_hash"][0], "workload 42"):
        assert value in results
    assert "GPU validation pending" in html


def test_overload_is_stated_from_the_measurement(built_site, committed_csvs):
    csv = pd.read_csv(committed_csvs[0])
    html = (built_site / "index.html").read_text()
    for _, base in csv[csv["num_speculative_tokens"] == 0].iterrows():
        note = re.search(rf'data-load="{base["arrival_rate"]:g}"[^>]*>(.*?)</p>', html, re.S).group(1)
        assert f'{base["ttft_last_tenth_p50_s"]:.3f} s for the last tenth' in note
        assert ("The baseline is overloaded here" in note) == bool(base["overloaded"])
    assert csv.loc[(csv["arrival_rate"] == 6) & (csv["num_speculative_tokens"] == 0), "overloaded"].item(), "the 6 req/s baseline is expected to be overloaded"


def test_data_page_documents_every_column(built_site):
    tokens = MarkdownIt("commonmark").enable("table").parse((REPO_ROOT / "content" / "data.md").read_text())
    documented = {t.content for t in tokens if t.type == "inline" for t in (t.children or []) if t.type == "code_inline"}
    assert set(SWEEP_COLUMNS) <= documented
    assert set(PROGRESS_COLUMNS) <= documented
    assert f"above {OVERLOAD_TTFT_GROWTH:g}" in (REPO_ROOT / "content" / "data.md").read_text()
    html = (built_site / "data.html").read_text()
    assert '<a href="sweep.csv" download>' in html and "<table>" in html


def test_modeling_page_has_the_progress_chart_data(built_site, committed_csvs):
    html = (built_site / "modeling.html").read_text()
    assert 'data-figure="progress-figure"' in html
    progress = pd.read_csv(committed_csvs[1])
    for _, row in progress.iterrows():
        assert f'{row["simulated_progress_per_step"]:.3f}' in html
    assert "(1 − α^(k+1)) / (1 − α)" in html


def test_values_from_the_csv_are_escaped(site_sources_copy, tmp_path):
    frame = pd.read_csv(site_sources_copy.sweep_csv)
    frame["profile_id"] = "<script>alert(1)</script>"
    frame.to_csv(site_sources_copy.sweep_csv, index=False)
    render_site(site_sources_copy, tmp_path / "site")
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_rendering_is_deterministic(built_site, committed_csvs, tmp_path):
    render_site(SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], **site_dirs()), tmp_path / "again")
    for path in built_site.iterdir():
        assert (tmp_path / "again" / path.name).read_bytes() == path.read_bytes(), path.name


def test_validation_report_replaces_the_pending_badge(site_sources_copy, tmp_path):
    report = tmp_path / "report.json"
    report.write_text('{"schema": "vidur-specdec/validation-report", "metrics": {"tpot": {"mape": 7.5}}}')
    render_site(SiteSources(**{**site_sources_copy.__dict__, "validation_report": report}), tmp_path / "site")
    home = (tmp_path / "site" / "index.html").read_text()
    assert "GPU validation results available" in home and "GPU validation pending" not in home
    assert "<code>metrics.tpot.mape</code></th><td>7.5</td>" in (tmp_path / "site" / "validation.html").read_text()
    report.write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        render_site(SiteSources(**{**site_sources_copy.__dict__, "validation_report": report}), tmp_path / "site2")


def test_a_json_that_is_not_a_validation_report_is_refused(site_sources_copy, tmp_path):
    report = tmp_path / "report.json"
    report.write_text('{"metrics": {}}')
    with pytest.raises(ConfigError, match="not a validation report"):
        render_site(SiteSources(**{**site_sources_copy.__dict__, "validation_report": report}), tmp_path / "site")
