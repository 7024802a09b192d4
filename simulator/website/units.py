"""How numbers and identifiers read on the site: one place, so chart, table and text agree."""

from __future__ import annotations

import math

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


def batch(value: float) -> str:
    """A mean number of requests, e.g. '23.4' (the column heading names the unit)."""
    return "–" if _missing(value) else f"{value:.1f}"


def attention_label(mode: str) -> str:
    return ATTENTION_LABELS.get(mode, mode)


def model_label(model: str) -> str:
    return MODEL_LABELS.get(model, model)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
