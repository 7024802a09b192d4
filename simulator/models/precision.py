"""A run's precision: the checkpoint's (``quantization_config``, read by
:func:`checkpoint_precision`) with vLLM's ``--quantization`` and ``--kv-cache-dtype`` applied, as
vLLM applies them (pure).

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
from simulator.models.config_fields import refuse
from simulator.models.shapes import Precision

# quantization methods: quant_method (and ModelOpt's quant_algo) -> the method's name here
QUANT_METHODS = ("fp8", "mxfp4", "modelopt")
MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}
KV_DTYPES = {"auto": "bf16", "bfloat16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def quantization_precision(method: str, has_experts: bool, where: str, field: str = "quantization_config") -> Precision:
    """The storage dtypes a quantization method gives a model's parts, as vLLM loads them: FP8
    (``fp8``, ModelOpt FP8): every linear layer of the decoder; MXFP4: the routed experts only
    (vLLM's Mxfp4Config quantizes FusedMoE layers; attention, router, embedding and LM head stay
    BF16); NVFP4 (ModelOpt): the FFNs, dense and experts, with attention in BF16.  The embedding,
    LM head and router stay 16-bit throughout."""
    if method == "fp8":
        return Precision(attention="fp8", ffn="fp8", experts="fp8", method="fp8")
    if method == "mxfp4":
        if not has_experts:
            raise ConfigError(f"{where}: {field} mxfp4 quantizes mixture-of-experts layers only, and the model has none")
        return Precision(experts="mxfp4", method="mxfp4")
    if method == "nvfp4":
        return Precision(ffn="nvfp4", experts="nvfp4", method="nvfp4")
    raise ConfigError(f"{where}: {field} {method!r} is not a modelled quantization method; modelled: fp8, mxfp4, nvfp4")


def checkpoint_precision(config: dict, has_experts: bool, source: str) -> Precision:
    """The checkpoint's own precision, from its ``config.json``'s ``quantization_config`` (16-bit
    when it has none); a method or format the cost model does not cover is refused."""
    quant = config.get("quantization_config")
    if quant is None:
        return Precision()
    if not isinstance(quant, dict):
        refuse(source, "quantization_config", quant, "must be a table")
    method = quant.get("quant_method")
    if method not in QUANT_METHODS:
        refuse(source, "quantization_config", method, f"quant_method is not modelled; modelled: {', '.join(QUANT_METHODS)} (16-bit otherwise)")
    if method == "modelopt":
        algo = quant.get("quant_algo")
        if algo not in MODELOPT_ALGOS:
            refuse(source, "quantization_config", algo, f"ModelOpt quant_algo is not modelled; modelled: {', '.join(MODELOPT_ALGOS)}")
        method = MODELOPT_ALGOS[algo]
    if method == "fp8" and quant.get("fmt", "e4m3") not in ("e4m3", "e5m2"):
        refuse(source, "quantization_config", quant.get("fmt"), "fp8 fmt must be e4m3 or e5m2")
    return quantization_precision(method, has_experts, source)


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
