"""A run's precision: the checkpoint's (``quantization_config``) with vLLM's ``--quantization``
and ``--kv-cache-dtype`` applied, as vLLM applies them (pure).

* ``--quantization`` unset: the checkpoint's own method (16-bit when it has none).
* ``--quantization`` the checkpoint's method: the same.  Another method: refused, as vLLM refuses
  a ``--quantization`` that differs from the checkpoint's ``quant_method``.
* ``--quantization fp8`` on a 16-bit checkpoint: vLLM's online FP8 (every linear layer of the
  decoder quantized to FP8 at load, W8A8 with dynamic activation scales).  ``mxfp4`` and
  ``nvfp4`` need a checkpoint quantized that way: refused on a 16-bit one.
* ``--kv-cache-dtype``: ``auto`` keeps the model's 16-bit dtype; ``fp8``, ``fp8_e4m3`` and
  ``fp8_e5m2`` store one byte per element.

Whether the GPU can run the result (FP8 or FP4 tensor cores) is the device's question
(:func:`precision_problem`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.models.spec import quantization_precision
from simulator.models.shapes import Precision

KV_DTYPES = {"auto": "bf16", "bfloat16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def run_precision(model: Precision, has_experts: bool, quantization: Optional[str], kv_cache_dtype: str, model_name: str) -> Precision:
    """The storage dtypes a run holds ``model_name``'s parts in."""
    if quantization is None or quantization == model.method:
        precision = model
    elif model.method:
        raise ConfigError(
            f"quantization = {quantization!r}: {model_name}'s quantization_config says {model.method!r}; vLLM refuses a "
            "--quantization that differs from the checkpoint's method (drop it, or give the checkpoint's)"
        )
    elif quantization == "fp8":
        precision = quantization_precision("fp8", has_experts, model_name, "quantization")
    else:
        raise ConfigError(
            f"quantization = {quantization!r}: {model_name} is a 16-bit checkpoint, and vLLM quantizes online to fp8 only; "
            f"{quantization} needs a checkpoint quantized with it"
        )
    if kv_cache_dtype not in KV_DTYPES:
        raise ConfigError(f"kv_cache_dtype = {kv_cache_dtype!r}: must be one of {', '.join(KV_DTYPES)}")
    return replace(precision, kv_cache=KV_DTYPES[kv_cache_dtype])


def precision_problem(precision: Precision, has_dtype, device: str) -> Optional[str]:
    """Why ``device`` (whose tensor-core dtypes ``has_dtype`` answers for) cannot run
    ``precision``, or None.  FP8 weights compute in FP8 and NVFP4 in FP4; MXFP4 weights are
    dequantized to BF16 (vLLM runs GPT-OSS so on Hopper), so they need neither."""
    for part in ("attention", "ffn", "experts"):
        dtype = precision.compute_dtype(part)
        if not has_dtype(dtype):
            method = precision.method or getattr(precision, part)
            return f"quantization = {method!r} computes in {dtype.upper()}, and device '{device}' has no {dtype.upper()} tensor cores"
    if precision.kv_cache == "fp8" and not has_dtype("fp8"):
        return f"kv_cache_dtype = 'fp8': device '{device}' has no FP8 support (vLLM's FP8 KV cache needs an FP8-capable GPU here)"
    return None
