"""Vidur's device and node SKUs for the devices of ``simulator/profiles/devices.toml``.

Vidur finds a device by walking ``BaseDeviceSKUConfig`` subclasses for ``str(get_type())`` and a
node by walking ``BaseNodeSKUConfig`` subclasses the same way, so defining a subclass is the
registration.  Every device of the TOML file that Vidur does not already know gets a device SKU
(its datasheet's dense FP16 TFLOPS and memory), and every ``[<device>.network]`` topology Vidur
does not know gets a node SKU (its GPUs per node): a new GPU is one TOML table.  Vidur's own
SKUs (``a100``, ``h100``, its ``*_dgx`` nodes) stay Vidur's, numbers included, so a stock Vidur
run and this project's agree on them.

Vidur reads ``total_memory_gb`` when it plans memory; the project plans KV memory itself
(:mod:`simulator.engine.memory_plan`), so these numbers only keep Vidur's own checks consistent.
Enum values start at 100, in file order, so they never equal Vidur's own (its IntEnums compare
equal across types); Vidur matches SKUs by name, never by value.
"""

from __future__ import annotations

import sys
from dataclasses import make_dataclass

from vidur.config.device_sku_config import BaseDeviceSKUConfig
from vidur.config.node_sku_config import BaseNodeSKUConfig
from vidur.config.utils import get_all_subclasses
from vidur.types import BaseIntEnum

from simulator.util.errors import ConfigError
from simulator.profiles.hardware import DeviceSpec, known_devices

FIRST_VALUE = 100


def _known(base: type) -> set[str]:
    names = set()
    for cls in get_all_subclasses(base):
        try:
            names.add(str(cls.get_type()))
        except (AttributeError, NotImplementedError, TypeError):
            continue
    return names


def _class_name(name: str, suffix: str) -> str:
    # "a100_40gb" -> "A10040GB", "b200_dgx" -> "B200Dgx": the names of the hand-written classes these replace
    return "".join(part.upper() if any(c.isdigit() for c in part) else part.capitalize() for part in name.split("_")) + suffix


def _sku(base: type, enum_member, name: str, fields: dict) -> type:
    """A dataclass subclass of ``base`` with ``fields`` as defaults and ``enum_member`` as its type,
    set on this module by its class name so configs holding it pickle by reference."""
    module = sys.modules[__name__]
    cls = make_dataclass(
        _class_name(name, base.__name__.replace("Base", "")),
        [(key, int, value) for key, value in fields.items()],
        bases=(base,),
        namespace={"get_type": staticmethod(lambda: enum_member), "__doc__": f"{name}, from devices.toml."},
    )
    cls.__module__ = __name__
    setattr(module, cls.__name__, cls)
    return cls


def register(devices: dict[str, DeviceSpec]) -> tuple[type, type]:
    """Register a SKU for every device and network topology of ``devices`` Vidur lacks; returns the
    two enums of the names registered (their members say what was added)."""
    known_devices_, known_nodes = _known(BaseDeviceSKUConfig), _known(BaseNodeSKUConfig)
    new_devices = [spec for name, spec in devices.items() if name not in known_devices_]
    nodes: dict[str, int] = {}
    for spec in devices.values():
        if spec.network is not None and spec.network.topology not in known_nodes:
            nodes.setdefault(spec.network.topology, spec.network.gpus_per_node)
    device_types = BaseIntEnum("ProjectDeviceType", [(s.name.upper(), FIRST_VALUE + i) for i, s in enumerate(new_devices)], module=__name__)
    node_types = BaseIntEnum("ProjectNodeType", [(n.upper(), FIRST_VALUE + i) for i, n in enumerate(nodes)], module=__name__)
    for spec in new_devices:
        sheet = spec.datasheet
        _sku(BaseDeviceSKUConfig, device_types[spec.name.upper()], spec.name,
             {"fp16_tflops": sheet.peak_fp16_tflops, "total_memory_gb": sheet.memory_gib})
    for topology, gpus in nodes.items():
        _sku(BaseNodeSKUConfig, node_types[topology.upper()], topology, {"num_devices_per_node": gpus})
    return device_types, node_types


def _register_package_devices() -> tuple[type, type]:
    try:
        devices = known_devices()
    except ConfigError:  # a malformed devices.toml: resolving a run reports it (exit 2), not this import
        devices = {}
    return register(devices)


ProjectDeviceType, ProjectNodeType = _register_package_devices()
