"""GPU n-gram, vLLM's ``ngram_gpu`` (vLLM 0.18.0 or later): the n-gram lookup as one vectorised
GPU module (``NgramGPUKernel``: unfold and argmax over every request's tokens, compiled with
torch.compile, no CUDA graph), in place of the CPU lookup; no network, no draft KV cache.

Cost per step with decode rows: for every n-gram size n in [prompt_lookup_min, prompt_lookup_max], one
memory-bound kernel that streams the int32 token ids of every decode row's context, n per
position (the unfolded windows), costed with the built-in physical model's streaming kernel and
its launch time.  No published timing of the kernel was found (docs/sources/proposers.md §1.5):
this is the physical model's estimate, not a fitted figure.  No host lookup time.
"""

from __future__ import annotations

from simulator.speculative.proposers.base import ProposerKind, SpeculationSettings, StepWork, TokenScan
from simulator.speculative.proposers.ngram import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN, lookup_options_from_config, lookup_window
from simulator.speculative.step import StepPlan

TOKEN_ID_BYTES = 4  # int32 token ids


class NgramGpuKind(ProposerKind):
    name = vllm_method = "ngram_gpu"
    label = "n-gram on the GPU"
    vllm_version = "vLLM 0.18.0 (PR #29184; docs/sources/proposers.md §1.1)"
    options = (PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN)
    rank = 12

    @staticmethod
    def window(settings: SpeculationSettings) -> tuple[int, int]:
        return lookup_window(settings)

    def check(self, settings: SpeculationSettings, target, draft_tp: int, tp: int) -> None:
        lookup_window(settings)

    def options_from_speculative_config(self, config: dict) -> dict:
        return {**super().options_from_speculative_config(config), **lookup_options_from_config(config)}

    def step_cost(self, settings: SpeculationSettings):
        return _GpuScan(*self.window(settings))


class _GpuScan:
    def __init__(self, low: int, high: int):
        self._sizes = range(low, high + 1)

    def work(self, step: StepPlan) -> StepWork:
        if not any(step.decode):
            return StepWork()  # the kernel runs once a step for the decode rows, drafting or not
        context = sum(step.context_after(i) for i, d in enumerate(step.decode) if d)
        return StepWork(scans=tuple(TokenScan(float(context * n * TOKEN_ID_BYTES)) for n in self._sizes))


KIND = NgramGpuKind()
