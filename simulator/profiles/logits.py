"""LM head and sampler time per step, from a profile's columns or the built-in estimate.

Vidur's op set stops at the last decoder layer: no LM head, no logits, no sampler.  A verify
step runs them on k' + 1 tokens per request, and with Llama-3's 128,256-token vocabulary the
LM head alone reads a gigabyte of weights.  A profile's ``mlp.csv`` may carry
``time_stats.lm_head.median`` / ``time_stats.sampler.median`` per ``num_tokens`` (the
built-in profile and ``python -m simulator.profiling measure`` write them); a Vidur-format
profile without them falls back to the built-in physical estimate, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.profiles import grid, roofline
from simulator.profiles.hardware import DeviceSpec
from simulator.models.shapes import ModelShape
from simulator.profiles.vidur_format import LOGITS_OPS

if TYPE_CHECKING:  # annotations only
    import pandas as pd

FROM_PROFILE = "profile"
BUILTIN_ESTIMATE = "builtin estimate"


@dataclass(frozen=True)
class LogitsTable:
    """Milliseconds of LM head + sampler as a function of the step's logits tokens."""

    tokens: tuple[int, ...]
    lm_head_ms: tuple[float, ...]
    sampler_ms: tuple[float, ...]
    source: str

    @cached_property
    def _curve(self) -> tuple:
        # arrays built once, and a memo per token count: a run asks once per step
        return np.asarray(self.tokens, dtype=float), np.asarray(self.lm_head_ms) + np.asarray(self.sampler_ms), {}

    def step_ms(self, logits_tokens: int) -> float:
        """Interpolated on the profiled grid; linear beyond its last point (bandwidth-bound there)."""
        if logits_tokens <= 0:
            return 0.0
        x, y, memo = self._curve
        value = memo.get(logits_tokens)
        if value is None:
            if logits_tokens > x[-1] and len(x) > 1:
                slope = (y[-1] - y[-2]) / (x[-1] - x[-2])
                value = float(y[-1] + slope * (logits_tokens - x[-1]))
            else:
                value = float(np.interp(logits_tokens, x, y))
            memo[logits_tokens] = value
        return value


def builtin_logits_table(shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> LogitsTable:
    tokens = np.array(grid.num_tokens_grid(max_tokens))
    return LogitsTable(
        tuple(int(t) for t in tokens),
        tuple(float(v) for v in roofline.lm_head_ms(tokens, shape, dev)),
        tuple(float(v) for v in roofline.sampler_ms(tokens, shape, dev)),
        BUILTIN_ESTIMATE,
    )


def logits_table(mlp_csv: Path, shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> LogitsTable:
    """The profile's own rows for this model shard when it has them, else the built-in estimate."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    columns = [f"time_stats.{op}.median" for op in LOGITS_OPS]
    frame = pd.read_csv(mlp_csv)
    if not set(columns) <= set(frame.columns):
        return builtin_logits_table(shape, dev, max_tokens)
    rows = frame[
        (frame.n_embd == shape.embedding_dim)
        & (frame.vocab_size == shape.vocab_size)
        & (frame.num_tensor_parallel_workers == shape.tensor_parallel)
    ].dropna(subset=columns)
    if rows.empty:
        return builtin_logits_table(shape, dev, max_tokens)
    table = rows.groupby("num_tokens")[columns].median().sort_index()
    return LogitsTable(
        tuple(int(t) for t in table.index),
        tuple(float(v) for v in table[columns[0]]),
        tuple(float(v) for v in table[columns[1]]),
        FROM_PROFILE,
    )


@lru_cache(maxsize=32)
def cached_logits_table(mlp_csv: Path, shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> LogitsTable:
    """:func:`logits_table` once per process for a (profile file, model shard, device): a sweep
    reads the profile once."""
    return logits_table(mlp_csv, shape, dev, max_tokens)


@lru_cache(maxsize=32)
def cached_builtin_logits_table(shape: ModelShape, dev: DeviceSpec, max_tokens: int) -> LogitsTable:
    """:func:`builtin_logits_table` once per process for a (model shard, device)."""
    return builtin_logits_table(shape, dev, max_tokens)
