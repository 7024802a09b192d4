"""A TP group's all-reduce rows, from wherever they come, in one order.

Measured rows (a ``network_profile_dir``), then a profile directory's own ``all_reduce.csv``, then
the device's NVLink ring model (:mod:`simulator.profiles.network`, pure arithmetic).  Rows are read,
checked and written here in the layout of Vidur's ``data/profiling/network/<topology>/all_reduce.csv``
so Vidur's own predictor trains on them.  :func:`group_network` is the one call a profile makes; the
rest is what it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from simulator.models.shapes import ModelShape
from simulator.profiles import grid, network
from simulator.profiles.builtin import GENERATOR_VERSION  # the built-in generator's version keys its rows file too
from simulator.profiles.hardware import DeviceSpec, NetworkSpec
from simulator.profiles.vidur_format import covered, missing_columns, read_csv, with_point_stats
from simulator.util.errors import ConfigError
from simulator.util.hashing import text_digest
from simulator.util.textio import atomic_path

if TYPE_CHECKING:  # annotations only
    import pandas as pd

NETWORK_REQUIRED = ("time_stats.all_reduce.median", "num_workers", "size", "collective", "devices_per_node")


@dataclass(frozen=True)
class GroupNetwork:
    """Where a TP group's all-reduce times come from: a file of rows, or the ring model a built-in profile evaluates."""

    all_reduce: Optional[Path] = None  # the rows, where a file gives them
    source: Optional[str] = None  # "network_dir", "profile_dir" or "builtin"; None without a TP group
    spec: Optional[NetworkSpec] = None  # the built-in profile's ring model (fitted to measured rows, or the device's)


def group_network(
    profile_dir, network_dir, whole: ModelShape, dev: DeviceSpec, cache_dir: Path, max_seq_len: int, tp: int, ranks: int, degrees: tuple[int, ...]
) -> GroupNetwork:
    """Where a TP group's all-reduce times come from, for either profile source, in one order:
    measured rows in ``network_dir``, then a profile directory's own ``all_reduce.csv``, then the
    device's NVLink model.  The built-in profile evaluates a ring model: measured rows replace the
    node's with the one fitted to them (:func:`simulator.profiles.network.fit`), so every
    all-reduce is what the measurement timed, NCCL's, with no custom all-reduce.  A directory gets
    the device model's rows generated.  ``ranks`` is the GPUs exchanging over NVLink: TP, times
    the data-parallel ranks of a mixture of experts (built-in profile only)."""
    builtin_source = profile_dir is None
    if builtin_source:
        check_device_covers(dev, ranks, "tensor_parallel_size" if ranks == tp else "data_parallel_size x tensor_parallel_size")
    found, source, where = None, None, None  # measured all-reduce rows: which file, from where
    if tp > 1 and network_dir is not None:
        found = find_all_reduce(network_dir) if Path(network_dir).is_dir() else None
        if found is None:
            raise ConfigError(f"network profile directory {network_dir}: no all_reduce.csv (or all_reduce.csv.xz)")
        source, where = "network_dir", network_dir
    elif tp > 1 and not builtin_source:
        found = find_all_reduce(profile_dir)
        source, where = ("profile_dir", profile_dir) if found is not None else (None, None)
    if found is not None:
        rows = validate_all_reduce(found, tp, f"{where}")
        return GroupNetwork(rows, source, measured_network(rows, dev) if builtin_source else None)
    if builtin_source:
        return GroupNetwork(None, "builtin", dev.network) if ranks > 1 else GroupNetwork()
    if tp == 1:
        return GroupNetwork()
    check_device_covers(dev, tp)
    return GroupNetwork(builtin_network_file(whole, dev, Path(cache_dir) / "profiles", max_seq_len, degrees), "builtin")


def find_all_reduce(directory) -> Optional[Path]:
    """``all_reduce.csv`` (or ``.csv.xz``) in ``directory``, if there is one."""
    for name in ("all_reduce.csv", "all_reduce.csv.xz"):
        if (Path(directory) / name).is_file():
            return Path(directory) / name
    return None


def check_device_covers(dev: DeviceSpec, tp: int, what: str = "tensor_parallel_size") -> None:
    """A TP group of ``tp`` GPUs fits one node of the device's network profile (``what`` names the field)."""
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


def read_all_reduce(path) -> pd.DataFrame:
    """A Vidur-format ``all_reduce.csv``, checked for the columns Vidur's predictor reads."""
    frame = read_csv(Path(path))
    missing = missing_columns(frame, NETWORK_REQUIRED)
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}")
    return frame


def single_node_all_reduce_rows(path, min_bytes: int = 0, max_bytes: int = 2**62) -> pd.DataFrame:
    """A measured all_reduce.csv's tensor-parallel rows (the whole group on one node) within a size range."""
    frame = read_all_reduce(path)
    return frame[
        (frame.collective == "all_reduce")
        & (frame.num_workers == frame.devices_per_node)
        & (frame.num_workers > 1)
        & (frame["size"] >= min_bytes)
        & (frame["size"] <= max_bytes)
    ].reset_index(drop=True)


def validate_all_reduce(path, tp: int, what: str) -> Path:
    """Check ``path`` holds the rows Vidur trains its all-reduce model on for a TP group on one node
    (``num_workers == devices_per_node == tp``).  ``what`` names the device or profile in errors."""
    frame = read_all_reduce(path)
    frame = frame[frame.collective == "all_reduce"]
    per_node = frame["max_devices_per_node"].max() if "max_devices_per_node" in frame.columns else frame.devices_per_node.max()
    if len(frame) and tp > per_node:
        raise ConfigError(
            f"{path}: tensor_parallel_size = {tp} is larger than the {int(per_node)} GPUs per node the network profile "
            f"of {what} covers"
        )
    if frame[(frame.num_workers == tp) & (frame.devices_per_node == tp)].empty:
        raise ConfigError(
            f"{path}: no network profile for {what} at tensor_parallel_size = {tp} (all-reduce rows with "
            f"num_workers = devices_per_node = {tp}; it has num_workers {covered(frame.num_workers)})"
        )
    return Path(path)


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


def builtin_network_file(shape: ModelShape, dev: DeviceSpec, root: Path, max_seq_len: int, degrees: tuple[int, ...]) -> Path:
    """The built-in all-reduce rows alone (for a profile directory without its own), generated
    once, at ``degrees``: the TP degrees of the node the model shards over (checked once, by
    :func:`simulator.profiles.source.resolve`)."""
    text = f"network|{shape.embedding_dim}|{dev.fingerprint()}|{max_seq_len}|v{GENERATOR_VERSION}"
    target = Path(root) / f"builtin-network-{dev.name}-{text_digest(text, 16)}.csv"
    if not target.is_file():
        frame = model_rows(shape, dev, max_seq_len, degrees)
        Path(root).mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            frame.to_csv(tmp, index=False, float_format="%.6g")
    return target


def model_rows(shape: ModelShape, dev: DeviceSpec, max_tokens: int, degrees) -> pd.DataFrame | None:
    """All-reduce rows for the message sizes this model's steps send (one activation row per token)."""
    workers = [tp for tp in degrees if tp > 1]
    if not workers:
        return None
    sizes = network.message_bytes(grid.num_tokens_grid(max_tokens), shape.embedding_dim)
    return vidur_rows(dev.network, sizes, workers)


def vidur_rows(net: NetworkSpec, sizes, workers=(2, 4, 8)) -> pd.DataFrame:
    """Vidur-format all_reduce.csv rows: every size at every TP degree the node holds."""
    import pandas as pd  # deferred: `import simulator` stays free of pandas (docs/performance.md)
    workers = [w for w in workers if 1 < w <= net.gpus_per_node]
    size_col = np.tile(np.asarray(sizes, dtype=np.int64), len(workers))
    worker_col = np.repeat(workers, len(sizes))
    median_ms = network.ring_all_reduce_ms(size_col, worker_col, net)
    frame = pd.DataFrame(index=range(len(size_col)))
    with_point_stats(frame, "all_reduce", median_ms)
    frame["rank"] = 0
    frame["num_workers"] = worker_col
    frame["size"] = size_col
    frame["collective"] = "all_reduce"
    frame["devices_per_node"] = worker_col
    frame["max_devices_per_node"] = net.gpus_per_node
    return frame
