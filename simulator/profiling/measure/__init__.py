"""Measure a Vidur-format profile (``mlp.csv``, ``attention.csv``) on one GPU with PyTorch alone.

Vidur's own profiler needs Sarathi, Ray and a multi-GPU node; this one times the same ops with
plain PyTorch on whatever single device is at hand (TP = 1), so a profile can be re-measured
for a new GPU or a new PyTorch release.  Every layer op of ``mlp.csv`` runs in the order of
a transformer layer; attention runs through ``scaled_dot_product_attention`` for decode
(batch x one query x KV) and chunked prefill (chunk x (KV + chunk), causal inside the chunk).

On a GPU each op is captured into a CUDA graph after its warm-up runs and the graph's replays
are timed between CUDA events, so the time is GPU execution alone, as Vidur's kernel-time
profiler records it, not the GPU waiting for Python to launch the next kernel (an op that
cannot be captured is timed between events around its eager launch instead, and the metadata
says so); on a CPU, ``time.perf_counter``.  The repeated runs are summarised as
min/max/mean/median/std in milliseconds per layer.  Shapes are measured coarse-to-fine (the
grid's corners first, then ever finer bisections), so a run cut short by ``--time-budget``
still leaves a profile that spans the whole grid, only more sparsely.  Shapes that do not fit
in device memory are skipped and listed in ``metadata.json``.

Modules, one concern each: ``timing`` (CUDA-graph, CUDA-event and CPU timers), ``shapes`` (the
grid and what fits in memory), ``ops`` (the layer's ops with random weights), ``runner`` (one
run: time budget, skip-and-record), ``output`` (the Vidur-format files), ``cli`` (the options).

PyTorch is an optional dependency (``pip install -e '.[profile]'``): the package imports it
only when measuring.
"""

from simulator.profiling.measure.cli import add_arguments, main
from simulator.profiling.measure.runner import MeasuredProfile, MeasureOptions, measure_profile
from simulator.profiling.measure.shapes import GRIDS, KIND_ORDER, build_shapes, refinement_depth
from simulator.profiling.measure.timing import summarize

__all__ = [
    "GRIDS",
    "KIND_ORDER",
    "MeasureOptions",
    "MeasuredProfile",
    "add_arguments",
    "build_shapes",
    "main",
    "measure_profile",
    "refinement_depth",
    "summarize",
]
