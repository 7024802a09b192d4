"""Vidur's batch and request entities, the request with Vidur 0.0.26's ``restart`` mended, and the
execution time that adds what Vidur's op set leaves out.

Private state is read and written through :mod:`simulator.vidur.seam` only.
"""

from __future__ import annotations

from vidur.entities import Batch, BatchStage, ExecutionTime, Request
from vidur.entities.base_entity import BaseEntity

from simulator.vidur.seam import reset_stage_progress, set_arrival, set_split

__all__ = ["BaseEntity", "Batch", "BatchStage", "ExecutionTime", "ExecutionTimePlus", "Request", "RestartableRequest"]


class RestartableRequest(Request):
    """Vidur's Request that survives preemption with its prompt intact, and can be released late.

    It remembers the prompt and output lengths it was created with: Vidur's ``restart`` rewrites
    the prefill/decode split.
    """

    def __init__(self, arrived_at: float, num_prefill_tokens: int, num_decode_tokens: int):
        super().__init__(arrived_at, num_prefill_tokens, num_decode_tokens)
        self.prompt_tokens = num_prefill_tokens
        self.output_tokens = num_decode_tokens

    def arrive_at(self, time: float) -> None:
        """Closed-loop load: the request is released when a slot frees up, not at generation."""
        set_arrival(self, time)

    def restart(self):
        """Vidur's restart, with two fixes for 0.0.26.

        Its restart makes everything processed so far the new prompt: preempted halfway through
        its prompt, a request would then turn the rest of its prompt into output tokens.  The
        prompt never shrinks here.  Vidur also leaves the pipeline-stage counters of the old
        attempt in place, which trips its prefill assertions on the next step.
        """
        super().restart()
        if self.num_prefill_tokens < self.prompt_tokens:
            set_split(self, self.prompt_tokens, self.total_tokens - self.prompt_tokens)
        reset_stage_progress(self)


class ExecutionTimePlus:
    """A step's execution time: Vidur's model time plus time outside Vidur's op set (LM head,
    sampler, engine overhead, the proposer).

    Delegates every other attribute to Vidur's ExecutionTime, so its per-op breakdown stays intact
    (Vidur's BatchStage reads ``total_time`` and ``model_time``; its metrics read the pieces).
    """

    __slots__ = ("base", "extra_seconds", "total_time", "model_time")

    def __init__(self, base: ExecutionTime, extra_seconds: float):
        self.base = base
        self.extra_seconds = extra_seconds
        self.model_time = base.model_time
        self.total_time = base.total_time + extra_seconds

    def __getattr__(self, name):
        return getattr(self.base, name)
