"""How long the predictor's tables are: as long as the run needs, not as long as the model's context.

The built-in profile and the forest's prediction tables grow with the longest sequence they cover
(attention rows for every KV length and batch, prefill rows for every chunk offset), and their
cost with it: a table for Llama-3.1-8B's 131,072-token context takes minutes to build where one for
8,192 takes seconds.  So a run's tables cover the longest thing it will cost, a request (prompt +
output) or a step (chunk + one token per running request), rounded up to a power of two so that
runs with similar workloads share one cached profile, and never less than ``TABLE_FLOOR``.

The floor keeps every model whose context is at most 8,192 tokens on exactly the tables it had when
the catalog capped contexts at 8,192 (their tables were sized by the context, which the floor
covers), so no recorded number moves; a longer context only gets longer tables when a run needs them.
"""

from __future__ import annotations

TABLE_FLOOR = 8192


def table_tokens(context: int, needed: int) -> int:
    """Tokens the profile and prediction tables cover for a model of ``context`` tokens whose
    run needs ``needed`` (``needed`` <= ``context``, checked by the caller)."""
    size = TABLE_FLOOR
    while size < needed:
        size *= 2
    return min(context, size)
