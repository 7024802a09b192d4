"""The site's pages, declared in one place: navigation, templates and copy all follow this list.

To add a page: append a :class:`Page` here, add its template to ``templates/`` and its Markdown
copy to ``content/``; the renderer, the navigation and the checks pick it up.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.website.data_page import COPY as DATA_COPY
from simulator.website.misses import COPY as CAUSES_COPY


@dataclass(frozen=True)
class Page:
    file: str  # output file name, also the template's name
    title: str  # navigation title
    copy: tuple[str, ...] = ()  # Markdown files under content/, without ".md"; "home/hero" -> copy.home.hero
    charts: bool = False  # loads plotly.js and site.js


HOME_COPY = ("hero", "hero-more", "verify-step", "predictions", "results", "chart-note", "model", "propose", "verify", "advance", "validation", "limits")

SITE_PAGES: tuple[Page, ...] = (
    Page("index.html", "Home", tuple(f"home/{name}" for name in HOME_COPY), charts=True),
    Page("modeling.html", "Modeling notes", ("modeling", "modeling-progress", "modeling-verify", "modeling-calibration"), charts=True),
    Page("published.html", "Published measurements", ("published", "published-method", "published-misses", *CAUSES_COPY), charts=True),
    Page("paysoff.html", "When does it pay off?", ("paysoff/lede", "paysoff/intro", "paysoff/intro-after", "paysoff/closed-loop", "paysoff/littles"), charts=True),
    Page("validation.html", "Validation workflow", ("validation",)),
    Page("data.html", "Data", DATA_COPY),
)

# file -> navigation title, in navigation order
PAGES = {page.file: page.title for page in SITE_PAGES}
