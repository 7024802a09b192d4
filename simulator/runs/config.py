"""What one simulation run is: plain frozen dataclasses, validated on construction.

:class:`RunConfig` holds a run's workload (:mod:`.workload_kinds`), its speculation
(:mod:`.speculation`) and the deployment's fields, and checks the rules that cross them.  Every
check (:mod:`.checks`) raises :class:`simulator.util.errors.ConfigError` with the field name and the
offending value, so a CLI can print it and exit non-zero before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.profiles.engines import DEFAULT_ENGINE  # the newest vLLM release the engine profiles model
from simulator.profiles.hardware import DEFAULT_DEVICE
from simulator.profiles.step_scales import StepScales
from simulator.runs.checks import is_int, require
from simulator.runs.speculation import SpeculationConfig
from simulator.runs.workload_kinds import PoissonWorkload, Workload

SCHEDULERS = ("sarathi",)
# The serving engine's CPU time per step outside the GPU's kernels (scheduling, input
# preparation, sampling bookkeeping, launches), for vLLM 0.10.1 on an H100: SpecDecode-Bench's
# constant, fitted on its own InstructCoder runs (no row of data/published.toml).  Declared in
# data/calibration/engine_costs.toml; see docs/model.md.  0 reproduces stock Vidur.
DEFAULT_ENGINE_OVERHEAD_MS = 1.2
# The scheduler's limits a RunConfig gets when none are given: what `vllm serve` (vLLM 0.10.1, V1
# engine) picks on an A100 and on GPUs under 70 GiB.  The command lines take vLLM's own rule for
# the device and version instead (simulator/cli/vllm_serve.py, the one place it is written).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_MAX_NUM_SEQS = 256
# vLLM's --quantization methods the cost model covers, and its --kv-cache-dtype choices
QUANTIZATIONS = ("fp8", "mxfp4", "nvfp4")
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one simulation's output (together with the vidur version)."""

    workload: Workload = field(default_factory=PoissonWorkload)
    speculation: SpeculationConfig = field(default_factory=SpeculationConfig)
    model: str = "meta-llama/Llama-2-7b-hf"
    device: str = DEFAULT_DEVICE
    profile_dir: Optional[str] = None  # a Vidur-format directory; None = built-in generator
    scheduler: str = "sarathi"
    # vLLM's max_num_batched_tokens: Sarathi's token budget per step (prompt chunks plus decode tokens)
    chunk_size: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    # vLLM's max_num_seqs: the most requests in the running batch
    batch_size_cap: int = DEFAULT_MAX_NUM_SEQS
    num_kv_blocks: Optional[int] = None  # override the memory planner (e.g. a server's block count)
    block_size: int = 16
    tensor_parallel_size: int = 1
    network_profile_dir: Optional[str] = None  # Vidur-format all_reduce.csv dir; None = the profile's own or built-in
    pipeline_stages: int = 1
    # the run's one seed besides the workload's (workload.seed: arrivals and lengths); what it seeds
    # is named below (acceptance_seed, vidur_seed).  Kept as one field: it is the CSVs' seed column,
    # part of every cache key, and --acceptance-seed on the command lines.
    seed: int = 0
    cache_dir: Optional[str] = None
    # Outside Vidur's op set: LM head + sampler on every logits token, and a fixed per-step
    # engine overhead.  lm_head=False with engine_overhead_ms=0 is stock Vidur's costing.
    lm_head: bool = True
    engine_overhead_ms: float = DEFAULT_ENGINE_OVERHEAD_MS
    # how the engine issues a step's kernels (CUDA graphs, launches): a profile of
    # simulator/profiles/engines.toml, named for the vLLM version it stands for
    engine: str = DEFAULT_ENGINE
    # a server's fitted multipliers on the built-in step model's terms (simulator/profiles/step_scales.py,
    # from python -m simulator.validation fit); None: the built-in profile as it stands
    step_scales: Optional[StepScales] = None
    # precision, as vLLM's --quantization and --kv-cache-dtype: None / "auto" = what the model's
    # config says (its quantization_config; the model's 16-bit dtype for the cache)
    quantization: Optional[str] = None
    kv_cache_dtype: str = "auto"
    # mixture-of-experts targets: vLLM's --enable-expert-parallel (whole experts, E / TP per GPU),
    # and the router's popularity skew (Zipf exponent; 0 = uniform routing, simulator/profiles/moe.py)
    expert_parallel: bool = False
    moe_routing_skew: float = 0.0
    # vLLM's --data-parallel-size for a mixture of experts with expert parallelism: the run is one
    # of this many ranks (each with its own requests: give it one rank's share of the load), whose
    # experts serve every rank's tokens (simulator/profiles/moe.py)
    data_parallel_size: int = 1

    def __post_init__(self):
        require(isinstance(self.device, str) and self.device.strip() != "", "device", self.device, "must be a device name such as 'a100'")
        object.__setattr__(self, "device", self.device.strip().lower())  # device names are matched case-insensitively
        require(
            self.scheduler in SCHEDULERS,
            "scheduler",
            self.scheduler,
            "only Vidur's Sarathi scheduler is modelled (speculative runs and their baselines alike)",
        )
        for name in ("chunk_size", "batch_size_cap", "block_size", "tensor_parallel_size", "pipeline_stages"):
            value = getattr(self, name)
            require(is_int(value) and value > 0, name, value, "must be a positive integer")
        if self.num_kv_blocks is not None:
            require(is_int(self.num_kv_blocks) and self.num_kv_blocks > 0, "num_kv_blocks", self.num_kv_blocks, "must be a positive integer")
        require(is_int(self.seed) and self.seed >= 0, "seed", self.seed, "must be an integer >= 0")
        require(isinstance(self.lm_head, bool), "lm_head", self.lm_head, "must be true or false")
        require(
            isinstance(self.engine_overhead_ms, (int, float)) and not isinstance(self.engine_overhead_ms, bool)
            and math.isfinite(self.engine_overhead_ms) and self.engine_overhead_ms >= 0,
            "engine_overhead_ms",
            self.engine_overhead_ms,
            "must be a finite number of milliseconds >= 0",
        )
        self._check_draft_tensor_parallel()
        schedule = self.speculation.k_schedule
        if schedule is not None and schedule[-1][1] < self.batch_size_cap:
            raise ConfigError(
                f"k_schedule row {len(schedule) - 1} {list(schedule[-1])}: ends at batch size {schedule[-1][1]}, but the batch "
                f"holds up to batch_size_cap = {self.batch_size_cap} requests; batch sizes {schedule[-1][1] + 1}..{self.batch_size_cap} have no k"
            )
        if self.network_profile_dir is not None:
            require(Path(self.network_profile_dir).is_dir(), "network_profile_dir", self.network_profile_dir, "is not a directory")
        require(self.pipeline_stages == 1, "pipeline_stages", self.pipeline_stages, "only pipeline parallelism 1 is modelled")
        if self.profile_dir is not None:
            require(Path(self.profile_dir).is_dir(), "profile_dir", self.profile_dir, "is not a directory")
        require(isinstance(self.engine, str) and self.engine.strip() != "", "engine", self.engine, "must name an engine profile such as 'vllm-0.10.1'")
        require(self.step_scales is None or isinstance(self.step_scales, StepScales), "step_scales", self.step_scales, "must be a StepScales or None")
        if self.speculation.adaptive_verification and (self.profile_dir is not None or self.speculation.draft_profile_dir is not None):
            raise ConfigError(
                "adaptive_verification with a profile directory: its cost tables are profiled on the built-in step model "
                "(a Vidur-format profile cannot time a step outside a run); drop the profile directory or adaptive verification"
            )
        if self.step_scales is not None and (self.profile_dir is not None or self.speculation.draft_profile_dir is not None):
            raise ConfigError("step_scales with a profile directory: fitted scales multiply the built-in profile's terms, and a Vidur-format profile has tables of its own; drop one")
        require(self.quantization is None or self.quantization in QUANTIZATIONS, "quantization", self.quantization, f"must be one of {QUANTIZATIONS} (or unset: the model's own)")
        require(self.kv_cache_dtype in KV_CACHE_DTYPES, "kv_cache_dtype", self.kv_cache_dtype, f"must be one of {KV_CACHE_DTYPES}")
        require(isinstance(self.expert_parallel, bool), "expert_parallel", self.expert_parallel, "must be true or false")
        require(is_int(self.data_parallel_size) and self.data_parallel_size > 0, "data_parallel_size", self.data_parallel_size, "must be a positive integer")
        if self.speculation.k_schedule and self.data_parallel_size > 1:
            # vllm/config/vllm.py (v0.30.0), _maybe_disable_dynamic_sd_for_data_parallel: ranks could pick different k and diverge
            raise ConfigError(
                f"k_schedule with data_parallel_size = {self.data_parallel_size}: vLLM drops num_speculative_tokens_per_batch_size under data "
                f"parallelism and runs the static num_speculative_tokens = {self.speculation.num_speculative_tokens}; simulate that k instead"
            )
        require(
            isinstance(self.moe_routing_skew, (int, float)) and not isinstance(self.moe_routing_skew, bool)
            and math.isfinite(self.moe_routing_skew) and self.moe_routing_skew >= 0,
            "moe_routing_skew", self.moe_routing_skew, "must be a finite number >= 0 (0 = uniform routing)",
        )
        self._read_local_models()

    def _check_draft_tensor_parallel(self) -> None:
        """The draft-TP rule, written once for every front end (each maps the field names to its
        own flags or keys): vLLM shards a draft network over one GPU or over the target's GPUs, and
        a proposer without a network has nothing to shard."""
        draft_tp = self.speculation.draft_tensor_parallel_size
        if draft_tp is None:
            return
        require(
            is_int(draft_tp) and draft_tp in (1, self.tensor_parallel_size),
            "draft_tensor_parallel_size",
            draft_tp,
            f"must be 1 or the target's tensor_parallel_size ({self.tensor_parallel_size})",
        )
        kind = self.speculation.kind
        require(
            kind.runs_network,
            "draft_tensor_parallel_size",
            draft_tp,
            f"proposer = '{kind.name}' runs no draft network (a draft model, a head, MTP layers, a drafter) to shard; drop it",
        )

    def _read_local_models(self) -> None:
        """A model or draft given as a local ``config.json`` path is read here, when the run is built
        (and again when a pickled run arrives in another process): resolution then looks both up as
        values (:func:`simulator.vidur.models.known_model`), and a bad file is refused before anything
        runs.  Catalog names need no reading (Vidur loads only for a path)."""
        from simulator.models.files import looks_like_path

        for name in (self.model, self.speculation.draft_model):
            if isinstance(name, str) and name and looks_like_path(name):
                from simulator.vidur.models import model_config

                model_config(name)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._read_local_models()

    @property
    def acceptance_seed(self) -> int:
        """The seed of the acceptance draws (:class:`simulator.speculative.acceptance.AcceptanceSampler`):
        the only randomness of a run besides its workload's."""
        return self.seed

    @property
    def vidur_seed(self) -> int:
        """The seed handed to Vidur's simulation config.  Vidur reads it only in its own entry point
        (vidur/main.py's set_seeds), which a run never calls, so it changes no number; it is the
        acceptance seed so a config printed from Vidur names the same seed as the run."""
        return self.seed

    @property
    def draft_tensor_parallel_size(self) -> int:
        """GPUs the draft model runs on (vLLM's default: the target's)."""
        draft_tp = self.speculation.draft_tensor_parallel_size
        return self.tensor_parallel_size if draft_tp is None else draft_tp

    def to_dict(self) -> dict:
        data = _as_dict(self)
        data["workload"]["kind"] = type(self.workload).__name__
        return data


_SCALARS = (int, float, str, bool, type(None))


def _as_dict(value):
    """What ``dataclasses.asdict`` gives for a config (frozen dataclasses, tuples, scalars), without
    its deep copy of every element: a closed loop's lengths are hundreds of numbers, and a sweep
    keys every run by its config.  Immutable tuples of scalars are returned as they are."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_dict(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        if hasattr(value, "_fields"):  # a named tuple, rebuilt as asdict rebuilds it
            return type(value)(*[_as_dict(v) for v in value])
        return value if all(type(v) in _SCALARS for v in value) else tuple(_as_dict(v) for v in value)
    if isinstance(value, list):
        return [_as_dict(v) for v in value]
    if isinstance(value, dict):
        return {_as_dict(k): _as_dict(v) for k, v in value.items()}
    return value
