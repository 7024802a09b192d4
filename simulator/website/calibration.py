"""The calibration report's tables as a reader should see them.

``docs/calibration-<device>.md`` is written by the calibration tool with raw column names
(``median_ape``), bare percentages and counts printed as floats ("730.0").  The site renders the
same Markdown and rewrites the table cells in the parsed token stream: readable headings,
"%" on absolute-percentage-error values, joined to the number by a no-break space (a phone
must not wrap "%" onto a line of its own), whole numbers for counts.  Headings stay short
("P90 APE", not "90th-percentile APE") so all five columns fit a 390 px phone without scrolling.
"""

from __future__ import annotations

from markdown_it.token import Token

WORDS = {"op": "operation", "mape": "mean APE", "ape": "APE", "held": "held-out", "out": "", "p90": "P90"}


NBSP = "\u00a0"


def heading(column: str) -> str:
    """``held_out_median_ape`` -> "Held-out median APE"."""
    words = [WORDS.get(word, word) for word in column.strip().split("_")]
    text = " ".join(word for word in words if word)
    return text[:1].upper() + text[1:]


def cell(column: str, value: str) -> str:
    value = value.strip()
    try:
        number = float(value)
    except ValueError:
        return value.replace("_", " ") if column == "op" else value
    if column.endswith("ape"):
        return f"{number:.2f}{NBSP}%"
    if column.endswith("rows"):
        return f"{number:,.0f}"
    return value


def format_tables(tokens: list[Token]) -> None:
    """Rewrite every table's header and body cells in place."""
    columns: list[str] = []
    index = 0
    in_head = False
    for i, token in enumerate(tokens):
        if token.type == "thead_open":
            in_head, columns = True, []
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            index = 0
        elif token.type in ("th_open", "td_open"):
            inline = tokens[i + 1]
            raw = inline.content
            if in_head:
                columns.append(raw.strip())
                text = heading(raw)
            else:
                text = cell(columns[index] if index < len(columns) else "", raw)
            index += 1
            inline.content = text
            child = Token("text", "", 0, content=text)
            inline.children = [child]
