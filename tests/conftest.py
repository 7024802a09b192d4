"""Test tiers, and shared fixtures: a site rendered from the committed CSVs, a local HTTP server
for it, and the Chromium that Playwright drives (``$PLAYWRIGHT_CHROMIUM``, else Debian's
``/usr/bin/chromium``, else Playwright's own download; browser tests skip when there is none).

Tiers, by marker (``pytest -m unit`` runs the fast tier):

* ``browser``: uses Playwright's ``page``; marked here from the fixture.
* ``torch``: needs PyTorch; marked by hand with its skip (``tiers.requires("torch", ...)``).
* ``shared``: needs ``../shared``; marked by hand (``tiers.requires("shared", ...)`` or ``@pytest.mark.shared``).
* ``simulation``: runs a Vidur simulation; marked in the test module (``pytestmark`` or per test).
* ``unit``: everything else, marked here (no tier is read from a skip reason's wording).  A unit
  test that starts a Vidur simulation in the test process (a fixture's included) or in a worker
  it forks fails, naming the marker it needs, so the tier cannot drift; tests that simulate
  through a subprocess are marked by hand.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from repo import DATA_DIR, REPO_ROOT, RESULTS_DIR, site_dirs
from tiers import TIERS
from simulator.website.render import SiteSources, render_site

SYSTEM_CHROMIUM = Path("/usr/bin/chromium")


def _chromium_executable():
    """Path to a Chromium for Playwright, '' for Playwright's own, None when there is none."""
    explicit = os.environ.get("PLAYWRIGHT_CHROMIUM")
    if explicit:
        return explicit
    if SYSTEM_CHROMIUM.exists():
        return str(SYSTEM_CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        return "" if Path(p.chromium.executable_path).exists() else None


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Tests never write into ~/.cache: the predictor cache lives in a session temp dir unless
    VIDUR_SPECDEC_CACHE names one (set it to reuse fitted forests across test sessions)."""
    if os.environ.get("VIDUR_SPECDEC_CACHE"):
        yield Path(os.environ["VIDUR_SPECDEC_CACHE"])
        return
    path = tmp_path_factory.mktemp("vidur-specdec-cache")
    os.environ["VIDUR_SPECDEC_CACHE"] = str(path)
    try:
        yield path
    finally:
        os.environ.pop("VIDUR_SPECDEC_CACHE", None)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "page" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The unit tier stays fast: while a test marked ``unit`` is set up, run and torn down (its
    fixtures included, and any worker process it forks), starting a Vidur simulation fails.  A
    simulation in a subprocess it launches (``python -m simulator``) cannot be seen from here:
    such tests are marked ``simulation`` by hand."""
    hidden_torch = "torch" in sys.modules and sys.modules["torch"] is None  # the run that hides PyTorch (tests/test_measure.py)
    if item.get_closest_marker("unit") is None or hidden_torch:  # scipy, under Vidur's imports, fails on a hidden module
        yield
        return
    from simulator.vidur.runtime import Simulator

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{item.nodeid} runs a Vidur simulation: mark it `simulation` (pytestmark or @pytest.mark.simulation)")

    original = Simulator.run
    Simulator.run = refuse
    try:
        yield
    finally:
        Simulator.run = original


def _checkout_outputs() -> dict:
    return {p.relative_to(DATA_DIR).as_posix(): p.read_bytes() for folder in (DATA_DIR, RESULTS_DIR) for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def checkout_untouched():
    """No test writes into the checkout's data/ (a build under test that forgot one of its path
    flags once rewrote data/results/paysoff.csv): the session fails if any recorded file changed."""
    before = _checkout_outputs()
    yield
    after = _checkout_outputs()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, f"the test session changed data/ or data/results/ in the checkout: {changed}"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments plus the Chromium found above."""
    executable = _chromium_executable()
    if executable is None:
        reason = "no Chromium: install Debian's chromium, set PLAYWRIGHT_CHROMIUM, or run `playwright install chromium`"
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(reason + " (REQUIRE_BROWSER is set: browser tests must run here)")
        pytest.skip(reason)
    return {**browser_type_launch_args, **({"executable_path": executable} if executable else {})}


@pytest.fixture(scope="session")
def base_url(pytestconfig):
    """pytest-playwright's fallback, as a plain function: its own is a session fixture defined
    as a method, which pytest deprecates (an error under -W error)."""
    return pytestconfig.getoption("--base-url") or pytestconfig.getini("base_url") or None


@pytest.fixture(scope="session")
def committed_csvs() -> tuple[Path, Path]:
    sweep, progress = RESULTS_DIR / "sweep.csv", RESULTS_DIR / "progress.csv"
    if not sweep.is_file() or not progress.is_file():
        pytest.fail("data/results/sweep.csv and data/results/progress.csv are committed results; run `python build.py` to record them")
    return sweep, progress


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, committed_csvs) -> Path:
    """The site rendered from the committed CSVs (what `python build.py --skip-sweep` publishes)."""
    out = tmp_path_factory.mktemp("published") / "site"
    render_site(SiteSources(sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], **site_dirs()), out)
    return out


@pytest.fixture(scope="session")
def recorded_site(tmp_path_factory, committed_csvs) -> Path:
    """The site rendered from every committed result (what `python build.py --skip-sweep`
    publishes): the seed sweep, the progress check, the pays-off sweep and the published rows."""
    out = tmp_path_factory.mktemp("recorded") / "site"
    render_site(
        SiteSources(
            sweep_csv=committed_csvs[0], progress_csv=committed_csvs[1], paysoff_csv=RESULTS_DIR / "paysoff.csv",
            paysoff_crossovers_csv=RESULTS_DIR / "paysoff_crossovers.csv", schedules_json=RESULTS_DIR / "recommended_schedules.json",
            published_csv=RESULTS_DIR / "published.csv", **site_dirs(),
        ),
        out,
    )
    return out


@pytest.fixture(scope="session")
def site_server(built_site):
    """The built site over HTTP on a free local port; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory) -> Path:
    """Screenshots for people to look at: $TEST_ARTIFACTS when set, else a session temp dir
    (tests never write into the repository)."""
    explicit = os.environ.get("TEST_ARTIFACTS")
    path = Path(explicit) if explicit else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def site_sources_copy(tmp_path, committed_csvs) -> SiteSources:
    """Writable copies of templates, content and CSVs, for tests that break one of them."""
    templates, content = tmp_path / "templates", tmp_path / "content"
    shutil.copytree(REPO_ROOT / "templates", templates)
    shutil.copytree(REPO_ROOT / "content", content)
    sweep, progress = tmp_path / "sweep.csv", tmp_path / "progress.csv"
    shutil.copyfile(committed_csvs[0], sweep)
    shutil.copyfile(committed_csvs[1], progress)
    return SiteSources(sweep_csv=sweep, progress_csv=progress, templates_dir=templates, content_dir=content, docs_dir=REPO_ROOT / "docs")
