"""Fixed costs inside and outside CUDA graphs (issue 31, item 4).

A kernel's own fixed time (the devices.toml intercepts, fitted on kernel durations) is the same in
every issuing mode; a full graph adds only the GPU's gap between kernels, eager launching adds the
CPU's launches where the CPU is the slower side.  vLLM's custom all-reduce is costed with in-graph
measurements, on the A100 from an A100 table (data/calibration/graph_costs.toml), and an A100 keeps
the custom kernel's whole buffer at every TP degree (vLLM caps it per degree only on the devices
where it runs symmetric memory).  Hand-worked points on a made-up round GPU, and the declared
constants against the cells they were fitted on."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from simulator.models.shapes import DENSE_LAYER, ModelShape
from simulator.profiles import collectives
from simulator.profiles.attention import AttentionRows
from simulator.profiles.engines import get_engine
from simulator.profiles.hardware import NetworkSpec, get_device
from simulator.profiles.step import StepModel
from simulator.profiling import step_calibration
from simulator.vidur.models import model_config, model_shape
from round_device import ROUND

REPO = Path(__file__).resolve().parents[1]
DECLARED = REPO / "data" / "calibration" / "graph_costs.toml"
L70 = "meta-llama/Llama-3.3-70B-Instruct"

# A round NVLink node: 100 GB/s per direction; the custom kernel 5 us + bytes at half of it (one-shot)
ROUND_NET = NetworkSpec(
    topology="round", gpus_per_node=8, nvlink_bandwidth_gbps=100.0, source="round numbers", version="round", fitted_from="nothing",
    launch_us=50.0, hop_us=1.0, bus_eff=0.5, custom_oneshot_us=5.0, custom_twoshot_us=10.0, custom_bus_eff=0.5, custom_twoshot_bus_eff=0.25,
)
# hidden 512, 8 query heads and 4 KV heads of 64, MLP width 1024 (gated): at TP 4 one worker holds
# 2 query heads, 1 KV head, a QKV projection (2 + 2) x 64 = 256 wide and 256 of the MLP's width
SHAPE = ModelShape(num_q_heads=8, num_kv_heads=4, embedding_dim=512, mlp_hidden_dim=1024, vocab_size=1000)


def _round_model(engine) -> StepModel:
    return StepModel(shape=SHAPE.sharded(4), num_layers=80, device=ROUND, engine=engine, network=ROUND_NET, lm_head=False, max_tokens=64)


def _gemm_us(n: int, k: int) -> float:
    """A one-token GEMM on the round GPU: 10 us + its bytes (2 x (k + n k + n)) at 1 TB/s (compute is far below)."""
    return 10.0 + 2 * (k + n * k + n) * 1e-6


def _layer_linear_us() -> float:
    """One layer's kernels outside attention at one token, by hand (round_device.py's formulas)."""
    norms = 2 * (3.0 + 1 / 200)  # two fused add + RMSNorm kernels: 3 us + 1/200 of a 1 us wave
    gemms = _gemm_us(256, 512) + _gemm_us(512, 128) + _gemm_us(512, 512) + _gemm_us(512, 256)  # QKV, output, gate/up, down
    rope = 2.0 + 2 * (2 + 1) * 64 * 2 / 0.125 * 1e-6  # Q and K of one token, at rope's 1/8
    kv_write = 2.0 + 2 * 1 * 64 * (2 + 2) / 0.25 * 1e-6  # read K and V, write them to the cache, at add's 1/4
    act = 2.0 + (512 + 256) * 2 / 0.5 * 1e-6  # read gate and up, write the product, at act's 1/2
    return norms + gemms + rope + kv_write + act


def test_an_80_layer_full_graph_step_pays_each_kernel_its_own_fixed_time_and_one_gap():
    """Batch-1 decode at TP 4 in vLLM 0.11's full graph: per layer the nine kernels' own times (their
    fitted fixed times once each: four GEMMs x 10 us, two norms x 3 us, three streaming kernels x
    2 us), two one-shot all-reduces of one 1 KiB row, and 0.9 us of gap after each of the twelve
    kernels (nine, the attention call, two all-reduces); no CPU time, the CPU launches one graph."""
    model = _round_model(get_engine("vllm-0.11.0"))
    cost = model.forward(AttentionRows(decode=((1, 100),)), 1, 0, uniform_decode=True)
    assert cost.mode == "full" and cost.padded_tokens == 1
    assert cost.linear_ms == pytest.approx(80 * _layer_linear_us() * 1e-3, rel=1e-9)
    one_shot_us = 5.0 + 3 * 1024 / (100e9 * 0.5) * 1e6  # three peers' 1 KiB rows at 50 GB/s
    assert cost.all_reduce_ms == pytest.approx(80 * 2 * one_shot_us * 1e-3, rel=1e-9)
    assert cost.gaps_ms == pytest.approx(80 * 12 * 0.9e-3, rel=1e-12)
    assert cost.cpu_bound_ms == 0.0
    # the fixed part alone: 80 x (4 x 10 + 2 x 3 + 3 x 2 kernel us + 2 x 5 all-reduce us + 12 x 0.9 gap us) = 5.824 ms
    fixed_ms = 80 * (4 * 10.0 + 2 * 3.0 + 3 * 2.0 + 2 * 5.0 + 12 * 0.9) * 1e-3
    assert fixed_ms == pytest.approx(5.824)
    assert cost.linear_ms + cost.all_reduce_ms + cost.gaps_ms - fixed_ms == pytest.approx(80 * (_layer_linear_us() - 52.0 + 2 * (one_shot_us - 5.0)) * 1e-3)


def test_eager_launching_pays_the_same_kernel_times_plus_the_cpus_launches():
    """The same step launched eagerly: the kernels cost what they cost in the graph (their fixed
    times are kernel durations, not launches), the gaps are the eager 1.5 us, and each layer waits
    on a CPU that launches eleven kernels (here at 10 us each) and one 25 us attention call
    (135 us) where that is longer than the layer's GPU time; piecewise, on one piece's replay and
    the attention call (35 us: hidden behind the layer)."""
    full = _round_model(get_engine("vllm-0.11.0"))
    eager = _round_model(dataclasses.replace(get_engine("vllm-0.11.0"), cudagraph_mode="none", cpu_kernel_launch_us=10.0))
    piecewise = _round_model(get_engine("vllm-0.10.1"))
    rows = AttentionRows(decode=((1, 100),))
    graph, launched, pieces = (m.forward(rows, 1, 0, uniform_decode=True) for m in (full, eager, piecewise))
    assert (launched.mode, pieces.mode) == ("eager", "piecewise")
    assert launched.linear_ms == graph.linear_ms == pieces.linear_ms
    assert launched.all_reduce_ms == graph.all_reduce_ms
    assert launched.gaps_ms == pytest.approx(80 * 12 * 1.5e-3, rel=1e-12)
    gpu_us = (launched.linear_ms + launched.attention_ms + launched.all_reduce_ms + launched.gaps_ms) / 80 * 1e3
    cpu_us = (9 + 2) * 10.0 + 25.0
    assert cpu_us > gpu_us  # a small model: the CPU is the slower side
    assert launched.cpu_bound_ms == pytest.approx(80 * (cpu_us - gpu_us) * 1e-3, rel=1e-9)
    gpu_us = (pieces.linear_ms + pieces.attention_ms + pieces.all_reduce_ms + pieces.gaps_ms) / 80 * 1e3
    assert 10.0 + 25.0 < gpu_us and pieces.cpu_bound_ms == 0.0


def test_the_a100_custom_all_reduce_at_hand_worked_points():
    """One-shot at two GPUs, 16 KiB: 5.351 us + 16 KiB at 0.6353 of 300 GB/s; two-shot at four,
    1 MiB: 13.59 us + 1.5 MiB at 0.7965 of 300 GB/s."""
    net = get_device("a100").network
    assert collectives.all_reduce_ms(16384, 2, net, 8 * 2**20) * 1e3 == pytest.approx(5.351 + 16384 / (300e9 * 0.6353) * 1e6)
    assert collectives.all_reduce_ms(16384, 2, net, 8 * 2**20) * 1e3 == pytest.approx(5.437, abs=0.001)
    assert collectives.all_reduce_ms(2**20, 4, net, 8 * 2**20) * 1e3 == pytest.approx(13.59 + 1.5 * 2**20 / (300e9 * 0.7965) * 1e6)
    assert collectives.all_reduce_ms(2**20, 4, net, 8 * 2**20) * 1e3 == pytest.approx(20.17, abs=0.01)
    # the H100 keeps one bandwidth fraction for both kernels
    h100 = get_device("h100").network
    assert h100.custom_twoshot_bus_eff is None and h100.custom_twoshot_eff == h100.custom_bus_eff


def test_an_a100_keeps_the_whole_custom_buffer_at_tp_8():
    """vLLM >= 0.11 caps the custom all-reduce per TP degree (256 KiB at 8 GPUs) only where it runs
    symmetric memory (Hopper, Blackwell): a 70B decode batch of 64 at TP 8 (1 MiB messages) takes
    the custom two-shot kernel on an A100 (13.59 us + 1.75 MiB at 239 GB/s = 21.27 us), torch
    symmetric memory's multimem kernel on an H100 (13 us + 1 MiB at 0.466 of 450 GB/s)."""
    engine = get_engine("vllm-0.14.0")
    assert engine.custom_all_reduce_limit(8) == 2**18 and engine.custom_all_reduce_limit(8, per_tp=False) == 8 * 2**20
    a100, h100 = get_device("a100"), get_device("h100")
    assert not a100.network.has_symm_mem and h100.network.has_symm_mem
    layers = model_config(L70).num_layers
    on = {dev.name: StepModel(shape=model_shape(L70).sharded(8), num_layers=layers, device=dev, engine=engine, network=dev.network) for dev in (a100, h100)}
    assert on["a100"].all_reduce_ms(64) * 1e3 == pytest.approx(2 * (13.59 + 1.75 * 2**20 / (300e9 * 0.7965) * 1e6))
    assert on["a100"].all_reduce_ms(64) * 1e3 == pytest.approx(2 * 21.27, abs=0.02)
    assert on["h100"].all_reduce_ms(64) * 1e3 == pytest.approx(2 * (13.0 + 2**20 / (450e9 * 0.466) * 1e6))
    # and an A100 step is not NCCL's eager 42.5 us-plus ring any more
    assert on["a100"].all_reduce_ms(64) < 2 * float(collectives.ring_all_reduce_ms(2**20, 8, a100.network))


def test_every_graph_cost_is_the_value_the_simulator_uses_and_saw_no_row():
    declared = step_calibration.load(DECLARED)
    assert len(declared.constants) == 4 and declared.in_sample
    for entry in declared.constants:
        assert step_calibration.live_value(entry.name) == pytest.approx(entry.value), entry.name
        assert entry.examined_rows == (), entry.name


def _quoted_cells(quote: str) -> list[tuple[int, int, float]]:
    """(bytes, GPUs, us) from the quote's 'num_gpus N: elements:us ...' groups."""
    cells = []
    for gpus, group in re.findall(r"num_gpus (\d+): ([^;]+)", quote):
        for elements, us in re.findall(r"(\d+):([\d.]+)", group):
            cells.append((2 * int(elements), int(gpus), float(us)))
    return cells


def test_the_a100_constants_are_the_pooled_fit_of_the_quoted_cells():
    """Re-fitting the 45 quoted in-graph cells (TP 2, 4, 8 below the 8 MiB buffer) gives back the
    four committed numbers, and the fit is within 10% of the cells at the median for each TP degree."""
    declared = {c.name: c for c in step_calibration.load(DECLARED).constants}
    cells = _quoted_cells(declared["devices.a100.network.custom_oneshot_us"].quote)
    assert len(cells) == 45 and {g for _, g, _ in cells} == {2, 4, 8} and max(b for b, _, _ in cells) < 8 * 2**20
    net = get_device("a100").network
    fitted = collectives.fit_custom(dataclasses.replace(net, custom_oneshot_us=1.0, custom_twoshot_us=1.0), *zip(*cells))
    for key in ("custom_oneshot_us", "custom_bus_eff", "custom_twoshot_us", "custom_twoshot_bus_eff"):
        assert getattr(fitted, key) == getattr(net, key), key
    for gpus in (2, 4, 8):
        errors = sorted(abs(collectives.custom_all_reduce_us(b, g, net) / us - 1) for b, g, us in cells if g == gpus)
        assert errors[len(errors) // 2] < 0.10, gpus
