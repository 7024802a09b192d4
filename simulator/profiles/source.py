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

from simulator.catalog import model_shape
from simulator.errors import ConfigError
from simulator.hashing import text_digest
from simulator.profiles import builtin, network
from simulator.profiles.hardware import DeviceSpec, NetworkSpec, get_device
from simulator.shapes import ModelShape
from simulator.profiles.vidur_format import (
    ProfileFiles,
    find_all_reduce,
    max_decode_batch,
    validate_all_reduce,
    validate_profile_dir,
    write_profile,
)
from simulator.textio import atomic_path


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


def builtin_profile_dir(model: str, device: str, root: Path, max_seq_len: int = 4096, block_size: int = 16) -> Path:
    """Generate (once) the built-in profile under ``root``; a finished directory is never rewritten."""
    shape = model_shape(model)
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
            all_reduce=builtin.all_reduce_table(shape, dev, max_seq_len, degrees),
        )
        try:
            staging.rename(target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "metadata.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def builtin_network_file(shape: ModelShape, dev: DeviceSpec, root: Path, max_seq_len: int = 4096) -> Path:
    """The built-in all-reduce rows alone (for a profile directory without its own), generated once."""
    text = f"network|{shape.embedding_dim}|{dev.fingerprint()}|{max_seq_len}|v{builtin.GENERATOR_VERSION}"
    target = Path(root) / f"builtin-network-{dev.name}-{text_digest(text, 16)}.csv"
    if not target.is_file():
        frame = builtin.all_reduce_table(shape, dev, max_seq_len, builtin.tp_degrees(shape, dev))
        Path(root).mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            frame.to_csv(tmp, index=False, float_format="%.6g")
    return target


def _check_device_covers(dev: DeviceSpec, tp: int, what: str = "tensor_parallel_size") -> None:
    if tp == 1:
        return
    if dev.network is None:
        raise ConfigError(
            f"{what} = {tp}: no network profile for device '{dev.name}' (devices.toml has no "
            f"[{dev.name}.network] table); give a Vidur-format all_reduce.csv with network_profile_dir"
        )
    if tp > dev.network.gpus_per_node:
        raise ConfigError(
            f"{what} = {tp} is larger than the {dev.network.gpus_per_node} GPUs per node the "
            f"'{dev.name}' profile covers ({dev.network.topology})"
        )


def _stamp(directory: Optional[Path]):
    if directory is None or not directory.is_dir():
        return None
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.iterdir()) if p.is_file())


def resolve_profile(
    profile_dir,
    model: str,
    shape: ModelShape,
    device: DeviceSpec,
    cache_dir: Path,
    max_seq_len: int = 4096,
    block_size: int = 16,
    tensor_parallel: int = 1,
    network_dir=None,
) -> ResolvedProfile:
    """The profile a run trains on, for ``model`` (its name, for messages) of ``shape`` (the whole
    model) on ``device``, both already resolved by the caller; validated and hashed once per
    process for unchanged files."""
    directory = Path(profile_dir) if profile_dir is not None else None
    net = Path(network_dir) if network_dir is not None else None
    return _resolve(directory, _stamp(directory), net, _stamp(net), model, shape, device, Path(cache_dir), max_seq_len, block_size, tensor_parallel)


def _network_file(profile_dir, network_dir, shape: ModelShape, device: DeviceSpec, cache_dir, max_seq_len, tp) -> tuple[Path, str]:
    """The all-reduce rows for a TP group and where they came from."""
    if network_dir is not None:
        found = find_all_reduce(network_dir) if Path(network_dir).is_dir() else None
        if found is None:
            raise ConfigError(f"network profile directory {network_dir}: no all_reduce.csv (or all_reduce.csv.xz)")
        return validate_all_reduce(found, tp, f"{network_dir}"), "network_dir"
    if profile_dir is not None and find_all_reduce(profile_dir) is not None:
        return validate_all_reduce(find_all_reduce(profile_dir), tp, f"{profile_dir}"), "profile_dir"
    _check_device_covers(device, tp)
    return builtin_network_file(shape, device, Path(cache_dir) / "profiles", max_seq_len), "builtin"


@lru_cache(maxsize=32)
def _resolve(
    profile_dir, stamp, network_dir, network_stamp, model: str, whole: ModelShape, device: DeviceSpec, cache_dir: Path, max_seq_len: int, block_size: int, tp: int
) -> ResolvedProfile:
    shape = whole.sharded(tp)
    network = None
    if profile_dir is None:
        return _resolve_builtin(network_dir, shape, device, tp)
    else:
        files = validate_profile_dir(profile_dir, shape, block_size)
        if tp > 1:
            network = _network_file(profile_dir, network_dir, whole, device, cache_dir, max_seq_len, tp)
    files = replace(files, all_reduce=network[0] if network else None)
    digest = files.sha256()
    return ResolvedProfile(
        files, "directory", f"sha256:{digest[:16]}", digest, max_decode_batch(files, shape, block_size), tp, network[1] if network else None
    )


def _resolve_builtin(network_dir, shape, dev: DeviceSpec, tp: int) -> ResolvedProfile:
    """The built-in physical model for this shard and device: nothing to generate or fit, except
    that measured all-reduce rows (``network_dir``) replace the node's NVLink model with the ring
    model fitted to them (:func:`simulator.profiles.network.fit`): every all-reduce is then what
    the measurement timed, NCCL's, with no custom all-reduce."""
    # data-parallel ranks of a mixture of experts exchange tokens over the node's NVLink too
    dp = shape.moe.data_parallel if shape.moe is not None else 1
    ranks = tp * dp
    _check_device_covers(dev, ranks, "tensor_parallel_size" if dp == 1 else "data_parallel_size x tensor_parallel_size")
    profile_id = f"builtin-v{builtin.GENERATOR_VERSION}:{dev.constants_version}"
    files, network_source, net = None, None, None
    if tp > 1 and network_dir is not None:
        found = find_all_reduce(network_dir) if Path(network_dir).is_dir() else None
        if found is None:
            raise ConfigError(f"network profile directory {network_dir}: no all_reduce.csv (or all_reduce.csv.xz)")
        all_reduce = validate_all_reduce(found, tp, f"{network_dir}")
        files = ProfileFiles(None, None, all_reduce)
        net, network_source = measured_network(all_reduce, dev), "network_dir"
        profile_id += f"+{net.version}"
    elif ranks > 1:
        net, network_source = dev.network, "builtin"
        profile_id += f"+{dev.network.version}"
    model = builtin.BuiltinModel(shape, dev, net)
    digest = text_digest(model.digest() + (files.sha256() if files else ""))
    return ResolvedProfile(files, "builtin", profile_id, digest, builtin.MAX_DECODE_BATCH, tp, network_source, model)


def measured_network(all_reduce_csv: Path, dev: DeviceSpec) -> NetworkSpec:
    """The ring model fitted to a measured Vidur-format all_reduce.csv (its rows of one node), on
    the device's NVLink datasheet; without the custom all-reduce, which the rows did not time."""
    import pandas as pd

    rows = pd.read_csv(all_reduce_csv)
    rows = rows[rows.num_workers == rows.devices_per_node]
    base = replace(dev.network, custom_oneshot_us=None, custom_twoshot_us=None, custom_source="")
    fitted = network.fit(base, rows["size"], rows.num_workers, rows["time_stats.all_reduce.median"])
    digest = text_digest(f"{fitted.launch_us}|{fitted.hop_us}|{fitted.bus_eff}", 8)
    return replace(fitted, version=f"measured-{digest}", fitted_from=f"{all_reduce_csv} (ring model fitted at load)")
