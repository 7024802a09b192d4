"""n-gram (prompt lookup), vLLM's ``ngram``: the draft is the continuation of the longest earlier
match of the last tokens, found on the CPU; no network, no draft KV cache.

Cost: a fixed host time per step that carries proposals (:class:`LookupOptions`, an assumption:
set it from your own server); vLLM V1 runs the lookup on the CPU (numba), between steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.util.errors import ConfigError
from simulator.speculative.proposers.base import Option, ProposerKind, SpeculationSettings, StepWork, milliseconds
from simulator.speculative.step import StepPlan

# vLLM's n-gram lookup when a --speculative-config leaves a bound out (SpeculativeConfig.__post_init__,
# the same in v0.10.1, v0.14.0 and v0.24.0): neither -> both 5; one -> the other copies it
VLLM_UNSET_LOOKUP = 5
# prompt_lookup_max in the recommended config, always written (older vLLM required one of
# prompt_lookup_min / max).  Its default is vLLM's own when none is given, so ``-k 4 --proposer
# ngram`` and ``--speculative-config '{"method": "ngram", "num_speculative_tokens": 4}'`` are one
# deployment and print one config.
PROMPT_LOOKUP_MAX = Option(
    "prompt_lookup_max", int, VLLM_UNSET_LOOKUP, "the longest n-gram the lookup matches (vLLM's prompt_lookup_max)", vllm_key="prompt_lookup_max",
    minimum=1, always_in_config=True,
    source="vLLM's SpeculativeConfig: prompt_lookup_min and prompt_lookup_max both 5 when a config gives neither",
)
PROMPT_LOOKUP_MIN = Option(
    "prompt_lookup_min", int, None, "the shortest n-gram the lookup matches (vLLM's prompt_lookup_min; unset: prompt_lookup_max, as vLLM copies it)",
    vllm_key="prompt_lookup_min", minimum=1,
)


# The host time of one lookup step: an assumption (no measurement declared), set it from your server.
DEFAULT_NGRAM_OVERHEAD_MS = 0.1


@dataclass(frozen=True)
class LookupOptions:
    """The n-gram kind's cost knob: the CPU time of the lookup at a step that carries proposals
    (``--ngram-overhead-ms``; stored as the run's ``ngram_overhead_ms``)."""

    ngram_overhead_ms: float = DEFAULT_NGRAM_OVERHEAD_MS

    def __post_init__(self):
        milliseconds("ngram_overhead_ms", self.ngram_overhead_ms)


def lookup_window(settings: SpeculationSettings) -> tuple[int, int]:
    """(prompt_lookup_min, prompt_lookup_max) a run uses, the minimum copying the maximum when unset."""
    high = settings.options["prompt_lookup_max"]
    low = settings.options.get("prompt_lookup_min") or high
    if low > high:
        raise ConfigError(f"prompt_lookup_min = {low}: above prompt_lookup_max = {high} (vLLM refuses it)")
    return low, high


def lookup_options_from_config(config: dict) -> dict:
    """The lookup bounds as vLLM reads a --speculative-config (:data:`VLLM_UNSET_LOOKUP`; neither
    bound given is the option's default, so the run is the one the flags without them give)."""
    low, high = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if low is None and high is None:
        return {}
    return {"prompt_lookup_max": high if high is not None else low, **({"prompt_lookup_min": low} if low is not None else {})}


class NgramKind(ProposerKind):
    name = "ngram"
    label = "n-gram (prompt lookup)"
    vllm_method = "ngram"
    vllm_version = "vLLM V1 from its first release (0.9.2 and earlier; docs/sources/proposers.md §1.1)"
    options = (PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN)
    Options = LookupOptions
    rank = 10

    def check(self, settings: SpeculationSettings, target, draft_tp: int, tp: int) -> None:
        lookup_window(settings)

    def options_from_speculative_config(self, config: dict) -> dict:
        return {**super().options_from_speculative_config(config), **lookup_options_from_config(config)}

    def step_cost(self, settings: SpeculationSettings):
        return _HostLookup(self.costs(settings.costs).ngram_overhead_ms * 1e-3)


class _HostLookup:
    def __init__(self, seconds: float):
        self._seconds = seconds

    def work(self, step: StepPlan) -> StepWork:
        return StepWork(host_seconds=self._seconds if step.num_proposals else 0.0)


KIND = NgramKind()
