"""The published site in a real Chromium: selectors, URL state, offline-ness, downloads, a phone
screen, JavaScript off, keyboard focus, and an axe-core accessibility audit of every page."""

from __future__ import annotations

import base64
import os
import re
import struct
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Page, expect

from simulator.website.pages import PAGES
from simulator.util.units import number

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
    rows = page.locator(".selection.active tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("th, td").all_inner_texts()] for i in range(rows.count())]


def expected(csv: pd.DataFrame, load: float, acceptance: float):
    rows = csv[(csv["arrival_rate"] == load) & (csv["acceptance_rate"] == acceptance)].sort_values(["num_speculative_tokens", "attention"])
    baseline = csv[(csv["arrival_rate"] == load) & (csv["num_speculative_tokens"] == 0)].iloc[0]
    traces = {LABELS[a]: {"x": list(g["num_speculative_tokens"]), "y": list(g["tpot_speedup"])} for a, g in rows.groupby("attention")}
    table = [["none (baseline)", "–", "1.00×", "1.00", _batch(baseline["mean_decode_batch"]), f"{baseline['tpot_p50_s'] * 1000:.2f} ms", f"{baseline['ttft_p50_s']:.3f} s", f"{baseline['e2e_p50_s']:.3f} s"]]
    table += [
        [f"k = {r.num_speculative_tokens}", LABELS[r.attention], f"{r.tpot_speedup:.2f}×", f"{r.mean_acceptance_length:.2f}", _batch(r.mean_decode_batch),
         f"{r.tpot_p50_s * 1000:.2f} ms", f"{r.ttft_p50_s:.3f} s", f"{r.e2e_p50_s:.3f} s"]
        for r in rows.itertuples()
    ]
    return traces, table


def _batch(value) -> str:
    return "–" if pd.isna(value) else f"{value:.1f}"


def assert_selection_shown(page: Page, csv: pd.DataFrame, load: float, acceptance: float):
    traces, table = expected(csv, load, acceptance)
    shown = chart_traces(page)
    for name, values in traces.items():
        assert shown[name]["x"] == values["x"]
        assert shown[name]["y"] == pytest.approx(values["y"], rel=1e-12)
    assert [row[:8] for row in visible_table(page)] == table
    assert page.locator('#chart-title').inner_text() == f"Predicted median TPOT speedup at {number(load)} req/s, acceptance rate {number(acceptance)}"
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
    # the 6 req/s overload warning sits above the chart
    assert page.locator('[data-load="6"]').bounding_box()["y"] < page.locator("#speedup-chart").bounding_box()["y"]
    page.select_option("#acceptance", "0.5")
    assert_selection_shown(page, csv, 6.0, 0.5)
    for load in sorted(csv["arrival_rate"].unique()):
        for acceptance in sorted(csv["acceptance_rate"].dropna().unique()):
            page.select_option("#load", number(load))
            page.select_option("#acceptance", number(acceptance))
            assert_selection_shown(page, csv, load, acceptance)
    watch.assert_clean(origin)


def chart_in_view(page: Page) -> bool:
    return page.evaluate("() => { const r = document.getElementById('explore').getBoundingClientRect(); return window.scrollY > 0 && Math.abs(r.top) < 5; }")


def test_url_state_round_trips(page: Page, built_site, site_server, csv):
    origin = origin_of("http", built_site, site_server)
    watch = Watch(page)
    page.goto(origin + "index.html#load=6&acceptance=0.9")
    page.wait_for_selector("#speedup-chart .main-svg")
    assert (page.input_value("#load"), page.input_value("#acceptance")) == ("6", "0.9")
    assert_selection_shown(page, csv, 6.0, 0.9)
    assert chart_in_view(page), "a shared link must land on the chart"
    page.select_option("#load", "2")
    assert page.evaluate("location.hash") == "#load=2&acceptance=0.9"
    page.reload()
    page.wait_for_selector("#speedup-chart .main-svg")
    assert_selection_shown(page, csv, 2.0, 0.9)
    page.evaluate("location.hash = '#load=4.0&acceptance=0.5'")
    expect(page.locator("#acceptance")).to_have_value("0.5")
    assert_selection_shown(page, csv, 4.0, 0.5)
    watch.assert_clean(origin)


@pytest.mark.parametrize("kind", ["file", "http"])
def test_a_query_string_selects_too_and_becomes_the_hash(page: Page, built_site, site_server, csv, kind):
    origin = origin_of(kind, built_site, site_server)
    page.goto(origin + "index.html?load=6&acceptance=0.5")
    page.wait_for_selector("#speedup-chart .main-svg")
    assert_selection_shown(page, csv, 6.0, 0.5)
    assert chart_in_view(page)
    assert page.evaluate("[location.search, location.hash]") == ["", "#load=6&acceptance=0.5"]
    page.goto(origin + "index.html?load=2")
    page.wait_for_selector("#speedup-chart .main-svg")
    assert_selection_shown(page, csv, 2.0, 0.7)


def test_an_invalid_value_is_reported_precisely_and_the_valid_one_kept(page: Page, built_site, site_server, csv):
    origin = origin_of("http", built_site, site_server)
    page.goto(origin + "index.html#load=5&acceptance=0.9")
    page.wait_for_selector("#speedup-chart .main-svg")
    notice = page.locator("#url-notice")
    expect(notice).to_be_visible()
    expect(notice).to_have_text("load=5 is not a recorded load (recorded: 2, 4, 6 req/s); showing load 4 req/s instead.")
    assert_selection_shown(page, csv, 4.0, 0.9)
    page.evaluate("location.hash = '#load=6&acceptance=high'")
    expect(notice).to_have_text("acceptance=high is not a recorded acceptance rate (recorded: 0.5, 0.7, 0.9); showing acceptance 0.7 instead.")
    assert_selection_shown(page, csv, 6.0, 0.7)
    page.select_option("#load", "2")
    expect(notice).to_be_hidden()


def test_back_and_forward_step_through_selections(page: Page, built_site, site_server, csv):
    origin = origin_of("http", built_site, site_server)
    page.goto(origin + "index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    page.select_option("#load", "6")
    page.select_option("#acceptance", "0.9")
    assert_selection_shown(page, csv, 6.0, 0.9)
    page.go_back()
    expect(page.locator("#acceptance")).to_have_value("0.7")
    assert_selection_shown(page, csv, 6.0, 0.7)
    page.go_back()
    expect(page.locator("#load")).to_have_value("4")
    assert page.url == origin + "index.html", "Back must not leave the page before the first selection"
    assert_selection_shown(page, csv, 4.0, 0.7)
    page.go_forward()
    expect(page.locator("#load")).to_have_value("6")
    assert_selection_shown(page, csv, 6.0, 0.7)


def test_explore_the_results_keeps_the_selection_in_the_url(page: Page, built_site, site_server, csv):
    origin = origin_of("http", built_site, site_server)
    page.goto(origin + "index.html#load=2&acceptance=0.5")
    page.wait_for_selector("#speedup-chart .main-svg")
    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_role("link", name="Explore the results").click()
    assert page.evaluate("location.hash") == "#load=2&acceptance=0.5"
    assert_selection_shown(page, csv, 2.0, 0.5)
    expect(page.locator("#url-notice")).to_be_hidden()
    page.wait_for_function("() => Math.abs(document.getElementById('explore').getBoundingClientRect().top) < 5")


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
    for name in PAGES:
        watch = Watch(page)
        page.goto(origin + name)
        if name == "index.html":
            page.wait_for_selector("#speedup-chart .main-svg")
        if name == "modeling.html":
            page.wait_for_selector("#progress-chart .main-svg")
            assert page.evaluate("() => document.getElementById('progress-chart').data.length") == 2 * 3  # closed form + simulated per α
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, f"{name} scrolls sideways on a phone"
        watch.assert_clean(origin)


PAGE_FILES = tuple(PAGES)


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_page_screenshots(page: Page, built_site, artifacts_dir, width, height):
    """Full-page screenshots for people to look at ($TEST_ARTIFACTS)."""
    page.set_viewport_size({"width": width, "height": height})
    for name in PAGE_FILES:
        page.goto(built_site.as_uri() + "/" + name)
        if name in ("index.html", "modeling.html"):
            page.wait_for_selector(".chart .main-svg")
        path = artifacts_dir / f"{name.removesuffix('.html')}-{width}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 20_000


def hover_text(page: Page, curve: int, point: int) -> str:
    page.evaluate(f"() => Plotly.Fx.hover('speedup-chart', [{{curveNumber: {curve}, pointNumber: {point}}}])")
    page.wait_for_selector("#speedup-chart .hoverlayer .hovertext")
    return page.locator("#speedup-chart .hoverlayer .hovertext").first.text_content()


def test_tooltip_says_k_once(page: Page, built_site, csv):
    page.goto(built_site.as_uri() + "/index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    names = page.evaluate("() => document.getElementById('speedup-chart').data.map(t => t.name)")
    text = hover_text(page, names.index("KV read once"), 0)
    assert text.startswith("k = 2") and "k = k" not in text
    row = csv[(csv.arrival_rate == 4) & (csv.acceptance_rate == 0.7) & (csv.num_speculative_tokens == 2) & (csv.attention == "kv_once")].iloc[0]
    assert f"{row.tpot_speedup:.2f}×" in text and f"{row.mean_acceptance_length:.2f} tokens per verify step" in text


def test_mode_bar_offers_only_a_png_that_carries_title_and_caveats(page: Page, built_site, site_server, tmp_path):
    page.goto(site_server + "index.html#load=6&acceptance=0.9")
    page.wait_for_selector("#speedup-chart .main-svg")
    buttons = page.locator("#speedup-chart .modebar-btn")
    assert buttons.count() == 1
    assert buttons.first.get_attribute("data-title") == "Download as PNG (with title, selection and caveats)"
    html = page.inner_html("#speedup-chart")
    assert "Share" not in html and "cloud" not in html.lower() and "Edit in Chart Studio" not in html
    layout = page.evaluate("() => siteCharts.exportLayout(JSON.parse(document.getElementById('explorer-data').textContent).figures['6|0.9'])")
    assert layout["title"]["text"] == "Predicted median TPOT speedup at 6 req/s, acceptance rate 0.9"
    notes = [a["text"].replace("<br>", " ") for a in layout["annotations"]]
    assert notes[0].startswith("Overloaded at 6 req/s") and any("not a statistical confidence interval" in n for n in notes)
    page.hover("#speedup-chart")
    with page.expect_download() as download:
        buttons.first.click()
    assert download.value.suggested_filename == "tpot-speedup-6rps-acceptance-0.9.png"
    png = Path(download.value.path()).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000


@pytest.fixture
def no_js_page(browser, built_site):
    context = browser.new_context(java_script_enabled=False)
    yield context.new_page()
    context.close()


def test_without_javascript_every_table_and_a_chart_note_are_shown(no_js_page: Page, built_site, csv):
    page = no_js_page
    page.goto(built_site.as_uri() + "/index.html")
    expect(page.locator(".chart-loading")).to_be_hidden()
    expect(page.locator("noscript p.warning").first).to_be_visible()
    selections = page.locator("details.selection")
    loads, acceptances = sorted(csv.arrival_rate.unique()), sorted(csv.acceptance_rate.dropna().unique())
    assert selections.count() == len(loads) * len(acceptances) == 9
    for i in range(selections.count()):
        expect(selections.nth(i).locator("summary")).to_be_visible()
    expect(page.locator("details.selection[open]")).to_have_count(1)
    # every table is one click (or one link) away
    page.get_by_role("link", name="6 req/s, α 0.9").click()
    block = page.locator("#results-6-0_9")
    block.locator("summary").click()
    expect(block.locator("table")).to_be_visible()
    for note in page.locator("[data-load]").all():
        expect(note).to_be_visible()
    page.goto(built_site.as_uri() + "/modeling.html")
    expect(page.locator(".chart-loading")).to_be_hidden()
    expect(page.locator("noscript p.warning")).to_be_visible()
    page.locator("#progress summary").click()
    expect(page.locator("#progress-table")).to_be_visible()
    assert page.locator("math").count() > 10  # equations are MathML, not script-rendered


def test_a_phone_reads_the_diagram_the_results_and_the_equations(page: Page, built_site):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(built_site.as_uri() + "/index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    expect(page.locator(".diagram svg.wide")).to_be_hidden()
    text_px = page.evaluate(
        "() => { const svg = document.querySelector('.diagram svg.narrow'); const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;"
        " return Math.min(...Array.from(svg.querySelectorAll('text')).map(t => parseFloat(getComputedStyle(t).fontSize) * scale)); }"
    )
    assert text_px >= 12, f"diagram text renders at {text_px:.1f} px"
    cells = page.locator(".selection.active td.speedup")
    assert cells.count() == 5  # baseline + k = 2, 4 under two attention assumptions
    for cell in cells.all():
        box = cell.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, "the speedup column is cut off"
    page.goto(built_site.as_uri() + "/modeling.html")
    for block in page.locator(".math-wrap").all():
        assert block.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), "an equation overflows at 390 px"
    page.goto(built_site.as_uri() + "/data.html")
    for code in page.locator(".dictionary td code").all():
        assert code.evaluate("c => c.getClientRects().length") == 1, f"{code.inner_text()} breaks mid-word"
        box = code.bounding_box()
        assert box["x"] + box["width"] <= 390


def contrast(color: str) -> float:
    """WCAG contrast of an rgb() colour against white."""
    r, g, b = (int(v) / 255 for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3])
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 1.05 / (0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] + 0.05)


def test_keyboard_focus_ring_meets_contrast(page: Page, built_site):
    page.goto(built_site.as_uri() + "/index.html")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    outline = page.evaluate("() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }")
    assert outline[0] == "solid" and float(outline[1].removesuffix("px")) >= 2
    assert contrast(outline[2]) >= 3, f"focus ring {outline[2]} against white"


def test_code_is_readable_and_commands_fit_and_copy(browser, site_server):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.goto(site_server + "validation.html")
    blocks = page.locator("pre")
    assert blocks.count() >= 4
    for block in blocks.all():
        assert block.evaluate("b => b.scrollWidth <= b.clientWidth"), "a command block overflows at 1280 px"
    sizes = page.evaluate("() => Array.from(document.querySelectorAll('code')).map(c => parseFloat(getComputedStyle(c).fontSize))")
    assert min(sizes) >= 14, f"code renders at {min(sizes)} px"
    first = blocks.first
    first.get_by_role("button", name="Copy command").click()
    expect(first.get_by_role("button")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == first.locator("code").inner_text().rstrip("\n")
    assert copied.startswith("python -m simulator.validation bench")
    context.close()


def axe_script() -> Path:
    try:
        import axe_playwright_python
    except ImportError:
        reason = "axe-core is not installed: pip install -e '.[test]' (axe-playwright-python ships a pinned axe.min.js)"
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(reason + " (REQUIRE_BROWSER is set)")
        pytest.skip(reason)
    return Path(axe_playwright_python.__file__).parent / "axe.min.js"


@pytest.mark.parametrize("name", PAGE_FILES)
@pytest.mark.parametrize("width", [1280, 390])
def test_axe_finds_no_serious_or_critical_violations(page: Page, site_server, name, width):
    script = axe_script()
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(site_server + name)
    if name in ("index.html", "modeling.html"):
        page.wait_for_selector(".chart .main-svg")
    page.add_script_tag(path=str(script))
    version = page.evaluate("axe.version")
    assert version.startswith("4.")
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == [], f"axe-core {version} on {name} at {width} px"


FIRST_CHART_PROBE = """
new MutationObserver((_, observer) => {
  if (document.querySelector('#speedup-chart .main-svg')) {
    window.__firstChartMs = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""


def test_first_chart_appears_quickly_from_file(browser, built_site):
    """A regression guard with headroom for a busy CI machine; the measured figure on an idle
    machine (about a third of this) is in docs/performance.md, from bench/build_bench.py."""
    times = []
    for _ in range(3):
        context = browser.new_context()
        page = context.new_page()
        page.add_init_script(FIRST_CHART_PROBE)
        page.goto(built_site.as_uri() + "/index.html")
        page.wait_for_function("() => window.__firstChartMs !== undefined")
        times.append(page.evaluate("window.__firstChartMs"))
        context.close()
    assert min(times) <= 3000, f"first chart after {min(times):.0f} ms"


# --- issue 20: PNG downloads, each page's footer, the data page, the calibration table on a phone --------
@pytest.fixture(scope="module")
def full_site(tmp_path_factory, committed_csvs) -> Path:
    """The site rendered from the committed seed, progress and published results (the pays-off
    page has its own fixture, a small sweep: paysoff_site)."""
    from repo import RESULTS_DIR, site_dirs
    from simulator.website.render import SiteSources, render_site

    out = tmp_path_factory.mktemp("full") / "site"
    render_site(SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], published_csv=RESULTS_DIR / "published.csv", **site_dirs()), out)
    return out


# Every PNG payload a page offers: its data-figure charts, the home page's nine selections, the
# pays-off page's charts and maps.
PAYLOADS = """() => {
  const out = [];
  document.querySelectorAll('[data-figure]').forEach(div => out.push([div.dataset.figure, JSON.parse(document.getElementById(div.dataset.figure).textContent)]));
  const explorer = document.getElementById('explorer-data');
  if (explorer) { const d = JSON.parse(explorer.textContent); for (const [k, p] of Object.entries(d.figures)) out.push(['explorer ' + k, p]); }
  const pay = document.getElementById('paysoff-data');
  if (pay) { const d = JSON.parse(pay.textContent);
    for (const [k, p] of Object.entries(d.figures || {})) out.push(['paysoff ' + k, p]);
    for (const [k, p] of Object.entries(d.maps || {})) out.push(['paysoff map ' + k, p]); }
  return out;
}"""

# The exported figure drawn at the PNG's size, as Plotly.toImage draws it: where everything lands.
# (1100 × 720 when the export names no size: what site.js downloaded before issue 20.)
EXPORT_GEOMETRY = """async (payload) => {
  const layout = Object.assign({width: 1100, height: 720}, siteCharts.exportLayout(payload));
  const div = document.createElement('div');
  div.style.position = 'absolute'; div.style.left = '-30000px'; div.style.top = '0';
  document.body.appendChild(div);
  await Plotly.newPlot(div, payload.figure.data, layout, {staticPlot: true});
  const svg = div.querySelector('.main-svg').getBoundingClientRect();
  const box = el => { if (!el) return null; const r = el.getBoundingClientRect(); return {x: r.left - svg.left, y: r.top - svg.top, w: r.width, h: r.height, text: el.textContent}; };
  const out = {width: layout.width, height: layout.height, drawn: [svg.width, svg.height],
    annotations: Array.from(div.querySelectorAll('.annotation')).map(box),
    legend: box(div.querySelector('.legend')), title: box(div.querySelector('.gtitle')), xtitle: box(div.querySelector('.xtitle'))};
  Plotly.purge(div); div.remove();
  return out;
}"""


def _inside(box: dict, width: float, height: float, margin: float = 2) -> bool:
    return box["x"] >= margin and box["y"] >= 0 and box["x"] + box["w"] <= width - margin and box["y"] + box["h"] <= height - margin


def _overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def assert_export_fits(geometry: dict, name: str):
    """Title, legend, axis title and every caption lie inside the image and apart from each other."""
    width, height = geometry["width"], geometry["height"]
    assert geometry["drawn"] == [width, height]
    assert geometry["annotations"], f"{name}: no captions"
    parts = [("title", geometry["title"]), ("x-axis title", geometry["xtitle"])] + [(f"caption {i + 1}", a) for i, a in enumerate(geometry["annotations"])]
    if geometry["legend"]:
        parts.append(("legend", geometry["legend"]))
    for label, box in parts:
        if box is not None:
            assert _inside(box, width, height), f"{name}: the {label} ({box}) is not inside the {width}×{height} image"
    for i, (label_a, a) in enumerate(parts):
        for label_b, b in parts[i + 1 :]:
            if a is not None and b is not None:
                assert not _overlap(a, b), f"{name}: the {label_a} and the {label_b} overlap"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk (bytes 16-24)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


INK = """async ([url, boxes]) => {
  const img = new Image(); img.src = url; await img.decode();
  const canvas = document.createElement('canvas'); canvas.width = img.width; canvas.height = img.height;
  const ctx = canvas.getContext('2d'); ctx.drawImage(img, 0, 0);
  const dark = (x, y, w, h) => { const d = ctx.getImageData(x, y, w, h).data; let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && d[i] + d[i + 1] + d[i + 2] < 3 * 140) n++; return n; };
  return {inBoxes: boxes.map(b => dark(Math.floor(b.x), Math.floor(b.y), Math.ceil(b.w), Math.ceil(b.h))),
          bottomEdge: dark(0, img.height - 3, img.width, 3), rightEdge: dark(img.width - 3, 0, 3, img.height)};
}"""


def test_png_download_holds_title_selection_and_every_caveat(page: Page, site_server):
    """Issue 20: at 6 req/s the 1100×720 PNG showed one pixel row of its first caption."""
    page.goto(site_server + "index.html#load=6&acceptance=0.9")
    page.wait_for_selector("#speedup-chart .main-svg")
    payload = page.evaluate("() => JSON.parse(document.getElementById('explorer-data').textContent).figures['6|0.9']")
    geometry = page.evaluate(EXPORT_GEOMETRY, payload)
    assert_export_fits(geometry, "6 req/s, α 0.9")
    captions = [a["text"].replace("<br>", " ") for a in payload["export"]["annotations"]]
    assert len(captions) == len(geometry["annotations"]) == 3
    assert captions[0].startswith("Overloaded at 6 req/s") and any("not a statistical confidence interval" in c for c in captions)
    assert any("sweep.csv" in c for c in captions)
    page.hover("#speedup-chart")
    with page.expect_download() as download:
        page.locator("#speedup-chart .modebar-btn").first.click()
    png = Path(download.value.path()).read_bytes()
    assert png_size(png) == (geometry["width"], geometry["height"])
    # the downloaded image itself: ink in every caption's box, none on the bottom or right edge
    ink = page.evaluate(INK, ["data:image/png;base64," + base64.b64encode(png).decode(), geometry["annotations"]])
    assert all(n > 200 for n in ink["inBoxes"]), f"a caption is blank in the PNG: {ink['inBoxes']}"
    assert ink["bottomEdge"] == 0 and ink["rightEdge"] == 0, "something is cut off at the image's edge"


@pytest.mark.parametrize("name", ["index.html", "modeling.html", "published.html", "paysoff.html"])
def test_every_png_export_fits_its_captions(page: Page, request, name):
    """Title, legend, axis title and every caption inside the image, for every chart with a PNG."""
    site = request.getfixturevalue("paysoff_site" if name == "paysoff.html" else "full_site")
    page.goto(site.as_uri() + "/" + name)
    page.wait_for_selector(".chart .main-svg")
    payloads = page.evaluate(PAYLOADS)
    assert payloads, f"{name} offers no PNG"
    for label, payload in payloads:
        assert_export_fits(page.evaluate(EXPORT_GEOMETRY, payload), f"{name} {label}")


def footer_text(page: Page) -> str:
    return re.sub(r"\s+", " ", page.locator("footer.site-footer").inner_text())


def test_each_footer_states_its_own_page_setup_and_its_links_resolve(page: Page, full_site, paysoff_site, committed_csvs):
    """Issue 20: every footer read 'Setup: Llama-2-7B · A100 · 300 requests …' and 'comes from
    sweep.csv or progress.csv', wrong for the pays-off and published pages."""
    seed = pd.read_csv(committed_csvs[0])
    seed_setup = f"{seed['num_requests'].iloc[0]} requests per run"
    for site, name in [(full_site, name) for name in PAGES] + [(paysoff_site, "paysoff.html")]:
        page.goto(site.as_uri() + "/" + name)
        text = footer_text(page)
        assert "on this site comes from" not in text, name
        assert ("sweep.csv" in text) == (name in ("index.html", "data.html")), name
        assert (seed_setup in text) == (name == "index.html"), f"{name}: {text}"
        for link in page.locator("footer.site-footer a").all():
            href = link.get_attribute("href")
            assert (site / href).is_file(), f"{name}: footer links to missing {href}"
        if name == "published.html":
            assert "comes from published.csv" in text and "data/published.toml" in text
        if name == "paysoff.html":
            recorded = site == paysoff_site
            assert ("comes from paysoff.csv, paysoff_crossovers.csv and recommended_schedules.json" in text) == recorded, text
            assert ("requests in flight" in text) == recorded and ("not recorded" in text) != recorded


def test_data_page_documents_every_file_and_published_links_to_its_input(page: Page, full_site):
    """Issue 20: data.html documented only sweep.csv and progress.csv; published.html linked
    data/published.toml to a page that did not describe it."""
    site = full_site
    page.goto(site.as_uri() + "/published.html")
    links = page.locator("main a", has_text="published.toml")
    assert links.count() >= 1
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href")
        assert href.split("#")[0] == "data.html", href
    links.first.click()
    page.wait_for_url(re.compile(r"data\.html"))
    section = page.locator("#published-toml")
    expect(section.locator("h2")).to_contain_text("published.toml")
    expect(section.locator("h3", has_text="data/published_assumptions.toml")).to_have_count(1)
    for anchor, title in (("paysoff-csv", "paysoff.csv"), ("paysoff-crossovers-csv", "paysoff_crossovers.csv"),
                          ("recommended-schedules-json", "recommended_schedules.json"), ("published-csv", "published.csv")):
        block = page.locator(f"#{anchor}")
        expect(block.locator("h2")).to_contain_text(title)
        assert block.locator("table tbody tr").count() >= 8, f"{title} has no column dictionary"
        page.goto(site.as_uri() + f"/data.html#{anchor}")
        expect(block).to_be_in_viewport()
    for link in page.locator(".files a[download]").all():
        assert (site / link.get_attribute("href")).is_file()
    # the generic scroll box every page's wide tables use
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<div class=\"table-scroll\" id=\"probe\"></div>')")
    assert page.evaluate("getComputedStyle(document.getElementById('probe')).overflowX") == "auto"


def test_calibration_tables_fit_a_phone_without_a_lone_percent_sign(page: Page, built_site):
    """Issue 20: at 390 px the calibration table wrapped "%" onto its own line and its p90 column
    needed scrolling."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(built_site.as_uri() + "/modeling.html")
    wraps = page.locator(".calibration .table-wrap")
    assert wraps.count() >= 3
    for wrap in wraps.all():
        assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "a calibration table scrolls at 390 px"
        last = wrap.locator("thead th").last.bounding_box()
        assert last["x"] + last["width"] <= 390, "the last column is off screen"
    lines = page.evaluate(
        """() => Array.from(document.querySelectorAll('.calibration td, .calibration th')).filter(c => c.textContent.includes('%')).map(c => {
             const r = document.createRange(); r.selectNodeContents(c);
             return [c.textContent, new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size]; })"""
    )
    assert lines, "no percentage in the calibration tables"
    assert [text for text, n in lines if n != 1] == [], "a percentage breaks over two lines"


# --- published.html (issues 18 and 20): check rows vs calibration rows, cells, a phone --------------
# A small published comparison written here, with the cases the page once got wrong: a row without
# speculation (no acceptance used), an error that rounds to zero, speedups, a calibration row, and
# ids long enough to push the numbers off a phone's screen.
def _published_rows() -> list[dict]:
    from simulator.schemas import PUBLISHED_COLUMNS as COLUMNS

    def row(id_, metric, published, simulated, role="check", cls="same_source", proposer="eagle", acceptance="", **extra):
        base = {c: "" for c in COLUMNS}
        base.update(id=id_, source_url="https://example.org/" + id_, metric=metric, published=published, simulated=simulated,
                    error_pct=100 * (simulated - published) / published, unit="x" if metric == "speedup" else "output tokens/s",
                    status="simulated", role=role, acceptance_class=cls, source=id_.split("-")[0], engine="vllm",
                    engine_version="0.15.1", engine_profile="vllm-0.15.1", engine_class="vllm", gpu="h100", tp=1,
                    model="meta-llama/Llama-3.1-8B-Instruct", proposer=proposer, k="" if proposer == "none" else 3,
                    batch_size=1, dataset="mt-bench", acceptance_used=acceptance, **extra)
        return base

    return [
        row("vllm-example-nospec-with-a-long-identifier", "output_tokens_per_s", 133.0, 119.95, proposer="none"),
        row("vllm-example-eagle-rounds-to-zero-error-row", "output_tokens_per_s", 108.88, 108.861, acceptance="length 1.7 at k = 1 (this row): i.i.d. 0.700"),
        row("vllm-example-speedup-assumed-acceptance-row", "speedup", 1.5, 1.56774, cls="assumed", acceptance="i.i.d. 0.535 (assumed)",
            plausible="output_len 170-210", error_range_pct="+2.0 to +7.5"),
        row("specdecode-bench-llama8b-sharegpt-eagle-bs128", "speedup", 1.3, 1.0985, role="calibration", sets="engine_overhead_ms",
            acceptance="length 2.25 at k = 3 (assumed): i.i.d. 0.622"),
    ]


@pytest.fixture(scope="module")
def published_site(tmp_path_factory, committed_csvs) -> Path:
    from simulator.schemas import PUBLISHED_COLUMNS as COLUMNS
    from simulator.website.render import SiteSources, render_site

    from repo import site_dirs

    folder = tmp_path_factory.mktemp("published-page")
    csv_path = folder / "published.csv"
    pd.DataFrame(_published_rows(), columns=list(COLUMNS)).to_csv(csv_path, index=False)
    out = folder / "site"
    render_site(SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], published_csv=csv_path, **site_dirs()), out)
    return out


def _table(page: Page, table_id: str) -> list[list[str]]:
    rows = page.locator(f"#{table_id} tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("th, td").all_inner_texts()] for i in range(rows.count())]


def _row_ids(page: Page, table_id: str) -> list[str]:
    """The rows' ids, from their anchors (the first cell names the source in words, issue 33)."""
    return [i.removeprefix("row-") for i in page.locator(f"#{table_id} tbody tr").evaluate_all("rs => rs.map(r => r.id)")]


def test_published_cells_have_units_and_no_raw_nan_or_negative_zero(page: Page, published_site):
    page.goto(published_site.as_uri() + "/published.html")
    checks, calibration = _table(page, "published-table"), _table(page, "calibration-table")
    cells = [cell for row in checks + calibration for cell in row]
    assert not [c for c in cells if "nan" in c.lower().split()], "a raw nan in a cell"
    assert not [c for c in cells if "-0.0" in c or "−0.0" in c], "an error of -0.0 %"
    by_id = dict(zip(_row_ids(page, "published-table") + _row_ids(page, "calibration-table"), checks + calibration))
    nospec = by_id["vllm-example-nospec-with-a-long-identifier"]
    assert nospec[5].startswith("none needed")  # acceptance used: said, not "nan" or blank
    assert by_id["vllm-example-eagle-rounds-to-zero-error-row"][3] == "0.0 %"
    for row in checks + calibration:  # published and simulated carry the same unit
        published, simulated = row[1], row[2]
        assert published.split(" ", 1)[1:] == simulated.split(" ", 1)[1:] and published[-1] == simulated[-1], row
    speedup = by_id["vllm-example-speedup-assumed-acceptance-row"]
    assert speedup[1] == "1.50×" and speedup[2] == "1.57×" and "+2.0 to +7.5" in speedup[6]


def test_published_check_and_calibration_rows_are_apart_in_table_chart_and_headline(page: Page, published_site):
    page.goto(published_site.as_uri() + "/published.html")
    page.wait_for_selector("#published-chart .main-svg")
    ids = lambda table: _row_ids(page, table)  # noqa: E731
    assert ids("calibration-table") == ["specdecode-bench-llama8b-sharegpt-eagle-bs128"]
    assert "specdecode-bench-llama8b-sharegpt-eagle-bs128" not in ids("published-table") and len(ids("published-table")) == 3
    traces = page.evaluate("() => document.getElementById('published-chart').data.map(t => [t.name, (t.customdata || []).map(c => c[0])])")
    calibration = {i for name, points in traces if name.startswith("calibration") for i in points}
    checks = {i for name, points in traces if not name.startswith("calibration") for i in points}
    assert calibration == {"specdecode-bench-llama8b-sharegpt-eagle-bs128"} and len(checks) == 3 and not calibration & checks
    from simulator.website.published import CLASS_LABELS

    by_class = {r[0]: r[1] for r in _table(page, "by-class")}
    assert by_class == {CLASS_LABELS[c]: n for c, n in {"same_source": "2", "same_setting_other_run": "0", "other_dataset": "0", "assumed": "1"}.items()}
    assert _table(page, "published-table")[0][0] == "example.org"  # the source in words, not the row's slug
    summary = page.locator("#summary").inner_text()
    assert "vLLM check rows (3," in summary and "1 of 1" in summary  # the calibration row's speedup miss is not counted
    page.goto(published_site.as_uri() + "/index.html")
    assert "3 check rows" in page.locator("main").inner_text() and "1 calibration row shown apart" in page.locator("main").inner_text()


def test_published_table_reads_on_a_phone(page: Page, published_site):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(published_site.as_uri() + "/published.html")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways"
    box = page.locator("#published-table-caption").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, "the caption runs off the screen"
    caption_clipped = page.evaluate("() => { const c = document.getElementById('published-table-caption'); return c.scrollWidth > c.clientWidth; }")
    assert not caption_clipped
    wrap = page.locator("#published-table").locator("xpath=..")
    assert wrap.evaluate("el => getComputedStyle(el).overflowX") == "auto"  # the rest scrolls inside its container
    visible = wrap.bounding_box()
    headers = page.locator("#published-table thead th")
    names = [h.strip() for h in headers.all_inner_texts()]
    for name in ("Published", "Simulated", "Error"):
        cell = headers.nth(names.index(name)).bounding_box()
        assert cell["x"] + cell["width"] <= visible["x"] + visible["width"] + 0.5, f"the {name} column ends at {cell['x'] + cell['width']:.0f} px, off screen"
    for name in ("Published", "Simulated"):  # headings do not run into each other
        assert page.evaluate(f"() => {{ const h = [...document.querySelectorAll('#published-table thead th')].find(e => e.innerText.trim() === '{name}'); return h.scrollWidth <= h.clientWidth; }}")


@pytest.mark.parametrize("width", [1280, 390])
def test_published_page_with_rows_passes_axe(page: Page, published_site, width):
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(published_site.as_uri() + "/published.html")
    page.wait_for_selector("#published-chart .main-svg")
    page.add_script_tag(path=str(axe_script()))
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [f"{v['id']} ({v['impact']}): {v['help']}" for v in results["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == []


# --- The pays-off page (issue 19), rendered from a small pays-off sweep -------------------------------------
# Its own fixture: the committed site's fixture renders without pays-off data.  The sweep is the small
# three-deployment spec of tests/test_sweep_paysoff.py (n-gram on Llama-2-7B/A100 with an open loop,
# EAGLE-3 and a draft model on Llama-3.1-8B/H100, closed loop only).


@pytest.fixture(scope="module")
def paysoff_site(tmp_path_factory, committed_csvs) -> Path:
    from repo import site_dirs
    from simulator.sweep.executors import LocalExecutor
    from simulator.paysoff.runner import csv_texts, run_paysoff, schedules_json_text
    from simulator.paysoff.spec import parse_paysoff_spec
    from simulator.website.render import SiteSources, render_site
    from test_sweep_paysoff import SMALL

    root = tmp_path_factory.mktemp("paysoff-site")
    output = run_paysoff(parse_paysoff_spec(SMALL), LocalExecutor(jobs=1, progress=False))
    runs, crossovers = csv_texts(output)
    files = {"p.csv": runs, "c.csv": crossovers, "s.json": schedules_json_text(output.schedules)}
    for name, text in files.items():
        (root / name).write_text(text)
    out = root / "site"
    render_site(
        SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], paysoff_csv=root / "p.csv", paysoff_crossovers_csv=root / "c.csv",
                    schedules_json=root / "s.json", **site_dirs()),
        out,
    )
    return out


def open_paysoff(page: Page, site: Path, width: int = 1280, fragment: str = "") -> Watch:
    page.set_viewport_size({"width": width, "height": 844})
    watch = Watch(page)
    page.goto(site.as_uri() + "/paysoff.html" + fragment)
    page.wait_for_selector("#paysoff-closed .main-svg")
    return watch


def _boxes_overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


@pytest.mark.parametrize("width", [1280, 390])
def test_paysoff_fits_the_screen_and_the_legend_clears_the_axis_title(page: Page, paysoff_site, width):
    watch = open_paysoff(page, paysoff_site, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    for region in page.locator(".table-scroll").all():
        if region.is_visible():
            assert region.evaluate("e => getComputedStyle(e).overflowX") == "auto"
            assert region.bounding_box()["width"] <= width
    legend = page.locator("#paysoff-closed .legend").bounding_box()
    title = page.locator("#paysoff-closed .xtitle").bounding_box()
    plot = page.locator("#paysoff-closed .nsewdrag").first.bounding_box()
    assert not _boxes_overlap(legend, title), (legend, title)
    assert not _boxes_overlap(legend, plot), "the legend covers the plot"
    assert plot["width"] >= min(200, width / 2), f"plot area only {plot['width']} px wide"
    watch.assert_clean(paysoff_site.as_uri())


def test_paysoff_y_axis_reaches_the_highest_curve_and_tooltips_carry_units(page: Page, paysoff_site):
    open_paysoff(page, paysoff_site)
    chart = page.evaluate(
        "() => { const d = document.getElementById('paysoff-closed'); return {names: d.data.map(t => t.name),"
        " ys: d.data.map(t => Array.from(t.y || [])), range: d.layout.yaxis.range, ticks: Array.from(d.layout.yaxis.tickvals)} }"
    )
    top = max(max(y) for y in chart["ys"] if y)
    assert 10 ** chart["range"][1] >= top and all(t <= 10 ** chart["range"][1] for t in chart["ticks"])
    curve = next(i for i, n in enumerate(chart["names"]) if (n or "").startswith("k = "))
    page.evaluate(f"() => Plotly.Fx.hover('paysoff-closed', [{{curveNumber: {curve}, pointNumber: 0}}])")
    page.wait_for_selector("#paysoff-closed .hoverlayer .hovertext")
    text = page.locator("#paysoff-closed .hoverlayer .hovertext").first.text_content()
    assert "in flight" in text and "median TPOT speedup" in text and "×" in text


def test_paysoff_selector_is_styled_and_switches_deployment_card_charts_and_url(page: Page, paysoff_site):
    open_paysoff(page, paysoff_site)
    select = page.locator("#pay-deployment")
    assert select.evaluate("e => parseFloat(getComputedStyle(e).paddingTop)") > 0  # .controls styling, not the browser default
    assert page.get_by_label("Deployment and acceptance").count() == 1
    default = select.input_value()
    assert default == "decaying"  # the EAGLE-3 deployment opens first
    expect(page.locator('[data-paysoff-key="decaying"]')).to_be_visible()
    expect(page.locator("#open-block")).to_be_hidden()
    expect(page.locator("#open-missing")).to_be_visible()
    description = page.locator("#closed-desc").inner_text()
    assert description.startswith("Median TPOT speedup") and "band" in description.lower() or "No k beats" in description
    select.select_option("iid-0.8")
    expect(page.locator('[data-paysoff-key="iid-0.8"]')).to_be_visible()
    expect(page.locator('[data-paysoff-key="decaying"]')).to_be_hidden()
    expect(page.locator("#open-block")).to_be_visible()
    assert page.url.endswith("#deployment=iid-0.8")
    assert page.locator("#open-desc").inner_text().startswith("Median TPOT speedup")
    ys = page.evaluate("() => document.getElementById('paysoff-closed').data.filter(t => t.name === 'k = 1')[0].y.length")
    assert ys == 3
    # a link opens the same deployment; an unknown one says so and falls back
    page.goto(paysoff_site.as_uri() + "/paysoff.html#deployment=draft-len")
    page.wait_for_selector("#paysoff-closed .main-svg")
    assert select.input_value() == "draft-len"
    page.goto(paysoff_site.as_uri() + "/paysoff.html#deployment=nope")
    page.wait_for_selector("#paysoff-closed .main-svg")
    expect(page.locator("#pay-notice")).to_have_text("Link: deployment 'nope' is not recorded; showing the default instead.")


def test_paysoff_cards_name_the_deployment_and_tables_state_their_grid(page: Page, paysoff_site):
    open_paysoff(page, paysoff_site)
    card = page.locator('[data-paysoff-key="decaying"]')
    text = card.inner_text()
    for fact in ("meta-llama/Llama-3.1-8B-Instruct", "H100", "tensor parallel 1", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                 "Verify cost", "0.24.0", "Stops paying"):
        assert fact in text, fact
    assert card.locator('a[href="https://github.com/vllm-project/vllm/pull/32374"]').count() == 1
    page.locator("#pay-deployment").select_option("iid-0.8")
    caption = page.locator('[data-paysoff-key="iid-0.8"] caption', has_text="Open loop").inner_text()
    assert "k = 2 only" in caption  # the open-loop grid's k, said where it is compared
    assert "smaller k wins" in page.locator("#map-title + .table-scroll + .note").inner_text()


def test_paysoff_without_javascript_shows_every_card_and_description(browser, paysoff_site):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(paysoff_site.as_uri() + "/paysoff.html")
    cards = page.locator(".pay-selection")
    assert cards.count() == 4
    for i in range(4):
        expect(cards.nth(i)).to_be_visible()
        assert "Closed loop: Median TPOT speedup" in cards.nth(i).inner_text()
    context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_paysoff_axe_finds_no_serious_or_critical_violations(page: Page, paysoff_site, width):
    script = axe_script()
    open_paysoff(page, paysoff_site, width)
    page.add_script_tag(path=str(script))
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}" for v in results["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == []


# --- issue 26: the pays-off answer first, usable on a phone; published tables; math; copy ---------------
# These read the committed results (recorded_site, tests/conftest.py): the defects were seen there.
def open_recorded(page: Page, site: Path, name: str, width: int, height: int = 800) -> Watch:
    page.set_viewport_size({"width": width, "height": height})
    watch = Watch(page)
    page.goto(site.as_uri() + "/" + name)
    if name == "paysoff.html":
        page.wait_for_selector("#paysoff-closed .main-svg")
    return watch


def test_paysoff_leads_with_the_answer_above_the_fold(page: Page, recorded_site):
    """Issue 26: at 1280 x 800 the deployment selector sat below the fold and the answer at y = 1,900."""
    watch = open_recorded(page, recorded_site, "paysoff.html", 1280)
    select = page.locator("#pay-deployment").bounding_box()
    assert select["y"] + select["height"] <= 800, f"the selector ends at {select['y'] + select['height']:.0f} px"
    answer = page.locator(".pay-answer:visible")
    assert answer.count() == 1
    lead = answer.locator(".pay-lead").bounding_box()
    assert lead["y"] + lead["height"] <= 800, f"the answer ends at {lead['y'] + lead['height']:.0f} px"
    assert re.search(r"\d\.\d\d× at 1 in flight", answer.inner_text())
    page.locator("#pay-deployment").select_option("llama3-70b-draft")
    expect(page.locator('[data-answer-key="llama3-70b-draft"]')).to_be_visible()
    expect(page.locator('[data-answer-key="llama3.1-8b-eagle3"]')).to_be_hidden()
    watch.assert_clean(recorded_site.as_uri())


def test_paysoff_tables_say_they_scroll_and_keep_their_first_column_on_a_phone(page: Page, recorded_site):
    """Issue 26: at 390 px the tables scrolled with no cue, and the best-k table showed two columns."""
    open_recorded(page, recorded_site, "paysoff.html", 390, 844)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    boxes = page.locator(".table-scroll:visible")
    overflowing = 0
    for i in range(boxes.count()):
        box = boxes.nth(i)
        wide = box.evaluate("b => b.scrollWidth > b.clientWidth + 1")
        cue = box.evaluate("b => getComputedStyle(b, '::before').content")
        assert ("Scroll sideways" in cue) == wide, (box.get_attribute("aria-label"), wide, cue)
        overflowing += wide
    assert overflowing >= 1
    best = page.locator(".best-k")
    frame = best.locator("xpath=..").bounding_box()
    headers = best.locator("thead th")
    inside = [h for h in headers.all() if (lambda b: b["x"] + b["width"] <= frame["x"] + frame["width"] + 0.5)(h.bounding_box())]
    assert len(inside) >= 4, f"the best-k table shows {len(inside)} columns at 390 px"
    best.locator("xpath=..").evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    first = best.locator("tbody th").first.bounding_box()
    assert abs(first["x"] - frame["x"]) < 2, "the deployment column scrolls away"


def test_paysoff_chart_keeps_its_plot_on_a_phone(page: Page, recorded_site):
    """Issue 26: at 390 px the plot was about 250 x 200 px under a legend as tall as itself."""
    open_recorded(page, recorded_site, "paysoff.html", 390, 844)
    plot = page.locator("#paysoff-closed .nsewdrag").first.bounding_box()
    legend = page.locator("#paysoff-closed .legend").bounding_box()
    assert plot["width"] >= 270 and plot["height"] >= 300, plot
    assert legend["height"] <= 0.4 * plot["height"], (legend, plot)
    assert not _boxes_overlap(legend, plot)
    texts = page.locator("#paysoff-closed .legendtext").all_text_contents()
    widths = page.evaluate("() => Array.from(document.querySelectorAll('#paysoff-closed .legend .traces')).map(t => t.getBoundingClientRect().right)")
    assert max(widths) <= page.locator("#paysoff-closed .main-svg").first.bounding_box()["width"] + 16, texts


def test_published_tables_fit_their_box_on_a_desktop_and_keep_the_error_on_a_phone(page: Page, recorded_site):
    """Issue 26: the tables were 1,065 px in a 1,056 px box ("Source" cut to "Sourc"); at 390 px the
    Error column's "%" was clipped."""
    open_recorded(page, recorded_site, "published.html", 1280)
    for wrap in page.locator(".table-wrap").all():
        assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "a published table is wider than its box at 1280 px"
    clipped = page.evaluate("() => Array.from(document.querySelectorAll('main th, main td')).filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText)")
    assert clipped == []
    page.set_viewport_size({"width": 390, "height": 844})
    for table in ("published-table", "calibration-table"):
        cells = page.locator(f"#{table} tbody td:nth-child(4)")
        assert cells.count() > 0
        cut = cells.evaluate_all("cs => cs.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText)")
        assert cut == [], f"{table}: error cells clipped at 390 px: {cut[:3]}"


def _tick_value(text: str) -> float:
    return float(text.replace(",", "").replace("k", "e3").replace("\u2212", "-"))


def test_published_scatter_labels_every_tick_with_its_value(page: Page, recorded_site):
    """Issue 26: the log axes' minor ticks printed as bare digits ("2", "5" between 10 and 100)."""
    open_recorded(page, recorded_site, "published.html", 1280)
    page.wait_for_selector("#published-chart .main-svg")
    for axis in ("xtick", "ytick"):
        labels = [t for t in page.locator(f"#published-chart .{axis} text").all_text_contents() if t.strip()]
        values = [_tick_value(t) for t in labels]
        assert len(values) >= 3 and values == sorted(set(values)), f"{axis}: {labels}"


def test_math_font_loads_braces_stretch_and_primes_read(page: Page, built_site):
    """Issue 26: without a math font the brace of min{…} did not stretch and the prime of k′ was tiny."""
    watch = open_recorded(page, built_site, "modeling.html", 1280)
    measured = page.evaluate(
        """async () => {
          await document.fonts.ready;
          const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === 'Noto Sans Math').map(f => f.status);
          const block = [...document.querySelectorAll('math[display="block"]')].find(m => m.textContent.includes('min'));
          const mo = t => [...block.querySelectorAll('mo')].find(o => o.textContent === t).getBoundingClientRect().height;
          const inline = [...document.querySelectorAll('math')].find(m => m.textContent.replace(/\\s/g, '') === 'k\\u2032');
          const box = el => el.getBoundingClientRect();
          const letters = [...inline.querySelectorAll('mi')];
          return {faces, brace: mo('{'), equals: mo('='), k: box(letters[0]).height, prime: box(letters[1]).height,
                  primeTop: box(letters[1]).top, kTop: box(letters[0]).top};
        }"""
    )
    assert measured["faces"] == ["loaded"], measured
    assert measured["brace"] > 4 * measured["equals"], measured
    assert measured["prime"] >= 0.3 * measured["k"], measured
    assert abs(measured["primeTop"] - measured["kTop"]) <= 0.25 * measured["k"], measured
    watch.assert_clean(built_site.as_uri())


def test_the_vllm_serve_command_has_a_copy_button(browser, site_server):
    """Issue 26: the validation page's `vllm serve` command had no Copy button."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.goto(site_server + "validation.html")
    block = page.locator("pre", has_text="vllm serve")
    expect(block).to_have_count(1)
    block.get_by_role("button", name="Copy command").click()
    expect(block.get_by_role("button")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("vllm serve ") and "--speculative-config" in copied and copied == block.locator("code").inner_text().rstrip("\n")
    context.close()


# --- issue 33: the site, read on a phone ------------------------------------------------------------
def test_home_first_screen_on_a_phone_has_a_result_and_the_pays_off_link(page: Page, recorded_site):
    """Issue 33: the hero had no link to the pays-off page and no result on the first screen."""
    watch = open_recorded(page, recorded_site, "index.html", 390, 844)
    result = page.locator("#hero-result")
    box = result.bounding_box()
    assert box["y"] + box["height"] <= 844, f"the hero's result ends at {box['y'] + box['height']:.0f} px"
    assert re.search(r"\d\.\d\d×–\d\.\d\d× median TPOT speedup", result.inner_text())
    link = result.get_by_role("link", name=re.compile("pay off"))
    assert link.get_attribute("href") == "paysoff.html" and link.bounding_box()["y"] < 844
    watch.assert_clean(recorded_site.as_uri())


def test_home_chart_y_axis_follows_the_selection(page: Page, built_site, csv):
    """Issue 33: the y axis was 0.42-12x for every selection; each selection's axis now holds its own
    points (read from the CSV) without five-fold empty room."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(built_site.as_uri() + "/index.html")
    page.wait_for_selector("#speedup-chart .main-svg")
    ranges = []
    for load in sorted(csv["arrival_rate"].unique())[:2]:
        page.locator("#load").select_option(f"{load:g}")
        page.wait_for_timeout(200)
        y = page.evaluate("document.getElementById('speedup-chart').layout.yaxis.range")
        acceptance = float(page.locator("#acceptance").input_value())
        rows = csv[(csv["arrival_rate"] == load) & (csv["acceptance_rate"] == acceptance) & (csv["num_speculative_tokens"] > 0)]["tpot_speedup"]
        low, high = min(rows.min(), 1.0), max(rows.max(), 1.0)
        assert 10 ** y[0] < low and 10 ** y[1] > high and 10 ** y[1] < 1.4 * high, (load, [10 ** v for v in y], (low, high))
        ranges.append(tuple(y))
    assert ranges[0] != ranges[1]


def test_published_scatter_has_the_band_and_room_on_a_phone(page: Page, recorded_site):
    """Issue 33: the scatter squeezed five decades into 227 px on a phone and drew no ±15 % band."""
    open_recorded(page, recorded_site, "published.html", 390, 844)
    page.wait_for_selector("#published-chart .main-svg")
    plot = page.locator("#published-chart .nsewdrag").first.bounding_box()
    assert plot["height"] >= 360 and plot["width"] >= 280, plot
    legend = page.locator("#published-chart .legend").bounding_box()
    title = page.locator("#published-chart .xtitle").bounding_box()
    assert not _boxes_overlap(legend, plot) and not _boxes_overlap(legend, title), (legend, plot, title)
    names = page.evaluate("document.getElementById('published-chart').data.map(t => t.name)")
    assert "within ±15 % (not a miss)" in names
    band = page.evaluate("document.getElementById('published-chart').data.find(t => t.fill === 'tonexty')")
    assert all(abs(y / x - 0.85) < 1e-9 for x, y in zip(band["x"], band["y"]))
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_published_misses_are_grouped_by_cause_and_link_their_rows(page: Page, recorded_site):
    """Issue 33: 84 miss bullets ran about 8,300 px with no link to their row or cause."""
    open_recorded(page, recorded_site, "published.html", 390, 844)
    section = page.locator("#misses")
    assert section.bounding_box()["height"] < 8300 / 2, section.bounding_box()
    groups = section.locator(".miss-group")
    assert groups.count() >= 5
    first = groups.first
    first.locator("summary").click()
    link = first.locator(".miss-rows a").first
    target = link.get_attribute("href")
    link.click()
    expect(page.locator(target)).to_be_in_viewport()
