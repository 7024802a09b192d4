"""The data page: every file the site's results come from, each with its column dictionary.

One list drives the page's download box, its sections (each with an anchor other pages link
to, e.g. ``data.html#published-toml``) and the Markdown copy it needs (``content/data/``).
A file this build did not record is still described, and the box says it is not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class DataFile:
    anchor: str  # the section's id on data.html
    copy: str  # content/data/<copy>.md
    name: str  # the file's name in the site (or its path in the repository)
    what: str  # one line for the download box
    in_site: bool = True  # published next to the pages (False: an input kept in the repository)


DATA_FILES: tuple[DataFile, ...] = (
    DataFile("sweep-csv", "sweep", "sweep.csv", "one row per simulated run of the seed sweep (home page)"),
    DataFile("progress-csv", "progress", "progress.csv", "the batch-1 progress check (modeling notes)"),
    DataFile("paysoff-csv", "paysoff", "paysoff.csv", "one row per run of the pays-off sweep"),
    DataFile("paysoff-crossovers-csv", "paysoff-crossovers", "paysoff_crossovers.csv", "where each fixed k stops paying"),
    DataFile("recommended-schedules-json", "schedules", "recommended_schedules.json", "a recommended k schedule per deployment"),
    DataFile("published-csv", "published-csv", "published.csv", "published measurements against their reproductions"),
    DataFile("published-toml", "published-toml", "data/published.toml", "the published figures, and data/published_assumptions.toml for what they leave unstated", in_site=False),
)

COPY = tuple(f"data/{f.copy}" for f in DATA_FILES)


def entries(sizes: dict[str, str], paths: dict[str, Optional[Path]], source_url: Optional[str]) -> list[dict]:
    """The download box's rows.  ``sizes``: file name -> "735 rows"; ``paths``: file name -> the
    recorded file (None or absent: not recorded in this build).  Repository inputs link to the
    repository when the build has a ``source_url``."""
    out = []
    for f in DATA_FILES:
        path = paths.get(f.name)
        recorded = f.in_site and path is not None and Path(path).is_file()
        out.append({
            "anchor": f.anchor,
            "content": f.copy,
            "name": f.name,
            "what": f.what,
            "in_site": f.in_site,
            "recorded": recorded,
            "size": sizes.get(f.name, "") if recorded else "",
            "kib": f"{Path(path).stat().st_size / 1024:.1f}" if recorded else "",
            "href": f.name if recorded else (f"{source_url.rstrip('/')}/{f.name}" if source_url and not f.in_site else None),
        })
    return out
