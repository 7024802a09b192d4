"""n-gram (prompt lookup), vLLM's ``ngram``: the draft is the continuation of the longest earlier
match of the last tokens, found on the CPU; no network, no draft KV cache.

Cost: a fixed host time per step that carries proposals (``ngram_overhead_ms``, an assumption:
set it from your own server); vLLM V1 runs the lookup on the CPU (numba), between steps.
"""

from __future__ import annotations

from simulator.speculative.proposers.base import Option, ProposerKind, SpecSettings, StepWork
from simulator.speculative.step import StepPlan

# prompt_lookup_max in the recommended config, always written: older vLLM required one of
# prompt_lookup_min / max (both default to 5 when neither is given); the value of vLLM's docs' example.
PROMPT_LOOKUP_MAX = Option(
    "prompt_lookup_max", int, 4, "the longest n-gram the lookup matches (vLLM's prompt_lookup_max)", vllm_key="prompt_lookup_max", minimum=1,
    always_in_config=True,
    source="vLLM's docs' n-gram example: {\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}",
)


class NgramKind(ProposerKind):
    name = "ngram"
    label = "n-gram (prompt lookup)"
    vllm_method = "ngram"
    vllm_version = "vLLM V1 from its first release (0.9.2 and earlier; docs/sources/proposers.md §1.1)"
    options = (PROMPT_LOOKUP_MAX,)
    rank = 10

    def step_cost(self, settings: SpecSettings):
        return _HostLookup(settings.ngram_overhead_ms * 1e-3)


class _HostLookup:
    def __init__(self, seconds: float):
        self._seconds = seconds

    def work(self, step: StepPlan) -> StepWork:
        return StepWork(host_seconds=self._seconds if step.num_proposals else 0.0)


KIND = NgramKind()
