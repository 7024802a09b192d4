"""Device descriptions for the built-in profile: datasheet numbers plus fitted kernel constants.

The data lives in ``devices.toml`` next to this module (package data) so a new GPU is a data change, not a code change.
Datasheet values come from vendor documents; kernel constants are fitted by
``python -m simulator.profiling fit-device`` against a measured Vidur profile and say so in
their ``fitted_from`` field.
"""

from __future__ import annotations

from functools import lru_cache

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_toml

# Package data: found the same way from a checkout, an editable install or a wheel.
DEVICES_FILE = Path(str(resources.files("simulator.profiles").joinpath("devices.toml")))
# The GPU a run, a sweep row and every command's --device get when none is named: the A100 80GB,
# the GPU of Vidur's own measured profiles.  The one place it is spelled; a device of DEVICES_FILE.
DEFAULT_DEVICE = "a100"


@dataclass(frozen=True)
class Datasheet:
    """Vendor numbers: the ceilings the kernel constants are fractions of."""

    memory_gib: float
    peak_fp16_tflops: float  # dense tensor-core FP16 / BF16
    hbm_bandwidth_tbps: float
    num_sms: int
    l2_cache_mib: float
    source: str
    # dense tensor-core peaks of the narrower dtypes; 0: the GPU has no tensor cores for it
    peak_fp8_tflops: float = 0.0
    peak_fp4_tflops: float = 0.0

    def peak_tflops(self, dtype: str) -> float:
        """The dense tensor-core peak a GEMM computing in ``dtype`` ("bf16", "fp8", "fp4") runs against."""
        peak = {"bf16": self.peak_fp16_tflops, "fp8": self.peak_fp8_tflops, "fp4": self.peak_fp4_tflops}[dtype]
        if peak <= 0:
            raise ValueError(f"no {dtype} tensor cores")
        return peak

    def has_dtype(self, dtype: str) -> bool:
        """Whether the GPU has tensor cores (and so vLLM's kernels) for ``dtype``."""
        return {"bf16": self.peak_fp16_tflops, "fp8": self.peak_fp8_tflops, "fp4": self.peak_fp4_tflops}.get(dtype, 0) > 0


@dataclass(frozen=True)
class KernelConstants:
    """How closely each kernel family approaches the datasheet ceilings.

    Times are per transformer layer.  ``*_us`` are microseconds, ``*_eff`` fractions of
    a datasheet ceiling, ``*_gbps`` gigabytes per second.
    """

    # GEMMs (cuBLAS-like, 64x64 tiles, two CTAs per SM)
    gemm_compute_eff: float
    gemm_memory_eff: float
    gemm_launch_us: float
    gemm_tail_exponent: float  # cost of a partial last wave: frac ** exponent
    gemm_k_overhead: float  # prologue/epilogue cost per tile, in K-elements
    # Row-wise kernels (RMSNorm: one row per CTA, latency-bound waves)
    norm_launch_us: float
    norm_wave_l2_us: float
    norm_wave_hbm_us: float
    norm_tail_exponent: float
    # Streaming element-wise kernels: fraction of HBM bandwidth, and gain when L2-resident
    act_eff: float
    add_eff: float
    rope_eff: float
    elementwise_launch_us: float
    l2_bandwidth_gain: float
    # Decode attention (paged, split-KV for small grids; two CTAs per SM)
    decode_fixed_us: float
    decode_per_seq_us: float
    decode_first_wave_eff: float
    decode_stream_gain: float
    decode_sm_gbps: float
    decode_short_kv_eff: float
    decode_short_kv_tokens: float
    decode_doubling_penalty: float
    split_combine_us: float
    # Prefill attention (64x128 tiles, rectangular work, two CTAs per SM)
    prefill_fixed_us: float
    prefill_compute_eff: float
    prefill_tail_weight: float
    prefill_cta_overhead_blocks: float
    # Fraction of the shorter of a GEMM's compute and memory times that is not hidden behind the
    # longer (0: a pure roofline max).  Fitted only in a pooled fit (several widths and TP degrees
    # put many GEMMs near the ridge point); one model's TP 1 rows, as the A100 had, leave it at 0.
    gemm_overlap_loss: float = 0.0


@dataclass(frozen=True)
class KernelShapes:
    """How a device's kernels lay out work: set from the libraries' documented kernels and from
    physics (``source`` says which), never fitted.  The defaults are what the A100 constants were
    fitted with: 64x64 GEMM tiles, two CTAs per SM, and a norm wave whose time does not depend
    on the row width (that fit saw one width, 4,096)."""

    gemm_tile_m: int = 64
    gemm_tile_n: int = 64
    gemm_ctas_per_sm: int = 2
    # A norm wave's time scales as (row width / NORM_REFERENCE_WIDTH) ** exponent: 1 when it is
    # set by the bytes each row moves, 0 for width-independent latency.
    norm_width_exponent: float = 0.0
    source: str = "default: 64x64 GEMM tiles, two CTAs per SM (Ampere-class cuBLAS); width-independent norm waves"


@dataclass(frozen=True)
class NetworkSpec:
    """The GPU-to-GPU fabric a tensor-parallel group all-reduces over (one NVSwitch node).

    ``nvlink_bandwidth_gbps`` (per GPU, per direction) and ``gpus_per_node`` are datasheet
    numbers; ``launch_us``, ``hop_us`` and ``bus_eff`` are fitted once per device over all
    TP degrees and message sizes of a measured ``all_reduce.csv`` (``fitted_from`` says which).
    """

    topology: str  # Vidur's network_device name, e.g. "a100_dgx"
    gpus_per_node: int
    nvlink_bandwidth_gbps: float
    source: str
    version: str
    fitted_from: str
    launch_us: float  # fixed cost of one collective as timed (launch, synchronisation)
    hop_us: float  # latency of one ring step
    bus_eff: float  # fraction of the NVLink bandwidth a ring sustains
    # vLLM's custom all-reduce (simulator.profiles.collectives), as a CUDA graph replays it: fixed
    # time of its one-shot and two-shot kernels and the fraction of NVLink bandwidth their peer
    # reads sustain (``custom_twoshot_bus_eff``: the two-shot kernel's own, where its measurement
    # tells it apart; None: ``custom_bus_eff``); None: the node has none measured, and every
    # all-reduce is NCCL's ring above
    custom_oneshot_us: Optional[float] = None
    custom_twoshot_us: Optional[float] = None
    custom_bus_eff: float = 1.0
    custom_source: str = ""
    custom_twoshot_bus_eff: Optional[float] = None
    # torch symmetric memory's all-reduce (vLLM >= 0.11 on Hopper): the fixed time of its kernels
    # and the fraction of NVLink bandwidth its multimem and two-shot kernels sustain; None: the node
    # has none (vLLM enables it on Hopper and Blackwell only)
    symm_mem_us: Optional[float] = None
    symm_multimem_eff: float = 1.0
    symm_twoshot_eff: float = 1.0

    @property
    def custom_twoshot_eff(self) -> float:
        """The fraction of NVLink bandwidth the custom two-shot kernel sustains."""
        return self.custom_bus_eff if self.custom_twoshot_bus_eff is None else self.custom_twoshot_bus_eff

    @property
    def has_symm_mem(self) -> bool:
        """Whether vLLM runs torch symmetric memory on this node (Hopper and Blackwell: the same
        devices for which it also caps the custom all-reduce per TP degree)."""
        return self.symm_mem_us is not None


@dataclass(frozen=True)
class AttentionSpec:
    """The attention backend vLLM runs on the device and, for FlashAttention-3, how close its
    kernel comes to the datasheet (:mod:`simulator.profiles.attention`).  FlashAttention-2 (the
    A100) takes its decode and prefill constants from :class:`KernelConstants`, fitted on Vidur's
    measured FlashAttention profile."""

    backend: str  # "flash_attn_3", "flashinfer" (the same CTA model, its own constants) or "flash_attn_2"
    source: str
    decode_bandwidth_eff: float = 0.0  # fraction of HBM bandwidth decode CTAs stream K and V at (grouped-query heads)
    prefill_compute_eff: float = 0.0  # fraction of the FP16 tensor peak prefill tiles compute at
    kernel_us: float = 0.0  # fixed time of one attention kernel
    combine_us: float = 0.0  # the split-KV combine kernel, when the kernel splits
    # multi-head latent attention's decode kernel (FlashMLA on Hopper): fractions of the HBM
    # bandwidth and of the BF16 tensor peak it reaches; 0: MLA is not modelled on the device
    mla_backend: str = ""
    mla_decode_bandwidth_eff: float = 0.0
    mla_decode_compute_eff: float = 0.0
    mla_source: str = ""


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    datasheet: Datasheet
    constants: KernelConstants
    constants_version: str
    fitted_from: str
    network: Optional[NetworkSpec] = None
    kernels: KernelShapes = KernelShapes()
    attention: AttentionSpec = AttentionSpec("flash_attn_2", "default: FlashAttention-2, the fitted kernel constants")

    def with_constants(self, constants: KernelConstants, version: str, fitted_from: str) -> "DeviceSpec":
        return replace(self, constants=constants, constants_version=version, fitted_from=fitted_from)

    def fingerprint(self) -> str:
        """Content hash of every number the generator reads; part of every cache key."""
        payload = json.dumps(
            {
                "name": self.name,
                "datasheet": asdict(self.datasheet),
                "constants": asdict(self.constants),
                **({"network": asdict(self.network)} if self.network else {}),
                **({"kernels": asdict(self.kernels)} if self.kernels != KernelShapes() else {}),
                "attention": asdict(self.attention),
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _build(name: str, entry: dict, path: Path) -> DeviceSpec:
    try:
        datasheet = Datasheet(**entry["datasheet"])
        constants_table = dict(entry["constants"])
        version = constants_table.pop("version")
        fitted_from = constants_table.pop("fitted_from")
        constants = KernelConstants(**constants_table)
    except (KeyError, TypeError) as exc:
        expected = [f.name for f in fields(KernelConstants)]
        raise ConfigError(f"{path}: device '{name}' is malformed ({exc}); constants must be {expected}") from exc
    network = None
    if "network" in entry:
        try:
            network = NetworkSpec(**entry["network"])
        except TypeError as exc:
            expected = [f.name for f in fields(NetworkSpec)]
            raise ConfigError(f"{path}: device '{name}' has a malformed [network] table ({exc}); it must hold {expected}") from exc
    kernels = KernelShapes()
    if "kernels" in entry:
        try:
            kernels = KernelShapes(**entry["kernels"])
        except TypeError as exc:
            expected = [f.name for f in fields(KernelShapes)]
            raise ConfigError(f"{path}: device '{name}' has a malformed [kernels] table ({exc}); it may hold {expected}") from exc
    attention = DeviceSpec.attention
    if "attention" in entry:
        try:
            attention = AttentionSpec(**entry["attention"])
        except TypeError as exc:
            expected = [f.name for f in fields(AttentionSpec)]
            raise ConfigError(f"{path}: device '{name}' has a malformed [attention] table ({exc}); it may hold {expected}") from exc
    return DeviceSpec(name, datasheet, constants, version, fitted_from, network, kernels, attention)


def _resolve_variant(name: str, entry: dict, table: dict, path: Path) -> dict:
    """A ``variant_of`` device takes its parent's tables and overrides the keys it gives: its kernel
    constants are the parent's fractions of its own datasheet.  That is exact for the same chip
    with other memory (H200 of H100) and a stated carry-over for a new chip not measured yet
    (B200 of H100), whose versions read "{parent}-carried"."""
    parent_name = entry.get("variant_of")
    if parent_name is None:
        return entry
    parent = table.get(parent_name)
    if parent is None or "variant_of" in parent:
        raise ConfigError(f"{path}: device '{name}' is a variant_of '{parent_name}', which is not a base device")
    merged = {key: dict(value) if isinstance(value, dict) else value for key, value in parent.items()}
    for key, value in entry.items():
        if key != "variant_of":
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    # a variant that carries its parent's fitted tables to another chip says so in their version:
    # "{parent}-carried" names the parent's current version, so a refit of the parent shows
    for table in ("constants", "network"):
        version = merged.get(table, {}).get("version")
        if isinstance(version, str) and "{parent}" in version:
            merged[table]["version"] = version.replace("{parent}", parent[table]["version"])
    return merged


def load_devices(path: Path = DEVICES_FILE) -> dict[str, DeviceSpec]:
    table = read_toml(path, "device constants")
    return {name: _build(name, _resolve_variant(name, entry, table, path), path) for name, entry in table.items()}


@lru_cache(maxsize=8)
def _devices_at(path: str, mtime_ns: int, size: int) -> dict[str, DeviceSpec]:
    return load_devices(Path(path))


def known_devices(path: Path = DEVICES_FILE) -> dict[str, DeviceSpec]:
    """Every device of ``path``, parsed once per file version (a run asks several times, a sweep
    or the published rows' plans hundreds of times); the dict is shared: read it, do not change it."""
    try:
        stat = Path(path).stat()
    except OSError:
        return load_devices(path)  # reports the missing file as a ConfigError
    return _devices_at(str(path), stat.st_mtime_ns, stat.st_size)


def device_names(path: Path = DEVICES_FILE) -> list[str]:
    """Every device of ``path``, in the table's order: what --help lists and --device accepts."""
    return list(known_devices(path))


def get_device(name: str, path: Path = DEVICES_FILE) -> DeviceSpec:
    devices = known_devices(path)
    if name not in devices:
        raise ConfigError(f"unknown device '{name}'; known devices: {', '.join(sorted(devices))}")
    return devices[name]
