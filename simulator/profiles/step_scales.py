"""A server's own step costs as scales on the built-in step model's terms (pure).

The built-in profile prices a forward from kernel models (:mod:`simulator.profiles.step`); a
real server differs from them by how efficiently its kernels run on its GPU and software, not by
its shape.  A fit to a server's own measurements (``python -m simulator.validation fit``) therefore
moves a handful of free terms, each a multiplier on one group of the step model's terms:

=============  ===================================================================================
scale          multiplies (:class:`~simulator.profiles.step.StepCost`'s terms)
=============  ===================================================================================
gemm           the kernels whose time grows with the step's token count: the GEMMs, norms,
               rotary, KV write and activation of every layer, the embedding and final norm, the
               LM head and the sampler (``linear_ms``, ``outside_layers_ms``, ``logits_ms``)
attention      the attention kernels (``attention_ms``)
all_reduce     the tensor-parallel collectives (``all_reduce_ms``; nothing at TP 1)
drafter        everything the proposer adds to a speculative step (the draft passes, the fc, the
               host lookups: :class:`simulator.engine.proposers.ProposerCost`)
=============  ===================================================================================

The GPU's idle gaps between kernels and the CPU time the layers wait on are left as the engine
profile states them; the engine's per-step CPU time is the run's ``engine_overhead_ms``, the fifth
fitted term.  All scales 1 is the built-in profile itself, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from simulator.profiles.step import StepCost

SCALE_TERMS = ("gemm", "attention", "all_reduce", "drafter")


@dataclass(frozen=True)
class StepScales:
    """Multipliers on the built-in step model's terms (module docstring); 1 leaves a term as built."""

    gemm: float = 1.0
    attention: float = 1.0
    all_reduce: float = 1.0
    drafter: float = 1.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"step scale {f.name} = {value!r}: must be a finite number > 0")

    def forward_ms(self, cost: StepCost) -> float:
        """A forward's milliseconds with each term scaled (the kernel gaps and CPU-bound time as built)."""
        return (
            self.gemm * (cost.linear_ms + cost.outside_layers_ms + cost.logits_ms)
            + self.attention * cost.attention_ms
            + self.all_reduce * cost.all_reduce_ms
            + cost.gaps_ms + cost.cpu_bound_ms
        )
