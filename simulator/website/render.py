"""Render the site: Jinja2 templates (autoescaped) + Markdown copy + Plotly JSON + local plotly.js.

Everything is written into a staging directory beside the output and swapped in at the end,
so a build that fails at any point leaves the previously published site as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import jinja2
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from simulator.errors import ConfigError
from simulator.sweep.runner import OVERLOAD_TTFT_GROWTH
from simulator.validation.report import SCHEMA as REPORT_SCHEMA
from simulator.website import units
from simulator.website.charts import ATTENTION_STYLE, PLOT_CONFIG, REFERENCE_COLOR, SPAN_COLOR, figure_json, progress_figure, speedup_figure
from simulator.website.recorded import Recorded, load_progress, load_recorded

PAGES = {"index.html": "Home", "modeling.html": "Modeling notes", "validation.html": "Validation workflow", "data.html": "Data"}
TEMPLATES = ("base.html", "_setup.html") + tuple(PAGES)
HOME_COPY = ("hero", "verify-step", "predictions", "results", "chart-note", "model", "propose", "verify", "advance", "validation", "limits")
PAGE_COPY = ("modeling", "modeling-progress", "modeling-calibration", "validation", "data")
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
    if sources.validation_report is not None and not sources.validation_report.is_file():
        raise ConfigError(f"validation report {sources.validation_report} does not exist")


def render_site(sources: SiteSources, out_dir: Path) -> None:
    """Build the site into a staging directory and swap it in as ``out_dir``."""
    with staged_directory(out_dir) as staging:
        render_into(sources, staging)


def render_into(sources: SiteSources, directory: Path) -> None:
    check_sources(sources)
    recorded = load_recorded(sources.sweep_csv)
    progress = load_progress(sources.progress_csv)
    markdown = MarkdownIt("commonmark", {"html": False, "typographer": True}).enable(["table", "replacements", "smartquotes"])
    env = _environment(sources.templates_dir)
    copy = {name: _markdown(markdown, sources.content_dir / f"{name}.md") for name in PAGE_COPY}
    copy["home"] = {name: _markdown(markdown, sources.content_dir / "home" / f"{name}.md") for name in HOME_COPY}
    setup = recorded.setup
    calibration_doc = sources.docs_dir / f"calibration-{setup['device']}.md"
    context = {
        "copy": copy,
        "setup": setup,
        "favicon": FAVICON,
        "pages": PAGES,
        "files": {"sweep": SWEEP_CSV_NAME, "progress": PROGRESS_CSV_NAME},
        "sweep_rows": len(recorded.frame),
        "progress_rows": len(progress),
        "sweep_kib": _kib(sources.sweep_csv),
        "progress_kib": _kib(sources.progress_csv),
        "explorer": _explorer(recorded),
        "loads": _load_notes(recorded),
        "progress": progress.to_dict("records"),
        "progress_max_difference": float(100 * (progress["simulated_progress_per_step"] / progress["closed_form_progress_per_step"] - 1).abs().max()),
        "progress_figure": figure_json(progress_figure(progress)),
        "plot_config": PLOT_CONFIG,
        "legend": {"attentions": [(a, ATTENTION_STYLE[a]) for a in recorded.attentions], "span": SPAN_COLOR, "reference": REFERENCE_COLOR},
        "overload_threshold": OVERLOAD_TTFT_GROWTH,
        "validation": _validation(sources.validation_report),
        "calibration": _markdown(markdown, calibration_doc, shift_headings=2) if calibration_doc.is_file() else None,
        "calibration_doc": f"docs/{calibration_doc.name}",
    }
    for page in PAGES:
        html = env.get_template(page).render(page=page, **context)
        (directory / page).write_text(html, encoding="utf-8")
    for name in STATIC_FILES:
        shutil.copyfile(STATIC_DIR / name, directory / name)
    shutil.copyfile(PLOTLY_BASIC_BUNDLE, directory / PLOTLY_JS)
    shutil.copyfile(sources.sweep_csv, directory / SWEEP_CSV_NAME)
    shutil.copyfile(sources.progress_csv, directory / PROGRESS_CSV_NAME)


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty directory beside ``target``; on success it replaces ``target``, else it is removed."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"output dir {target} exists and is not a directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.staging-"))
    except OSError as exc:
        raise ConfigError(f"output dir {target}: cannot write there ({exc.strerror or exc})") from exc
    try:
        yield staging
        os.chmod(staging, 0o755)
        swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging`` with two renames; the old tree is deleted last."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
        os.rename(target, old / "site")
    try:
        os.rename(staging, target)
    except BaseException:
        if old is not None:
            os.rename(old / "site", target)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


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
        num=units.number,
        attention=units.attention_label,
        model=units.model_label,
    )
    return env


def _content_files() -> list[str]:
    return [f"{name}.md" for name in PAGE_COPY] + [f"home/{name}.md" for name in HOME_COPY]


def _markdown(markdown: MarkdownIt, path: Path, shift_headings: int = 0) -> Markup:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"content file {path}: cannot read ({exc.strerror or exc})") from exc
    tokens = []
    for token in markdown.parse(text):
        if token.type in ("heading_open", "heading_close") and shift_headings:
            token.tag = f"h{min(6, int(token.tag[1]) + shift_headings)}"
        # Wide tables scroll inside their own box instead of widening the page on a phone.
        if token.type == "table_open":
            tokens.append(Token("html_block", "", 0, content='<div class="table-wrap">\n'))
        tokens.append(token)
        if token.type == "table_close":
            tokens.append(Token("html_block", "", 0, content="</div>\n"))
    # Raw HTML is disabled in the parser, so the rendered HTML is safe to mark as such.
    return Markup(markdown.renderer.render(tokens, markdown.options, {}))


def _explorer(recorded: Recorded) -> dict:
    """Everything the home page's selectors can show, keyed 'load|acceptance'."""
    figures, summaries, selections = {}, {}, []
    default_load = recorded.loads[len(recorded.loads) // 2]
    default_acceptance = recorded.acceptances[len(recorded.acceptances) // 2]
    for load in recorded.loads:
        baseline = recorded.baseline(load)
        for acceptance in recorded.acceptances:
            key = f"{units.number(load)}|{units.number(acceptance)}"
            rows = recorded.selection(load, acceptance)
            figures[key] = figure_json(speedup_figure(rows, recorded.attentions, recorded.proposals))
            summaries[key] = _summary(load, acceptance, rows, recorded)
            selections.append({
                "key": key,
                "load": load,
                "acceptance": acceptance,
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
        "config": PLOT_CONFIG,
    }
    return {"data": data, "selections": selections, "default_key": f"{data['default']['load']}|{data['default']['acceptance']}"}


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
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        raise ConfigError(f"validation report {path}: not a validation report (expected a JSON object with schema {REPORT_SCHEMA!r})")
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else str(key), value[key])
        else:
            rows.append((prefix, value if isinstance(value, str) else json.dumps(value)))

    walk("", report)
    return {"name": path.name, "rows": rows}


def _kib(path: Path) -> str:
    return f"{path.stat().st_size / 1024:.1f}"
