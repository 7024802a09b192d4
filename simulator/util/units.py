"""How numbers, identifiers and k schedules read, on the site and in the pays-off command's answer:
one place, so chart, table, page text and terminal agree."""

from __future__ import annotations

import math
import re

ATTENTION_LABELS = {"kv_once": "KV read once", "per_token": "Per-token cost", "interpolated": "Interpolated"}
MODEL_LABELS = {"meta-llama/Llama-2-7b-hf": "Llama-2-7B"}


def number(value: float) -> str:
    """Shortest plain form: 4.0 -> '4', 0.7 -> '0.7' (also the selector and URL values)."""
    return f"{float(value):g}"


def milliseconds(seconds: float) -> str:
    return "–" if _missing(seconds) else f"{seconds * 1000:.2f} ms"


def seconds(value: float) -> str:
    return "–" if _missing(value) else f"{value:.3f} s"


def speedup(value: float) -> str:
    return "–" if _missing(value) else f"{value:.2f}×"


def speedup_words(value: float) -> str:
    """A speedup that rounds to 1.00x is break-even, whichever side of 1 it lies: "1.00×, break-even"."""
    return f"{speedup(value)}, break-even" if breaks_even(value) else speedup(value)


def breaks_even(value: float) -> bool:
    """Whether a speedup prints as 1.00x (the page then says break-even, not "pays" or "loses")."""
    return not _missing(value) and round(float(value), 2) == 1.0


def figure(value: float, significant: int | None = None) -> str:
    """A measured or simulated figure in full, with thousands separators and never an exponent:
    14300 -> '14,300', 6582.87 -> '6,582.87'; ``significant`` rounds first (3: 14,318.2 -> '14,300')."""
    if _missing(value):
        return "–"
    value = float(value)
    if significant:
        value = float(f"{value:.{significant}g}")
    return f"{value:,.6f}".rstrip("0").rstrip(".")


ACCEPTANCE_LENGTH = re.compile(r"(acceptance length |length )(\d+\.\d{3,})")


def acceptance_length(value: float) -> str:
    """A mean acceptance length to 2 decimals: 2.49585 -> '2.50'."""
    return "–" if _missing(value) else f"{float(value):.2f}"


def acceptance_lengths_in_text(text: str) -> str:
    """Recorded prose with each acceptance length to 2 decimals ("length 2.49585 at k = 3" -> "length 2.50 at k = 3")."""
    return ACCEPTANCE_LENGTH.sub(lambda m: m.group(1) + acceptance_length(float(m.group(2))), text)


def plural(count: int, word: str, many: str | None = None) -> str:
    """ "1 source", "2 sources"."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def percent(value: float) -> str:
    """A signed error in percent, never "-0.0 %" (a value that rounds to zero reads "0.0 %")."""
    if _missing(value) or value == "":
        return "—"
    rounded = round(float(value), 1)
    return "0.0 %" if rounded == 0 else f"{rounded:+.1f} %"


def batch(value: float) -> str:
    """A mean number of requests, e.g. '23.4' (the column heading names the unit)."""
    return "–" if _missing(value) else f"{value:.1f}"



def schedule_words(schedule) -> str:
    """vLLM's num_speculative_tokens_per_batch_size rows in words: "k = 4 up to 31 in flight, 3 from 32"."""
    rows = [list(r) for r in schedule or []]
    if not rows:
        return "no speculation"
    if len(rows) == 1:
        k = rows[0][2]
        return f"k = {k} at every batch size" if k else "speculation off at every batch size"
    start, end, k = rows[0]
    parts = [f"k = {k} up to {end} in flight" if k else f"off up to {end} in flight"]
    parts += [f"{k} from {start}" if k else f"off from {start}" for start, _, k in rows[1:]]
    return ", ".join(parts)


def attention_label(mode: str) -> str:
    return ATTENTION_LABELS.get(mode, mode)


def model_label(model: str) -> str:
    return MODEL_LABELS.get(model, model)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
