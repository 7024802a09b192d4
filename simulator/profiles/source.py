"""One interface, two profile sources: the built-in physical model or a Vidur-format directory.

A directory gives a pair of Vidur-format CSV files that Vidur's random forest trains on.  The
built-in source gives the physical model itself (:class:`~simulator.profiles.builtin.BuiltinModel`):
the predictor evaluates it at every point Vidur looks up, so nothing is generated, written or
fitted.  At tensor parallelism > 1 the all-reduce times come from ``network_dir`` when given,
else the profile directory's own ``all_reduce.csv``, else the built-in NVLink model of the device.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

from simulator.models.shapes import ModelShape
from simulator.profiles import builtin
from simulator.profiles.all_reduce_rows import GroupNetwork, group_network, model_rows
from simulator.profiles.hardware import DeviceSpec, get_device
from simulator.profiles.sharding import check_sharding, tp_degrees
from simulator.profiles.vidur_format import ProfileFiles, max_decode_batch, validate_profile_dir, write_profile
from simulator.util.errors import ConfigError
from simulator.util.hashing import text_digest


@dataclass(frozen=True)
class ResolvedProfile:
    files: Optional[ProfileFiles]  # a directory's CSVs (all-reduce rows too); built-in: measured all-reduce rows only, if any
    source: str  # "builtin" or "directory"
    profile_id: str  # constants version (built-in) or "sha256:<digest>" (directory)
    content_sha256: str
    max_decode_batch: int
    tensor_parallel: int = 1
    network_source: Optional[str] = None  # TP > 1: "builtin", "profile_dir" or "network_dir"
    builtin: Optional[builtin.BuiltinModel] = None  # the physical model a built-in run's tables come from

    def provenance(self) -> dict:
        base = {"profile_source": self.source, "profile_id": self.profile_id, "profile_sha256": self.content_sha256}
        if self.tensor_parallel > 1:
            base.update({"tensor_parallel_size": self.tensor_parallel, "network_source": self.network_source})
        return base


def _builtin_key(model: str, device: str, max_seq_len: int, block_size: int) -> str:
    dev = get_device(device)
    text = f"{model}|{dev.fingerprint()}|{max_seq_len}|{block_size}|v{builtin.GENERATOR_VERSION}"
    return text_digest(text, 16)


def builtin_profile_dir(model: str, shape: ModelShape, device: str, root: Path, max_seq_len: int = 4096, block_size: int = 16) -> Path:
    """Generate (once) the built-in profile of ``model`` (of ``shape``, its cost model's shape) under
    ``root``; a finished directory is never rewritten."""
    dev = get_device(device)
    target = Path(root) / f"builtin-{device}-{model.replace('/', '--')}-{_builtin_key(model, device, max_seq_len, block_size)}"
    if (target / "metadata.json").is_file():
        return target
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=".builtin-"))
    except OSError as exc:
        raise ConfigError(f"cache directory {root}: not writable ({exc.strerror})") from exc
    degrees = builtin.tp_degrees(shape, dev)
    try:
        write_profile(
            staging,
            builtin.mlp_table(shape, dev, max_tokens=max_seq_len, degrees=degrees),
            builtin.attention_table(shape, dev, max_seq_len, block_size, degrees=degrees),
            {
                "source": "built-in roofline generator",
                "generator_version": builtin.GENERATOR_VERSION,
                "model": model,
                "device": device,
                "constants_version": dev.constants_version,
                "constants_fitted_from": dev.fitted_from,
                "max_seq_len": max_seq_len,
                "block_size": block_size,
                "tensor_parallel_degrees": list(degrees),
                **({"network_version": dev.network.version, "network_fitted_from": dev.network.fitted_from} if dev.network else {}),
            },
            all_reduce=model_rows(shape, dev, max_seq_len, degrees),
        )
        try:
            staging.rename(target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "metadata.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _stamp(directory: Optional[Path]):
    if directory is None or not directory.is_dir():
        return None
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.iterdir()) if p.is_file())


@dataclass(frozen=True)
class ProfileQuery:
    """One model side's profile question, in values the run resolved already: the model (its name,
    for messages, and its whole shape as the run holds it), the device and TP degree, and the
    directories given.  The field names say which of the run's fields a refusal is about."""

    model: str
    shape: ModelShape  # the whole model; ``shape.sharded(tensor_parallel)`` is one GPU's share
    device: DeviceSpec
    tensor_parallel: int
    cache_dir: Path
    max_seq_len: int
    block_size: int
    profile_dir: Optional[str] = None  # a Vidur-format directory; None = the built-in profile
    network_dir: Optional[str] = None  # measured all_reduce.csv rows for TP > 1
    tp_field: str = "tensor_parallel_size"
    profile_field: str = "profile_dir"


def resolve(query: ProfileQuery) -> ResolvedProfile:
    """The profile a run side trains on: the sharding checked (here, once), then the built-in model
    or a Vidur-format directory with its all-reduce rows (:func:`~simulator.profiles.all_reduce_rows.group_network`); validated and hashed
    once per process for unchanged files."""
    dev = query.device
    check_sharding(query.shape, query.tensor_parallel, query.tp_field, query.model)
    degrees = tp_degrees(query.shape, dev.network.gpus_per_node if dev.network else 1)  # what built-in all-reduce rows cover
    if query.profile_dir is not None and not query.shape.is_plain:
        raise ConfigError(
            f"{query.profile_field} = {query.profile_dir}: a Vidur-format profile holds a dense 16-bit Llama-style layer's ops, and "
            f"{query.model} as this run holds it is not one (its layer kinds, experts, attention or precision); use the built-in profile"
        )
    directory = Path(query.profile_dir) if query.profile_dir is not None else None
    net = Path(query.network_dir) if query.network_dir is not None else None
    return _resolve(
        directory, _stamp(directory), net, _stamp(net), query.model, query.shape, dev, Path(query.cache_dir),
        query.max_seq_len, query.block_size, query.tensor_parallel, degrees,
    )


@lru_cache(maxsize=32)
def _resolve(
    profile_dir, stamp, network_dir, network_stamp, model: str, whole: ModelShape, device: DeviceSpec, cache_dir: Path, max_seq_len: int, block_size: int,
    tp: int, degrees: tuple[int, ...],
) -> ResolvedProfile:
    shape = whole.sharded(tp)
    # the GPUs that exchange over NVLink: TP, times a built-in mixture of experts' data-parallel ranks (they exchange tokens too)
    ranks = tp * (shape.moe.data_parallel if shape.moe is not None and profile_dir is None else 1)
    network = group_network(profile_dir, network_dir, whole, device, cache_dir, max_seq_len, tp, ranks, degrees)
    if profile_dir is None:
        return _builtin_profile(shape, device, tp, network)
    files = replace(validate_profile_dir(profile_dir, shape, block_size), all_reduce=network.all_reduce)
    digest = files.sha256()
    return ResolvedProfile(files, "directory", f"sha256:{digest[:16]}", digest, max_decode_batch(files, shape, block_size), tp, network.source)


def _builtin_profile(shape: ModelShape, dev: DeviceSpec, tp: int, network: GroupNetwork) -> ResolvedProfile:
    """The built-in physical model for this shard, device and network: nothing to generate or fit."""
    profile_id = f"builtin-v{builtin.GENERATOR_VERSION}:{dev.constants_version}"
    files = ProfileFiles(None, None, network.all_reduce) if network.all_reduce is not None else None
    if network.spec is not None:
        profile_id += f"+{network.spec.version}"
    model = builtin.BuiltinModel(shape, dev, network.spec)
    digest = text_digest(model.digest() + (files.sha256() if files else ""))
    return ResolvedProfile(files, "builtin", profile_id, digest, builtin.MAX_DECODE_BATCH, tp, network.source, model)
