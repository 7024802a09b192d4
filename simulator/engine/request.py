"""A Vidur request that counts its speculative work and reports its emissions.

Its survival of preemption (Vidur 0.0.26's ``restart`` mended) and its late release under
closed-loop load are :class:`~simulator.vidur.entities.RestartableRequest`'s.
"""

from simulator.vidur.entities import RestartableRequest


class SpeculativeRequest(RestartableRequest):
    def __init__(self, arrived_at: float, num_prefill_tokens: int, num_decode_tokens: int):
        super().__init__(arrived_at, num_prefill_tokens, num_decode_tokens)
        self.acceptance_log: list[tuple[int, int]] = []  # (proposed, accepted) per verify step
        self.on_complete = None  # closed-loop load: called once when the request finishes
        self.emission_times: list[float] = []  # end of every step that gave the client tokens (ITL)

    def on_batch_end(self, time: float, num_tokens_processed: int) -> None:
        super().on_batch_end(time, num_tokens_processed)
        if self.is_prefill_complete:  # the prompt's last chunk emits the first token, each decode step at least one
            self.emission_times.append(time)
        if self.completed and self.on_complete is not None:
            callback, self.on_complete = self.on_complete, None
            callback(self)

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
