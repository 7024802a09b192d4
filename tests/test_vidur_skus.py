"""Vidur's SKUs come from devices.toml: the same devices and numbers as the hand-written classes
they replaced, and a new GPU is one TOML table."""

from __future__ import annotations

import pytest

from simulator.profiles.hardware import DEVICES_FILE, known_devices, load_devices
from simulator.vidur import skus
from simulator.vidur.configs import ReplicaConfig

MODEL = "meta-llama/Llama-2-7b-hf"


def _replica(device: str, node: str) -> ReplicaConfig:
    return ReplicaConfig(model_name=MODEL, device=device, network_device=node)


@pytest.mark.parametrize(
    "device, node, tflops, memory_gb, gpus",
    [
        # generated from devices.toml (the numbers the hand-written classes held)
        ("h200", "h100_dgx", 989, 141, 8),
        ("a100_40gb", "a100_dgx", 312, 40, 8),
        ("b200", "b200_dgx", 2250, 180, 8),
        # Vidur's own, left as Vidur has them (its H100 says 1000 TFLOPS; devices.toml 989)
        ("a100", "a100_dgx", 312, 80, 8),
        ("h100", "h100_dgx", 1000, 80, 8),
    ],
)
def test_every_device_of_devices_toml_is_a_vidur_sku(device, node, tflops, memory_gb, gpus):
    replica = _replica(device, node)
    assert (replica.device_config.fp16_tflops, replica.device_config.total_memory_gb) == (tflops, memory_gb)
    assert replica.node_config.num_devices_per_node == gpus
    assert known_devices()[device].network.topology == node


def test_generated_skus_are_the_toml_values_and_named_like_the_classes_they_replace():
    assert [str(t) for t in skus.ProjectDeviceType] == ["a100_40gb", "h200", "b200"]  # devices.toml order
    assert [str(t) for t in skus.ProjectNodeType] == ["b200_dgx"]
    assert all(t.value >= skus.FIRST_VALUE for t in (*skus.ProjectDeviceType, *skus.ProjectNodeType))
    devices = known_devices(DEVICES_FILE)
    for name, cls in (("h200", skus.H200DeviceSKUConfig), ("a100_40gb", skus.A10040GBDeviceSKUConfig), ("b200", skus.B200DeviceSKUConfig)):
        sheet = devices[name].datasheet
        assert (cls().fp16_tflops, cls().total_memory_gb) == (sheet.peak_fp16_tflops, sheet.memory_gib)
        assert cls.__module__ == skus.__name__ and getattr(skus, cls.__name__) is cls  # configs holding it pickle by reference
    assert skus.B200DgxNodeSKUConfig().num_devices_per_node == 8


def test_a_new_gpu_is_one_toml_table(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(
        DEVICES_FILE.read_text(encoding="utf-8")
        + '\n[x900]\nvariant_of = "h100"\n\n[x900.datasheet]\nmemory_gib = 200\nsource = "test"\n\n'
        + '[x900.network]\ntopology = "x900_nvl"\ngpus_per_node = 4\nsource = "test"\n'
    )
    with pytest.raises(ValueError, match="x900"):
        _replica("x900", "x900_nvl")
    device_types, node_types = skus.register(load_devices(path))
    assert [str(t) for t in device_types] == ["x900"] and [str(t) for t in node_types] == ["x900_nvl"]  # the rest is registered already
    replica = _replica("x900", "x900_nvl")
    assert (replica.device_config.fp16_tflops, replica.device_config.total_memory_gb) == (989, 200)
    assert replica.node_config.num_devices_per_node == 4
