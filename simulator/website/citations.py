"""Repository files the pages cite by path ("docs/model.md", "data/published.toml"), shipped with
the site and linked where they are cited, so no citation is dead (issue 33: the pages named
docs/*.md and data/*.toml that a reader of the published site could not open).

The project states no repository URL, so the site cannot link to one unless the build is given
``--source-url``; it ships the cited files instead, as they are, under ``source/`` (the Markdown
and TOML open as text in a browser).  Only cited files are shipped; a cited file missing from the
checkout fails the build.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from simulator.util.errors import ConfigError

FOLDER = "source"  # in the site: source/docs/model.md
# a repository path as the pages cite it: docs/<name>.md or data/<name>.toml (not part of an address)
CITED = re.compile(r"(?<![\w/.\-])((?:docs/[\w.\-]+\.md)|(?:data/[\w\-]+\.toml))(?![\w/])")
TAG = re.compile(r"(<[^>]+>)")


def href(path: str) -> str:
    return f"{FOLDER}/{path}"


def link(html: str) -> tuple[str, set[str]]:
    """The page with every cited path in its text linked to its shipped copy, and the paths cited.
    Text inside an existing link, a script or a style is left alone."""
    cited: set[str] = set()
    out, inside_link, inside_raw = [], 0, False
    for part in TAG.split(html):
        if part.startswith("<"):
            name = re.match(r"</?\s*([a-zA-Z0-9]+)", part)
            tag = name.group(1).lower() if name else ""
            closing = part.startswith("</")
            if tag == "a":
                inside_link += -1 if closing else 1
            elif tag in ("script", "style"):
                inside_raw = not closing
            out.append(part)
            continue
        if inside_link or inside_raw:
            out.append(part)
            continue
        out.append(CITED.sub(lambda m: _anchor(m.group(1), cited), part))
    return "".join(out), cited


def _anchor(path: str, cited: set[str]) -> str:
    cited.add(path)
    return f'<a href="{href(path)}">{path}</a>'


def ship(cited: set[str], repo_root: Path, directory: Path) -> None:
    """Copy each cited file from the checkout into the site's ``source/`` folder."""
    for path in sorted(cited):
        origin = repo_root / path
        if not origin.is_file():
            raise ConfigError(f"a page cites {path}, which is not in the repository ({origin})")
        target = directory / FOLDER / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, target)
