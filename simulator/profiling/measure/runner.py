"""One measuring run: check the options, pick the device, walk the grid coarse-to-fine within
the time budget, skip (and record) the shapes that do not fit, and gather the rows."""

from __future__ import annotations

import math
import platform
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pandas as pd
from tqdm import tqdm

from simulator.vidur.models import model_config
from simulator.util.errors import ConfigError
from simulator.profiling.measure import ops, output, shapes as grid, timing
from simulator.profiling.measure.ops import ATTENTION_BACKENDS
from simulator.profiling.measure.shapes import DEFAULT_MAX_KV, KIND_ORDER, PROFILE_KINDS, VERIFY_KINDS, Shape
from simulator.profiling.measure.timing import TIMERS
from simulator.profiles.vidur_format import MLP_OPS

DTYPES = ("float16", "bfloat16", "float32")
# What to measure: the Vidur-format profile, the verify steps, or both.
TABLES = ("profile", "verify", "all")
DEFAULT_VERIFY_MAX_K = 8
GPU_BURN_IN_S = 1.0  # clocks ramp up from idle before the first timed shape


@dataclass(frozen=True)
class MeasureOptions:
    model: str
    torch_device: str = "auto"  # cuda, cpu, or auto: cuda when available
    dtype: str = "auto"
    grid: str = "vidur"
    max_tokens: int = 4096
    max_batch: int = 128
    max_kv: int | None = None  # None: the model's context length, at most DEFAULT_MAX_KV
    repeats: int = 10
    warmup: int = 3
    time_budget_s: float | None = None
    attention_backend: str = "auto"
    block_size: int = 16
    seed: int = 0
    timer: str = "auto"  # auto: CUDA graphs on a GPU, perf_counter on a CPU
    tables: str = "profile"
    verify_max_k: int = DEFAULT_VERIFY_MAX_K  # verify steps of k' = 0..verify_max_k proposals


@dataclass
class MeasuredProfile:
    """The measured tables: the Vidur-format profile and/or the verify steps (None if not asked for)."""

    mlp: pd.DataFrame | None
    attention: pd.DataFrame | None
    metadata: dict | None = None
    verify_attention: pd.DataFrame | None = None
    verify_layer: pd.DataFrame | None = None
    verify_metadata: dict | None = None


def check_options(o: MeasureOptions) -> None:
    for name in ("max_tokens", "max_batch", "repeats", "block_size"):
        if getattr(o, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(o, name)}: must be at least 1")
    if o.max_kv is not None and o.max_kv < 2:
        raise ConfigError(f"--max-kv {o.max_kv}: must be at least 2")
    if o.warmup < 0:
        raise ConfigError(f"--warmup {o.warmup}: must not be negative")
    if o.time_budget_s is not None and (o.time_budget_s < 0 or not math.isfinite(o.time_budget_s)):
        raise ConfigError(f"--time-budget {o.time_budget_s}: must be a non-negative number of seconds")
    if o.dtype not in ("auto", *DTYPES):
        raise ConfigError(f"--dtype {o.dtype!r}: must be one of auto, {', '.join(DTYPES)}")
    if o.timer not in TIMERS:
        raise ConfigError(f"--timer {o.timer!r}: must be one of {', '.join(TIMERS)}")
    if o.tables not in TABLES:
        raise ConfigError(f"--tables {o.tables!r}: must be one of {', '.join(TABLES)}")
    if o.verify_max_k < 0:
        raise ConfigError(f"--verify-max-k {o.verify_max_k}: must not be negative")
    if o.attention_backend not in ATTENTION_BACKENDS:
        raise ConfigError(f"--attention-backend {o.attention_backend!r}: must be one of {', '.join(ATTENTION_BACKENDS)}")


def resolve_device(torch, name: str):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cuda", "cpu"):
        raise ConfigError(f"--torch-device {name!r}: must be cuda or cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--torch-device cuda: this PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    return torch.device(name)


def device_facts(torch, device) -> dict:
    facts = {"type": device.type, "torch_version": torch.__version__, "cuda_version": torch.version.cuda}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            cudnn_version=torch.backends.cudnn.version(),
        )
    else:
        facts.update(
            name=platform.processor() or platform.machine(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
            threads=torch.get_num_threads(),
        )
    return facts


@dataclass
class GridOutcome:
    rows: dict = field(default_factory=lambda: {kind: [] for kind in KIND_ORDER})
    skipped: list = field(default_factory=list)  # each shape's describe() with the reason
    over_budget: dict = field(default_factory=lambda: {kind: 0 for kind in KIND_ORDER})
    backends: dict = field(default_factory=lambda: {kind: set() for kind in KIND_ORDER})
    absent_ops: list = field(default_factory=list)
    timers: dict = field(default_factory=lambda: {kind: {} for kind in KIND_ORDER})  # kind -> timer -> shapes
    timer_fallbacks: list = field(default_factory=list)  # shapes not timed by the timer asked for, and why

    def summary(self, kinds) -> dict:
        """The metadata of the shapes of ``kinds`` (one output table's)."""
        timers: dict[str, int] = {}
        for kind in kinds:
            for timer, count in self.timers[kind].items():
                timers[timer] = timers.get(timer, 0) + count
        return {
            "timer": dict(sorted(timers.items())),
            "timer_fallbacks": [f for f in self.timer_fallbacks if f["kind"] in kinds],
            "attention_backends": sorted({f"sdpa_{b}" for kind in kinds for b in self.backends[kind]}),
            "skipped_for_time_budget": {kind: self.over_budget[kind] for kind in kinds},
            "skipped": [s for s in self.skipped if s["kind"] in kinds],
        }


def _row(cfg, shape: Shape, timed, backend, layer, options: MeasureOptions, max_kv: int) -> dict:
    if shape.kind == "mlp":
        return output.mlp_row(cfg, shape.a, timed.stats, layer.ops())
    if shape.kind in VERIFY_KINDS:
        return output.verify_row(cfg, shape, timed.stats, backend)
    return output.attention_row(cfg, shape, timed.stats, backend, options.block_size, max_kv)


def measure_grid(torch, cfg, device, dtype, shapes: list[Shape], options: MeasureOptions, max_kv: int) -> GridOutcome:
    started = time.perf_counter()
    element_size = torch.empty((), dtype=dtype).element_size()
    max_tokens = max((s.new_tokens for s in shapes if s.kind in ("mlp", "verify_layer")), default=1)
    max_position = max([max_tokens, max_kv] + [s.b + s.q for s in shapes if s.kind in VERIFY_KINDS])
    try:
        layer = ops.Layer(torch, cfg, device, dtype, max_position)
    except Exception as exc:
        if timing.is_out_of_memory(torch, exc):
            raise ConfigError(f"model '{options.model}': one layer's weights do not fit in {device.type} memory") from exc
        raise
    capacity = grid.kv_capacity(torch, device, shapes, cfg, element_size, layer.activation_bytes(max_tokens, element_size))
    attention = ops.Attention(torch, cfg, device, dtype, capacity, options.attention_backend)
    verify_layer = ops.VerifyLayer(layer, attention)
    if device.type == "cuda":  # a second of the largest layer's matmuls
        burn_in, burn_in_end = timing.Clock(torch, device, graphs=False), time.perf_counter() + GPU_BURN_IN_S
        while time.perf_counter() < burn_in_end:
            layer.measure(max_tokens, burn_in, 0, 1)
        torch.cuda.synchronize()
    clock = timing.make_clock(torch, device, options.timer)

    outcome = GridOutcome(absent_ops=[op for op in MLP_OPS if op not in layer.ops()])
    for shape in tqdm(shapes, desc=f"measuring {options.model}", unit="shape", disable=None):
        if shape.depth > 0 and options.time_budget_s is not None and time.perf_counter() - started >= options.time_budget_s:
            outcome.over_budget[shape.kind] += 1
            continue
        if shape.kind == "mlp":
            needed = layer.activation_bytes(shape.a, element_size)
        elif grid.kv_tokens_needed(shape) > attention.capacity:
            reason = f"K/V for {grid.kv_tokens_needed(shape)} tokens exceeds the {attention.capacity} that fit in device memory"
            outcome.skipped.append({**shape.describe(), "reason": reason})
            continue
        elif shape.kind == "verify_layer":
            needed = verify_layer.transient_bytes(shape, element_size)
        else:
            needed = attention.transient_bytes(shape, element_size)
        if not grid.fits(torch, device, needed):
            outcome.skipped.append({**shape.describe(), "reason": f"needs about {needed / 2**30:.2f} GiB more device memory than is free"})
            continue
        try:
            backend, timed = ops.measure_shape(layer, attention, clock, shape, options.warmup, options.repeats)
        except ops.ShapeRejected as exc:
            outcome.skipped.append({**shape.describe(), "reason": str(exc)})
            continue
        except Exception as exc:
            if not timing.is_out_of_memory(torch, exc):
                raise
            outcome.skipped.append({**shape.describe(), "reason": f"out of memory: {str(exc).splitlines()[0]}"})
            continue
        finally:
            timing.free_memory(torch, device)
        outcome.timers[shape.kind][timed.timer] = outcome.timers[shape.kind].get(timed.timer, 0) + 1
        if timed.fallback is not None:
            outcome.timer_fallbacks.append({**shape.describe(), "timer": timed.timer, "reason": timed.fallback})
        if backend is not None:
            outcome.backends[shape.kind].add(backend)
        outcome.rows[shape.kind].append(_row(cfg, shape, timed, backend, layer, options, max_kv))
    measured = sum(len(rows) for rows in outcome.rows.values())
    print(f"measured {measured} of {len(shapes)} shapes in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return outcome


def measure_profile(options: MeasureOptions) -> MeasuredProfile:
    """Time every shape of the grid on one device; a shape that does not fit is skipped, not fatal."""
    check_options(options)
    cfg = model_config(options.model)
    max_kv = options.max_kv or min(cfg.max_model_len, DEFAULT_MAX_KV)
    profile, verify = options.tables in ("profile", "all"), options.tables in ("verify", "all")
    shapes = grid.build_shapes(options.grid, options.max_tokens, options.max_batch, max_kv) if profile else []
    shapes = grid.sort_shapes(shapes + (grid.build_verify_shapes(options.max_batch, max_kv, options.verify_max_k) if verify else []))
    torch = timing.import_torch()
    device = resolve_device(torch, options.torch_device)
    if options.timer == "graph" and device.type != "cuda":
        raise ConfigError(f"--timer graph: CUDA graphs need a CUDA device, and this run measures on {device.type}")
    dtype_name = options.dtype if options.dtype != "auto" else ("float16" if device.type == "cuda" else "float32")
    torch.manual_seed(options.seed)
    with torch.inference_mode():
        outcome = measure_grid(torch, cfg, device, getattr(torch, dtype_name), shapes, options, max_kv)

    common = {
        "source": "measured with PyTorch (python -m simulator.profiling measure)",
        "model": options.model,
        "measured_on": device_facts(torch, device),
        "date": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "dtype": dtype_name,
        "timer_requested": options.timer,
        "attention_backend_requested": options.attention_backend,
        "tensor_parallel_workers": 1,
        "warmup": options.warmup,
        "repeats": options.repeats,
        "seed": options.seed,
        "time_budget_s": options.time_budget_s,
    }
    result = MeasuredProfile(None, None)
    if profile:
        result.mlp, result.attention = output.profile_frames(outcome.rows["mlp"], outcome.rows["decode"] + outcome.rows["prefill"])
        result.metadata = {
            **common,
            **outcome.summary(PROFILE_KINDS),
            "units": "milliseconds per layer; lm_head and sampler: milliseconds per forward pass",
            "head_ops": {
                "lm_head": "F.linear of [num_tokens, hidden] by the [vocab_size, hidden] weight, in dtype (TP = 1)",
                "sampler": "torch.softmax over fp32 [num_tokens, vocab_size] logits, then argmax (greedy)",
            },
            "attention": "torch.nn.functional.scaled_dot_product_attention on contiguous K/V (not paged)",
            "ops_absent_from_model": outcome.absent_ops,
            "block_size": options.block_size,
            "grid": {
                "kind": options.grid,
                "max_tokens": options.max_tokens,
                "max_batch": options.max_batch,
                "max_kv": max_kv,
                "shapes": {kind: sum(s.kind == kind for s in shapes) for kind in PROFILE_KINDS},
            },
            "measured_shapes": {kind: len(outcome.rows[kind]) for kind in PROFILE_KINDS},
        }
    if verify:
        result.verify_attention, result.verify_layer = output.verify_frames(outcome.rows["verify_attention"], outcome.rows["verify_layer"])
        result.verify_metadata = {
            **common,
            **outcome.summary(VERIFY_KINDS),
            "units": "milliseconds per layer",
            "attention": "torch.nn.functional.scaled_dot_product_attention on contiguous K/V (not paged), causal bottom-right within the new tokens",
            "kv_layout": "contiguous",
            "grid": {
                "max_batch": options.max_batch,
                "min_kv": min(grid.VERIFY_MIN_KV, max_kv),
                "max_kv": max_kv,
                "max_speculative_tokens": options.verify_max_k,
                "shapes": {kind: sum(s.kind == kind for s in shapes) for kind in VERIFY_KINDS},
            },
            "measured_shapes": {kind: len(outcome.rows[kind]) for kind in VERIFY_KINDS},
        }
    return result
