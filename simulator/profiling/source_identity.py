"""What counts as one source: an address's canonical identity, not its spelling.

The calibration guard (:mod:`simulator.profiling.calibration_guard`) refuses a check that shares
a source with calibration data.  Comparing addresses as written lets one source through under
another spelling (http or https, a ``www.`` or ``m.`` host, a trailing slash or ``index.html``, a
fragment or query, a pull request's ``/files`` or ``/commits`` tab, ``pulls`` for ``pull``, an
arXiv abstract, PDF, HTML page or version, letter case) or under another host (a project's page
and its repository).  So an address is reduced to its identities:

* a GitHub issue, pull request or discussion, comments and tabs included (they share one number
  sequence per repository): ``github.com/<owner>/<repo>#<n>``;
* a GitHub repository's files, commits, releases or raw files: ``github.com/<owner>/<repo>``; a
  Hugging Face repository likewise (``huggingface.co/[datasets/|spaces/]<owner>/<repo>``, its
  discussions numbered as GitHub's threads);
* an arXiv paper in any form or version (abs, pdf, html, ar5iv, alphaxiv, huggingface.co/papers,
  DOI 10.48550): ``arxiv:<id>``;
* any other page: host and path in lower case, without scheme, ``www.``/``m.``, port, fragment,
  query, trailing slash, ``index.html`` or a ``.html`` suffix;
* a GitHub Pages address ``<owner>.github.io/<name>/...`` also implies its repository's identity,
  ``github.com/<owner>/<name>`` (``<owner>.github.io`` alone: ``github.com/<owner>/<owner>.github.io``),
  which meets a repository's address but never another page's implied one.

What no rule can see (a study's page, paper and code on three hosts; a site under its own domain)
comes from a declared alias table (``data/calibration/source_aliases.toml``, read by
:func:`parse_aliases`): a host alias is read as the host it names, and every address in an
identity group, with every page under it, carries the group's name.  Two addresses are one
source when their identities meet (:func:`same_source`).

Pure: strings and parsed tables in, values out; nothing is read or fetched.  Dropping a query
errs on the side of refusal: two pages that differ only in their query count as one source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping
from urllib.parse import unquote, urlsplit

from simulator.util.inputs import check_table, non_empty_str, require

_THREADS = ("pull", "pulls", "issues", "discussions")
_ARXIV_HOSTS = ("arxiv.org", "export.arxiv.org", "ar5iv.labs.arxiv.org", "ar5iv.org", "alphaxiv.org")
_ARXIV_FORMS = ("abs", "pdf", "html", "format", "ps")
_ARXIV_ID = re.compile(r"(\d{4}\.\d{4,5}|[a-z][a-z.\-]*/\d{7})(v\d+)?")
_GROUP = "declared:"  # a group's identity: never a canonical address


@dataclass(frozen=True)
class Aliases:
    """The declared alias table: alias host -> host, and each group's addresses (canonical) -> name."""

    hosts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    groups: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


NO_ALIASES = Aliases()


def _host(netloc: str) -> str:
    host = netloc.rsplit("@", 1)[-1].split(":", 1)[0].lower().rstrip(".")
    for prefix in ("www.", "m."):
        if host.startswith(prefix) and "." in host[len(prefix):]:
            host = host[len(prefix):]
    return host


def _split(url: str, aliases: Aliases) -> tuple[str, list[str]]:
    parts = urlsplit(url.strip() if "://" in url else "https://" + url.strip())
    host = _host(parts.netloc)
    return aliases.hosts.get(host, host), [p for p in unquote(parts.path).lower().split("/") if p]


def _arxiv(forms: list[str]) -> str | None:
    """``abs/2407.08608v2``, ``pdf/2407.08608.pdf``, ``hep-th/9901001``... -> ``arxiv:<id>``."""
    if len(forms) < 2 or forms[0] not in _ARXIV_FORMS:
        return None
    match = _ARXIV_ID.fullmatch("/".join(forms[1:]).removesuffix(".pdf"))
    return f"arxiv:{match.group(1)}" if match else None


def _repository(host: str, path: list[str]) -> str:
    """A code host's thread (``host/owner/repo#n``) or repository (``host/owner/repo``)."""
    if host == "huggingface.co" and path[:1] in (["datasets"], ["spaces"]):
        host, path = f"{host}/{path[0]}", path[1:]
    if len(path) < 2:
        return "/".join([host] + path)
    owner, repo = path[0], path[1].removesuffix(".git")
    if len(path) >= 4 and path[2] in _THREADS and path[3].isdigit():
        return f"{host}/{owner}/{repo}#{int(path[3])}"
    return f"{host}/{owner}/{repo}"


def canonical(url: str, aliases: Aliases = NO_ALIASES) -> str:
    """An address's one canonical identity (the rules of this module's docstring)."""
    host, path = _split(url, aliases)
    if host in _ARXIV_HOSTS and _arxiv(path):
        return _arxiv(path)
    if host == "huggingface.co" and path[:1] == ["papers"] and _arxiv(["abs"] + path[1:2]):
        return _arxiv(["abs"] + path[1:2])
    if host == "doi.org" and len(path) == 2 and path[0] == "10.48550" and path[1].startswith("arxiv."):
        return _arxiv(["abs", path[1][len("arxiv."):]]) or f"doi.org/{'/'.join(path)}"
    if host in ("github.com", "api.github.com", "raw.githubusercontent.com"):
        return _repository("github.com", path[1:] if path[:1] == ["repos"] else path)
    if host == "huggingface.co":
        return _repository(host, path)
    if path and path[-1] in ("index.html", "index.htm"):
        path = path[:-1]
    if path and path[-1].endswith((".html", ".htm")):
        path = path[:-1] + [path[-1].rsplit(".", 1)[0]]
    return "/".join([host] + path)


def _group(identity: str, aliases: Aliases) -> str | None:
    """The group of a declared address equal to ``identity`` or a page above it."""
    while identity:
        if identity in aliases.groups:
            return aliases.groups[identity]
        identity = identity.rpartition("/")[0] if "/" in identity else ""
    return None


def _with_groups(found: set[str], aliases: Aliases) -> frozenset[str]:
    return frozenset(found | {group for group in (_group(i, aliases) for i in found) if group})


def identities(url: str, aliases: Aliases = NO_ALIASES) -> frozenset[str]:
    """An address's own identities: its canonical one and the declared group it is in."""
    return _with_groups({canonical(url, aliases)}, aliases)


def implied_identities(url: str, aliases: Aliases = NO_ALIASES) -> frozenset[str]:
    """What a GitHub Pages address implies: its repository (and that repository's group).  An
    implied identity meets only another address's own ones, never another implied one (two pages
    of one site, ``<owner>.github.io/2024/...``, are not one source because both imply a repository)."""
    first = canonical(url, aliases)
    host, _, rest = first.partition("/")
    if not host.endswith(".github.io"):
        return frozenset()
    owner = host[: -len(".github.io")]
    return _with_groups({f"github.com/{owner}/{rest.split('/')[0] if rest else host}"}, aliases)


def same_source(a: str, b: str, aliases: Aliases = NO_ALIASES) -> bool:
    own_a, own_b = identities(a, aliases), identities(b, aliases)
    return bool(own_a & own_b or implied_identities(a, aliases) & own_b or own_a & implied_identities(b, aliases))


def describe(identity: str) -> str:
    """An identity as a reader names it (a declared group by its name)."""
    return f"the declared source {identity[len(_GROUP):]!r}" if identity.startswith(_GROUP) else identity


def parse_aliases(doc: dict, where: str) -> Aliases:
    """The alias table from a parsed ``source_aliases.toml``: ``[[host]]`` (host, same_as, why) and
    ``[[identity]]`` (name, what, addresses: two or more links), each address in one group only."""
    check_table(doc, {"host": list, "identity": list}, where, ())
    hosts: dict[str, str] = {}
    for i, table in enumerate(doc.get("host", [])):
        at = f"{where}: host {i + 1}"
        check_table(table, {"host": str, "same_as": str, "why": str}, at)
        require(non_empty_str(table["why"]), at, "why must say why the two hosts are one site")
        alias, host = _host(table["host"]), _host(table["same_as"])
        require(alias != host and "/" not in table["host"] + table["same_as"], at, f"host = {table['host']!r}, same_as = {table['same_as']!r} must name two different hosts")
        require(alias not in hosts, at, f"host {alias} is declared twice")
        hosts[alias] = host
    partial = Aliases(MappingProxyType(hosts))
    names: dict[str, str] = {}  # canonical address -> its group's name
    for i, table in enumerate(doc.get("identity", [])):
        at = f"{where}: identity {i + 1} ({table.get('name', '?') if isinstance(table, dict) else '?'})"
        check_table(table, {"name": str, "what": str, "addresses": list}, at)
        require(non_empty_str(table["name"]) and non_empty_str(table["what"]), at, "name and what must say something")
        require(table["name"] not in names.values(), at, "is declared twice")
        addresses = table["addresses"]
        require(len(addresses) >= 2 and all(isinstance(a, str) and a.startswith(("https://", "http://")) for a in addresses), at,
                f"addresses = {addresses!r} must be two or more links (one source's addresses on different hosts)")
        for address in addresses:
            key = canonical(address, partial)
            require(names.get(key, table["name"]) == table["name"], at, f"{address} is already in identity {names.get(key)!r}: one address, one source")
            names[key] = table["name"]
    return Aliases(MappingProxyType(hosts), MappingProxyType({key: _GROUP + name for key, name in names.items()}))
