"""The calibration reports' tables as a reader should see them, one report per device.

Every ``docs/calibration-<device>.md`` is shown (the seed sweep's device first): the A100 alone
left out the H100 and H200 that drive most of the pays-off and published answers (issue 26).

``docs/calibration-<device>.md`` is written by the calibration tool with raw column names
(``median_ape``), bare percentages and counts printed as floats ("730.0").  The site renders the
same Markdown and rewrites the table cells in the parsed token stream: readable headings,
"%" on absolute-percentage-error values, joined to the number by a no-break space (a phone
must not wrap "%" onto a line of its own), whole numbers for counts.  Headings stay short
("P90 APE", not "90th-percentile APE") so all five columns fit a 390 px phone without scrolling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from markdown_it import MarkdownIt
from markdown_it.token import Token

from simulator.website import markdown as site_markdown

WORDS = {"op": "operation", "mape": "mean APE", "ape": "APE", "held": "held-out", "out": "", "p90": "P90"}


NBSP = "\u00a0"
# A table with more columns than this becomes one card per row on a phone (site.css, table.stack):
# the H100 report's tables have six and eight, too many for 390 px.
STACK_ABOVE = 5


def heading(column: str) -> str:
    """``held_out_median_ape`` -> "Held-out median APE"."""
    words = [WORDS.get(word, word) for word in column.strip().split("_")]
    text = " ".join(word for word in words if word).replace(" %", f"{NBSP}%")  # "median APE %": the % stays with its word
    return text[:1].upper() + text[1:]


def cell(column: str, value: str) -> str:
    value = value.strip()
    try:
        number = float(value)
    except ValueError:
        if column == "model":
            return value.split("/")[-1]  # the organisation is the same for every row
        return value.replace("_", " ") if column == "op" else value
    if column.endswith("ape"):
        return f"{number:.2f}{NBSP}%"
    if column.endswith("rows"):
        return f"{number:,.0f}"
    return value


def format_tables(tokens: list[Token]) -> None:
    """Rewrite every table's header and body cells in place; a wide table stacks on a phone, each
    cell labelled with its column's heading."""
    columns: list[str] = []
    index = 0
    in_head = False
    table: Token | None = None
    for i, token in enumerate(tokens):
        if token.type == "table_open":
            table = token
        elif token.type == "thead_open":
            in_head, columns = True, []
        elif token.type == "thead_close":
            in_head = False
            if table is not None and len(columns) > STACK_ABOVE:
                table.attrSet("class", "stack")
        elif token.type == "tr_open":
            index = 0
        elif token.type in ("th_open", "td_open"):
            inline = tokens[i + 1]
            raw = inline.content
            if in_head:
                columns.append(raw.strip())
                text = heading(raw)
            else:
                column = columns[index] if index < len(columns) else ""
                text = cell(column, raw)
                if table is not None and table.attrGet("class") == "stack":
                    token.attrSet("data-label", heading(column))
            index += 1
            inline.content = text
            child = Token("text", "", 0, content=text)
            inline.children = [child]


def reports(markdown: MarkdownIt, docs_dir: Path, first_device: str, source_url: Optional[str]) -> list[dict]:
    """Each device's calibration report, rendered: {"device", "doc" (its repository path), "url", "html"}."""
    paths = sorted(docs_dir.glob("calibration-*.md"), key=lambda p: (p.stem != f"calibration-{first_device}", p.stem))
    out = []
    for path in paths:
        doc = f"docs/{path.name}"
        out.append({
            "device": path.stem.removeprefix("calibration-"),
            "doc": doc,
            "url": site_markdown.source_link(doc, source_url),
            "html": site_markdown.render(markdown, path, shift_headings=2, table_cells=format_tables),
        })
    return out
