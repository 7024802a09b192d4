"""The PyTorch profiler: tiny grids on the CPU, checked the way Vidur's predictor reads the output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tiers import requires

from simulator.vidur.models import model_config, model_shape
from simulator.util.errors import ConfigError
from simulator.profiles import grid as vidur_grid
from simulator.profiling import measure
from simulator.profiling.measure import timing
from simulator.profiling.measure import ops as measure_ops
from simulator.profiling.measure import shapes as measure_shapes
from simulator.profiling import verify_fit
from simulator.profiling.__main__ import main as profiles_main
from simulator.profiles.vidur_format import ATTENTION_OPS, LOGITS_OPS, MLP_OPS, STAT_SUFFIXES, validate_profile_dir

try:
    import torch
except ImportError:  # the grid and the error paths are still tested
    torch = None
needs_torch = requires("torch", torch is None, "measuring needs PyTorch (pip install -e '.[profile]')")

MODEL = "JackFram/llama-68m"  # Llama architecture, 768 wide: one layer builds in well under a second
TINY = ["--grid", "small", "--max-tokens", "8", "--max-batch", "2", "--max-kv", "32", "--repeats", "3", "--warmup", "1", "--torch-device", "cpu"]


def run_cli(*args: str) -> int:
    return profiles_main(["measure", *args])


def vidur_load(directory, model: str, block_size: int = 16):
    """The frames Vidur's sklearn predictor trains on, filtered by its own loader methods."""
    from simulator.vidur.seam import training_frames

    mlp_path = next(p for p in directory.iterdir() if p.name.startswith("mlp.csv"))
    attention_path = next(p for p in directory.iterdir() if p.name.startswith("attention.csv"))
    return training_frames(mlp_path, attention_path, model_config(model), block_size)


def assert_ordered_stats(frame: pd.DataFrame, ops) -> None:
    for op in ops:
        cols = {s: f"time_stats.{op}.{s}" for s in STAT_SUFFIXES}
        rows = frame.dropna(subset=[cols["median"]])
        assert len(rows), f"no timings for {op}"
        assert (rows[cols["min"]] > 0).all(), op
        for low, high in (("min", "median"), ("median", "max"), ("min", "mean"), ("mean", "max")):
            assert (rows[cols[low]] <= rows[cols[high]] * (1 + 1e-5)).all(), (op, low, high)
        assert (rows[cols["std"]] >= 0).all(), op


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile") / "llama-68m"
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 0
    return out


# --- the grid (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 3, 4, 5, 9, 17, 144, 259])
def test_refinement_depth_spreads_every_prefix_over_the_axis(count):
    depths = [measure.refinement_depth(i, count) for i in range(count)]
    assert depths[0] == depths[-1] == 0
    levels = (count - 2).bit_length()
    assert max(depths) <= levels
    for level in range(levels + 1):
        kept = [i for i, d in enumerate(depths) if d <= level]
        assert max(np.diff(kept)) <= 2 ** (levels - level)


def test_vidur_grid_is_vidurs_and_ordered_coarse_to_fine():
    shapes = measure.build_shapes("vidur", 4096, 256, 4096)
    by_kind = {kind: {(s.a, s.b) for s in shapes if s.kind == kind} for kind in measure.KIND_ORDER}
    assert {a for a, _ in by_kind["mlp"]} == set(vidur_grid.num_tokens_grid(4096))
    assert by_kind["decode"] == set(vidur_grid.decode_shapes(4096, 256))
    assert by_kind["prefill"] == set(vidur_grid.prefill_shapes(4096, 4096))
    assert [s.depth for s in shapes] == sorted(s.depth for s in shapes)
    corners = {(s.kind, s.a, s.b) for s in shapes if s.depth == 0}
    assert {("mlp", 1, 0), ("mlp", 4096, 0), ("decode", 1, 32), ("decode", 256, 4032), ("prefill", 4096, 0)} <= corners


def test_an_empty_grid_is_refused():
    with pytest.raises(ConfigError, match="no prefill shapes"):
        measure.build_shapes("vidur", 8, 2, 64)  # Vidur's prefill chunks start at 32


def test_summary_statistics_are_vidurs():
    stats = measure.summarize([1.0, 2.0, 3.0, 10.0])
    assert stats == {"min": 1.0, "max": 10.0, "mean": 4.0, "median": 2.5, "std": pytest.approx(np.std([1, 2, 3, 10]))}


# --- a measured profile ---------------------------------------------------------------------


@needs_torch
def test_profile_loads_through_vidurs_own_filters(tiny_profile):
    mlp, attention = vidur_load(tiny_profile, MODEL)
    assert sorted(mlp.num_tokens) == [1, 2, 4, 8]
    assert_ordered_stats(mlp, MLP_OPS)
    decode = attention[attention.is_decode]
    prefill = attention[~attention.is_decode]
    assert set(zip(decode.batch_size, decode.kv_cache_size)) == {(1, 16), (2, 16), (1, 32), (2, 32)}
    assert set(zip(prefill.prefill_chunk_size, prefill.kv_cache_size)) == {(8, 0), (8, 8), (8, 16), (8, 24)}
    assert decode["time_stats.attn_prefill.median"].isna().all() and prefill["time_stats.attn_decode.median"].isna().all()
    assert_ordered_stats(attention, ATTENTION_OPS)
    validate_profile_dir(tiny_profile, model_shape(MODEL))


@needs_torch
def test_lm_head_and_sampler_are_extra_columns_of_mlp_csv(tiny_profile):
    mlp = pd.read_csv(tiny_profile / "mlp.csv")
    assert_ordered_stats(mlp, LOGITS_OPS)
    stat_cols = [c for c in mlp.columns if c.startswith("time_stats.")]
    assert stat_cols[-10:] == [f"time_stats.{op}.{s}" for op in ("lm_head", "sampler") for s in STAT_SUFFIXES]
    mlp, _ = vidur_load(tiny_profile, MODEL)  # Vidur's loader keeps reading the file
    assert len(mlp) == 4


class RecordingClock:
    """Runs a layer once and records each op's output, instead of timing it."""

    def __init__(self):
        self.outputs = {}

    def measure(self, run, warmup, repeats):
        run(SimpleNamespace(time=lambda name, fn: self.outputs.setdefault(name, fn())))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lm_head_is_a_vocab_wide_gemm_and_the_sampler_reads_fp32_logits(dtype):
    cfg = model_config(MODEL)
    layer = measure_ops.Layer(torch, cfg, torch.device("cpu"), getattr(torch, dtype), 16)
    clock = RecordingClock()
    layer.measure(5, clock, 0, 1)
    logits, sampled = clock.outputs["lm_head"], clock.outputs["sampler"]
    assert logits.shape == (5, cfg.vocab_size) and logits.dtype == getattr(torch, dtype)
    assert sampled.shape == (5,) and sampled.dtype == torch.int64 and int(sampled.max()) < cfg.vocab_size
    assert layer.activation_bytes(10, 2) - layer.activation_bytes(5, 2) >= 5 * cfg.vocab_size * (2 + 4)


@needs_torch
def test_metadata_says_what_measured_it(tiny_profile):
    meta = json.loads((tiny_profile / "metadata.json").read_text())
    assert meta["model"] == MODEL
    assert meta["measured_on"]["type"] == "cpu" and meta["measured_on"]["torch_version"] == torch.__version__
    assert meta["dtype"] == "float32" and meta["timer"] == {"perf_counter": 12}
    assert meta["timer_requested"] == "auto" and meta["timer_fallbacks"] == []
    assert meta["attention_backends"] and all(b.startswith("sdpa_") for b in meta["attention_backends"])
    attention = pd.read_csv(tiny_profile / "attention.csv")
    assert set(attention.attention_backend) == set(meta["attention_backends"])
    assert meta["grid"] == {"kind": "small", "max_tokens": 8, "max_batch": 2, "max_kv": 32, "shapes": {"mlp": 4, "decode": 4, "prefill": 4}}
    assert meta["measured_shapes"] == {"mlp": 4, "decode": 4, "prefill": 4}
    assert meta["skipped"] == [] and sum(meta["skipped_for_time_budget"].values()) == 0


@needs_torch
def test_grouped_query_attention_model(tmp_path):
    name = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"  # 32 query heads share 4 KV heads
    out = tmp_path / "tinyllama"
    assert run_cli("--model", name, "--out", str(out), *TINY) == 0
    mlp, attention = vidur_load(out, name)
    assert len(mlp) == 4 and (attention.n_kv_head == 4).all() and len(attention) == 8
    assert_ordered_stats(attention, ATTENTION_OPS)


@needs_torch
def test_time_budget_leaves_a_smaller_valid_profile(tmp_path):
    out = tmp_path / "partial"
    limits = ["--grid", "small", "--max-tokens", "64", "--max-batch", "8", "--max-kv", "128", "--repeats", "2", "--warmup", "1"]
    assert run_cli("--model", MODEL, "--out", str(out), "--torch-device", "cpu", *limits, "--time-budget", "0", "--compress") == 0
    assert sorted(p.name for p in out.iterdir()) == ["attention.csv.xz", "metadata.json", "mlp.csv.xz"]
    corners = [s for s in measure.build_shapes("small", 64, 8, 128) if s.depth == 0]
    mlp, attention = vidur_load(out, MODEL)
    assert sorted(mlp.num_tokens) == sorted(s.a for s in corners if s.kind == "mlp") == [1, 64]
    decode = attention[attention.is_decode]
    assert set(zip(decode.batch_size, decode.kv_cache_size)) == {(s.a, s.b) for s in corners if s.kind == "decode"}
    meta = json.loads((out / "metadata.json").read_text())
    total = sum(meta["grid"]["shapes"].values())
    assert sum(meta["measured_shapes"].values()) == len(corners) < total
    assert sum(meta["measured_shapes"].values()) + sum(meta["skipped_for_time_budget"].values()) == total
    validate_profile_dir(out, model_shape(MODEL))


# --- bad input and devices that run out of memory ---------------------------------------------


@needs_torch
def test_out_of_memory_on_one_shape_is_skipped_and_recorded(tmp_path, monkeypatch):
    real = measure_ops.measure_shape

    def flaky(layer, attention, clock, shape, warmup, repeats):
        if (shape.kind, shape.a, shape.b) == ("decode", 2, 32):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(layer, attention, clock, shape, warmup, repeats)

    monkeypatch.setattr(measure_ops, "measure_shape", flaky)
    out = tmp_path / "oom"
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["skipped"] == [{"kind": "decode", "batch_size": 2, "kv_cache_size": 32, "reason": "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB"}]
    attention = pd.read_csv(out / "attention.csv")
    decode = attention[attention.prefill_chunk_size == 0]
    assert set(zip(decode.batch_size, decode.kv_cache_size)) == {(1, 16), (2, 16), (1, 32)}


@needs_torch
def test_no_profile_when_a_whole_kind_cannot_be_measured(tmp_path, monkeypatch, capsys):
    real = measure_ops.measure_shape

    def no_decode(layer, attention, clock, shape, warmup, repeats):
        if shape.kind == "decode":
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(layer, attention, clock, shape, warmup, repeats)

    monkeypatch.setattr(measure_ops, "measure_shape", no_decode)
    out = tmp_path / "none"
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 2
    assert "no decode shape of 'JackFram/llama-68m' could be measured here" in capsys.readouterr().err
    assert not out.exists()


@needs_torch
def test_shapes_beyond_device_memory_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(measure_shapes, "kv_capacity", lambda *args: 20)  # K/V buffers for 20 tokens only
    out = tmp_path / "small-memory"
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 0
    attention = pd.read_csv(out / "attention.csv")
    needed = np.where(attention.prefill_chunk_size == 0, attention.batch_size * (attention.kv_cache_size + 1), attention.prefill_chunk_size + attention.kv_cache_size)
    assert (needed <= 20).all() and len(attention) == 3  # decode (1, 16); prefill (8, 0), (8, 8)
    meta = json.loads((out / "metadata.json").read_text())
    assert len(meta["skipped"]) == 5 and all("exceeds the 20 that fit" in s["reason"] for s in meta["skipped"])


@needs_torch
def test_non_empty_out_dir_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "existing"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: directory exists and is not empty" in err and "--overwrite" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert run_cli("--model", MODEL, "--out", str(out), *TINY, "--overwrite") == 0
    assert sorted(p.name for p in out.iterdir()) == ["attention.csv", "metadata.json", "mlp.csv", "notes.txt"]
    assert run_cli("--model", MODEL, "--out", str(out), *TINY, "--overwrite", "--compress") == 0
    assert sorted(p.name for p in out.iterdir()) == ["attention.csv.xz", "metadata.json", "mlp.csv.xz", "notes.txt"]


@needs_torch
def test_profile_files_are_world_readable(tiny_profile):
    for path in tiny_profile.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path.name


# --- the timer ------------------------------------------------------------------------------


class FakeGraphClock(timing.Clock):
    """A CPU clock that pretends to replay CUDA graphs: decode attention fails to capture."""

    def __init__(self, torch_module, device):
        super().__init__(torch_module, device, graphs=False)
        self.graphs = True
        self.replayed = []

    def _replayed(self, run, warmup, repeats):
        ops = []
        run(SimpleNamespace(time=lambda name, fn: ops.append(name) or fn()))
        if "attn_decode" in ops:
            raise timing.CaptureFailed("RuntimeError: operation not permitted when stream is capturing")
        self.replayed.append(tuple(ops))
        return {name: measure.summarize([0.25, 0.5]) for name in ops}


@needs_torch
def test_a_shape_that_cannot_be_captured_falls_back_to_eager_timing(tmp_path, monkeypatch):
    clocks = []
    monkeypatch.setattr(timing, "make_clock", lambda torch_module, device, timer: clocks.append(FakeGraphClock(torch_module, device)) or clocks[-1])
    out = tmp_path / "fallback"
    assert run_cli("--model", MODEL, "--out", str(out), *TINY) == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["timer"] == {"cuda_graph": 8, "perf_counter": 4}  # 4 MLP + 4 prefill shapes replayed, 4 decode fell back
    reason = "RuntimeError: operation not permitted when stream is capturing"
    fallbacks = sorted(meta["timer_fallbacks"], key=lambda f: (f["batch_size"], f["kv_cache_size"]))
    assert fallbacks == [
        {"kind": "decode", "batch_size": b, "kv_cache_size": kv, "timer": "perf_counter", "reason": reason} for b, kv in [(1, 16), (1, 32), (2, 16), (2, 32)]
    ]
    assert len(clocks[0].replayed) == 8
    mlp, attention = vidur_load(out, MODEL)
    assert (mlp["time_stats.attn_rope.median"] == 0.375).all()  # the replayed timings reach the profile
    decode = attention[attention.is_decode]
    assert (decode["time_stats.attn_decode.median"] != 0.375).all() and (decode["time_stats.attn_decode.min"] > 0).all()
    assert (attention[~attention.is_decode]["time_stats.attn_prefill.median"] == 0.375).all()


@needs_torch
def test_the_clock_follows_the_timer_option():
    cpu = torch.device("cpu")
    assert timing.make_clock(torch, cpu, "auto").graphs is False
    assert timing.make_clock(torch, cpu, "event").eager_timer == "perf_counter"
    timed = timing.make_clock(torch, cpu, "event").measure(lambda watch: watch.time("op", lambda: sum(range(100))), 1, 3)
    assert timed.timer == "perf_counter" and timed.fallback is None and set(timed.stats) == {"op"}


@needs_torch
def test_graph_timer_needs_a_gpu(tmp_path, capsys):
    assert run_cli("--model", MODEL, "--out", str(tmp_path / "x"), *TINY, "--timer", "graph") == 2
    assert "--timer graph: CUDA graphs need a CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_unknown_timer_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("--model", MODEL, "--out", str(tmp_path / "x"), *TINY, "--timer", "stopwatch")
    assert exit_info.value.code == 2 and "--timer" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--timer 'stopwatch': must be one of auto, graph, event"):
        measure.measure_profile(measure.MeasureOptions(model=MODEL, grid="small", max_tokens=8, max_batch=2, max_kv=32, timer="stopwatch"))


def test_unknown_model_is_named_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "never"
    assert run_cli("--model", "acme/Unknown-7B", "--out", str(out), *TINY) == 2
    err = capsys.readouterr().err
    assert "unknown model 'acme/Unknown-7B'" in err and MODEL in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--repeats", "0", "--repeats 0"), ("--max-kv", "1", "--max-kv 1"), ("--time-budget", "-1", "--time-budget -1"), ("--verify-max-k", "-1", "--verify-max-k -1")],
)
def test_bad_limits_are_named(tmp_path, capsys, flag, value, message):
    args = list(TINY)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    assert run_cli("--model", MODEL, "--out", str(tmp_path / "x"), *args) == 2
    assert message in capsys.readouterr().err


@needs_torch
@pytest.mark.skipif(torch is not None and torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_requested_without_a_gpu(tmp_path, capsys):
    args = [a if a != "cpu" else "cuda" for a in TINY]
    assert run_cli("--model", MODEL, "--out", str(tmp_path / "x"), *args) == 2
    assert "--torch-device cuda" in capsys.readouterr().err


def test_torch_is_imported_only_to_measure(monkeypatch):
    code = "import sys; sys.modules['torch'] = None; import simulator.profiling.measure as m; print(m.GRIDS)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[profile\]'"):
        measure.measure_profile(measure.MeasureOptions(model=MODEL, grid="small", max_tokens=8, max_batch=2, max_kv=32))


def test_device_is_not_the_torch_device(tmp_path, capsys):
    """--device names a GPU SKU in every other command; measure's cuda/cpu choice is --torch-device."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli("--model", MODEL, "--out", str(tmp_path / "x"), *TINY, "--device", "cuda")
    assert exit_info.value.code == 2 and "unrecognized arguments: --device" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MEASURE_TESTS_TORCH_HIDDEN") == "1", reason="this is the run with torch hidden")
def test_every_test_skips_with_its_reason_without_torch():
    """This file run with ``import torch`` failing: the torch tests skip with the reason, the rest pass."""
    code = "import sys; sys.modules['torch'] = None; import pytest; sys.exit(pytest.main(sys.argv[1:]))"
    args = ["-q", "-rs", "-p", "no:cacheprovider", "-p", "no:randomly", __file__]
    env = {**os.environ, "MEASURE_TESTS_TORCH_HIDDEN": "1"}
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=os.path.dirname(__file__), check=False)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-3000:]
    assert "error" not in summary and "failed" not in summary, summary
    skips = [re.match(r"SKIPPED \[(\d+)\] [^:]+:\d+: (.*)", line).groups() for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    reasons = {reason for _, reason in skips}
    assert reasons == {"measuring needs PyTorch (pip install -e '.[profile]')", "this is the run with torch hidden"}, reasons
    assert sum(int(n) for n, reason in skips if "PyTorch" in reason) >= 12


# --- verify steps -----------------------------------------------------------------------------

VERIFY = ["--tables", "verify", "--max-batch", "2", "--max-kv", "256", "--verify-max-k", "2", "--repeats", "3", "--warmup", "1", "--torch-device", "cpu"]
VERIFY_STEPS = {(b, kv, q) for b in (1, 2) for kv in (128, 256) for q in (1, 2, 3)}
BOUND_ROWS = {(b * q, kv, 1) for b, kv, q in VERIFY_STEPS}


def test_verify_grid_is_every_step_plus_the_bounds_it_needs():
    grid = measure_shapes.build_verify_shapes(128, 4096, 8)
    steps = {(b, kv, q) for b in (1, 2, 4, 8, 16, 32, 64, 128) for kv in (128, 256, 512, 1024, 2048, 4096) for q in range(1, 10)}
    layer = {(s.a, s.b, s.q): s.depth for s in grid if s.kind == "verify_layer"}
    attention = {(s.a, s.b, s.q): s.depth for s in grid if s.kind == "verify_attention"}
    assert set(layer) == steps and len(layer) == 432
    assert set(attention) == steps | {(b * q, kv, 1) for b, kv, q in steps} and max(b for b, _, _ in attention) == 1152
    for (b, kv, q), depth in layer.items():  # each step's bounds are measured no later than the step
        assert attention[(b, kv, 1)] <= depth and attention[(b * q, kv, 1)] <= depth
    assert {(1, 128, 1), (128, 4096, 9), (1152, 4096, 1)} <= {k for k, d in attention.items() if d == 0}
    assert [s.depth for s in grid] == sorted(s.depth for s in grid)


@needs_torch
def test_verify_attention_is_causal_within_the_new_tokens():
    mask = measure_ops.Attention.mask("verify_attention", 3, 5)["attn_mask"]._materialize()
    assert mask.shape == (3, 8) and mask.sum(dim=1).tolist() == [6, 7, 8]  # query i sees the cache and new tokens 0..i
    assert measure_ops.Attention.mask("verify_attention", 1, 5) == {}  # one query: plain decode


@needs_torch
def test_verify_tables_on_the_cpu(tmp_path):
    out = tmp_path / "verify"
    assert run_cli("--model", MODEL, "--out", str(out), *VERIFY) == 0
    assert sorted(p.name for p in out.iterdir()) == ["verify_attention.csv", "verify_layer.csv", "verify_metadata.json"]
    attention, layer = pd.read_csv(out / "verify_attention.csv"), pd.read_csv(out / "verify_layer.csv")
    assert set(zip(attention.batch_size, attention.kv_cache_size, attention.num_query_tokens)) == VERIFY_STEPS | BOUND_ROWS
    assert set(zip(layer.batch_size, layer.kv_cache_size, layer.num_query_tokens)) == VERIFY_STEPS
    assert (attention.num_speculative_tokens == attention.num_query_tokens - 1).all()
    assert_ordered_stats(attention, ["attention"])
    assert_ordered_stats(layer, ["layer"])
    assert (attention.kv_layout == "contiguous").all() and attention.attention_backend.str.startswith("sdpa_").all()
    assert (layer.n_expanded_embd == model_config(MODEL).mlp_hidden_dim).all()
    meta = json.loads((out / "verify_metadata.json").read_text())
    assert meta["grid"] == {"max_batch": 2, "min_kv": 128, "max_kv": 256, "max_speculative_tokens": 2, "shapes": {"verify_attention": 18, "verify_layer": 12}}
    assert meta["measured_shapes"] == {"verify_attention": 18, "verify_layer": 12} and meta["skipped"] == []
    assert meta["timer"] == {"perf_counter": 30} and meta["units"] == "milliseconds per layer"
    fit = tmp_path / "fit.json"  # the fit reads what measure wrote, and says what measured it
    assert profiles_main(["fit-verify", "--profile-dir", str(out), "--json", str(fit)]) == 0
    measured = json.loads(fit.read_text())["measured"]
    assert measured["model"] == MODEL and measured["measured_on"]["type"] == "cpu" and measured["dtype"] == "float32"


@needs_torch
def test_verify_tables_beside_an_existing_profile_need_overwrite_and_keep_it(tiny_profile, tmp_path, capsys):
    out = tmp_path / "profile"
    shutil.copytree(tiny_profile, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run_cli("--model", MODEL, "--out", str(out), *VERIFY) == 2
    assert "--overwrite" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == sorted(before)
    assert run_cli("--model", MODEL, "--out", str(out), *VERIFY, "--overwrite", "--compress") == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([*before, "verify_attention.csv.xz", "verify_layer.csv.xz", "verify_metadata.json"])
    assert all((out / name).read_bytes() == data for name, data in before.items())  # the profile is untouched


@needs_torch
def test_profile_and_verify_tables_in_one_run(tmp_path):
    out = tmp_path / "all"
    args = [a for a in TINY if a != "--torch-device" and a != "cpu"]
    assert run_cli("--model", MODEL, "--out", str(out), *args, "--tables", "all", "--max-kv", "128", "--verify-max-k", "1", "--torch-device", "cpu") == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["attention.csv", "metadata.json", "mlp.csv", "verify_attention.csv", "verify_layer.csv", "verify_metadata.json"]
    assert set(json.loads((out / "metadata.json").read_text())["measured_shapes"]) == {"mlp", "decode", "prefill"}
    validate_profile_dir(out, model_shape(MODEL))
    fit = tmp_path / "fit.json"  # the bounds as the simulator looks them up, in the profile's decode rows
    assert profiles_main(["fit-verify", "--profile-dir", str(out), "--decode-profile", str(out), "--model", MODEL, "--json", str(fit)]) == 0
    assert json.loads(fit.read_text())["bounds"] == "decode profile"


@needs_torch
def test_verify_shapes_that_do_not_fit_are_skipped_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(measure_shapes, "kv_capacity", lambda *args: 2 * 258)  # K/V for batch 2 at KV 256 + 2 queries
    out = tmp_path / "small-memory"
    assert run_cli("--model", MODEL, "--out", str(out), *VERIFY) == 0
    attention = pd.read_csv(out / "verify_attention.csv")
    needed = attention.batch_size * (attention.kv_cache_size + attention.num_query_tokens)
    assert (needed <= 516).all() and len(attention) == 18 - 5  # (3|4|6, 256, 1), (6, 128, 1) and (2, 256, 3) are out
    assert len(pd.read_csv(out / "verify_layer.csv")) == 12 - 1
    meta = json.loads((out / "verify_metadata.json").read_text())
    assert all("exceeds the 516 that fit" in s["reason"] for s in meta["skipped"])
    assert {(s["kind"], s["batch_size"], s["kv_cache_size"], s["num_query_tokens"]) for s in meta["skipped"]} >= {("verify_layer", 2, 256, 3), ("verify_attention", 6, 256, 1)}
    assert meta["measured_shapes"]["verify_attention"] + sum(s["kind"] == "verify_attention" for s in meta["skipped"]) == 18


@needs_torch
def test_verify_time_budget_keeps_the_bounds_of_every_step_it_measured(tmp_path):
    out = tmp_path / "budget"
    args = ["--tables", "verify", "--max-batch", "8", "--max-kv", "512", "--verify-max-k", "4", "--repeats", "2", "--warmup", "0", "--torch-device", "cpu"]
    assert run_cli("--model", MODEL, "--out", str(out), *args, "--time-budget", "0") == 0
    attention = pd.read_csv(out / "verify_attention.csv")
    steps = attention[attention.num_query_tokens > 1]
    assert set(zip(steps.batch_size, steps.kv_cache_size, steps.num_query_tokens)) == {(b, kv, 5) for b in (1, 8) for kv in (128, 512)}
    points = verify_fit.same_run_bounds(attention)
    assert len(points) == len(steps)  # no step lost its bounds to the budget
    meta = json.loads((out / "verify_metadata.json").read_text())
    assert sum(meta["skipped_for_time_budget"].values()) > 0


@pytest.mark.parametrize("command", [["simulator.profiling.measure"], ["simulator.profiling", "measure"], ["simulator.profiling", "fit-verify"]])
def test_entry_points_answer_help(command):
    result = subprocess.run([sys.executable, "-m", *command, "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "--torch-device" in result.stdout if command[-1] != "fit-verify" else "--profile-dir" in result.stdout


def test_fastest_backend_keeps_the_faster_kernel_and_the_layer_reuses_its_choice():
    attention = measure_ops.Attention.__new__(measure_ops.Attention)  # no buffers: the kernels are stood in
    attention.backend, attention.chosen = "fastest", {}
    medians, asked = {"flash": 2.0, "efficient": 1.5}, []

    def accepting(run, names, clock, warmup, repeats, failures):
        asked.append(names)
        for name in names:
            if name in medians:
                yield name, timing.Timed({"op": {"median": medians[name]}}, "perf_counter")
            else:
                failures.append(f"{name}: declined")

    attention._accepting = accepting
    assert attention.on_backend(None, "op", (4, 3, 128), None, 1, 1)[0] == "efficient" and asked == [("flash", "efficient")]
    assert attention.on_backend(None, "op", (4, 3, 128), None, 1, 1)[0] == "efficient" and asked[-1] == ("efficient",)
    medians.update(flash=1.0)
    assert attention.on_backend(None, "op", (8, 3, 128), None, 1, 1)[0] == "flash"
    medians.clear()
    with pytest.raises(measure_ops.ShapeRejected, match="flash: declined; efficient: declined; math: declined"):
        attention.on_backend(None, "op", (16, 3, 128), None, 1, 1)
    medians["math"] = 9.0
    assert attention.on_backend(None, "op", (32, 3, 128), None, 1, 1)[0] == "math"  # neither fused kernel accepts it


@needs_torch
def test_verify_layer_writes_the_new_keys_after_the_cache_and_returns_every_token():
    cfg, cpu = model_config(MODEL), torch.device("cpu")
    layer = measure_ops.Layer(torch, cfg, cpu, torch.float32, 64)
    attention = measure_ops.Attention(torch, cfg, cpu, torch.float32, 2 * (16 + 3), "auto")
    k_cache, v_cache = attention.caches(2, 16 + 3)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    clock = RecordingClock()
    backend, _ = measure_ops.VerifyLayer(layer, attention).measure(measure_shapes.Shape("verify_layer", 2, 16, 0, 3), clock, 1, 1)
    assert backend in ("flash", "efficient", "math")
    assert clock.outputs["verify_layer"].shape == (2 * 3, cfg.embedding_dim)
    assert torch.equal(k_cache[:, :, :16], k_before[:, :, :16]) and torch.equal(v_cache[:, :, :16], v_before[:, :, :16])
    assert not torch.isclose(k_cache[:, :, 16:], k_before[:, :, 16:]).any() and not torch.isclose(v_cache[:, :, 16:], v_before[:, :, 16:]).any()


@needs_torch
def test_no_verify_tables_when_no_layer_step_can_be_measured(tmp_path, monkeypatch, capsys):
    real = measure_ops.measure_shape

    def no_layer(layer, attention, clock, shape, warmup, repeats):
        if shape.kind == "verify_layer":
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(layer, attention, clock, shape, warmup, repeats)

    monkeypatch.setattr(measure_ops, "measure_shape", no_layer)
    out = tmp_path / "none"
    assert run_cli("--model", MODEL, "--out", str(out), *VERIFY) == 2
    assert "no verify_layer shape" in capsys.readouterr().err and not out.exists()
