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

from simulator.catalog import model_config
from simulator.errors import ConfigError
from simulator.profiles.measure import ops, output, shapes as grid, timing
from simulator.profiles.measure.ops import ATTENTION_BACKENDS
from simulator.profiles.measure.shapes import DEFAULT_MAX_KV, KIND_ORDER, Shape
from simulator.profiles.measure.timing import TIMERS
from simulator.profiles.vidur_format import MLP_OPS

DTYPES = ("float16", "bfloat16", "float32")
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


@dataclass
class MeasuredProfile:
    mlp: pd.DataFrame
    attention: pd.DataFrame
    metadata: dict = field(default_factory=dict)


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
    mlp_rows: list = field(default_factory=list)
    attention_rows: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    over_budget: dict = field(default_factory=lambda: {kind: 0 for kind in KIND_ORDER})
    backends: set = field(default_factory=set)
    absent_ops: list = field(default_factory=list)
    timers: dict = field(default_factory=dict)  # timer -> shapes it timed
    timer_fallbacks: list = field(default_factory=list)  # shapes not timed by the timer asked for, and why


def measure_grid(torch, cfg, device, dtype, shapes: list[Shape], options: MeasureOptions, max_kv: int) -> GridOutcome:
    started = time.perf_counter()
    element_size = torch.empty((), dtype=dtype).element_size()
    max_tokens = max(s.a for s in shapes if s.kind == "mlp")
    try:
        layer = ops.Layer(torch, cfg, device, dtype, max(max_tokens, max_kv))
    except Exception as exc:
        if timing.is_out_of_memory(torch, exc):
            raise ConfigError(f"model '{options.model}': one layer's weights do not fit in {device.type} memory") from exc
        raise
    capacity = grid.kv_capacity(torch, device, shapes, cfg, element_size, layer.activation_bytes(max_tokens, element_size))
    attention = ops.Attention(torch, cfg, device, dtype, capacity, options.attention_backend)
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
        outcome.timers[timed.timer] = outcome.timers.get(timed.timer, 0) + 1
        if timed.fallback is not None:
            outcome.timer_fallbacks.append({**shape.describe(), "timer": timed.timer, "reason": timed.fallback})
        if shape.kind == "mlp":
            outcome.mlp_rows.append(output.mlp_row(cfg, shape.a, timed.stats, layer.ops()))
        else:
            outcome.backends.add(backend)
            outcome.attention_rows.append(output.attention_row(cfg, shape, timed.stats, backend, options.block_size, max_kv))
    print(f"measured {len(outcome.mlp_rows) + len(outcome.attention_rows)} of {len(shapes)} shapes in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return outcome


def measure_profile(options: MeasureOptions) -> MeasuredProfile:
    """Time every shape of the grid on one device; a shape that does not fit is skipped, not fatal."""
    check_options(options)
    cfg = model_config(options.model)
    max_kv = options.max_kv or min(cfg.max_model_len, DEFAULT_MAX_KV)
    shapes = grid.build_shapes(options.grid, options.max_tokens, options.max_batch, max_kv)
    torch = timing.import_torch()
    device = resolve_device(torch, options.torch_device)
    if options.timer == "graph" and device.type != "cuda":
        raise ConfigError(f"--timer graph: CUDA graphs need a CUDA device, and this run measures on {device.type}")
    dtype_name = options.dtype if options.dtype != "auto" else ("float16" if device.type == "cuda" else "float32")
    torch.manual_seed(options.seed)
    with torch.inference_mode():
        outcome = measure_grid(torch, cfg, device, getattr(torch, dtype_name), shapes, options, max_kv)

    mlp, attention = output.profile_frames(outcome.mlp_rows, outcome.attention_rows)
    metadata = {
        "source": "measured with PyTorch (python -m simulator.profiles measure)",
        "model": options.model,
        "measured_on": device_facts(torch, device),
        "date": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "dtype": dtype_name,
        "timer": dict(sorted(outcome.timers.items())),
        "timer_requested": options.timer,
        "timer_fallbacks": outcome.timer_fallbacks,
        "units": "milliseconds per layer; lm_head and sampler: milliseconds per forward pass",
        "head_ops": {
            "lm_head": "F.linear of [num_tokens, hidden] by the [vocab_size, hidden] weight, in dtype (TP = 1)",
            "sampler": "torch.softmax over fp32 [num_tokens, vocab_size] logits, then argmax (greedy)",
        },
        "attention": "torch.nn.functional.scaled_dot_product_attention on contiguous K/V (not paged)",
        "attention_backends": sorted(f"sdpa_{b}" for b in outcome.backends),
        "ops_absent_from_model": outcome.absent_ops,
        "tensor_parallel_workers": 1,
        "block_size": options.block_size,
        "warmup": options.warmup,
        "repeats": options.repeats,
        "seed": options.seed,
        "time_budget_s": options.time_budget_s,
        "grid": {
            "kind": options.grid,
            "max_tokens": options.max_tokens,
            "max_batch": options.max_batch,
            "max_kv": max_kv,
            "shapes": {kind: sum(s.kind == kind for s in shapes) for kind in KIND_ORDER},
        },
        "measured_shapes": {
            "mlp": len(mlp),
            "decode": int((attention.prefill_chunk_size == 0).sum()),
            "prefill": int((attention.prefill_chunk_size > 0).sum()),
        },
        "skipped_for_time_budget": outcome.over_budget,
        "skipped": outcome.skipped,
    }
    return MeasuredProfile(mlp, attention, metadata)
