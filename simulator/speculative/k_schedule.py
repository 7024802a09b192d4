"""Dynamic speculation: k chosen at each step from the running batch size (vLLM's schedule).

vLLM's ``num_speculative_tokens_per_batch_size`` is a list of rows ``[start, end, k]``: a step
with ``start <= running requests <= end`` proposes up to k tokens per request, and k = 0 runs
plain decode (vLLM V0's "disable above batch size N" is ``[[1, N, k], [N + 1, cap, 0]]``).

Here a schedule must say what happens at every batch size: rows sorted, starting at 1, each
starting right after the previous one ends (no gaps, no overlaps), k between 0 and the
proposer's maximum (``num_speculative_tokens``, which sizes the draft buffers).  vLLM fills
gaps with the previous row's k and clamps k to the maximum; we refuse both, because a schedule
that relies on them is most likely a typo.  Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

from simulator.util.errors import ConfigError

Schedule = tuple[tuple[int, int, int], ...]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_schedule(rows, max_k: Optional[int] = None, name: str = "k_schedule") -> Schedule:
    """The validated schedule as a tuple of (start, end, k) integer triples.

    ``max_k`` is the proposer's maximum (None: no limit beyond k >= 0).  Every error names
    the row (0-based, as it appears in the list) and what is wrong with it.
    """
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows:
        raise ConfigError(f"{name} = {rows!r}: must be a non-empty list of [start, end, k] rows")
    out, names = [], []
    for i, row in enumerate(rows):
        where = f"{name} row {i} {list(row) if isinstance(row, (list, tuple)) else row!r}"
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != 3:
            raise ConfigError(f"{where}: must be [start, end, k], three integers")
        for label, value in zip(("start", "end", "k"), row):
            if not _is_int(value):
                raise ConfigError(f"{where}: {label} = {value!r} is not an integer")
        start, end, k = (int(v) for v in row)
        if start < 1:
            raise ConfigError(f"{where}: start = {start} must be a batch size >= 1")
        if end < start:
            raise ConfigError(f"{where}: end = {end} is below start = {start}")
        if k < 0:
            raise ConfigError(f"{where}: k = {k} is negative (k = 0 runs plain decode)")
        if max_k is not None and k > max_k:
            raise ConfigError(f"{where}: k = {k} is above the proposer's maximum num_speculative_tokens = {max_k}")
        out.append((start, end, k))
        names.append(where)
    for i in range(1, len(out)):
        if out[i][0] < out[i - 1][0]:
            raise ConfigError(f"{names[i]}: rows are not sorted; start = {out[i][0]} comes after row {i - 1}'s start = {out[i - 1][0]}")
    if out[0][0] != 1:
        raise ConfigError(f"{names[0]}: the first row must start at batch size 1; sizes 1..{out[0][0] - 1} have no k")
    for i in range(1, len(out)):
        start, previous_end = out[i][0], out[i - 1][1]
        if start <= previous_end:
            raise ConfigError(f"{names[i]}: overlaps row {i - 1}, which ends at {previous_end}")
        if start > previous_end + 1:
            gap = f"batch size {start - 1} is" if start - 1 == previous_end + 1 else f"batch sizes {previous_end + 1}..{start - 1} are"
            raise ConfigError(f"{names[i]}: {gap} missing between row {i - 1} and row {i}")
    return tuple(out)


def parse_schedule(text: str, max_k: Optional[int] = None, name: str = "--k-schedule") -> Schedule:
    """A schedule from its JSON text, e.g. ``[[1,16,4],[17,64,2],[65,512,0]]``."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name} {text!r}: not valid JSON ({exc.msg}); expected e.g. [[1,16,4],[17,64,2],[65,512,0]]") from None
    return check_schedule(rows, max_k, name)


def max_k(schedule: Schedule) -> int:
    return max(k for _, _, k in schedule)


def covered_up_to(schedule: Schedule) -> int:
    """The largest batch size the schedule gives a k for."""
    return schedule[-1][1]


def k_table(schedule: Schedule) -> tuple[int, ...]:
    """k per batch size as a flat table (index = batch size; index 0 = the first row's k),
    so a step looks its k up in O(1)."""
    return tuple(k_for_batch(schedule, max(batch_size, 1)) for batch_size in range(covered_up_to(schedule) + 1))


def k_for_batch(schedule: Schedule, batch_size: int) -> int:
    """k for a step with ``batch_size`` running requests."""
    for start, end, k in schedule:
        if start <= batch_size <= end:
            return k
    raise ConfigError(f"batch size {batch_size}: outside the schedule's 1..{covered_up_to(schedule)}")


def from_best_k(best: Sequence[tuple[int, int]], up_to: int) -> Schedule:
    """A schedule from (batch size, best k) points, sorted by batch size: each point's k holds
    from its batch size up to the next point's (geometric midpoints would be finer, but a
    recommendation should change k only where a measurement says so), and equal neighbours
    merge.  The first row starts at 1 and the last ends at ``up_to``."""
    if not best:
        raise ConfigError("a schedule needs at least one (batch size, k) point")
    points = sorted(best)
    rows: list[list[int]] = []
    for i, (size, k) in enumerate(points):
        start = 1 if i == 0 else size
        end = up_to if i + 1 == len(points) else points[i + 1][0] - 1
        if rows and rows[-1][2] == k:
            rows[-1][1] = end
        else:
            rows.append([start, end, k])
    return check_schedule(rows)


def to_vllm(schedule: Schedule) -> list[list[int]]:
    """The JSON value vLLM's ``num_speculative_tokens_per_batch_size`` takes."""
    return [list(row) for row in schedule]
