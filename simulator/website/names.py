"""Identifiers as a reader reads them: one place that turns the recorded slugs, setting names and
method names into words, so no page prints ``kv_once``, ``same_source`` or ``mimo_mtp`` as text.

The recorded files keep their identifiers (they are column values people filter on); only what
the pages say goes through here.  The data page's column dictionary still names the raw values,
because that is what a reader of the CSV will see.
"""

from __future__ import annotations

import re
import urllib.parse

# the verify-attention cost settings (simulator.runs.speculation.SpeculationConfig.attention)
SETTINGS = {"kv_once": "KV read once", "per_token": "per-token cost", "interpolated": "interpolated"}
BOUND_ROLE = {"kv_once": "lower bound", "per_token": "upper bound"}
# where a published row's acceptance comes from (simulator.schemas.ACCEPTANCE_CLASSES)
ACCEPTANCE_CLASS_WORDS = {
    "same_source": "from the same source",
    "same_setting_other_run": "from another run of the same setting",
    "other_dataset": "from another or unstated dataset",
    "assumed": "assumed",
}
# What the span between the two verify-cost bounds means, in the same words on every page that
# draws one (issue 33: the home page said "not a confidence interval", the pays-off page "the
# answer's uncertainty"; both are true, and now each says both).
BAND_MEANING = ("the uncertainty that comes from what verify attention costs (the two bounds of that cost), "
                "not a statistical confidence interval")
ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM"}
# GitHub repositories by their owner/name, as their projects write them
REPOSITORIES = {"vllm": "vLLM", "sglang": "SGLang", "SpecForge": "SpecForge", "EAGLE": "EAGLE", "AngelSlim": "AngelSlim"}
# sites whose pages are one source each, by host
SITES = {
    "vllm-project.github.io": "vLLM blog", "blog.vllm.ai": "vLLM blog", "lmsys.org": "LMSYS blog", "docs.sglang.ai": "SGLang docs",
    "specdecode-bench.github.io": "SpecDecode-Bench", "arxiv.org": "arXiv",
}
DATE_IN_PATH = re.compile(r"/(20\d\d)/(\d\d)/(\d\d)/")


def setting(name: str) -> str:
    """A verify-cost setting in words: "KV read once"."""
    return SETTINGS.get(name, name)


def setting_with_role(name: str) -> str:
    """A verify-cost setting with its role: "per-token cost (upper bound)"."""
    return f"{setting(name)} ({BOUND_ROLE[name]})" if name in BOUND_ROLE else setting(name)


def settings_in_text(text: str) -> str:
    """Recorded prose with its setting identifiers in words ("the bounds kv_once (...)" -> "KV read once")."""
    return re.sub(r"\b(" + "|".join(SETTINGS) + r")\b", lambda m: SETTINGS[m.group(1)], text)


def acceptance_class(name: str) -> str:
    return ACCEPTANCE_CLASS_WORDS.get(name, name)


def engine(name: str) -> str:
    return ENGINES.get(str(name), str(name))


def proposer(name: str) -> str:
    """The proposer registry's display name for a recorded proposer or vLLM method name."""
    from simulator.speculative import proposers

    kind = proposers.find(str(name))
    return kind.label if kind else str(name)


def methods_in_text(text: str) -> str:
    """Recorded prose that names a vLLM method ("method mimo_mtp") with the registry's name for it."""
    return re.sub(r"\bmethod (\w+)", lambda m: f"{proposer(m.group(1))}", text)


def source(url: str) -> str:
    """A published source, named from its address: "vLLM PR #16937", "vLLM blog, 2024-10-17",
    "SpecForge issue #339", "arXiv 2503.01840", "Dogacel/Qwen3-8B-DSpark on Hugging Face"."""
    parts = urllib.parse.urlsplit(str(url))
    path = [p for p in parts.path.split("/") if p]
    if parts.netloc == "github.com" and len(path) >= 2:
        repo = REPOSITORIES.get(path[1], path[1])
        if len(path) >= 4 and path[2] in ("pull", "issues"):
            return f"{repo} {'PR' if path[2] == 'pull' else 'issue'} #{path[3]}"
        return f"{path[0]}/{path[1]} on GitHub"
    if parts.netloc == "huggingface.co" and len(path) >= 2:
        return f"{path[0]}/{path[1]} on Hugging Face"
    site = SITES.get(parts.netloc, parts.netloc)
    if parts.netloc == "arxiv.org" and path:
        return f"arXiv {path[-1]}"
    date = DATE_IN_PATH.search(parts.path)
    return f"{site}, {'-'.join(date.groups())}" if date else site
