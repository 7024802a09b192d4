"""Tensor parallelism: sharded built-in rows, the all-reduce model, per-GPU memory, runs at TP > 1,
bad input, and the calibration targets against Vidur's measured profiles (skipped without ../shared)."""

import dataclasses
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tiers import requires

import simulator
from repo import SHARED_DIR
from simulator.vidur.models import model_config, model_shape
from simulator.runs.config import RunConfig
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError
from simulator.profiles import all_reduce_rows, builtin, network, roofline, source
from simulator.profiles.hardware import get_device
from simulator.profiling.tp_accuracy import mlp_side_errors
from simulator.profiles.all_reduce_rows import single_node_all_reduce_rows
from simulator.profiles.vidur_format import write_profile
from simulator.vidur.configs import CacheConfig
from simulator.vidur.runtime import MemoryPlanner
from simulator.vidur.seam import queued_requests, replica_scheduler, scheduler_predictor
from stock_vidur import direct_vidur_simulator
from simulator.speculative.memory import kv_blocks

L7, L70 = "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf"
PROFILES = SHARED_DIR / "vidur-profiles"
needs_shared = requires(
    "shared", not PROFILES.is_dir(), f"Vidur's measured profiles are not at {PROFILES} (../shared/vidur-profiles)"
)


# --- the built-in generator ------------------------------------------------------------------
def test_builtin_profile_has_sharded_rows_and_all_reduce_rows(tmp_path):
    directory = source.builtin_profile_dir(L70, model_shape(L70), "a100", tmp_path)
    mlp = pd.read_csv(directory / "mlp.csv")
    attention = pd.read_csv(directory / "attention.csv")
    all_reduce = pd.read_csv(directory / "all_reduce.csv")
    assert sorted(mlp.num_tensor_parallel_workers.unique()) == [1, 2, 4, 8]
    assert sorted(attention.num_tensor_parallel_workers.unique()) == [1, 2, 4, 8]
    assert sorted(all_reduce.num_workers.unique()) == [2, 4, 8]
    assert (all_reduce.devices_per_node == all_reduce.num_workers).all() and (all_reduce.max_devices_per_node == 8).all()
    # the messages are one activation row per token of the model
    assert set(all_reduce["size"] % (2 * 8192)) == {0}


def test_sharding_splits_gemms_and_keeps_norms_whole():
    shape, dev = model_shape(L70), get_device("a100")
    tokens = np.array([8, 512, 4096])
    whole = roofline.mlp_side_ms(tokens, shape, dev)
    quarter = roofline.mlp_side_ms(tokens, shape.sharded(4), dev)
    for op in ("input_layernorm", "post_attention_layernorm", "add", "emb"):
        np.testing.assert_array_equal(whole[op], quarter[op])
    for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act"):
        assert (quarter[op] < whole[op]).all(), op
    # at 4096 tokens the GEMMs are compute-bound: a quarter of the work is close to a quarter of the time
    ratio = quarter["mlp_up_proj"][-1] / whole["mlp_up_proj"][-1]
    assert 0.22 < ratio < 0.32
    # per-worker heads: 64/4 query heads, 8/4 KV heads; GQA with fewer KV heads than workers replicates them
    assert (shape.sharded(4).q_heads_per_worker, shape.sharded(4).kv_heads_per_worker) == (16, 2)
    tiny = model_shape("TinyLlama/TinyLlama-1.1B-Chat-v1.0").sharded(8)
    assert tiny.kv_heads_per_worker == 1 and tiny.gqa_group == 4


def test_tp1_rows_are_unchanged_by_sharding():
    shape, dev = model_shape(L7), get_device("a100")
    one = builtin.mlp_table(shape, dev, 4096)
    many = builtin.mlp_table(shape, dev, 4096, degrees=(1, 2, 4, 8))
    pd.testing.assert_frame_equal(one, many[many.num_tensor_parallel_workers == 1].reset_index(drop=True))


def test_ring_all_reduce_follows_the_ring_factor():
    net = get_device("h100").network
    big = 64 * 2**20
    # bandwidth term: 2 (n - 1) / n of the message per GPU; latency: 2 (n - 1) ring steps
    t = {n: float(network.ring_all_reduce_ms(big, n, net)) for n in (2, 4, 8)}
    bandwidth_ms = big / (net.nvlink_bandwidth_gbps * 1e9 * net.bus_eff) * 1e3
    for n in (2, 4, 8):
        expected = (net.launch_us + 2 * (n - 1) * net.hop_us) * 1e-3 + 2 * (n - 1) / n * bandwidth_ms
        assert t[n] == pytest.approx(expected)
    assert t[2] < t[4] < t[8]
    assert float(network.ring_all_reduce_ms(big, 1, net)) == 0.0


def test_devices_carry_network_provenance():
    for name in ("a100", "h100", "h200"):
        net = get_device(name).network
        assert net.gpus_per_node == 8 and net.nvlink_bandwidth_gbps > 0
        assert "datasheet" in net.source and net.fitted_from
    assert get_device("a100").network.nvlink_bandwidth_gbps == 300  # 600 GB/s NVLink 3, both directions
    assert get_device("h100").network.nvlink_bandwidth_gbps == 450  # 900 GB/s NVLink 4


# --- per-GPU memory ------------------------------------------------------------------------------
def _params_per_gpu(name: str, tp: int, embeddings: bool) -> int:
    """Counted here from the architecture, independently of Vidur's ParamCounter."""
    m = model_config(name)
    hd = m.embedding_dim // m.num_q_heads
    q, kv = m.num_q_heads // tp, -(-m.num_kv_heads // tp)
    layer = m.embedding_dim * hd * (q + 2 * kv) + m.embedding_dim * hd * q + 3 * m.embedding_dim * m.mlp_hidden_dim // tp
    return m.num_layers * layer + (2 * m.vocab_size * m.embedding_dim // tp if embeddings else 0)


def _kv_bytes_per_token(name: str, tp: int) -> int:
    m = model_config(name)
    return 2 * 2 * (m.embedding_dim // m.num_q_heads) * -(-m.num_kv_heads // tp) * m.num_layers


def _blocks(config: RunConfig, longest: int) -> int:
    """KV blocks the resolved run plans for a workload whose longest request is ``longest`` tokens."""
    workload = PoissonWorkload(num_requests=1, prompt_tokens=longest - 1, output_tokens=1)
    return resolve_run(dataclasses.replace(config, workload=workload)).memory.num_kv_blocks


def test_70b_needs_tensor_parallelism_on_80_gib():
    with pytest.raises(ConfigError, match="leaves no room"):
        _blocks(RunConfig(model=L70), 1280)
    config = RunConfig(model=L70, tensor_parallel_size=4)
    usable = 80 * 2**30 * 0.9 - 2 * _params_per_gpu(L70, 4, False)
    assert _blocks(config, 1280) == kv_blocks(int(usable // _kv_bytes_per_token(L70, 4)), 1280, 16)


def test_memory_plan_matches_vidurs_planner_at_tp():
    for tp in (2, 4, 8):
        config = RunConfig(model=L70, tensor_parallel_size=tp)
        replica = resolve_run(config).target.replica
        tokens = MemoryPlanner(replica, CacheConfig()).get_max_kv_cache_size_in_tokens()
        assert _blocks(config, 4096) == kv_blocks(int(tokens), 4096, 16)


@pytest.mark.parametrize("draft_tp", [1, 4])
def test_draft_weights_and_kv_per_gpu(draft_tp):
    draft = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    spec = SpeculationConfig(num_speculative_tokens=4, acceptance_rate=0.7, proposer="draft", draft_model=draft, draft_tensor_parallel_size=draft_tp)
    config = RunConfig(model=L70, tensor_parallel_size=4, speculation=spec)
    # the binding GPU holds 1/4 of the target and 1/draft_tp of the draft, weights and KV alike
    usable = 80 * 2**30 * 0.9 - 2 * _params_per_gpu(L70, 4, False) - 2 * _params_per_gpu(draft, draft_tp, True)
    per_token = _kv_bytes_per_token(L70, 4) + _kv_bytes_per_token(draft, draft_tp)
    assert _blocks(config, 2048) == kv_blocks(int(usable // per_token), 2048, 16)


def test_a_sharded_draft_leaves_more_room_than_a_whole_one():
    def blocks(draft_tp):
        spec = SpeculationConfig(4, 0.7, proposer="draft", draft_model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", draft_tensor_parallel_size=draft_tp)
        return _blocks(RunConfig(model=L70, tensor_parallel_size=4, speculation=spec), 2048)

    assert blocks(4) > blocks(1)


# --- bad input -----------------------------------------------------------------------------------
def _net_dir(tmp_path, workers):
    """A network profile with all-reduce rows for ``workers`` only."""
    net = get_device("a100").network
    directory = tmp_path / "net"
    directory.mkdir()
    all_reduce_rows.vidur_rows(net, [8192, 2**20], workers).to_csv(directory / "all_reduce.csv", index=False)
    return directory


def _tp12_profile(tmp_path):
    directory = tmp_path / "tp12"
    shape, dev = model_shape(L7), get_device("a100")
    write_profile(directory, builtin.mlp_table(shape, dev, 4096, degrees=(1, 2)), builtin.attention_table(shape, dev, 4096, max_batch=8, degrees=(1, 2)), {})
    return directory


DRAFT = ["-k", "4", "--acceptance", "0.7", "--proposer", "draft", "--draft-model", "JackFram/llama-68m"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tensor-parallel-size", "3"], "--tensor-parallel-size 3: meta-llama/Llama-2-7b-hf cannot be tensor-parallel over 3 GPUs"),
        (["--model", L70, "--tensor-parallel-size", "16"], "larger than the 8 GPUs per node"),
        (["--tensor-parallel-size", "4", "--network-profile-dir", "{net2}"], "no network profile for .* at --tensor-parallel-size 4"),
        (["--tensor-parallel-size", "4", "--profile-dir", "{tp12}"], "larger than the device count this profile covers"),
        (["--tensor-parallel-size", "4", *DRAFT, "--draft-tensor-parallel-size", "2"], "--draft-tensor-parallel-size 2: must be 1 or the target's --tensor-parallel-size \\(4\\)$"),
        # the draft-TP rule's second half, the run configuration's as the first: no network, nothing to shard
        (["-k", "4", "--acceptance", "0.7", "--draft-tensor-parallel-size", "1"], "--draft-tensor-parallel-size 1: --proposer ngram runs no draft network"),
        (["--tensor-parallel-size", "8", *DRAFT], "--draft-tensor-parallel-size 8: JackFram/llama-68m cannot be tensor-parallel over 8"),
    ],
)
def test_bad_tp_input_exits_2_and_writes_nothing(tmp_path, args, message):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    net2 = _net_dir(inputs, [2]) if "{net2}" in args else None
    tp12 = _tp12_profile(inputs) if "{tp12}" in args else None
    args = [a.format(net2=net2, tp12=tp12) for a in args]
    work = tmp_path / "work"
    work.mkdir()
    out = work / "summary.json"
    result = subprocess.run([sys.executable, "-m", "simulator", *args, "--json", str(out)], capture_output=True, text=True, cwd=work)
    assert result.returncode == 2, result.stderr
    assert re.search(message, result.stderr), result.stderr
    assert list(work.iterdir()) == []


def test_device_without_a_network_table_has_no_network_profile():
    from dataclasses import replace

    bare = replace(get_device("a100"), name="bare", network=None)
    with pytest.raises(ConfigError, match="no network profile for device 'bare'"):
        all_reduce_rows.check_device_covers(bare, 2)
    all_reduce_rows.check_device_covers(bare, 1)  # TP 1 needs no network


# --- runs at TP > 1 -------------------------------------------------------------------------------
SMALL = PoissonWorkload(num_requests=40, arrival_rate=2.0, seed=3)


@pytest.mark.slow
@pytest.mark.simulation
def test_stock_and_speculative_runs_at_tp2():
    # Vidur's ops alone (stock costing: no LM head, no per-step engine overhead, which does not shrink with TP)
    stock1 = simulator.run(RunConfig(workload=SMALL, engine_overhead_ms=0.0, lm_head=False))
    stock2 = simulator.run(RunConfig(workload=SMALL, tensor_parallel_size=2, engine_overhead_ms=0.0, lm_head=False))
    assert stock2.provenance["tensor_parallel_size"] == 2 and stock2.provenance["network_source"] == "builtin"
    # half the weights to stream per GPU, and two all-reduces a layer that vLLM's custom one-shot
    # kernel does in a few microseconds (not NCCL's eager tens): close to twice as fast (0.49 measured;
    # prefills get faster too, so less of the queue's interference shows in TPOT)
    assert 0.4 < stock2.summary["tpot_p50_s"] / stock1.summary["tpot_p50_s"] < 0.65
    assert stock2.summary["kv_blocks_total"] > stock1.summary["kv_blocks_total"]
    ngram = simulator.run(RunConfig(workload=SMALL, tensor_parallel_size=2, speculation=SpeculationConfig(4, 0.7)))
    assert ngram.summary["tpot_p50_s"] < stock2.summary["tpot_p50_s"]
    for draft_tp in (1, 2):
        spec = SpeculationConfig(4, 0.7, proposer="draft", draft_model="JackFram/llama-68m", draft_tensor_parallel_size=draft_tp)
        run = simulator.run(RunConfig(workload=SMALL, tensor_parallel_size=2, speculation=spec))
        assert run.summary["num_requests"] == 40 and run.summary["verify_steps"] > 0


# --- calibration targets against Vidur's measurements ------------------------------------------
@needs_shared
@pytest.mark.parametrize("device", ["a100", "h100"])
def test_builtin_tp_mlp_side_matches_vidurs_70b_rows(device):
    """TP 2/4/8 per-layer MLP-side time vs Vidur's measured Llama-2-70B rows, with the TP 1 constants."""
    measured = pd.read_csv(PROFILES / device / "meta-llama" / "Llama-2-70b-hf" / "mlp.csv")
    errors = mlp_side_errors(measured, model_shape(L70), get_device(device), degrees=(2, 4, 8)).set_index("TP")
    assert list(errors.index) == [2, 4, 8]
    assert (errors["median APE %"] <= 5.0).all(), errors


@needs_shared
@pytest.mark.parametrize("device, topology", [("a100", "a100_dgx"), ("h100", "h100_dgx")])
def test_builtin_all_reduce_matches_vidurs_measurements(device, topology):
    """Ring model vs Vidur's measured all-reduce over the sizes a 7B or 70B step sends, one fit for all TP."""
    rows = single_node_all_reduce_rows(PROFILES / "network" / topology / "all_reduce.csv", *network.STEP_MESSAGE_BYTES)
    assert sorted(rows.num_workers.unique()) == [2, 4, 8]
    table = network.error_table(rows, get_device(device).network)
    pooled = table[table.sizes == "all (pooled)"].iloc[0]
    assert pooled["median APE %"] <= 10.0, table
    # no TP degree is far off on its own either (the H100's TP 2 is the worst, see docs/calibration.md)
    per_tp = table[table.sizes == "all"]
    assert (per_tp["median APE %"] <= 11.0).all(), table


def _vidur_format_70b_tp4(root):
    """Vidur's measured A100 70B mlp.csv and a100_dgx all_reduce.csv (copied into a temp dir, never
    committed), with built-in attention rows at TP 4."""
    directory = root / "vidur-70b"
    directory.mkdir()
    shutil.copyfile(PROFILES / "a100" / "meta-llama" / "Llama-2-70b-hf" / "mlp.csv", directory / "mlp.csv")
    shutil.copyfile(PROFILES / "network" / "a100_dgx" / "all_reduce.csv", directory / "all_reduce.csv")
    builtin.attention_table(model_shape(L70), get_device("a100"), 4096, degrees=(4,)).to_csv(directory / "attention.csv", index=False)
    return directory


@needs_shared
@pytest.mark.slow
def test_stock_tp4_70b_matches_a_direct_vidur_sarathi_run(tmp_path):
    directory = _vidur_format_70b_tp4(tmp_path)
    # stock Vidur's costing: no LM head or sampler, no engine overhead
    config = RunConfig(
        model=L70,
        tensor_parallel_size=4,
        profile_dir=str(directory),
        workload=PoissonWorkload(num_requests=40, arrival_rate=1.0, seed=11),
        lm_head=False,
        engine_overhead_ms=0.0,
    )
    mine = simulator.run(config)
    assert mine.provenance["network_source"] == "profile_dir"

    # Vidur's own Sarathi scheduler, memory planner, request generator and Request class at TP 4;
    # only the predictor is ours (the stock one downloads profiles from the hub)
    sim = direct_vidur_simulator(config)
    direct = sorted(queued_requests(sim), key=lambda r: r.id)
    predictor = scheduler_predictor(replica_scheduler(sim))
    assert predictor.replica_config.tensor_parallel_size == 4 and "all_reduce" in predictor.predictions
    sim.run()
    frame = mine.requests
    assert [r.arrived_at for r in direct] == list(frame.arrival_s)
    assert [r.prefill_completed_at - r.arrived_at for r in direct] == list(frame.ttft_s)
    assert [r.completed_at - r.arrived_at for r in direct] == list(frame.e2e_s)


@pytest.mark.simulation
@pytest.mark.slow
def test_cli_reports_tp_in_json(tmp_path):
    """The flag reaches the run: the JSON's config and provenance carry it (the fit is cached per TP)."""
    out = tmp_path / "s.json"
    subprocess.run(
        [sys.executable, "-m", "simulator", "--requests", "10", "--tensor-parallel-size", "2", "--json", str(out)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    payload = json.loads(out.read_text())
    assert payload["config"]["tensor_parallel_size"] == 2
    assert payload["provenance"]["tensor_parallel_size"] == 2
