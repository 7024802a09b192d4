"""The fused-MoE kernels vLLM picks, and their measured efficiencies (``moe_kernels.toml``).

A routed-expert GEMM runs one of a few kernels, chosen by the GPU and the experts' precision, as
vLLM chooses them: Triton ``fused_moe`` for BF16 and FP8 (per-tensor, or 128 x 128 weight blocks),
and on Hopper the MXFP4 path (OpenAI's ``triton_kernels`` ``matmul_ogs``, W4A16).  Each kernel's
constants are arithmetic on a published kernel benchmark (the TOML says which, and which values are
carried from another kernel); :mod:`simulator.profiles.moe` costs a GEMM with them.  A GPU of no
family in the table (the A100), or a precision with no entry (NVFP4), keeps the device's dense
GEMM constants, and :attr:`MoEKernel.name` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_toml

KERNELS_FILE = Path(str(resources.files("simulator.profiles").joinpath("moe_kernels.toml")))
BLOCK_RULES = ("vllm_tuned", "vllm_default", "fixed_64", "triton_kernels")
_FIELDS = ("compute_dtype", "block_rule", "small_expert_mb", "small_memory_eff", "large_expert_mb",
           "large_memory_eff", "fixed_us", "compute_eff", "overlap_loss")


@dataclass(frozen=True)
class MoEKernel:
    """One fused-MoE GEMM kernel on one GPU family.

    Memory: the expert weights stream at a fraction of the HBM bandwidth that grows with the
    bytes of one expert's GEMM (small experts leave the SMs short of bytes in flight):
    ``small_memory_eff`` at ``small_expert_mb`` and ``large_memory_eff`` at ``large_expert_mb``,
    log-interpolated between and held outside.  Compute: ``compute_eff`` of the compute dtype's
    dense peak over the padded rows; ``overlap_loss`` of the shorter side shows; ``fixed_us`` per
    launch (under a CUDA graph)."""

    name: str
    compute_dtype: str
    block_rule: str
    small_expert_mb: float
    small_memory_eff: float
    large_expert_mb: float
    large_memory_eff: float
    fixed_us: float
    compute_eff: float
    overlap_loss: float


def _kernel(name: str, entry: dict, where: str) -> MoEKernel:
    missing = [f for f in _FIELDS if f not in entry]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    if entry["block_rule"] not in BLOCK_RULES:
        raise ConfigError(f"{where}: block_rule {entry['block_rule']!r} is not one of {', '.join(BLOCK_RULES)}")
    for field in ("small_memory_eff", "large_memory_eff", "compute_eff", "overlap_loss"):
        if not 0 <= float(entry[field]) <= 1:
            raise ConfigError(f"{where}: {field} = {entry[field]} must be in [0, 1]")
    if not 0 < float(entry["small_expert_mb"]) < float(entry["large_expert_mb"]):
        raise ConfigError(f"{where}: small_expert_mb must be positive and below large_expert_mb")
    return MoEKernel(name, str(entry["compute_dtype"]), str(entry["block_rule"]),
                     *(float(entry[f]) for f in _FIELDS[2:]))


def parse_kernels(table: dict, where: str) -> tuple[dict[str, str], dict[tuple[str, str], MoEKernel]]:
    """(device name -> family, (kernel, family) -> MoEKernel) of a parsed ``moe_kernels.toml``."""
    families = {device: family for family, devices in table.get("families", {}).items() for device in devices}
    kernels: dict[tuple[str, str], MoEKernel] = {}
    raw = {(k, f): e for k, per_family in table.get("kernel", {}).items() for f, e in per_family.items()}
    for (kernel, family), entry in raw.items():
        at = f"{where}: kernel.{kernel}.{family}"
        if "carried_from" in entry:
            source = tuple(str(entry["carried_from"]).split("."))
            if source not in raw or "carried_from" in raw[source]:
                raise ConfigError(f"{at}: carried_from = {entry['carried_from']!r} names no measured kernel")
            entry = raw[source]
            name = f"{kernel}.{family} (carried from {'.'.join(source)})"
        else:
            name = f"{kernel}.{family}"
        kernels[(kernel, family)] = _kernel(name, entry, at)
    return families, kernels


@lru_cache(maxsize=4)
def load_kernels(path: Path = KERNELS_FILE) -> tuple[dict[str, str], dict[tuple[str, str], MoEKernel]]:
    return parse_kernels(read_toml(path, "fused-MoE kernel table"), f"fused-MoE kernel table {path}")


def kernel_name(experts: str, block_fp8: bool) -> Optional[str]:
    """The kernel vLLM runs for routed experts stored in ``experts`` (a Precision dtype)."""
    if experts == "bf16":
        return "triton_bf16"
    if experts == "fp8":
        return "triton_fp8_block" if block_fp8 else "triton_fp8"
    if experts == "mxfp4":
        return "mxfp4"
    return None  # NVFP4 (FlashInfer / CUTLASS FP4 MoE on Blackwell): not in the table


def kernel_for(device: str, experts: str, block_fp8: bool, path: Path = KERNELS_FILE) -> Optional[MoEKernel]:
    """The measured kernel for ``device``'s routed experts, or None (the dense constants apply)."""
    families, kernels = load_kernels(path)
    name, family = kernel_name(experts, block_fp8), families.get(device)
    if name is None or family is None:
        return None
    return kernels.get((name, family))
