"""The site's Markdown: markdown-it-py with tables, math rendered to MathML at build time, and
links to the project's source that work wherever the site is published.

* ``$...$`` and ``$$...$$`` become MathML (latex2mathml): the browser draws it natively, no
  script runs, in the math font the site ships (:mod:`simulator.website.fonts`).  A prime is
  written after its letter, not as its superscript: the font's prime glyph is already raised,
  and scripted it shrank to a dot (issue 26).
* ``[text](source:simulator/x.py)`` links to ``{source_url}/simulator/x.py`` when the build is
  given a repository URL (``build.py --source-url``); without one, the path is shown as code and
  nothing links outside the site.
* Wide tables and display equations scroll inside their own box instead of widening the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

from latex2mathml.converter import convert as latex_to_mathml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup, escape
from mdit_py_plugins.dollarmath import dollarmath_plugin

from simulator.util.errors import ConfigError

SOURCE_SCHEME = "source:"


# latex2mathml writes k' as <msup><mi>k</mi><mi>′</mi></msup>
SCRIPTED_PRIME = re.compile(r"<msup>(<mi>[^<]*</mi>)<mi>(&#x0203[2-4];)</mi></msup>")


def _math(latex: str, options: dict) -> str:
    display = options.get("display_mode", False)
    mathml = SCRIPTED_PRIME.sub(r"<mrow>\1<mi>\2</mi></mrow>", latex_to_mathml(latex, display="block" if display else "inline"))
    return f'<div class="math-wrap">{mathml}</div>' if display else mathml


def parser() -> MarkdownIt:
    # Raw HTML is disabled, so everything rendered comes from the parser or the math renderer.
    markdown = MarkdownIt("commonmark", {"html": False, "typographer": True}).enable(["table", "replacements", "smartquotes"])
    markdown.use(dollarmath_plugin, renderer=_math, allow_digits=False, allow_labels=False)
    return markdown


def source_link(path: str, source_url: Optional[str]) -> Optional[str]:
    """Where a repository path links to: under ``source_url``, or nowhere."""
    return f"{source_url.rstrip('/')}/{path.lstrip('/')}" if source_url else None


def render(
    markdown: MarkdownIt,
    path: Path,
    *,
    source_url: Optional[str] = None,
    shift_headings: int = 0,
    table_cells: Optional[Callable[[list[Token]], None]] = None,
) -> Markup:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"content file {path}: cannot read ({exc.strerror or exc})") from exc
    tokens = markdown.parse(text)
    if table_cells is not None:
        table_cells(tokens)
    out = []
    for token in tokens:
        if token.type in ("heading_open", "heading_close") and shift_headings:
            token.tag = f"h{min(6, int(token.tag[1]) + shift_headings)}"
        if token.type == "inline" and token.children:
            token.children = _source_links(token.children, source_url, path)
        if token.type == "table_open":
            # Focusable, so a keyboard can scroll a table wider than the screen.
            out.append(Token("html_block", "", 0, content='<div class="table-wrap" tabindex="0" role="region" aria-label="Table">\n'))
        out.append(token)
        if token.type == "table_close":
            out.append(Token("html_block", "", 0, content="</div>\n"))
    return Markup(markdown.renderer.render(out, markdown.options, {}))


def _source_links(children: list[Token], source_url: Optional[str], path: Path) -> list[Token]:
    """Resolve ``source:`` links: absolute under ``source_url``, else the path as inline code."""
    out: list[Token] = []
    skipping = False
    for token in children:
        if token.type == "link_open" and str(token.attrGet("href") or "").startswith(SOURCE_SCHEME):
            target = str(token.attrGet("href"))[len(SOURCE_SCHEME) :]
            if not re.fullmatch(r"[\w.\-/]+", target) or ".." in target:
                raise ConfigError(f"content file {path}: source link {target!r} is not a repository path")
            href = source_link(target, source_url)
            if href is not None:
                token.attrSet("href", href)
                out.append(token)
                continue
            # A path as code, breakable only after a slash (a narrow card must not split a name).
            path_html = "/<wbr>".join(escape(part) for part in target.split("/"))
            out.append(Token("html_inline", "", 0, content=f'<code class="path">{path_html}</code>'))
            skipping = True
            continue
        if skipping:
            if token.type == "link_close":
                skipping = False
            continue
        out.append(token)
    return out
