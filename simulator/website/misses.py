"""The published page's misses, grouped by cause (issue 33: 84 bullets, about 8,300 px, each a slug
with no link to its row and no word of why).

Each cause is a rule over a check row's recorded fields and a paragraph of prose
(``content/published-causes/<key>.md``) that says what the model does not know there.  A miss
goes to the first cause whose rule it meets; one that meets none is listed under "not explained
yet", so a new miss is never hidden.  The groups that hold speculative rows at load come first:
those are the rows the pays-off answers rest on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simulator.website.published_summary import at_load
from simulator.util.units import percent


@dataclass(frozen=True)
class Cause:
    key: str  # content/published-causes/<key>.md, and the group's anchor (#miss-<key>)
    title: str
    applies: Callable[[dict], bool]


def _source(*names: str) -> Callable[[dict], bool]:
    return lambda row: str(row.get("source")) in names


def _vllm_015(tp: Callable[[int], bool], gpu: str) -> Callable[[dict], bool]:
    return lambda row: str(row.get("engine_version")) == "0.15.1" and str(row.get("gpu")).lower() == gpu and tp(int(row["tp"]))


CAUSES: tuple[Cause, ...] = (
    Cause("borrowed-acceptance", "Acceptance borrowed across sources (vLLM blog, 70B at TP 4)", _source("vllm-blog2024")),
    Cause("sglang-batches", "SGLang at batch sizes 2–64 (EAGLE-3 paper)", _source("eagle3-paper")),
    Cause("specbundle-70b", "SGLang's EAGLE-3 on a 70B at batch 8 (SpecBundle)", _source("specbundle-l33")),
    Cause("moe", "Mixtures of experts (Qwen3-30B-A3B)", _source("specbundle-q3", "specforge339-q3", "angelslim163-q3")),
    Cause("issue20780", "vLLM issue #20780's TPOT series", _source("vllm-issue20780")),
    Cause("long-context", "EAGLE at long context (vLLM PR #29334)", _source("vllm-pr29334")),
    Cause("tp4-deep", "Deep models at TP 4 (vLLM 0.15.1, H100)", _vllm_015(lambda tp: tp >= 2, "h100")),
    Cause("a100", "The A100 (vLLM 0.15.1)", lambda row: str(row.get("engine_version")) == "0.15.1" and str(row.get("gpu")).lower() == "a100"),
    Cause("mha", "Multi-head Llama-2-7B (vLLM 0.15.1)", lambda row: str(row.get("engine_version")) == "0.15.1" and "Llama-2-7b" in str(row.get("model"))),
    Cause("saturation", "Near saturation at TP 1 (vLLM 0.15.1, H100)", _vllm_015(lambda tp: tp == 1, "h100")),
    Cause("v060", "vLLM v0.6.0's V0 engine", lambda row: str(row.get("engine_version")) == "0.6.0"),
    Cause("pr18566", "1,000 prompts at once (vLLM PR #18566)", _source("vllm-pr18566")),
    Cause("unstated-lengths", "Unstated prompt lengths (a model card's Qwen3-8B)", _source("dspark-card")),
    Cause("gpt-oss", "GPT-OSS (MXFP4)", _source("dogacel-oss120b", "dogacel-oss20b", "lmsys-blog")),
    Cause("sglang-overhead", "SGLang's own per-step costs", lambda row: str(row.get("engine")) == "sglang"),
)
UNEXPLAINED = Cause("unexplained", "Not explained yet", lambda row: True)
COPY = tuple(f"published-causes/{c.key}" for c in CAUSES + (UNEXPLAINED,))


def speculative_at_load(row: dict) -> bool:
    """A row the pays-off answers rest on: speculation, measured under load."""
    return str(row.get("proposer")) != "none" and at_load(row)


def cause_of(row: dict) -> Cause:
    return next((c for c in CAUSES if c.applies(row)), UNEXPLAINED)


def groups(misses: list[dict]) -> list[dict]:
    """The misses by cause: groups holding speculative rows at load first, then in :data:`CAUSES`
    order; in each, the rows by |error|, largest first (the order ``misses`` comes in)."""
    order = {c.key: i for i, c in enumerate(CAUSES + (UNEXPLAINED,))}
    by_key: dict[str, dict] = {}
    for row in misses:
        cause = cause_of(row)
        group = by_key.setdefault(cause.key, {"key": cause.key, "title": cause.title, "rows": []})
        group["rows"].append(row)
    for group in by_key.values():
        errors = [float(r["error_pct"]) for r in group["rows"]]
        group["speculative_at_load"] = sum(speculative_at_load(r) for r in group["rows"])
        low, high = percent(min(errors)), percent(max(errors))
        group["range"] = low if low == high else f"{low} to {high}"
    return sorted(by_key.values(), key=lambda g: (g["speculative_at_load"] == 0, order[g["key"]]))
