"""The published site in a real Chromium: selectors, URL state, offline-ness, downloads."""

from __future__ import annotations

import pandas as pd
import pytest
from playwright.sync_api import Page, expect

from simulator.website.units import number

pytestmark = pytest.mark.browser

LABELS = {"kv_once": "KV read once", "per_token": "Per-token cost"}


class Watch:
    """Console errors/warnings, page errors, failed requests and every requested URL."""

    def __init__(self, page: Page):
        self.problems: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(f"console {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("request", lambda r: self.requests.append(r.url))

    def assert_clean(self, origin: str):
        assert self.problems == []
        off_origin = [u for u in self.requests if not u.startswith((origin, "data:"))]
        assert off_origin == [], f"requests leaving {origin}"


@pytest.fixture(scope="module")
def csv(committed_csvs) -> pd.DataFrame:
    return pd.read_csv(committed_csvs[0])


def origin_of(kind: str, built_site, site_server) -> str:
    return built_site.as_uri() + "/" if kind == "file" else site_server


@pytest.fixture(params=["file", "http"])
def origin(request, built_site, site_server) -> str:
    """The site's base URL, from file:// and from a local HTTP server."""
    return origin_of(request.param, built_site, site_server)


def chart_traces(page: Page) -> dict:
    return page.evaluate(
        "() => Object.fromEntries(document.getElementById('speedup-chart').data.map(t => [t.name, {x: Array.from(t.x), y: Array.from(t.y)}]))"
    )


def visible_table(page: Page) -> list[list[str]]:
    rows = page.locator("[data-selection]:not([hidden]) tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("th, td").all_inner_texts()] for i in range(rows.count())]


def expected(csv: pd.DataFrame, load: float, acceptance: float):
    rows = csv[(csv["arrival_rate"] == load) & (csv["acceptance_rate"] == acceptance)].sort_values(["num_speculative_tokens", "attention"])
    baseline = csv[(csv["arrival_rate"] == load) & (csv["num_speculative_tokens"] == 0)].iloc[0]
    traces = {LABELS[a]: {"x": list(g["num_speculative_tokens"]), "y": list(g["tpot_speedup"])} for a, g in rows.groupby("attention")}
    table = [["none (baseline)", "–", f"{baseline['tpot_p50_s'] * 1000:.2f} ms", f"{baseline['ttft_p50_s']:.3f} s", f"{baseline['e2e_p50_s']:.3f} s", "1.00×"]]
    table += [[f"k = {r.num_speculative_tokens}", LABELS[r.attention], f"{r.tpot_p50_s * 1000:.2f} ms", f"{r.ttft_p50_s:.3f} s", f"{r.e2e_p50_s:.3f} s", f"{r.tpot_speedup:.2f}×"] for r in rows.itertuples()]
    return traces, table


def assert_selection_shown(page: Page, csv: pd.DataFrame, load: float, acceptance: float):
    traces, table = expected(csv, load, acceptance)
    shown = chart_traces(page)
    for name, values in traces.items():
        assert shown[name]["x"] == values["x"]
        assert shown[name]["y"] == pytest.approx(values["y"], rel=1e-12)
    assert [row[:6] for row in visible_table(page)] == table
    assert page.locator("#selection-summary").inner_text().startswith(f"At {number(load)} req/s and acceptance {number(acceptance)},")


def test_each_selector_changes_chart_and_table_to_the_csv_values(page: Page, built_site, site_server, csv):
    origin = origin_of("file", built_site, site_server)
    watch = Watch(page)
    page.goto(origin + "index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    expect(page.locator(".chart-loading")).to_have_count(0)
    assert_selection_shown(page, csv, 4.0, 0.7)
    before = chart_traces(page)
    page.select_option("#load", "6")
    assert chart_traces(page) != before
    assert_selection_shown(page, csv, 6.0, 0.7)
    expect(page.locator('[data-load="6"]')).to_be_visible()
    expect(page.locator('[data-load="4"]')).to_be_hidden()
    page.select_option("#acceptance", "0.5")
    assert_selection_shown(page, csv, 6.0, 0.5)
    for load in sorted(csv["arrival_rate"].unique()):
        for acceptance in sorted(csv["acceptance_rate"].dropna().unique()):
            page.select_option("#load", number(load))
            page.select_option("#acceptance", number(acceptance))
            assert_selection_shown(page, csv, load, acceptance)
    watch.assert_clean(origin)


def test_url_state_round_trips(page: Page, built_site, site_server, csv):
    origin = origin_of("http", built_site, site_server)
    watch = Watch(page)
    page.goto(origin + "index.html#load=6&acceptance=0.9")
    page.wait_for_selector("#speedup-chart .main-svg")
    assert (page.input_value("#load"), page.input_value("#acceptance")) == ("6", "0.9")
    assert_selection_shown(page, csv, 6.0, 0.9)
    page.select_option("#load", "2")
    assert page.evaluate("location.hash") == "#load=2&acceptance=0.9"
    page.reload()
    page.wait_for_selector("#speedup-chart .main-svg")
    assert_selection_shown(page, csv, 2.0, 0.9)
    page.evaluate("location.hash = '#load=4.0&acceptance=0.5'")
    expect(page.locator("#acceptance")).to_have_value("0.5")
    assert_selection_shown(page, csv, 4.0, 0.5)
    page.evaluate("location.hash = '#load=5&acceptance=0.7'")
    expect(page.locator("#url-notice")).to_be_visible()
    expect(page.locator("#url-notice")).to_contain_text("load=5")
    assert_selection_shown(page, csv, 4.0, 0.7)
    watch.assert_clean(origin)


def test_controls_are_labelled_and_work_from_the_keyboard(page: Page, built_site, csv):
    page.goto(built_site.as_uri() + "/index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    expect(page.get_by_label("Load (requests/s)")).to_have_value("4")
    expect(page.get_by_label("Acceptance rate (α)")).to_have_value("0.7")
    page.focus("#acceptance")
    page.keyboard.press("ArrowDown")
    expect(page.locator("#acceptance")).to_have_value("0.9")
    assert_selection_shown(page, csv, 4.0, 0.9)


def test_csv_link_downloads_the_recorded_rows(page: Page, origin, committed_csvs):
    page.goto(origin + "index.html")
    with page.expect_download() as download:
        page.locator("#results a[download]").click()
    downloaded = pd.read_csv(download.value.path())
    assert len(downloaded) == 39
    pd.testing.assert_frame_equal(downloaded, pd.read_csv(committed_csvs[0]))


def test_every_page_loads_cleanly_and_fits_a_phone(page: Page, origin):
    page.set_viewport_size({"width": 375, "height": 800})
    for name in ("index.html", "modeling.html", "validation.html", "data.html"):
        watch = Watch(page)
        page.goto(origin + name)
        if name == "index.html":
            page.wait_for_selector("#speedup-chart .main-svg")
        if name == "modeling.html":
            page.wait_for_selector("#progress-chart .main-svg")
            assert page.evaluate("() => document.getElementById('progress-chart').data.length") == 2 * 3  # closed form + simulated per α
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, f"{name} scrolls sideways on a phone"
        watch.assert_clean(origin)


def test_home_page_screenshot(page: Page, built_site, artifacts_dir):
    page.set_viewport_size({"width": 1200, "height": 900})
    page.goto(built_site.as_uri() + "/index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    path = artifacts_dir / "home.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 50_000
