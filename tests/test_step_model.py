"""The built-in profile's step-time model: a step is the sum of its named terms, each term is the
kernel model it says it is, and the engine's issuing rules (CUDA-graph modes, padding, CPU-bound
layers, the custom all-reduce) decide what a step pays.  No forest is fitted for a built-in run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import simulator
from simulator.vidur.models import model_config, model_shape
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.engine import simulation
from simulator.engine.analytic import AnalyticPredictor, batch_rows
from simulator.engine.batch import SpeculativeBatch
from simulator.engine.predictor import ProfilePredictor
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError
from simulator.profiles import collectives, roofline
from simulator.profiles.attention import AttentionRows, attention_ms
from simulator.profiles.engines import get_engine, vllm_capture_sizes
from simulator.profiles.hardware import get_device
from simulator.profiles.step import LayerCost, StepCost, StepModel
from simulator.vidur.entities import Batch, Request
from simulator.vidur.seam import mark_prefill_complete
from simulator.models.shapes import DENSE_LAYER
from round_device import ROUND, SMALL

L7 = "meta-llama/Llama-2-7b-hf"
L8 = "meta-llama/Llama-3.1-8B-Instruct"
L70 = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture(autouse=True)
def no_forest(monkeypatch):
    """Any attempt to fit a forest fails the test: a built-in run must not train one."""

    def refuse(self, *args, **kwargs):
        raise AssertionError("a built-in run fitted a random forest")

    monkeypatch.setattr(ProfilePredictor, "fit_and_predict", refuse)


def _model(name=L8, device="h100", tp=1, engine="vllm-0.10.1", **kwargs) -> StepModel:
    dev = get_device(device)
    return StepModel(
        shape=model_shape(name).sharded(tp), num_layers=model_config(name).num_layers, device=dev, engine=get_engine(engine),
        network=dev.network if tp > 1 else None, max_tokens=8192, **kwargs,
    )


def _decode(batch: int, kv: int, q: int = 1) -> AttentionRows:
    return AttentionRows(decode=((q, kv),) * batch)


def test_a_builtin_run_uses_the_step_model():
    run = resolve_run(RunConfig(model=L8, device="h100"))
    predictor = simulation.side_predictor(run, run.target)
    assert isinstance(predictor, AnalyticPredictor)
    assert predictor.predictor_config.step_model.engine.name == "vllm-0.30.0"  # the newest release modelled is the default


def test_a_step_and_a_layer_total_each_of_their_terms_once():
    # each term a distinct power of two: a term left out, counted twice or swapped for another changes the sum
    assert StepCost("full", 8, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0).total_ms == 127.0  # 1 + 2 + 4 + ... + 64
    assert LayerCost(1.0, 2.0, 4.0, 8.0, 16.0).total_ms == 31.0  # 1 + 2 + 4 + 8 + 16


@pytest.mark.parametrize("name, device, tp", [(L7, "a100", 1), (L8, "h100", 1), (L70, "h200", 4)])
def test_a_step_is_its_terms_and_each_term_is_its_kernel_model(name, device, tp):
    model = _model(name, device, tp)
    shape, dev, layers = model.shape, model.device, model.num_layers
    doubled = dataclasses.replace(model, num_layers=2 * layers)
    for batch, kv in ((1, 100), (7, 1500), (64, 900), (200, 3000)):
        rows = _decode(batch, kv)
        cost = model.forward(rows, batch, batch, uniform_decode=True)
        # twice the layers: every layer term doubles, the embedding, final norm and logits do not
        twice = doubled.forward(rows, batch, batch, uniform_decode=True)
        for term in ("linear_ms", "attention_ms", "all_reduce_ms", "gaps_ms", "cpu_bound_ms"):
            assert getattr(twice, term) == pytest.approx(2 * getattr(cost, term), rel=1e-12), term
        assert (twice.outside_layers_ms, twice.logits_ms) == (cost.outside_layers_ms, cost.logits_ms)
        assert twice.total_ms - cost.total_ms == pytest.approx(cost.total_ms - cost.outside_layers_ms - cost.logits_ms, rel=1e-12)
        padded = cost.padded_tokens
        assert padded >= batch and padded in vllm_capture_sizes(512)
        gemms = (
            roofline.gemm_ms(padded, shape.qkv_dim, shape.embedding_dim, dev)
            + roofline.gemm_ms(padded, shape.embedding_dim, shape.q_heads_per_worker * shape.head_dim, dev)
            + roofline.gemm_ms(padded, 2 * shape.mlp_hidden_per_worker, shape.embedding_dim, dev)
            + roofline.gemm_ms(padded, shape.embedding_dim, shape.mlp_hidden_per_worker, dev)
        )
        assert cost.linear_ms > layers * float(gemms)  # the GEMMs and the small kernels around them
        assert cost.attention_ms == pytest.approx(layers * attention_ms(rows, shape, dev), rel=1e-12)
        size = padded * shape.embedding_dim * 2
        # two all-reduces a layer, by hand: after the attention's row-parallel output projection and after the MLP's down projection
        expected_ar = layers * 2 * collectives.all_reduce_ms(size, tp, dev.network, 8 * 2**20) if tp > 1 else 0.0
        assert cost.all_reduce_ms == pytest.approx(expected_ar, rel=1e-12)
        kernels = 9 + 1 + (2 if tp > 1 else 0)  # a Llama layer's nine kernels, its attention call, two all-reduces at TP > 1
        assert cost.gaps_ms == pytest.approx(layers * kernels * model.engine.graph_kernel_gap_us * 1e-3)


def test_the_engine_picks_full_piecewise_or_eager():
    v010, v011 = get_engine("vllm-0.10.1"), get_engine("vllm-0.11.0")
    assert v010.mode(64, uniform_decode=True) == "piecewise"  # 0.10.1: pieces for every batch up to 512 tokens
    assert v011.mode(64, uniform_decode=True) == "full"  # 0.11: one graph for a uniform decode or verify batch
    assert v011.mode(64, uniform_decode=False) == "piecewise"  # a mixed batch still runs the pieces
    assert v010.mode(513, uniform_decode=True) == v011.mode(513, uniform_decode=True) == "eager"
    assert v010.padded(1) == 1 and v010.padded(3) == 4 and v010.padded(100) == 104 and v010.padded(512) == 512
    with pytest.raises(ConfigError, match=r"unknown engine 'vllm-9'; known engines: .*vllm-0\.10\.1, vllm-0\.11\.0"):
        get_engine("vllm-9")


def test_a_layer_waits_on_the_cpu_only_when_the_cpu_is_slower():
    """Per layer the step takes the longer of GPU and CPU time: with a CPU slower than a small
    model's layers (here, a 200 us eager attention call) the layers wait on it; a full graph (0.11,
    uniform decode) pays no per-layer CPU time; the 8B's layers hide the default CPU costs."""
    slow_cpu = dataclasses.replace(get_engine("vllm-0.10.1"), cpu_attention_call_us=200.0)
    tiny = dataclasses.replace(_model("JackFram/llama-68m"), engine=slow_cpu)
    rows = _decode(4, 500)
    piecewise = tiny.forward(rows, 4, 4, uniform_decode=True)
    gpu_layer = (piecewise.linear_ms + piecewise.attention_ms + piecewise.gaps_ms) / tiny.num_layers
    cpu_layer = (slow_cpu.cpu_graph_launch_us + slow_cpu.cpu_attention_call_us) * 1e-3
    assert piecewise.mode == "piecewise" and piecewise.cpu_bound_ms == pytest.approx(tiny.num_layers * (cpu_layer - gpu_layer))
    full = dataclasses.replace(tiny, engine=dataclasses.replace(slow_cpu, cudagraph_mode="full_and_piecewise")).forward(rows, 4, 4, True)
    assert full.mode == "full" and full.cpu_bound_ms == 0 and full.total_ms < piecewise.total_ms
    assert _model(L8).forward(rows, 4, 4, uniform_decode=True).cpu_bound_ms == 0


def test_eager_steps_run_unpadded_and_launch_every_kernel():
    model = _model(L8)
    rows = AttentionRows(prefill=((2000, 0),))
    cost = model.forward(rows, 2000, 1, uniform_decode=False)
    assert cost.mode == "eager" and cost.padded_tokens == 2000
    assert cost.gaps_ms == pytest.approx(model.num_layers * (9 + 1) * model.engine.stream_kernel_gap_us * 1e-3)  # nine kernels and the attention call


def test_tensor_parallelism_halves_the_weights_and_adds_the_custom_all_reduce():
    """Batch-1 decode of the 70B on H200: TP 2 streams half the weights per GPU; its 160
    all-reduces of one activation row take vLLM's one-shot kernel (a few microseconds), not
    NCCL's eager tens of microseconds."""
    rows = _decode(1, 1000)
    tp1, tp2 = (_model(L70, "h200", tp).forward(rows, 1, 1, True) for tp in (1, 2))
    assert 0.5 < tp2.linear_ms / tp1.linear_ms < 0.6
    assert tp2.all_reduce_ms == pytest.approx(80 * 2 * collectives.all_reduce_ms(8192 * 2, 2, get_device("h200").network, 8 * 2**20))
    assert tp2.all_reduce_ms / (80 * 2) < 0.006  # under 6 us each
    assert tp2.total_ms / tp1.total_ms < 0.65  # the per-kernel fixed times and the attention call do not halve


def _declared(name: str) -> float:
    """A constant as data/calibration/step_time.toml declares it, read by tomllib (not through the simulator)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the tomli backport (pyproject.toml)
        import tomli as tomllib

    entries = tomllib.loads((Path(__file__).resolve().parents[1] / "data" / "calibration" / "step_time.toml").read_text(encoding="utf-8"))
    (value,) = [e["value"] for e in entries["constant"] if e["name"] == f"devices.h100.network.{name}"]
    return value


NVLINK = 450e9  # H100 NVLink 4: 900 GB/s per GPU, 450 GB/s each direction (NVIDIA H100 datasheet)


def test_custom_all_reduce_one_shot_two_shot_and_nccl():
    """vLLM's custom all-reduce priced from the declared constants and the datasheet's NVLink rate,
    worked by hand: a fixed time plus the bytes each GPU reads from its peers at the declared share
    of NVLink (one-shot: the whole message; two-shot: reduce-scatter then all-gather, 2 (n - 1) / n)."""
    net = get_device("h100").network
    limit = 8 * 2**20
    assert collectives.uses_oneshot(4 * 2**20, 2)  # two GPUs: always one-shot
    assert collectives.uses_oneshot(500 * 1024, 4) and not collectives.uses_oneshot(600 * 1024, 4)
    assert collectives.uses_oneshot(200 * 1024, 8) and not collectives.uses_oneshot(300 * 1024, 8)
    one_us = _declared("custom_oneshot_us") + 512 * 1024 / (NVLINK * _declared("custom_bus_eff")) * 1e6  # 4.5 + 524,288 B / 211.5 GB/s = 6.979 us
    assert collectives.all_reduce_ms(512 * 1024, 2, net, limit) == pytest.approx(one_us * 1e-3, rel=1e-9)
    assert one_us == pytest.approx(7.0, abs=0.5)  # vLLM PR #24111's 7 us, the point it was set from
    two_us = _declared("custom_twoshot_us") + 2 * 7 / 8 * 2 * 2**20 / (NVLINK * _declared("custom_bus_eff")) * 1e6  # 12.7 + 1.75 x 2 MiB / 211.5 GB/s = 30.052 us
    assert collectives.all_reduce_ms(2 * 2**20, 8, net, limit) == pytest.approx(two_us * 1e-3, rel=1e-9)
    nccl = collectives.all_reduce_ms(16 * 2**20, 8, net, limit)  # above the custom buffer
    assert nccl == pytest.approx(float(collectives.ring_all_reduce_ms(16 * 2**20, 8, net)))
    assert collectives.all_reduce_ms(1024, 1, net, limit) == 0.0


def test_vllm_011_dispatch_custom_then_symmetric_memory_then_nccl():
    """vLLM >= 0.11 on Hopper: custom below min(its per-TP limit, the 8 MiB buffer), torch
    symmetric memory (multimem at 4, 6, 8 GPUs; two-shot at 2) below its own limit, NCCL above;
    an A100 node has no symmetric-memory path.  Priced from the declared constants by hand."""
    from simulator.profiles.engines import get_engine

    engine, net = get_engine("vllm-0.14.0"), get_device("h100").network
    assert engine.custom_all_reduce_limit(4) == 8 * 2**20 and engine.custom_all_reduce_limit(8) == 2**18  # 32 MiB capped, 256 KiB kept
    assert engine.symm_mem_limit(4) == 32 * 2**20 and get_engine("vllm-0.10.1").symm_mem_limit(4) == 0
    args = (engine.custom_all_reduce_limit(4), engine.symm_mem_limit(4), engine.symm_mem_multimem_tp)
    below = collectives.all_reduce_ms(8 * 2**20 - 2, 4, net, *args)  # the custom kernel (two-shot) or NCCL
    two_shot_us = _declared("custom_twoshot_us") + 1.5 * (8 * 2**20 - 2) / (NVLINK * _declared("custom_bus_eff")) * 1e6  # 12.7 + 1.5 x 8 MiB / 211.5 GB/s = 72.19 us
    assert below == pytest.approx(min(two_shot_us * 1e-3, float(collectives.ring_all_reduce_ms(8 * 2**20 - 2, 4, net))), rel=1e-9)
    multimem_us = _declared("symm_mem_us") + 16 * 2**20 / (NVLINK * _declared("symm_multimem_eff")) * 1e6  # 13 + 16 MiB / 209.7 GB/s = 93.006 us
    assert collectives.all_reduce_ms(16 * 2**20, 4, net, *args) == pytest.approx(multimem_us * 1e-3, rel=1e-9)
    two = collectives.all_reduce_ms(16 * 2**20, 2, net, engine.custom_all_reduce_limit(2), engine.symm_mem_limit(2), engine.symm_mem_multimem_tp)
    two_us = _declared("symm_mem_us") + 16 * 2**20 / (NVLINK * _declared("symm_twoshot_eff")) * 1e6  # 2 (n - 1) / n = 1 at n = 2: 13 + 16 MiB / 393.3 GB/s = 55.658 us
    assert two == pytest.approx(two_us * 1e-3, rel=1e-9)
    above = collectives.all_reduce_ms(32 * 2**20, 4, net, *args)  # not below 32 MiB: NCCL
    assert above == pytest.approx(float(collectives.ring_all_reduce_ms(32 * 2**20, 4, net)))
    a100 = get_device("a100").network
    assert collectives.all_reduce_ms(16 * 2**20, 4, a100, *args) == pytest.approx(float(collectives.ring_all_reduce_ms(16 * 2**20, 4, a100)))


@pytest.mark.parametrize("name, device, tp", [(L8, "h100", 1), (L70, "h200", 4)])
def test_a_decode_step_costs_no_less_with_more_rows_or_more_context(name, device, tp):
    """Properties, not values: more rows over the same context never make a decode step cheaper,
    nor does a longer context for a batch whose attention streams its cache (16 rows and up; at one
    row vLLM's split-KV heuristic picks the split count, and a longer context with more splits may
    cost a little less); the context moves the attention term alone."""
    model = _model(name, device, tp)
    batches, contexts = (1, 2, 4, 8, 16, 32, 64, 128, 256), (0, 16, 128, 512, 1000, 2048, 4096, 8192)
    for kv in (100, 1500, 4000):
        totals = [model.forward(_decode(b, kv), b, b, uniform_decode=True).total_ms for b in batches]
        assert all(a <= b for a, b in zip(totals, totals[1:])), (kv, totals)
    for batch in (16, 128):
        costs = [model.forward(_decode(batch, kv), batch, batch, uniform_decode=True) for kv in contexts]
        assert all(a.total_ms <= b.total_ms for a, b in zip(costs, costs[1:])), (batch, [c.total_ms for c in costs])
        assert costs[0].attention_ms < costs[-1].attention_ms
        # the context moves the attention term alone: the weights a row multiplies do not depend on it
        assert len({(c.linear_ms, c.logits_ms, c.all_reduce_ms) for c in costs}) == 1


def test_a_verify_row_reads_its_cache_once_by_default():
    """kv_once: a verify row of k + 1 queries costs what one decode row over the same cache does;
    per_token charges every query; interpolated lies between."""
    rows = AttentionRows(decode=((5, 1200),) * 24)
    once = _model(L8, attention_mode="kv_once").forward(rows, 120, 120, True).attention_ms
    per_token = _model(L8, attention_mode="per_token").forward(rows, 120, 120, True).attention_ms
    half = _model(L8, attention_mode="interpolated", interpolation=0.5).forward(rows, 120, 120, True).attention_ms
    decode = _model(L8).forward(AttentionRows(decode=((1, 1200),) * 24), 24, 24, True).attention_ms
    assert once == pytest.approx(decode)
    assert once < half < per_token


def test_batch_rows_reads_a_vidur_batch():
    requests = [Request(0.0, 100, 10) for _ in range(3)]
    for r in requests[:2]:
        mark_prefill_complete(r)  # building a mid-run batch by hand
    batch = SpeculativeBatch(0, requests, [4, 1, 50], [300, 400, 50], [True, True, False])
    rows, tokens, logits, uniform = batch_rows(batch)
    assert rows.decode == ((4, 304), (1, 401)) and rows.prefill == ((50, 50),)
    assert tokens == 55 and logits == 4 + 1 and not uniform  # the chunk ends half-way through its 100-token prompt: no logits
    plain = Batch(0, requests[:2], [1, 1], [300, 400])
    assert batch_rows(plain)[3]  # two decode rows of one query: a uniform decode


@pytest.mark.simulation
def test_a_speculative_run_with_a_draft_needs_no_forest():
    config = RunConfig(
        workload=PoissonWorkload(num_requests=8, prompt_tokens=256, output_tokens=32, arrival_rate=2.0),
        speculation=SpeculationConfig(num_speculative_tokens=3, acceptance_rate=0.7, proposer="draft", draft_model="JackFram/llama-68m"),
    )
    result = simulator.run(config)
    assert result.summary["verify_steps"] > 0
    assert result.provenance["profile_source"] == "builtin" and result.provenance["draft_profile_source"] == "builtin"
    assert result.provenance["engine"] == "vllm-0.30.0"  # the default: the newest release modelled


def test_the_profile_digest_follows_the_device_numbers():
    """Provenance: the built-in profile's sha256 is a hash of the model shard and every device
    number, so a changed constant is a different profile."""
    a = resolve_run(RunConfig(model=L7, device="a100")).target.profile
    b = resolve_run(RunConfig(model=L7, device="h100")).target.profile
    assert a.content_sha256 != b.content_sha256
    changed = dataclasses.replace(a.builtin.device, constants=dataclasses.replace(a.builtin.device.constants, add_eff=0.5))
    assert dataclasses.replace(a.builtin, device=changed).digest() != a.builtin.digest()


@pytest.mark.simulation
def test_a_prompt_chunk_longer_than_the_tables_is_costed():
    """A 7,096-token prompt under an 8,192-token budget is one prefill chunk; the per-token tables
    stop at the run's range and beyond it the step model computes the count directly."""
    config = RunConfig(
        model=L8, device="h100", chunk_size=8192,
        workload=PoissonWorkload(num_requests=2, prompt_tokens=7096, output_tokens=8, arrival_rate=1.0),
    )
    result = simulator.run(config)
    assert result.summary.num_requests == 2 and result.summary.e2e_p50_s > 0
    model = _model(L8)
    beyond = dataclasses.replace(model, max_tokens=64).forward(AttentionRows(prefill=((7096, 0),)), 7096, 1, False)
    within = model.forward(AttentionRows(prefill=((7096, 0),)), 7096, 1, False)
    assert beyond.total_ms == pytest.approx(within.total_ms, rel=1e-12)


def test_a_llama_layers_linear_part_is_its_nine_kernels_worked_by_hand():
    """A Llama layer's linear part is the nine kernels of the table in simulator/profiles/step.py,
    worked by hand at 64 tokens on round numbers (tests/round_device.py: GEMMs 10 us + bytes at
    1 TB/s, norms 3 us + 0.32 of a 1 us wave, streaming kernels 2 us + bytes at act 1/2, add 1/4,
    rope 1/8 of 1 TB/s), in the per-token table and computed afresh beyond it."""
    model = StepModel(shape=SMALL, num_layers=2, device=ROUND, engine=get_engine("vllm-0.10.1"), max_tokens=8192)
    us = (
        2 * (3 + 64 / 200)  # two fused add + RMSNorms: 3.32 us each
        + 10 + 2 * (64 * 256 + 512 * 256 + 64 * 512) / 1e6  # QKV GEMM [64, 256] x [256, 512]: 10.360448
        + 2 + 64 * 2 * (4 + 2) * 64 * 2 / (1e6 / 8)  # rotary over Q and K, 98,304 bytes at rope 1/8: 2.786432
        + 2 + 64 * 2 * 2 * 64 * (2 + 2) / (1e6 / 4)  # K and V read and written to the cache, 65,536 bytes at add 1/4: 2.262144
        + 10 + 2 * (64 * 256 + 256 * 256 + 64 * 256) / 1e6  # output GEMM [64, 256] x [256, 256]: 10.196608
        + 10 + 2 * (64 * 256 + 1024 * 256 + 64 * 1024) / 1e6  # gate/up GEMM [64, 256] x [256, 1024]: 10.688128
        + 2 + 64 * (1024 + 512) * 2 / (1e6 / 2)  # SiLU-and-mul, 196,608 bytes at act 1/2: 2.393216
        + 10 + 2 * (64 * 512 + 256 * 512 + 64 * 256) / 1e6  # down GEMM [64, 512] x [512, 256]: 10.360448
    )
    assert us == pytest.approx(55.687424, rel=1e-12)
    assert model._per_token(DENSE_LAYER, 64) == pytest.approx(55.687424e-3, rel=1e-9)
    assert model.layer_kernels(DENSE_LAYER) == 9
    small = dataclasses.replace(model, max_tokens=8)  # 64 tokens lie beyond its table
    assert small._per_token(DENSE_LAYER, 64) == pytest.approx(55.687424e-3, rel=1e-9)
