"""Suffix decoding, vLLM's ``suffix`` (vLLM 0.11.1 or later, with Arctic Inference): drafts from
suffix trees of the prompt and of earlier responses, on the CPU; no network, no draft KV cache.

The draft length varies per request and step: vLLM treats ``num_speculative_tokens`` as a cap
(24, the tree depth, when unset), and the lookup proposes the most frequent continuation of the
longest match until its chained frequency falls below ``suffix_decoding_min_token_prob``, at most
``max_spec_factor`` x the match length; often nothing (docs/sources/proposers.md §3.1).  The
simulator takes the length's distribution as an input: a truncated geometric on 0..tree depth
whose mean is ``suffix_mean_draft_length`` (the shape is an assumption; the default mean is the
published figure below), each draft then capped at k.  Each row's length is drawn per (request,
output position) from its own stream, so it moves no acceptance draw and is the same at every k;
a length of 0 is a plain decode step.

Cost: host time per step of ``suffix_lookup_us_per_token`` for every token a sampling request
gained (its speculation and its tree update run once per generated token).  Both defaults come
from Arctic Inference's suffix-decoding simulator as its PR #212 reports it (2025-10-19, after the
PR's optimisations): ``avg_spec_toks`` 3.260117, ``spec_ms_per_tok`` 0.006288 and
``update_ms_per_tok`` 0.004126 (https://github.com/snowflakedb/ArcticInference/pull/212; one task,
dataset not named).  vLLM calls the lookup request by request in Python, which that C++-side
figure does not hold.
"""

from __future__ import annotations

import math

from simulator.util.errors import ConfigError
from simulator.speculative.proposers.base import Option, ProposerKind, SpeculationSettings, StepWork
from simulator.speculative.step import StepPlan

SOURCE = "https://github.com/snowflakedb/ArcticInference/pull/212 (avg_spec_toks 3.260117; spec_ms_per_tok 0.006288 + update_ms_per_tok 0.004126)"
OPTIONS = (
    Option("suffix_max_tree_depth", int, 24, "the suffix trees' depth (prefix match plus speculation), vLLM's suffix_decoding_max_tree_depth",
           vllm_key="suffix_decoding_max_tree_depth", minimum=1, source="vLLM's default"),
    Option("suffix_max_spec_factor", float, 1.0, "tokens speculated per matched token, vLLM's suffix_decoding_max_spec_factor",
           vllm_key="suffix_decoding_max_spec_factor", minimum=0, source="vLLM's default"),
    Option("suffix_min_token_prob", float, 0.1, "the chained frequency below which speculation stops, vLLM's suffix_decoding_min_token_prob",
           vllm_key="suffix_decoding_min_token_prob", minimum=0, maximum=1, source="vLLM's default"),
    Option("suffix_max_cached_requests", int, 10000, "responses kept in the global tree, vLLM's suffix_decoding_max_cached_requests",
           vllm_key="suffix_decoding_max_cached_requests", minimum=0, source="vLLM's default"),
    Option("suffix_mean_draft_length", float, 3.260117, "mean draft tokens offered per step (0 counted), the simulated length distribution's mean",
           minimum=0, source=SOURCE),
    Option("suffix_lookup_us_per_token", float, 10.414, "host time of the lookup and tree update per generated token, microseconds",
           minimum=0, source=SOURCE),
)


def truncated_geometric(mean: float, top: int) -> tuple[float, ...]:
    """P(L) proportional to r^L on L = 0..top, with r chosen so the mean is ``mean`` (bisection on
    log r; the mean rises monotonically with r)."""
    if top <= 0 or mean <= 0:
        return (1.0,) + (0.0,) * max(top, 0)
    if mean >= top:
        return (0.0,) * top + (1.0,)

    def pmf(log_r: float) -> list[float]:
        weights = [math.exp(log_r * n) for n in range(top + 1)]
        total = sum(weights)
        return [w / total for w in weights]

    lo, hi = -50.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if sum(n * p for n, p in enumerate(pmf(mid))) < mean:
            lo = mid
        else:
            hi = mid
    return tuple(pmf((lo + hi) / 2))


class SuffixKind(ProposerKind):
    name = vllm_method = "suffix"
    label = "suffix decoding"
    vllm_version = "vLLM 0.11.1 (needs arctic-inference; docs/sources/proposers.md §1.1)"
    acceptance_inputs = ("rate", "per_position")
    acceptance_note = "its draft length varies per step, so a mean acceptance length at one k does not say which rate gives it"
    options = OPTIONS
    rank = 15

    def draft_length_pmf(self, settings: SpeculationSettings) -> tuple[float, ...]:
        return truncated_geometric(settings.options["suffix_mean_draft_length"], settings.options["suffix_max_tree_depth"])

    def check(self, settings: SpeculationSettings, target, draft_tp: int, tp: int) -> None:
        mean, depth = settings.options["suffix_mean_draft_length"], settings.options["suffix_max_tree_depth"]
        if mean > depth:
            raise ConfigError(f"suffix_mean_draft_length = {mean:g}: above the longest draft the trees allow, suffix_max_tree_depth = {depth}; lower one or raise the other")

    def step_cost(self, settings: SpeculationSettings):
        return _SuffixLookup(settings.options["suffix_lookup_us_per_token"] * 1e-6)


class _SuffixLookup:
    def __init__(self, seconds_per_token: float):
        self._per_token = seconds_per_token

    def work(self, step: StepPlan) -> StepWork:
        tokens = sum(step.progress[i] if step.decode[i] else 1 for i in range(len(step.requests)) if step.samples(i))
        return StepWork(host_seconds=tokens * self._per_token)


KIND = SuffixKind()
