"""Render the site: Jinja2 templates (autoescaped) + Markdown copy + Plotly JSON + local plotly.js.

Everything is written into a staging directory beside the output and swapped in at the end
(:mod:`simulator.util.publication`), so a build that fails at any point leaves the previously
published site as it was.
"""

from __future__ import annotations

import json
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2
import pandas as pd

from simulator.util.errors import ConfigError
from simulator.schemas import OVERLOAD_TTFT_GROWTH, VALIDATION_REPORT_SCHEMA
from simulator.website import citations
from simulator.website import data_page
from simulator.website import fonts
from simulator.website import markdown as site_markdown
from simulator.website import names
from simulator.website import paysoff_page
from simulator.website import peer
from simulator.website import provenance as page_provenance
from simulator.website import published as published_page
from simulator.website import verify as verify_section
from simulator.util import units
from simulator.website import calibration as calibration_reports
from simulator.website.charts import (
    ATTENTION_STYLE, OVERLOAD_NAME, OVERLOAD_STYLE, PLOT_CONFIG, REFERENCE_COLOR, SPAN_COLOR,
    export_layout, figure_json, progress_figure, speedup_figure, speedup_range,
)
from simulator.website.pages import PAGES, SITE_PAGES
from simulator.util.publication import Publication
from simulator.website.recorded import Recorded, load_progress, load_recorded

TEMPLATES = ("base.html", "_setup.html", "_selection.html", "_paysoff_checks.html") + tuple(PAGES)
STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = ("site.css", "site.js")
PLOTLY_JS = "plotly.min.js"
# plotly.js's basic bundle (scatter, bar, pie): a quarter of the full bundle, same version
PLOTLY_BASIC_BUNDLE = STATIC_DIR / "vendor" / "plotly-basic.min.js"
SWEEP_CSV_NAME = "sweep.csv"
PROGRESS_CSV_NAME = "progress.csv"
FAVICON = "data:image/svg+xml," + urllib.parse.quote(
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>"
    "<rect width='16' height='16' rx='3' fill='#1f5fa8'/><path d='M3 11h2V7H3zm4 0h2V4H7zm4 0h2V9h-2z' fill='#fff'/></svg>"
)


@dataclass(frozen=True)
class SiteSources:
    """What a site is made from.  ``validation_report``: the harness's JSON, None = pending."""

    sweep_csv: Path
    progress_csv: Path
    templates_dir: Path
    content_dir: Path
    docs_dir: Path
    validation_report: Optional[Path] = None
    source_url: Optional[str] = None  # repository URL at a commit: "Source:" links become absolute
    # the pays-off sweep's files (data/results/paysoff.csv, data/results/paysoff_crossovers.csv, data/results/recommended_schedules.json)
    paysoff_csv: Optional[Path] = None
    paysoff_crossovers_csv: Optional[Path] = None
    schedules_json: Optional[Path] = None
    published_csv: Optional[Path] = None  # data/results/published.csv: the published-measurements page
    # data/peer/aiconfigurator.csv (bench/peer_aiconfigurator.py): the published page's side-by-side with a peer; None: not run
    peer_csv: Optional[Path] = None
    verify_tables_dir: Optional[Path] = None  # a profile dir with verify_attention.csv: the measured verify step


def check_sources(sources: SiteSources) -> None:
    """Fail before any simulation if a template or content file is missing."""
    for name in TEMPLATES:
        if not (sources.templates_dir / name).is_file():
            raise ConfigError(f"template {sources.templates_dir / name} is missing")
    for name in _content_files():
        if not (sources.content_dir / name).is_file():
            raise ConfigError(f"content file {sources.content_dir / name} is missing")
    for name in STATIC_FILES:
        if not (STATIC_DIR / name).is_file():
            raise ConfigError(f"static file {STATIC_DIR / name} is missing")
    if sources.published_csv is not None and not sources.published_csv.is_file():
        raise ConfigError(f"published comparison {sources.published_csv} does not exist; run python build.py")
    if sources.validation_report is not None and not sources.validation_report.is_file():
        raise ConfigError(f"validation report {sources.validation_report} does not exist")
    check_source_url(sources.source_url)


def check_source_url(url: Optional[str]) -> None:
    if url is None:
        return
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise ConfigError(f"--source-url {url!r}: expected an http(s) URL of the repository at a commit, without ?query or #fragment")


def render_site(sources: SiteSources, out_dir: Path) -> None:
    """Build the site into a staging directory and swap it in as ``out_dir``."""
    with Publication() as publication:
        render_into(sources, publication.directory(out_dir))


def render_into(sources: SiteSources, directory: Path) -> None:
    """Every page and the files it links into ``directory`` (a staging directory: the caller swaps
    it in).  All inputs are read and checked before the first page is written."""
    check_sources(sources)
    recorded = load_recorded(sources.sweep_csv)
    progress = load_progress(sources.progress_csv)
    paysoff_data = paysoff_page.load(sources.paysoff_csv, sources.paysoff_crossovers_csv, sources.schedules_json)
    published_frame = _published_frame(sources.published_csv)
    verify = verify_section.context(sources.verify_tables_dir)
    markdown = site_markdown.parser()
    env = _environment(sources.templates_dir)
    context = _page_context(sources, markdown, recorded, progress, paysoff_data, published_frame, verify)
    context["data_files"] = data_page.entries(
        _data_sizes(recorded, progress, paysoff_data, published_frame),
        {
            SWEEP_CSV_NAME: sources.sweep_csv,
            PROGRESS_CSV_NAME: sources.progress_csv,
            paysoff_page.CSV_NAME: sources.paysoff_csv,
            paysoff_page.CROSSOVERS_NAME: sources.paysoff_crossovers_csv,
            paysoff_page.SCHEDULES_NAME: sources.schedules_json,
            published_page.CSV_NAME: sources.published_csv,
        },
        sources.source_url,
    )
    footers = page_provenance.footers(
        files=context["files"],
        progress=progress,
        calibration_docs=tuple(report["doc"] for report in context["calibration"]),
        paysoff=paysoff_data,
        published=published_frame,
        published_file=published_page.CSV_NAME,
        paysoff_files=(paysoff_page.CSV_NAME, paysoff_page.CROSSOVERS_NAME, paysoff_page.SCHEDULES_NAME) if paysoff_data is not None else (),
        validation_name=context["validation"]["name"] if context["validation"] else None,
        verify_measured=not verify["pending"],
    )
    cited = _write_pages(env, context, footers, directory)
    # the cited docs/ and data/ files sit beside docs_dir in the checkout (build.py passes its docs/)
    citations.ship(cited, sources.docs_dir.parent, directory)
    _copy_site_files(sources, directory)


def _page_context(sources: SiteSources, markdown, recorded: Recorded, progress, paysoff_data, published_frame, verify: dict) -> dict:
    """What every template renders with: the shared frame (copy, setup, navigation), the seed
    sweep's and the progress check's views, and each other page's own context."""
    copy = _copy(markdown, sources)
    setup = recorded.setup
    calibration = calibration_reports.reports(markdown, sources.docs_dir, str(setup["device"]), sources.source_url)
    return {
        "copy": copy,
        "setup": setup,
        "favicon": FAVICON,
        "pages": PAGES,
        "chart_pages": {page.file for page in SITE_PAGES if page.charts},
        "files": {"sweep": SWEEP_CSV_NAME, "progress": PROGRESS_CSV_NAME},
        **_sweep_context(sources, recorded, progress),
        "validation": _validation(sources.validation_report),
        "calibration": calibration,
        "source_url": sources.source_url,
        "paysoff": paysoff_page.context(paysoff_data, published_frame),
        "published": published_page.context(sources.published_csv, page_provenance.published_line(published_frame)) if sources.published_csv else None,
        "peer": peer.peer_context(sources.peer_csv) if sources.peer_csv else None,
        "peer_not_run": peer.NOT_RUN,
        "peer_file": peer.CSV_NAME,
        "verify": verify,
        "band_meaning": names.BAND_MEANING,
    }


def _sweep_context(sources: SiteSources, recorded: Recorded, progress) -> dict:
    """The seed sweep's explorer and load notes and the progress check's table and chart, with
    the legend and overload threshold their charts share."""
    return {
        "sweep_rows": len(recorded.frame),
        "progress_rows": len(progress),
        "sweep_kib": _kib(sources.sweep_csv),
        "progress_kib": _kib(sources.progress_csv),
        "explorer": _explorer(recorded),
        "loads": _load_notes(recorded),
        "progress": progress.to_dict("records"),
        "progress_max_difference": float(100 * (progress["simulated_progress_per_step"] / progress["closed_form_progress_per_step"] - 1).abs().max()),
        "progress_figure": _progress_payload(progress),
        "plot_config": PLOT_CONFIG,
        "legend": {
            "attentions": [(a, ATTENTION_STYLE[a]) for a in recorded.attentions],
            "span": SPAN_COLOR,
            "reference": REFERENCE_COLOR,
            "overload": {"name": OVERLOAD_NAME, **OVERLOAD_STYLE},
        },
        "overload_threshold": OVERLOAD_TTFT_GROWTH,
    }


def _write_pages(env: jinja2.Environment, context: dict, footers: dict, directory: Path) -> set[str]:
    """Each page rendered with its footer and its citations linked; returns the files they cite,
    which the site ships beside the pages so every link resolves offline."""
    cited: set[str] = set()
    for page in PAGES:
        html, cites = citations.link(env.get_template(page).render(page=page, footer=footers[page], **context))
        cited |= cites
        (directory / page).write_text(html, encoding="utf-8")
    return cited


def _copy_site_files(sources: SiteSources, directory: Path) -> None:
    """The static assets (styles, scripts, plotly.js, fonts) and the recorded data the pages offer
    for download, copied beside the pages."""
    for name in STATIC_FILES:
        shutil.copyfile(STATIC_DIR / name, directory / name)
    shutil.copyfile(PLOTLY_BASIC_BUNDLE, directory / PLOTLY_JS)
    fonts.copy_into(directory)
    shutil.copyfile(sources.sweep_csv, directory / SWEEP_CSV_NAME)
    shutil.copyfile(sources.progress_csv, directory / PROGRESS_CSV_NAME)
    paysoff_page.copy_files(sources.paysoff_csv, sources.paysoff_crossovers_csv, sources.schedules_json, directory)
    if sources.published_csv:
        shutil.copyfile(sources.published_csv, directory / published_page.CSV_NAME)
    if sources.peer_csv and sources.peer_csv.is_file():
        shutil.copyfile(sources.peer_csv, directory / peer.CSV_NAME)


def _copy(markdown, sources: SiteSources) -> dict:
    """Every page's Markdown, rendered: "home/hero" -> copy["home"]["hero"]."""
    copy: dict = {}
    for page in SITE_PAGES:
        for name in page.copy:
            *folders, leaf = name.split("/")
            slot = copy
            for folder in folders:
                slot = slot.setdefault(folder, {})
            slot[leaf] = site_markdown.render(markdown, sources.content_dir / f"{name}.md", source_url=sources.source_url)
    return copy


def _environment(templates_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        ms=units.milliseconds,
        seconds=units.seconds,
        speedup=units.speedup,
        batch=units.batch,
        num=units.number,
        attention=units.attention_label,
        model=units.model_label,
    )
    return env


def _content_files() -> list[str]:
    return [f"{name}.md" for page in SITE_PAGES for name in page.copy]


def _explorer(recorded: Recorded) -> dict:
    """Everything the home page's selectors can show, keyed 'load|acceptance'."""
    figures, summaries, titles, selections = {}, {}, {}, []
    default_load = recorded.loads[len(recorded.loads) // 2]
    default_acceptance = recorded.acceptances[len(recorded.acceptances) // 2]
    setup_line = _setup_line(recorded.setup)
    for load in recorded.loads:
        baseline = recorded.baseline(load)
        for acceptance in recorded.acceptances:
            key = f"{units.number(load)}|{units.number(acceptance)}"
            rows = recorded.selection(load, acceptance)
            # each selection's own y-range (issue 33: one 0.42-12x axis for every selection flattened
            # a 1.1-1.8x selection into a band); the log scale and the 1x line stay
            y_range = speedup_range(rows[rows["num_speculative_tokens"] > 0]["tpot_speedup"].tolist())
            titles[key] = f"Predicted median TPOT speedup at {units.number(load)} req/s, acceptance rate {units.number(acceptance)}"
            notes = [
                f"Each vertical line spans the two verify-attention cost bounds: {names.BAND_MEANING}. Dashed line: 1× = no-speculation baseline. The y-axis fits this selection.",
                setup_line,
            ]
            if _overloaded(baseline):
                notes.insert(0, _overload_caveat(load, baseline, recorded.setup))
            figures[key] = {
                "figure": figure_json(speedup_figure(rows, recorded.attentions, recorded.proposals, y_range)),
                "export": export_layout(titles[key], notes),
                "filename": f"tpot-speedup-{units.number(load)}rps-acceptance-{units.number(acceptance)}",
            }
            summaries[key] = _summary(load, acceptance, rows, recorded)
            selections.append({
                "key": key,
                "id": f"results-{units.number(load)}-{units.number(acceptance)}".replace(".", "_"),
                "load": load,
                "acceptance": acceptance,
                "title": titles[key],
                "baseline": baseline.to_dict(),
                "rows": rows.sort_values(["num_speculative_tokens", "attention"]).to_dict("records"),
                "default": load == default_load and acceptance == default_acceptance,
            })
    data = {
        "loads": [units.number(v) for v in recorded.loads],
        "acceptances": [units.number(v) for v in recorded.acceptances],
        "default": {"load": units.number(default_load), "acceptance": units.number(default_acceptance)},
        "figures": figures,
        "summaries": summaries,
        "titles": titles,
        "config": PLOT_CONFIG,
    }
    return {"data": data, "selections": selections, "default_key": f"{data['default']['load']}|{data['default']['acceptance']}",
            "headline": _headline(recorded, default_load, default_acceptance)}


def _headline(recorded: Recorded, load: float, acceptance: float) -> dict:
    """The home page's first-screen result: the best k at the default selection, with its span
    over the two verify-cost bounds, read from the recorded rows."""
    rows = recorded.selection(load, acceptance)
    speculative = rows[rows["num_speculative_tokens"] > 0]
    best_k = int(speculative.groupby("num_speculative_tokens")["tpot_speedup"].min().idxmax())
    at_k = speculative[speculative["num_speculative_tokens"] == best_k]["tpot_speedup"]
    return {
        "load": units.number(load), "acceptance": units.number(acceptance), "k": best_k,
        "low": units.speedup(float(at_k.min())), "high": units.speedup(float(at_k.max())),
        "model": units.model_label(str(recorded.setup["model"])), "device": str(recorded.setup["device"]).upper(),
    }


def _progress_payload(progress) -> dict:
    title = "Tokens of progress per verify step: simulated (markers) vs closed form (lines), batch 1"
    return {
        "figure": figure_json(progress_figure(progress)),
        "export": export_layout(title, [page_provenance.progress_line(progress) + " Source: progress.csv."]),
        "filename": "progress-per-verify-step",
        "config": PLOT_CONFIG,
    }


def _setup_line(setup: dict) -> str:
    return (
        f"Simulated with Vidur {setup['vidur_version']} + vidur-specdec {setup['simulator_version']}: {units.model_label(setup['model'])}, "
        f"{str(setup['device']).upper()} profile ({setup['profile_source']}), {setup['num_requests']} requests per run, "
        f"{setup['prompt_tokens']} prompt / {setup['output_tokens']} output tokens. Source: sweep.csv."
    )


def _overloaded(row) -> bool:
    return str(row["overloaded"]).lower() == "true"


def _overload_caveat(load: float, baseline, setup: dict) -> str:
    return (
        f"Overloaded at {units.number(load)} req/s: the no-speculation baseline's queue grows through the run "
        f"({baseline['ttft_growth']:.1f}× median TTFT, last vs first tenth), so every speedup here depends on the run length ({setup['num_requests']} requests)."
    )


def _summary(load: float, acceptance: float, rows, recorded: Recorded) -> str:
    parts = []
    for k in recorded.proposals:
        at_k = rows[rows["num_speculative_tokens"] == k]
        values = ", ".join(
            f"{units.attention_label(a)} {units.speedup(float(at_k[at_k['attention'] == a]['tpot_speedup'].iloc[0]))}" for a in recorded.attentions
        )
        parts.append(f"k = {k}: {values}")
    return f"At {units.number(load)} req/s and acceptance {units.number(acceptance)}, predicted median TPOT speedup: " + "; ".join(parts) + "."


def _load_notes(recorded: Recorded) -> list[dict]:
    """Per load: the baseline's queue-growth measurement and how many runs there grew a queue."""
    notes = []
    for load in recorded.loads:
        at = recorded.frame[recorded.frame["arrival_rate"] == load]
        baseline = recorded.baseline(load)
        notes.append({
            "load": load,
            "baseline": baseline.to_dict(),
            "overloaded_runs": int(at["overloaded"].astype(str).str.lower().eq("true").sum()),
            "runs": len(at),
        })
    return notes


def _validation(path: Optional[Path]) -> Optional[dict]:
    """The validation harness's report, flattened to (key, value) rows for display."""
    if path is None:
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"validation report {path}: not readable JSON ({exc})") from exc
    if not isinstance(report, dict) or report.get("schema") != VALIDATION_REPORT_SCHEMA:
        raise ConfigError(f"validation report {path}: not a validation report (expected a JSON object with schema {VALIDATION_REPORT_SCHEMA!r})")
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else str(key), value[key])
        else:
            rows.append((prefix, value if isinstance(value, str) else json.dumps(value)))

    walk("", report)
    return {"name": path.name, "rows": rows}


def _data_sizes(recorded: Recorded, progress, paysoff_data, published) -> dict[str, str]:
    """How much each recorded file holds, for the data page's download box."""
    sizes = {SWEEP_CSV_NAME: f"{len(recorded.frame)} rows", PROGRESS_CSV_NAME: f"{len(progress)} rows"}
    if paysoff_data is not None:
        rows, crossovers, schedules = paysoff_data
        sizes[paysoff_page.CSV_NAME] = f"{len(rows)} rows"
        sizes[paysoff_page.CROSSOVERS_NAME] = f"{len(crossovers)} rows"
        sizes[paysoff_page.SCHEDULES_NAME] = f"{len(schedules.get('schedules', []))} schedules"
    if published is not None:
        sizes[published_page.CSV_NAME] = f"{len(published)} rows"
    return sizes


def _published_frame(path: Optional[Path]):
    """published.csv as read for its footer line (the page's own module checks its columns)."""
    if path is None:
        return None
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"published comparison {path}: not readable ({exc})") from exc


def _kib(path: Path) -> str:
    return f"{path.stat().st_size / 1024:.1f}"
