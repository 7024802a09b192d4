"""Text for a terminal: prose wrapped to :data:`WIDTH` columns, and shell commands broken at
their flags (a backslash continues the line) so a printed answer fits a 100-column window and
still pastes into a shell."""

from __future__ import annotations

import shlex
import textwrap

WIDTH = 100
INDENT = "    "


def wrap(text: str, indent: str = "  ") -> list[str]:
    """One paragraph as lines of at most WIDTH columns; continuation lines indented.  Words are
    never broken (a path or a flag longer than the line stays whole)."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False) or [""]


def shell_lines(command: str, width: int = WIDTH - 2) -> list[str]:
    """``command`` as shell lines of at most ``width`` columns (the answer indents them by two)
    where its words allow: a new line (after a backslash) before a flag and its value that would
    overflow; a JSON value in single quotes is broken after its commas, which JSON and the shell's
    quotes both allow."""
    lines, current = [], ""
    for unit in _units(_words(command)):
        candidate = f"{current} {unit}" if current else unit
        if len(candidate) + 2 <= width or not current:
            current = candidate
            continue
        flag, _, value = unit.partition(" ")
        if value.startswith("'{") and len(INDENT + unit) + 2 > width:
            head, *rest = _json_lines(value, width - len(INDENT + flag) - 3, width - len(INDENT) * 2 - 2)
            lines += [current + " \\", f"{INDENT}{flag} {head}"] + [INDENT * 2 + r for r in rest[:-1]]
            current = INDENT * 2 + rest[-1] if rest else ""
        else:
            lines.append(current + " \\")
            current = INDENT + unit
    return lines + ([current] if current.strip() else [])


def _units(words: list[str]) -> list[str]:
    """Words grouped so a line breaks only before a flag (``--x value`` stays together)."""
    units: list[str] = []
    for word in words:
        if units and not word.startswith("-") and units[-1].startswith("-") and " " not in units[-1]:
            units[-1] += " " + word
        else:
            units.append(word)
    return units


def _words(command: str) -> list[str]:
    """The command's words, a single-quoted argument kept with its quotes."""
    lexer = shlex.shlex(command, posix=False, punctuation_chars=False)
    lexer.whitespace_split = True
    return list(lexer)


def _json_lines(quoted: str, first: int, rest: int) -> list[str]:
    """A single-quoted JSON argument broken after commas: the first piece at most ``first``
    columns, the others at most ``rest``."""
    pieces = quoted.split(",")
    lines, current, limit = [], "", first
    for i, piece in enumerate(pieces):
        piece = piece + ("," if i < len(pieces) - 1 else "")
        if current and len(current) + len(piece) > limit:
            lines.append(current)
            current, limit = piece, rest
        else:
            current += piece
    return lines + [current]
