"""The math font the site ships, so its MathML renders the same everywhere, offline.

Browsers draw MathML with whatever math font the reader's system has; without one (most
Linux and many Windows machines) a stretchy brace such as min{…} stays one line tall and the
prime in k′ shrinks to a dot (issue 26).  The site therefore carries its own OpenType math font
next to its pages and names it in site.css: Noto Sans Math (SIL Open Font License 1.1, no
reserved font name), from the npm package ``@fontsource/noto-sans-math`` 5.3.0, subset once to
the characters and math ranges below with fontTools (``vendor/README.md`` has the command).  The
build copies the vendored file and its licence; nothing is downloaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

VENDOR_DIR = Path(__file__).resolve().parent / "static" / "vendor"
MATH_FONT = VENDOR_DIR / "noto-sans-math.woff2"
MATH_FONT_LICENSE = VENDOR_DIR / "LICENSE-noto-sans-math.txt"
# The Unicode ranges the subset keeps (the MATH table's size variants and brace assemblies for
# these come with them): Latin, Greek, punctuation with the primes, letterlike symbols, arrows,
# the mathematical operators, the bracket pieces, and the italic Latin and Greek letters
# MathML draws a single-letter <mi> with.
MATH_FONT_RANGES = (
    (0x0020, 0x007E), (0x00A0, 0x00FF), (0x0131, 0x0131), (0x0237, 0x0237), (0x02C6, 0x02DC), (0x0300, 0x036F),
    (0x0391, 0x03A9), (0x03B1, 0x03C9), (0x03D1, 0x03D1), (0x03D5, 0x03D5), (0x03F0, 0x03F1), (0x03F5, 0x03F5),
    (0x2000, 0x206F), (0x2100, 0x214F), (0x2190, 0x2199), (0x21D0, 0x21D5), (0x2200, 0x22FF), (0x2308, 0x230B),
    (0x239B, 0x23B7), (0x23DC, 0x23E1), (0x27E8, 0x27EB), (0x1D434, 0x1D467), (0x1D6E2, 0x1D71B),
)


def covers(char: str) -> bool:
    """Whether the shipped subset has a glyph for ``char``."""
    return any(low <= ord(char) <= high for low, high in MATH_FONT_RANGES)


def copy_into(directory: Path) -> None:
    """The font and its licence, next to the pages (site.css loads the font by this name)."""
    for path in (MATH_FONT, MATH_FONT_LICENSE):
        shutil.copyfile(path, directory / path.name)
