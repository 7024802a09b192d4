"""What the serving engine does around the kernels: CUDA graphs, launches, per-step CPU time.

A step's GPU kernels are costed by :mod:`simulator.profiles.roofline` and
:mod:`simulator.profiles.attention`; how they are *issued* is a property of the engine and its
version, not of the GPU, so it lives here, as data (``engines.toml``, package data) with a source
per number.  vLLM V1 issues a forward in one of three ways (``vllm/config/compilation.py``,
``vllm/v1/worker/gpu_model_runner.py``):

* **full graph**: one CUDA graph holds the whole forward, attention included.  vLLM >= 0.11
  (``cudagraph_mode = FULL_AND_PIECEWISE``) runs uniform decode batches this way (every row with
  the same query length: 1 for decode, k + 1 for a speculative verify), up to the largest capture
  size.  The CPU launches one graph; the GPU runs the kernels back to back.
* **piecewise**: the layers between attention calls are captured, attention runs eagerly between
  the pieces.  vLLM 0.10 runs every batch up to the largest capture size this way (0.11 keeps it
  for mixed prefill + decode batches).  Per layer the CPU replays a piece and calls attention.
* **eager**: batches above the largest capture size (long prefill chunks): every kernel is
  launched from Python.

SGLang (``engine = "sglang"`` profiles) issues a forward in two of these ways
(``cudagraph_mode = "full_decode_only"``): decode and EAGLE target-verify batches replay one full
graph, captured per request count (``capture_bs``, ``spec_capture_bs``: SGLang's
``get_batch_sizes_to_capture``), up to the largest; every other batch (prefill, extend) runs eagerly.
Its EAGLE drafter replays a graph of its decode steps and, from the versions that have
``EAGLEDraftExtendCudaGraphRunner``, of its extend over the accepted tokens (``draft_extend_graph``).

In every mode the GPU can run no faster than the CPU issues work; per layer the step takes the
longer of the two (:func:`simulator.profiles.step`).  Batches in a graph mode run padded to the
next capture size.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.util.inputs import check_table, read_toml, require

ENGINES_FILE = Path(str(resources.files("simulator.profiles").joinpath("engines.toml")))
CUDAGRAPH_MODES = ("piecewise", "full_and_piecewise", "full_decode_only", "none")
ENGINE_NAMES = ("vllm", "sglang")  # the engines a profile can describe


@dataclass(frozen=True)
class EngineSpec:
    """One engine version's issuing behaviour; times in microseconds unless the name says ms."""

    name: str
    version: str
    cudagraph_mode: str  # "piecewise", "full_and_piecewise", "full_decode_only" (SGLang) or "none"
    capture_sizes: tuple[int, ...]  # token counts graphs are captured for (ascending)
    graph_kernel_gap_us: float  # GPU idle between two kernels of one graph
    stream_kernel_gap_us: float  # GPU idle between two kernels launched eagerly, CPU ahead
    cpu_kernel_launch_us: float  # CPU time to launch one kernel eagerly (PyTorch dispatch + launch)
    cpu_graph_launch_us: float  # CPU time to replay one captured graph (or piece)
    cpu_attention_call_us: float  # CPU time of one eager attention call (metadata, cache write, kernel)
    custom_all_reduce_max_bytes: int  # vLLM's custom all-reduce buffer; larger messages go to NCCL
    source: str
    # asynchronous scheduling: the CPU prepares step n + 1 while the GPU runs step n, so a step
    # takes the longer of the two plus a short hand-over gap, instead of their sum
    async_scheduling: bool = False
    async_step_gap_us: float = 0.0
    # per TP degree, where the version sets its own custom all-reduce limits (vLLM >= 0.11 on Hopper,
    # with torch symmetric memory on by default): (tp, bytes) pairs, capped by the buffer above
    custom_all_reduce_max_by_tp: tuple[tuple[int, int], ...] = ()
    # torch symmetric memory's all-reduce (vLLM >= 0.11): (tp, bytes) limits, and the TP degrees
    # that take its multimem kernel (the others its two-shot kernel); none: not used
    symm_mem_all_reduce_max_by_tp: tuple[tuple[int, int], ...] = ()
    symm_mem_multimem_tp: tuple[int, ...] = ()
    # the GPU model runner ("v1": gpu_model_runner.py; "mrv2": Model Runner V2, vllm/v1/worker/gpu/) and
    # the speculative methods Model Runner V2 runs (the others fall back to the V1 runner)
    runner: str = "v1"
    mrv2_methods: tuple[str, ...] = ()
    # how the capture sizes follow the run ("fixed": max_capture_size as given, one token grid;
    # "vllm-0.15": vLLM >= 0.15's rule, :meth:`for_run`)
    capture_rule: str = "fixed"
    # the speculative methods that keep async scheduling (None: the kind's own rule, vLLM 0.14's)
    async_methods: Optional[tuple[str, ...]] = None
    # vLLM >= 0.24: a k schedule (dynamic SD) on the V1 runner overrides a full-graph cudagraph_mode to
    # PIECEWISE (VllmConfig._maybe_override_dynamic_sd_cudagraph_mode; Model Runner V2 keeps full graphs)
    dynamic_sd_piecewise_on_v1: bool = False
    # vLLM's enable_adaptive_verification exists (config/speculative.py; Model Runner V2 only): each
    # step verifies a draft budget picked from start-up cost tables (simulator.speculative.adaptive_verification)
    adaptive_verification: bool = False
    # the release's date (ISO): a published row that states no version runs the release current at its date
    released: str = ""
    # the engine the profile describes ("vllm" or "sglang"): a vLLM version is looked up among the
    # vLLM profiles only (:func:`engine_for_version`), an SGLang one among SGLang's (:func:`sglang_engine_for_version`)
    engine: str = "vllm"
    # SGLang: the request counts its decode graphs are captured for without and with speculative
    # decoding (get_batch_sizes_to_capture), its cuda_graph_max_bs, and whether its EAGLE drafter
    # replays a graph for the extend over the accepted tokens (EAGLEDraftExtendCudaGraphRunner)
    capture_bs: tuple[int, ...] = ()
    spec_capture_bs: tuple[int, ...] = ()
    cuda_graph_max_bs: int = 0
    draft_extend_graph: bool = True
    # the profiles whose kernel gaps and CPU costs this one carries over (no source of its own measures them)
    carried_from: tuple[str, ...] = ()
    # SGLang ("full_decode_only"), set by :meth:`for_run` and :meth:`drafter`: the request counts a
    # uniform batch replays a captured graph at (padded to the next), whatever its query length,
    # and the query lengths that run eagerly all the same (the drafter's extend over the accepted
    # tokens where SGLang builds its draft runner without graphs)
    graph_counts: tuple[int, ...] = ()
    eager_query_lens: tuple[int, ...] = ()
    # set by :meth:`for_run`: the query length of the run's uniform verify batches (1 + k; 0: any
    # uniform batch takes the full graph, as the fixed profiles have it), and the query lengths
    # Model Runner V2 captures full graphs for (1 + k, and every 1 + k of a schedule)
    decode_query_len: int = 0
    uniform_tiers: tuple[int, ...] = ()

    def custom_all_reduce_limit(self, tp: int, per_tp: bool = True) -> int:
        """The size below which vLLM sends a message through its custom all-reduce at ``tp`` GPUs:
        the version's limit for ``tp``, never beyond the kernel's buffer.  ``per_tp``: whether the
        device is one vLLM caps per TP degree; it does so (``CustomAllreduce.__init__``: only when
        symmetric memory is on and the compute capability is a key of
        ``CUSTOM_ALL_REDUCE_MAX_SIZES``, Hopper's and Blackwell's) exactly where it also runs torch
        symmetric memory, so an A100 keeps the whole 8 MiB buffer at every TP degree."""
        if not per_tp:
            return self.custom_all_reduce_max_bytes
        return min(dict(self.custom_all_reduce_max_by_tp).get(tp, self.custom_all_reduce_max_bytes), self.custom_all_reduce_max_bytes)

    def symm_mem_limit(self, tp: int) -> int:
        """The size below which torch symmetric memory reduces a message (0: never)."""
        return dict(self.symm_mem_all_reduce_max_by_tp).get(tp, 0)

    def runner_for(self, method: Optional[str]) -> str:
        """The model runner a run with speculative ``method`` (None: no speculation) gets."""
        if self.runner == "mrv2" and (method is None or method in self.mrv2_methods):
            return "mrv2"
        return "v1"

    def overlaps(self, method: Optional[str], kind_rule: bool) -> bool:
        """Whether a run with speculative ``method`` (None: none) keeps async scheduling:
        ``kind_rule`` is the kind's own (vLLM 0.14's EAGLE/MTP rule) where the version lists none."""
        if not self.async_scheduling:
            return False
        if method is None:
            return True
        return kind_rule if self.async_methods is None else method in self.async_methods

    def for_run(self, max_num_seqs: int, max_num_batched_tokens: int, k: int = 0, method: Optional[str] = None, dynamic: bool = False,
                schedule_ks: tuple[int, ...] = ()) -> "EngineSpec":
        """This engine with the capture sizes vLLM picks for one run (``capture_rule = "vllm-0.15"``;
        a "fixed" profile is returned as it is).  vLLM >= 0.15 (``VllmConfig._set_cudagraph_sizes``):
        the largest size is min(max_num_seqs x (1 + k) x 2, 512), at most max_num_batched_tokens;
        the grid is 1, 2, 4, every 8 to 248, every 16 from 256.  With k >= 1 a uniform verify batch
        of B requests is B x (k + 1) tokens, and a full graph needs an exact multiple of k + 1: the
        V1 runner with full decode graphs rounds every capture size up to a multiple of k + 1 and
        drops those above the largest (``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``,
        applied only when ``cudagraph_mode.decode_mode() == FULL``); Model Runner V2 (v0.29.0 on)
        adds n x (k + 1) over a grid of request counts n and max_num_batched_tokens to the grid,
        and rounds that list up to a multiple of each query length it captures full graphs for
        (``cudagraph_utils.py``): 1 + k, and with a k schedule every 1 + k of it
        (``schedule_ks``).  Above the largest size a forward runs eagerly."""
        if self.capture_rule == "sglang":
            return self._sglang_capture(k if method is not None else 0)
        engine = self
        if dynamic and self.dynamic_sd_piecewise_on_v1 and self.runner_for(method) == "v1" and self.cudagraph_mode == "full_and_piecewise":
            engine = replace(self, cudagraph_mode="piecewise")
        return engine._with_capture_sizes(max_num_seqs, max_num_batched_tokens, k, method, tuple(schedule_ks) if dynamic else ())

    def _sglang_capture(self, k: int) -> "EngineSpec":
        """SGLang's graphs for one run (``cuda_graph_runner.py``): graphs are captured per request
        count, at ``capture_bs`` without speculation and at ``spec_capture_bs`` with it, for the
        run's uniform batches: decode rows of 1 token, or target-verify rows of ``num_draft_tokens``
        each (1 + k for a chain; a tree's rows are as long as its draft tokens).  ``capture_sizes``
        holds the chain's token counts (request counts x (1 + k)) for the largest size."""
        query = 1 + max(k, 0)
        counts = self.spec_capture_bs if k > 0 else self.capture_bs
        return replace(self, capture_sizes=tuple(n * query for n in counts), decode_query_len=query, graph_counts=tuple(counts))

    def _with_capture_sizes(self, max_num_seqs: int, max_num_batched_tokens: int, k: int, method: Optional[str], schedule_ks: tuple[int, ...]) -> "EngineSpec":
        if self.capture_rule == "fixed":
            return self
        query = 1 + max(k, 0)
        largest = min(max_num_seqs * query * 2, 512, max_num_batched_tokens)
        grid = [s for s in (1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)) if s <= largest]
        if query == 1:
            return replace(self, capture_sizes=tuple(grid), decode_query_len=1)
        if self.runner_for(method) == "v1":
            if self.cudagraph_mode != "full_and_piecewise":  # no full decode graphs: the sizes stay as the grid gives them
                return replace(self, capture_sizes=tuple(grid), decode_query_len=query)
            rounded = sorted({_round_up(s, query) for s in grid if _round_up(s, query) <= largest}) or ([query] if query <= largest else [])
            return replace(self, capture_sizes=tuple(rounded), decode_query_len=query)
        counts = {n for n in (1, 2, 4, *range(8, min(max_num_seqs + 1, 256), 8), *range(256, max_num_seqs + 1, 16)) if n <= max_num_seqs} | {max_num_seqs}
        tiers = tuple(sorted({query} | {1 + ks for ks in schedule_ks}))
        merged = set(grid) | {n * q for n in counts for q in tiers if n * q <= largest}
        if max_num_batched_tokens <= largest:
            merged.add(max_num_batched_tokens)
        return replace(self, capture_sizes=tuple(sorted(merged)), decode_query_len=query, uniform_tiers=tiers)

    def drafter(self, method: Optional[str], tree: bool = False) -> "EngineSpec":
        """How the drafter's passes are issued: vLLM's V1 drafter captures piecewise graphs only
        (``EagleProposer``: "Eagle only supports PIECEWISE cudagraphs"); Model Runner V2's drafter
        replays full graphs for its one-token passes too.  The fixed profiles issue a draft pass as
        the target's batch of the same shape."""
        if self.capture_rule == "fixed":
            return self
        if self.capture_rule == "sglang":
            # EAGLEDraftCudaGraphRunner: the decode steps (topk tokens a request) at the speculative
            # request counts; EAGLEDraftExtendCudaGraphRunner, where the version has it, the extend
            # over the accepted tokens.  Without it (0.4.4) a chain's extend, costed as 1 + k tokens
            # a request, runs eagerly; a tree's extend rows (each request's accepted path) are rarely
            # uniform, so they run eagerly as mixed batches (docs/model.md, "SGLang profiles")
            counts = self.spec_capture_bs or self.capture_bs
            eager_extend = () if self.draft_extend_graph or tree or self.decode_query_len <= 1 else (self.decode_query_len,)
            return replace(self, capture_sizes=tuple(counts), graph_counts=tuple(counts), eager_query_lens=eager_extend, decode_query_len=1)
        if self.runner_for(method) == "v1":
            return replace(self, cudagraph_mode="piecewise") if self.cudagraph_mode == "full_and_piecewise" else self
        return replace(self, uniform_tiers=tuple(sorted(set(self.uniform_tiers) | {1})))

    def _uniform_sizes(self, query) -> tuple[int, ...]:
        """The sizes a uniform batch of ``query`` tokens a request pads to for a full graph: Model
        Runner V2's capture list rounded up to multiples of the query length, else the capture sizes."""
        if not self.uniform_tiers or not _is_length(query):
            return self.capture_sizes
        return tuple(sorted({_round_up(s, query) for s in self.capture_sizes if _round_up(s, query) <= self.max_capture_size}))

    @property
    def max_capture_size(self) -> int:
        return self.capture_sizes[-1] if self.capture_sizes else 0

    @property
    def _graph_counts(self) -> tuple[int, ...]:
        """SGLang's request counts with graphs: the run's (:meth:`for_run`), else the plain decode list."""
        return self.graph_counts or self.capture_bs

    def _query_len(self, uniform_decode) -> int:
        """A uniform batch's query length: as given, else the run's own (1 where none is set)."""
        return uniform_decode if _is_length(uniform_decode) else max(self.decode_query_len, 1)

    def padded(self, tokens: int, full=False) -> int:
        """The capture size a graph-mode batch of ``tokens`` runs at (vLLM pads to it); ``full``: a
        uniform batch replaying a full graph (its query length where known), padded among the
        sizes captured for it.  SGLang pads the request count to the next captured one."""
        if self.cudagraph_mode == "full_decode_only" and full:
            query, counts = self._query_len(full), self._graph_counts
            return counts[bisect.bisect_left(counts, -(-tokens // query))] * query
        sizes = self._uniform_sizes(full) if full else self.capture_sizes
        i = bisect.bisect_left(sizes, tokens)
        return sizes[i]

    def mode(self, tokens: int, uniform_decode) -> str:
        """How a forward of ``tokens`` tokens is issued: "full", "piecewise" or "eager".

        ``uniform_decode``: every row is a decode or verify row with the same query length: that
        length (an int), or True where it is not known, False / 0 for a mixed batch.  The V1
        runner captures full graphs for the run's own query length only (vLLM's dispatcher keys
        them on ``uniform_decode_query_len``); Model Runner V2 for every tier it captured."""
        if self.cudagraph_mode == "full_decode_only":  # SGLang: a graph for uniform batches only, by request count; the rest eager
            query, counts = self._query_len(uniform_decode), self._graph_counts
            if not uniform_decode or query in self.eager_query_lens or not counts or -(-tokens // query) > counts[-1]:
                return "eager"
            return "full"
        if self.cudagraph_mode == "none" or tokens > self.max_capture_size:
            return "eager"
        if self.cudagraph_mode == "full_and_piecewise" and uniform_decode:
            if self.uniform_tiers:
                if _is_length(uniform_decode) and uniform_decode not in self.uniform_tiers:
                    return "piecewise"
                sizes = self._uniform_sizes(uniform_decode)
                if sizes and tokens <= sizes[-1]:
                    return "full"
            elif self.decode_query_len <= 1 or not _is_length(uniform_decode) or uniform_decode == self.decode_query_len:
                return "full"
        return "piecewise"


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _is_length(value) -> bool:
    """A query length (an int), not the bare flag True / False."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def vllm_capture_sizes(largest: int) -> tuple[int, ...]:
    """vLLM V1's default capture sizes up to ``largest``: 1, 2, 4, then every multiple of 8."""
    return tuple(s for s in (1, 2, 4, *range(8, largest + 1, 8)) if s <= largest)


_FIELDS = {
    "version": str, "cudagraph_mode": str, "max_capture_size": int, "graph_kernel_gap_us": float, "stream_kernel_gap_us": float,
    "cpu_kernel_launch_us": float, "cpu_graph_launch_us": float, "cpu_attention_call_us": float,
    "custom_all_reduce_max_bytes": int, "source": str, "async_scheduling": bool, "async_step_gap_us": float,
    "custom_all_reduce_max_mib_by_tp": dict, "symm_mem_all_reduce_max_mib_by_tp": dict, "symm_mem_multimem_tp": list,
    "runner": str, "mrv2_methods": list, "capture_rule": str, "async_methods": list, "dynamic_sd_piecewise_on_v1": bool,
    "adaptive_verification": bool, "released": str,
    "engine": str, "capture_bs": list, "spec_capture_bs": list, "cuda_graph_max_bs": int, "draft_extend_graph": bool,
    "carried_from": list,
}
_OPTIONAL = ("async_scheduling", "async_step_gap_us", "custom_all_reduce_max_mib_by_tp", "symm_mem_all_reduce_max_mib_by_tp", "symm_mem_multimem_tp",
             "runner", "mrv2_methods", "capture_rule", "async_methods", "dynamic_sd_piecewise_on_v1", "adaptive_verification",
             "engine", "capture_bs", "spec_capture_bs", "cuda_graph_max_bs", "draft_extend_graph", "carried_from")
RUNNERS = ("v1", "mrv2")
CAPTURE_RULES = ("fixed", "vllm-0.15", "sglang")
_BY_TP = ("custom_all_reduce_max_mib_by_tp", "symm_mem_all_reduce_max_mib_by_tp")


def _engine(name: str, table: dict, where: str) -> EngineSpec:
    check_table(table, _FIELDS, f"{where}: [\"{name}\"]", tuple(k for k in _FIELDS if k not in _OPTIONAL))
    at = f"{where}: [\"{name}\"]"
    require(table["cudagraph_mode"] in CUDAGRAPH_MODES, at, f"cudagraph_mode = {table['cudagraph_mode']!r}; expected one of {list(CUDAGRAPH_MODES)}")
    for key, kind in _FIELDS.items():
        if kind is float and key in table:
            require(table[key] >= 0, at, f"{key} = {table[key]} must be >= 0")
    require(table["max_capture_size"] >= 1, at, f"max_capture_size = {table['max_capture_size']} must be >= 1")
    require(table["source"].strip() != "", at, "source must say where the numbers come from")
    require(re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["released"]) is not None, at, f"released = {table['released']!r} must be the release's date, YYYY-MM-DD")
    limits = {key: _limits_by_tp(table.get(key, {}), key, at) for key in _BY_TP}
    multimem = table.get("symm_mem_multimem_tp", [])
    require(all(isinstance(tp, int) and tp > 1 for tp in multimem), at, f"symm_mem_multimem_tp = {multimem!r} must list TP degrees > 1")
    require(table.get("runner", "v1") in RUNNERS, at, f"runner = {table.get('runner')!r}; expected one of {list(RUNNERS)}")
    require(table.get("capture_rule", "fixed") in CAPTURE_RULES, at, f"capture_rule = {table.get('capture_rule')!r}; expected one of {list(CAPTURE_RULES)}")
    for key in ("mrv2_methods", "async_methods"):
        require(all(isinstance(m, str) and m for m in table.get(key, [])), at, f"{key} = {table.get(key)!r} must list vLLM method names")
    sglang = _sglang_fields(table, at)
    require(all(isinstance(e, str) and e for e in table.get("carried_from", [])), at, f"carried_from = {table.get('carried_from')!r} must list engine profile names")
    listed = ("mrv2_methods", "async_methods", "capture_bs", "spec_capture_bs", "carried_from")
    lists = {key: tuple(table[key]) for key in listed if key in table}
    values = {key: table[key] for key in _FIELDS if key not in ("max_capture_size", "symm_mem_multimem_tp", *listed, *_BY_TP) and key in table}
    return EngineSpec(
        name=name, capture_sizes=tuple(table["capture_bs"]) if sglang else vllm_capture_sizes(table["max_capture_size"]), **lists,
        custom_all_reduce_max_by_tp=limits["custom_all_reduce_max_mib_by_tp"],
        symm_mem_all_reduce_max_by_tp=limits["symm_mem_all_reduce_max_mib_by_tp"],
        symm_mem_multimem_tp=tuple(multimem), **values,
    )


def _sglang_fields(table: dict, at: str) -> bool:
    """Check an SGLang profile's own fields (and that a vLLM profile has none): its capture lists
    ascending request counts up to cuda_graph_max_bs, its graph mode SGLang's.  True for SGLang."""
    engine = table.get("engine", "vllm")
    require(engine in ENGINE_NAMES, at, f"engine = {engine!r}; expected one of {list(ENGINE_NAMES)}")
    own = ("capture_bs", "spec_capture_bs", "cuda_graph_max_bs", "draft_extend_graph")
    if engine != "sglang":
        require(not any(key in table for key in own) and table.get("capture_rule") != "sglang" and table["cudagraph_mode"] != "full_decode_only",
                at, f"{', '.join(own)}, capture_rule = \"sglang\" and cudagraph_mode = \"full_decode_only\" describe SGLang; set engine = \"sglang\"")
        return False
    for key in ("capture_bs", "spec_capture_bs", "cuda_graph_max_bs"):
        require(key in table, at, f"an SGLang profile needs {key}")
    require(table.get("capture_rule") == "sglang" and table["cudagraph_mode"] in ("full_decode_only", "none"), at,
            'an SGLang profile has capture_rule = "sglang" and cudagraph_mode = "full_decode_only" (or "none")')
    largest = table["cuda_graph_max_bs"]
    for key in ("capture_bs", "spec_capture_bs"):
        counts = table[key]
        require(bool(counts) and all(isinstance(n, int) and n >= 1 for n in counts) and list(counts) == sorted(set(counts)) and counts[-1] <= largest,
                at, f"{key} = {counts!r} must list ascending request counts of at most cuda_graph_max_bs = {largest}")
    require(table["max_capture_size"] == table["capture_bs"][-1], at, f"max_capture_size = {table['max_capture_size']} must be capture_bs's largest, {table['capture_bs'][-1]}")
    return True


def _limits_by_tp(by_tp: dict, key: str, at: str) -> tuple[tuple[int, int], ...]:
    """{"tp": MiB} as sorted (tp, bytes) pairs, refusing anything else."""
    for tp, mib in by_tp.items():
        require(tp.isdigit() and int(tp) > 1 and isinstance(mib, (int, float)) and mib > 0, at,
                f"{key}: {tp} = {mib!r} must map a TP degree > 1 to a size in MiB > 0")
    return tuple(sorted((int(tp), int(mib * 2**20)) for tp, mib in by_tp.items()))


def load_engines(path: Path = ENGINES_FILE) -> dict[str, EngineSpec]:
    doc = read_toml(path, "engine profiles")
    return {name: _engine(name, table, f"engine profiles {path}") for name, table in doc.items()}


@lru_cache(maxsize=4)
def _engines_at(path: str, mtime_ns: int) -> dict[str, EngineSpec]:
    return load_engines(Path(path))


def engines_of(engine: str, path: Path = ENGINES_FILE) -> list[EngineSpec]:
    """The profiles of one engine ("vllm", "sglang"), oldest first."""
    found = [e for e in _engines_at(str(path), Path(path).stat().st_mtime_ns).values() if e.engine == engine]
    return sorted(found, key=lambda e: _version_key(e.version))


def engine_for_version(version: str, path: Path = ENGINES_FILE) -> EngineSpec:
    """The newest vLLM engine profile at or below vLLM ``version`` (the oldest profile for an older one)."""
    engines = engines_of("vllm", path)
    at_or_below = [e for e in engines if _version_key(e.version) <= _version_key(version)]
    return at_or_below[-1] if at_or_below else engines[0]


def sglang_engine_for_version(version: str, path: Path = ENGINES_FILE) -> Optional[EngineSpec]:
    """The SGLang profile of SGLang ``version``: the newest at or below it in its minor series
    (0.4.5 runs sglang-0.4.4; 0.5.2 runs sglang-0.5.1.post3), None where the series has none at
    or below it (an SGLang generation no profile was read for)."""
    wanted = _version_key(version)
    same = [e for e in engines_of("sglang", path) if _version_key(e.version).release[:2] == wanted.release[:2] and _version_key(e.version) <= wanted]
    return same[-1] if same else None


def _version_key(version: str):
    """A release as PEP 440 orders it (vLLM's own versions are PEP 440)."""
    from packaging.version import Version

    return Version(version)


def newest_engine(path: Path = ENGINES_FILE) -> EngineSpec:
    """The newest release the project models: every command's default (``--vllm-version``)."""
    return engines_of("vllm", path)[-1]


DEFAULT_ENGINE = newest_engine().name


def get_engine(name: str = DEFAULT_ENGINE, path: Path = ENGINES_FILE) -> EngineSpec:
    engines = _engines_at(str(path), Path(path).stat().st_mtime_ns)
    if name not in engines:
        raise ConfigError(f"unknown engine '{name}'; known engines: {', '.join(sorted(engines))}")
    return engines[name]

