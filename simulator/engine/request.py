"""A Vidur request that survives preemption and counts its speculative work."""

from vidur.entities import Request

from simulator.engine.vidur_seam import reset_stage_progress, set_arrival, set_split


class SpeculativeRequest(Request):
    def __init__(self, arrived_at: float, num_prefill_tokens: int, num_decode_tokens: int):
        super().__init__(arrived_at, num_prefill_tokens, num_decode_tokens)
        self.prompt_tokens = num_prefill_tokens  # restart() rewrites the prefill/decode split
        self.output_tokens = num_decode_tokens
        self.acceptance_log: list[tuple[int, int]] = []  # (proposed, accepted) per verify step
        self.on_complete = None  # closed-loop load: called once when the request finishes
        self.emission_times: list[float] = []  # end of every step that gave the client tokens (ITL)

    def arrive_at(self, time: float) -> None:
        """Closed-loop load: the request is released when a slot frees up, not at generation."""
        set_arrival(self, time)

    def on_batch_end(self, time: float, num_tokens_processed: int) -> None:
        super().on_batch_end(time, num_tokens_processed)
        if self.is_prefill_complete:  # the prompt's last chunk emits the first token, each decode step at least one
            self.emission_times.append(time)
        if self.completed and self.on_complete is not None:
            callback, self.on_complete = self.on_complete, None
            callback(self)

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

    @property
    def verify_steps(self) -> int:
        """Decode steps that carried at least one proposal."""
        return len(self.acceptance_log)

    @property
    def proposed_tokens(self) -> int:
        return sum(proposed for proposed, _ in self.acceptance_log)

    @property
    def accepted_tokens(self) -> int:
        return sum(accepted for _, accepted in self.acceptance_log)
