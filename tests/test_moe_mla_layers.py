"""Today's layers in the step model: mixture-of-experts FFNs, multi-head latent attention, sliding
windows, linear attention, FP8 / FP4 precision and Blackwell, each checked at sampled points against
the formulas in docs/model.md ("Layer kinds, experts and precision")."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simulator.vidur.models import model_config, model_shape
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import ClosedLoopWorkload
from simulator.cli.vllm_serve import scheduler_defaults
from simulator.engine.resolve import resolve_run, target_run_shape
from simulator.util.errors import ConfigError
from simulator.models import weights
from simulator.models.spec import parse_config
from simulator.profiles import attention as attn
from simulator.profiles import moe as moe_model
from simulator.profiles import roofline
from simulator.profiles.attention import AttentionRows, attention_ms
from simulator.profiles.engines import get_engine
from simulator.profiles.hardware import get_device
from simulator.profiles.layers import layer_linear_ms
from simulator.profiles.step import StepModel
from simulator.models.shapes import LayerKind, Precision
from simulator.speculative.memory import ModelMemory, kv_capacity_tokens

from repo import REPO_ROOT

CATALOG = REPO_ROOT / "simulator" / "models" / "data"

QWEN = "Qwen/Qwen3-30B-A3B"
DSV3 = "deepseek-ai/DeepSeek-V3"
OSS20 = "openai/gpt-oss-20b"
OSS120 = "openai/gpt-oss-120b"
MISTRAL = "mistralai/Mistral-7B-v0.1"
MOE = LayerKind("full", "moe")


def _step(name, device="h200", tp=1, shape=None, engine="vllm-0.10.1") -> StepModel:
    dev = get_device(device)
    shape = (shape or model_shape(name)).sharded(tp)
    return StepModel(shape=shape, num_layers=model_config(name).num_layers, device=dev, engine=get_engine(engine),
                     network=dev.network if tp > 1 else None, max_tokens=8192)


# --- routing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens", [1, 2, 8, 32, 256, 4096])
def test_uniform_routing_touches_the_expected_number_of_experts(tokens):
    q = moe_model.routing_probabilities(128, 8)
    touched, rows = moe_model.expected_touched(tokens, q)
    assert float(touched) == pytest.approx(128 * (1 - (1 - 8 / 128) ** tokens), rel=1e-12)
    assert float(rows) == pytest.approx(8 * tokens)


def test_a_verify_step_touches_more_experts_than_a_decode_step():
    """Batch 8: decode touches 51.6 of Qwen3-30B-A3B's 128 experts, a k = 3 verify (32 tokens) 111.8."""
    q = moe_model.routing_probabilities(128, 8)
    decode, verify = (float(moe_model.expected_touched(t, q)[0]) for t in (8, 32))
    assert decode == pytest.approx(51.62, abs=0.01) and verify == pytest.approx(111.77, abs=0.01)


def test_skewed_routing_touches_fewer_experts_and_keeps_k_per_token():
    uniform = moe_model.routing_probabilities(128, 8)
    for skew in (0.5, 1.0, 2.0):
        q = moe_model.routing_probabilities(128, 8, skew)
        assert q.sum() == pytest.approx(8) and q.max() <= 1 + 1e-12 and (np.diff(q) <= 1e-15).all()
        assert float(moe_model.expected_touched(32, q)[0]) < float(moe_model.expected_touched(32, uniform)[0])
    assert (moe_model.routing_probabilities(128, 8, 0.0) == uniform).all()
    with pytest.raises(ValueError):
        moe_model.routing_probabilities(8, 9)


def test_the_grouped_gemm_at_one_token_streams_k_experts():
    """At one token, each of the k touched experts streams its whole weight once (one 16-row tile)."""
    dev = get_device("h200")
    c, d = dev.constants, dev.datasheet
    n, k = 2 * 768, 2048
    ms = float(moe_model.grouped_gemm_ms(8.0, 8.0, n, k, 16, dev, 2.0, 2.0, moe_model.dense_kernel(dev, "bf16", False)))
    memory = (8 * n * k * 2 + 8 * k * 2 + 8 * n * 2) / (d.hbm_bandwidth_tbps * 1e12 * c.gemm_memory_eff)
    useful = 2 * 8 * n * k / (d.peak_fp16_tflops * 1e12 * c.gemm_compute_eff)
    assert ms == pytest.approx((c.gemm_launch_us * 1e-6 + memory + c.gemm_overlap_loss * useful) * 1e3, rel=1e-12)
    # vLLM's default BLOCK_SIZE_M: 16 up to E tokens, 64 beyond; 64 for FP8 block quantization
    assert list(moe_model.block_m([1, 128, 129], 128, False)) == [16, 16, 64] and moe_model.block_m(1, 128, True) == 64


def test_moe_verify_costs_more_than_decode_where_a_dense_model_does_not():
    """The issue's point: on an MoE target a verify step with k + 1 tokens per sequence streams more
    expert weights than a decode step; a dense model's weights stream once whatever the tokens."""
    ratios = []
    for model in (_step(QWEN), _step("Qwen/Qwen3-8B")):
        kind = model.groups[0][0]
        ratios.append(model._per_token(kind, 32) / model._per_token(kind, 8))
    assert ratios[0] > 1.6 and ratios[1] < 1.1


def test_experts_split_over_tp_or_placed_whole_with_expert_parallelism():
    """TP 4: every GPU runs every touched expert at a quarter of its width; with expert parallelism
    it runs a quarter of the experts whole (uniform routing: a quarter of the touched ones)."""
    shape = model_shape(QWEN)
    tp, ep = shape.sharded(4), shape.with_moe(expert_parallel=True).sharded(4)
    q_tp = moe_model.local_probabilities(tp.moe, 4)
    q_ep = moe_model.local_probabilities(ep.moe, 4)
    assert len(q_tp) == 128 and len(q_ep) == 32
    touched_tp, rows_tp = moe_model.expected_touched(8, q_tp)
    touched_ep, rows_ep = moe_model.expected_touched(8, q_ep)
    assert float(touched_ep) == pytest.approx(float(touched_tp) / 4) and float(rows_ep) == pytest.approx(float(rows_tp) / 4)
    # the same bytes per GPU either way
    assert weights.weight_bytes(tp, 48, False) == weights.weight_bytes(ep, 48, False)
    with pytest.raises(ConfigError, match="cannot be placed evenly"):
        from simulator.profiles.sharding import check_sharding

        check_sharding(model_shape(QWEN).with_moe(expert_parallel=True, num_experts=126), 4, "tensor_parallel_size", QWEN)


def test_shared_experts_run_for_every_token():
    dev = get_device("h200")
    shape = model_shape(DSV3).sharded(8)
    without = dataclasses.replace(shape, moe=dataclasses.replace(shape.moe, shared_hidden_dim=0))
    with_shared, _ = layer_linear_ms(MOE, np.array([1, 64]), shape, dev)
    without_shared, _ = layer_linear_ms(MOE, np.array([1, 64]), without, dev)
    assert (with_shared > without_shared).all()


# --- layer groups ---------------------------------------------------------------------------------
def test_a_forward_is_each_group_count_times_its_layer():
    """DeepSeek-V3: 3 dense layers and 58 MoE layers; each group costs its count times one layer of
    its kind, which StepModel.layer_cost also gives on its own (an MTP module's layer is one)."""
    model = _step(DSV3, tp=8)
    assert [(k.label, n) for k, n in model.groups] == [("full+dense", 3), ("full+moe", 58)]
    rows = AttentionRows(decode=((4, 1000),) * 8)
    cost = model.forward(rows, 32, 32, True)
    mode, padded = model.mode_and_padding(32, True)
    layers = [(n, model.layer_cost(k, rows, padded, mode)) for k, n in model.groups]
    for term in ("linear_ms", "attention_ms", "all_reduce_ms", "gaps_ms", "cpu_bound_ms"):
        assert getattr(cost, term) == pytest.approx(sum(n * getattr(layer, term) for n, layer in layers), rel=1e-12)
    dense, moe = (layer for _, layer in layers)
    assert moe.linear_ms != dense.linear_ms and model.layer_kernels(model.groups[1][0]) > model.layer_kernels(model.groups[0][0])


def test_groups_must_add_up_to_the_layers():
    model = _step(DSV3, tp=8)
    with pytest.raises(ValueError, match="do not add up"):
        dataclasses.replace(model, num_layers=60).groups


# --- multi-head latent attention --------------------------------------------------------------------
def test_mla_caches_one_latent_per_token_and_layer_on_every_gpu():
    """DeepSeek-V3: (512 + 64) elements per layer, 61 layers, 16-bit: 70,272 bytes per token on each
    of 8 GPUs (the latent is replicated over the TP group, not split by heads); FP8 halves it."""
    for tp in (1, 8):
        full, windows, state = weights.kv_layout(model_shape(DSV3).sharded(tp), 61)
        assert (full, windows, state) == (576 * 2 * 61, (), 0)
    fp8 = model_shape(DSV3).with_precision(Precision(kv_cache="fp8", attention="fp8", ffn="fp8", experts="fp8", method="fp8"))
    assert weights.kv_layout(fp8.sharded(8), 61)[0] == 576 * 61


def test_mla_decode_reads_the_latent_once_and_packs_queries_with_heads():
    """At TP 8 a row's 16 query heads fill a quarter of FlashMLA's 64-row tile: up to 4 verify queries
    cost what one does (the latent is read once); at TP 1 the 128 heads make it compute-bound."""
    dev = get_device("h200")
    tp8, tp1 = model_shape(DSV3).sharded(8), model_shape(DSV3)
    one, four, five = (attn.mla_decode_ms([(q, 4000)] * 8, tp8, dev) for q in (1, 4, 5))
    assert one == pytest.approx(four) and five > four
    a, d = dev.attention, dev.datasheet
    memory = 8 * 4000 * 576 * 2 / (d.hbm_bandwidth_tbps * 1e12 * a.mla_decode_bandwidth_eff)
    assert one == pytest.approx(memory * 1e3)
    compute = 8 * 2 * 64 * 4000 * 2 * (576 + 512) / (d.peak_fp16_tflops * 1e12 * a.mla_decode_compute_eff)
    assert attn.mla_decode_ms([(1, 4000)] * 8, tp1, dev) == pytest.approx(compute * 1e3)
    # per_token runs every query as its own row
    rows = AttentionRows(decode=((4, 4000),) * 8)
    assert attention_ms(rows, tp8, dev, "per_token") > attention_ms(rows, tp8, dev, "kv_once")


def test_mla_prefill_up_projects_the_cached_prefix():
    dev = get_device("h200")
    shape = model_shape(DSV3).sharded(8)
    assert attn.mla_prefill_ms(512, 4096, shape, dev) > attn.mla_prefill_ms(512, 0, shape, dev) > 0


def test_mla_on_a_gpu_without_a_modelled_backend_is_refused():
    with pytest.raises(ConfigError, match="multi-head latent attention"):
        target_run_shape(model_shape(DSV3).with_precision(Precision()), get_device("a100"), DSV3)


# --- sliding windows --------------------------------------------------------------------------------
def test_a_window_caps_the_keys_a_row_reads():
    dev = get_device("h100")
    shape = model_shape(MISTRAL)
    window = LayerKind("sliding", "dense", 4096)
    for q in (1, 4):
        capped = attention_ms(AttentionRows(decode=((q, 20000),) * 16), shape, dev, kind=window)
        at_window = attention_ms(AttentionRows(decode=((q, 4096 + q - 1),) * 16), shape, dev)
        assert capped == pytest.approx(at_window)
    below = AttentionRows(decode=((1, 3000),) * 16)
    assert attention_ms(below, shape, dev, kind=window) == pytest.approx(attention_ms(below, shape, dev))
    # prefill: each 128-query tile sees at most window + 128 keys
    assert attention_ms(AttentionRows(prefill=((2048, 30000),)), shape, dev, kind=window) == pytest.approx(
        attention_ms(AttentionRows(prefill=((2048, 4096 - 128),)), shape, dev, kind=window), rel=0.02
    )
    assert attention_ms(AttentionRows(prefill=((2048, 30000),)), shape, dev, kind=window) < attention_ms(AttentionRows(prefill=((2048, 30000),)), shape, dev)


def test_window_layers_hold_at_most_a_window_of_kv():
    """GPT-OSS-20B: 12 full layers keep every token, 12 sliding layers at most 128 of a request's."""
    full, windows, state = weights.kv_layout(model_shape(OSS20), 24)
    per_layer = 2 * 64 * 8 * 2
    assert (full, windows, state) == (12 * per_layer, ((12 * per_layer, 128),), 0)
    memory = ModelMemory(0, full, windows, state)
    assert memory.bytes_per_token(100) == pytest.approx(24 * per_layer)  # shorter than the window: every layer
    assert memory.bytes_per_token(4096) == pytest.approx(12 * per_layer + 12 * per_layer * 128 / 4096)
    assert kv_capacity_tokens(2**30, 0.0, memory, None, 4096) == int(2**30 // memory.bytes_per_token(4096))


def test_sliding_windows_let_more_requests_fit():
    """Mistral-7B-v0.1 with 16k-token requests: its 4,096-token window holds a quarter of their KV."""
    workload = ClosedLoopWorkload.fixed(1, 1, 16000, 384)
    run = resolve_run(RunConfig(model=MISTRAL, device="h100", workload=workload))
    full = dataclasses.replace(run.memory.target, kv_bytes_per_token=run.memory.target.bytes_per_token(4096), window_kv=())
    assert run.memory.target.bytes_per_token(16384) == pytest.approx(full.kv_bytes_per_token / 4)


# --- linear attention (Qwen3-Next) ----------------------------------------------------------------------
QWEN3_NEXT = {  # the architecture fields of Qwen/Qwen3-Next-80B-A3B-Instruct's config.json (alibaba/InferSim's copy)
    "architectures": ["Qwen3NextForCausalLM"], "decoder_sparse_step": 1, "full_attention_interval": 4, "head_dim": 256,
    "hidden_size": 2048, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "mlp_only_layers": [], "moe_intermediate_size": 512, "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10,
    "num_hidden_layers": 48, "num_key_value_heads": 2, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "vocab_size": 151936, "rope_theta": 10000000,
}


def test_qwen3_next_alternates_three_linear_layers_and_one_full():
    spec = parse_config(QWEN3_NEXT, "qwen3-next", "x")
    assert [(k.label, n) for k, n in spec.layers] == [("linear+moe", 36), ("full+moe", 12)]
    assert spec.gated_attention and spec.moe.shared_hidden_dim == 512 and spec.linear.value_dim == 4096


def test_linear_attention_holds_a_constant_state_and_reads_it_once_per_row():
    spec = parse_config(QWEN3_NEXT, "qwen3-next-test", "x")
    shape = dataclasses.replace(model_shape("Qwen/Qwen3-8B"), **{k: getattr(spec, k) for k in ("moe", "linear", "gated_attention")},
                                num_q_heads=16, num_kv_heads=2, embedding_dim=2048, head_size=256, layers=spec.layers, mlp_hidden_dim=5120)
    full, windows, state = weights.kv_layout(shape, 48)
    assert full == 12 * 2 * 256 * 2 * 2  # only the 12 full-attention layers cache per token
    assert state == 36 * (32 * 128 * 128 + 3 * (2 * 2048 + 4096)) * 2
    dev = get_device("h200")
    linear = LayerKind("linear", "moe")
    short, long = (attention_ms(AttentionRows(decode=((1, kv),) * 8), shape, dev, kind=linear) for kv in (100, 100000))
    assert short == pytest.approx(long)  # the state does not grow with the context
    per_row = (1 + 1) * 32 * 128 * 128 * 2 / (dev.datasheet.hbm_bandwidth_tbps * 1e12 * dev.attention.decode_bandwidth_eff)
    assert short == pytest.approx(dev.attention.kernel_us * 1e-3 + 8 * per_row * 1e3)
    verify = attention_ms(AttentionRows(decode=((4, 100),) * 8), shape, dev, kind=linear)
    assert verify > short  # a verify row writes one state per speculative position


# --- precision --------------------------------------------------------------------------------------
def test_fp8_weights_halve_the_bytes_and_compute_at_the_fp8_peak():
    dev = get_device("h100")
    bf16 = float(roofline.gemm_ms(1, 14336, 4096, dev))
    fp8 = float(roofline.gemm_ms(1, 14336, 4096, dev, 1.0, 1.0, "fp8"))
    c = dev.constants
    assert (fp8 - c.gemm_launch_us * 1e-3) < 0.55 * (bf16 - c.gemm_launch_us * 1e-3)
    big_bf16 = float(roofline.gemm_ms(8192, 14336, 4096, dev))
    big_fp8 = float(roofline.gemm_ms(8192, 14336, 4096, dev, 1.0, 1.0, "fp8"))
    assert big_fp8 == pytest.approx(big_bf16 / 2, rel=0.1)  # compute-bound: twice the peak
    shape = model_shape("meta-llama/Llama-3.1-8B-Instruct")
    fp8_shape = target_run_shape(shape, dev, "meta-llama/Llama-3.1-8B-Instruct", quantization="fp8")
    assert weights.weight_bytes(fp8_shape, 32, False) == weights.weight_bytes(shape, 32, False) // 2


def test_block_scaled_4bit_formats_carry_their_scales():
    from simulator.models.shapes import DTYPE_BYTES

    assert DTYPE_BYTES["mxfp4"] == pytest.approx(4.25 / 8) and DTYPE_BYTES["nvfp4"] == pytest.approx(4.5 / 8)


def test_gpt_oss_holds_its_experts_in_mxfp4_and_the_rest_in_bf16():
    shape = model_shape(OSS120)
    per_layer = weights.layer_weight_bytes(LayerKind("full", "moe"), shape)
    experts = 128 * 3 * 2880 * 2880 * 4.25 / 8
    attention = (2880 * (64 + 16) * 64 + 64 * 64 * 2880) * 2
    router = 128 * 2880 * 2
    assert per_layer == pytest.approx(experts + attention + router)
    total = weights.weight_bytes(shape, 36, True)
    assert 60e9 < total < 66e9  # the 65 GB checkpoint


def test_fp8_kv_cache_fits_twice_the_tokens():
    base = resolve_run(RunConfig(model="meta-llama/Llama-3.1-8B-Instruct", device="h100"))
    fp8 = resolve_run(RunConfig(model="meta-llama/Llama-3.1-8B-Instruct", device="h100", kv_cache_dtype="fp8"))
    assert fp8.memory.target.kv_bytes_per_token * 2 == base.memory.target.kv_bytes_per_token
    assert fp8.memory.num_kv_blocks >= 2 * base.memory.num_kv_blocks - 20


NVFP4 = {**json.loads((CATALOG / "Qwen--Qwen3-30B-A3B.json").read_text()),
         "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}


@pytest.mark.parametrize(
    "model, change, device, named",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", {"quantization": "fp8"}, "a100", "device 'a100' has no FP8"),
        ("meta-llama/Llama-3.1-8B-Instruct", {"kv_cache_dtype": "fp8"}, "a100", "kv_cache_dtype = 'fp8': device 'a100'"),
        ("meta-llama/Llama-3.1-8B-Instruct", {"quantization": "mxfp4"}, "h100", "16-bit checkpoint"),
        (OSS20, {"quantization": "fp8"}, "h100", "quantization_config says 'mxfp4'"),
        ("meta-llama/Llama-3.1-8B-Instruct", {"expert_parallel": True}, "h100", "not a mixture-of-experts model"),
    ],
)
def test_a_precision_or_option_the_setting_cannot_run_is_refused_naming_both(model, change, device, named):
    with pytest.raises(ConfigError, match=named):
        resolve_run(RunConfig(model=model, device=device, **change))


def test_fp4_compute_on_hopper_is_refused_naming_both(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in NVFP4.items() if k != "_name_or_path"}))
    spec = parse_config(json.loads((tmp_path / "config.json").read_text()), "x", "x")
    assert spec.precision == Precision(ffn="nvfp4", experts="nvfp4", method="nvfp4")
    with pytest.raises(ConfigError, match="'nvfp4' computes in FP4, and device 'h100' has no FP4 tensor cores"):
        resolve_run(RunConfig(model=str(tmp_path), device="h100"))
    run = resolve_run(RunConfig(model=str(tmp_path), device="b200"))  # Blackwell has FP4 tensor cores
    assert run.target.shape.precision.experts == "nvfp4"


# --- Blackwell ---------------------------------------------------------------------------------------
def test_b200_datasheet_and_carried_constants():
    b200, h100 = get_device("b200"), get_device("h100")
    d = b200.datasheet
    assert (d.memory_gib, d.peak_fp16_tflops, d.peak_fp8_tflops, d.peak_fp4_tflops, d.hbm_bandwidth_tbps, d.num_sms, d.l2_cache_mib) == (
        180, 2250, 4500, 9000, 7.7, 148, 126.5)
    assert b200.constants == h100.constants and b200.constants_version == "h100-2026.12-carried"
    assert b200.attention.backend == "flashinfer" and b200.network.nvlink_bandwidth_gbps == 900
    assert b200.network.version.endswith("-carried") and b200.network.topology == "b200_dgx"
    assert not h100.datasheet.has_dtype("fp4") and h100.datasheet.has_dtype("fp8") and not get_device("a100").datasheet.has_dtype("fp8")


def test_b200_is_a_device_vidur_knows_and_profiles_say_carried():
    run = resolve_run(RunConfig(model=QWEN, device="b200", tensor_parallel_size=2))
    assert run.target.replica.device_config.total_memory_gb == 180
    assert run.target.replica.node_config.num_devices_per_node == 8
    assert "carried" in run.target.profile.profile_id


@pytest.mark.parametrize(
    "device, version, expected",
    [("b200", "0.10.1", (1024, 8192)), ("b200", "0.28.0", (1024, 16384)), ("h200", "0.28.0", (1024, 8192)), ("a100", "0.28.0", (256, 2048))],
)
def test_vllm_scheduler_defaults_on_blackwell(device, version, expected):
    assert scheduler_defaults(device, version) == expected


# --- bad configs --------------------------------------------------------------------------------------
MOE_CONFIG = json.loads((CATALOG / "deepseek-ai--DeepSeek-V3.json").read_text())


@pytest.mark.parametrize(
    "change, field",
    [
        ({"num_experts_per_tok": 300}, "num_experts_per_tok"),
        ({"topk_method": "sinkhorn"}, "topk_method"),
        ({"scoring_func": "relu"}, "scoring_func"),
        ({"topk_group": 9}, "topk_group"),
        ({"first_k_dense_replace": 70}, "first_k_dense_replace"),
        ({"kv_lora_rank": None}, "kv_lora_rank"),
        ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config"),
        ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}}, "quantization_config"),
        ({"layer_types": ["full_attention"] * 60}, "layer_types"),
        ({"num_nextn_predict_layers": 1, "mtp_num_hidden_layers": 2}, "mtp_num_hidden_layers"),
    ],
)
def test_an_moe_config_whose_fields_disagree_or_are_not_modelled_is_refused(change, field):
    config = {k: v for k, v in {**MOE_CONFIG, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as error:
        parse_config(config, "x", "config.json x")
    assert f"'{field}'" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"layer_types": ["sliding_attention", "full_attention"] * 12, "sliding_window": None}, "sliding_window"),
        ({"layer_types": ["linear_attention", "full_attention"] * 12}, "layer_types"),
        ({"quantization_config": {"quant_method": "mxfp4"}, "architectures": ["LlamaForCausalLM"], "num_local_experts": None, "experts_per_token": None, "num_experts_per_tok": None, "layer_types": None}, "quantization_config"),
    ],
)
def test_layer_and_precision_fields_that_disagree_are_refused(change, field):
    base = json.loads((CATALOG / "openai--gpt-oss-20b.json").read_text())
    config = {k: v for k, v in {**base, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as error:
        parse_config(config, "x", "config.json x")
    assert f"'{field}'" in str(error.value) or "quantization_config" in str(error.value)


def test_the_dense_weight_count_is_vidurs_param_counter():
    """Every dense catalog model at every TP degree it shards over: the generalised count equals
    Vidur's ParamCounter (plus the explicit head_dim correction the plan always made)."""
    from simulator.vidur.configs import ReplicaConfig
    from simulator.vidur.runtime import ParamCounter

    from simulator.vidur.models import known_models, shape_of
    from simulator.profiles.sharding import shardable

    checked = 0
    for name in known_models():
        cfg = model_config(name)
        shape = shape_of(cfg)
        if not shape.is_plain or getattr(cfg, "method", None):
            continue
        for tp in (1, 2, 4, 8):
            if not shardable(shape, tp) or cfg.embedding_dim % cfg.num_q_heads:
                continue
            replica = ReplicaConfig(model_name=name, device="h100", network_device="h100_dgx", num_pipeline_stages=1, tensor_parallel_size=tp)
            vidur = ParamCounter(replica).get_num_parameters_per_device()
            hd, vidur_hd = shape.head_dim, replica.attention_head_dim
            vidur += cfg.embedding_dim * (hd - vidur_hd) * (2 * replica.q_heads_per_tensor_parallel_worker + 2 * replica.kv_heads_per_tensor_parallel_worker) * cfg.num_layers
            assert weights.weight_bytes(shape.sharded(tp), cfg.num_layers, False) == 2 * vidur, (name, tp)
            checked += 1
    assert checked >= 20


# --- data-parallel attention with expert parallelism ---------------------------------------------------
def test_data_parallel_ranks_split_the_experts_and_exchange_tokens():
    """DeepSeek-V3 on 8 ranks (DP 8, TP 1, EP 8): each GPU holds the whole attention and 32 of the
    256 experts, its experts serve all 8 ranks' tokens, and each MoE layer all-gathers the ranks'
    hidden states and reduce-scatters the experts' outputs (vLLM's default all-to-all backend)."""
    from simulator.profiles import collectives

    dev = get_device("h200")
    shape = target_run_shape(model_shape(DSV3), dev, DSV3, data_parallel_size=8, expert_parallel=True)
    assert (shape.moe.data_parallel, shape.moe.expert_parallel, shape.moe.expert_groups(1)) == (8, True, 8)
    assert len(moe_model.local_probabilities(shape.moe, 1)) == 32
    tp8 = model_shape(DSV3).sharded(8)
    moe_kind = LayerKind("full", "moe")
    assert weights.layer_weight_bytes(moe_kind, shape) > weights.layer_weight_bytes(moe_kind, tp8)  # the whole attention
    experts = 256 * 3 * 7168 * 2048 // 8
    assert weights.layer_weight_bytes(moe_kind, shape) - weights.layer_weight_bytes(moe_kind.__class__("full", "dense"), shape) == pytest.approx(
        experts + 256 * 7168 * 2 + 3 * 7168 * 2048 - 3 * 7168 * 18432, rel=1e-9)
    model = StepModel(shape=shape, num_layers=61, device=dev, engine=get_engine("vllm-0.10.1"), network=dev.network)
    ms, count = model.collectives_ms(moe_kind, 16)
    assert count == 2 and ms == pytest.approx(collectives.moe_dispatch_combine_ms(16, 7168, 8, dev.network))
    assert model.collectives_ms(LayerKind("full", "dense"), 16) == (0.0, 0)  # TP 1: nothing to all-reduce
    # the experts serve 8 x 16 tokens: 32 (1 - (1 - 8/256)^128) = 31.4 of a GPU's 32 experts touched,
    # whose FP8 weights (44 MB each) stream at least once
    touched = 32 * (1 - (1 - 8 / 256) ** 128)
    floor = touched * 3 * 7168 * 2048 / (dev.datasheet.hbm_bandwidth_tbps * 1e12) * 1e3
    linear16, linear1 = (float(layer_linear_ms(moe_kind, np.array([t]), shape, dev)[0][0]) for t in (16, 1))
    assert linear16 > floor > linear1


@pytest.mark.parametrize(
    "change, named",
    [
        ({"data_parallel_size": 8}, "without expert parallelism"),
        ({"data_parallel_size": 2, "expert_parallel": True, "tensor_parallel_size": 4}, "tensor parallelism 1 only"),
        ({"data_parallel_size": 16, "expert_parallel": True}, "data_parallel_size x tensor_parallel_size = 16 is larger than the 8 GPUs"),
    ],
)
def test_data_parallel_settings_not_modelled_are_refused(change, named):
    with pytest.raises(ConfigError, match=named):
        resolve_run(RunConfig(model=DSV3, device="h200", **change))
    with pytest.raises(ConfigError, match="independent: simulate one"):
        resolve_run(RunConfig(model="meta-llama/Llama-3.1-8B-Instruct", device="h100", data_parallel_size=2))
