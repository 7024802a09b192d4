"""The sweep spec: a small TOML file that names every run the site publishes.

Parsing is strict (unknown sections or keys, wrong types, duplicates and speculative loads
without a baseline are all :class:`ConfigError`), because a typo in a spec would otherwise
silently publish a different grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from simulator.speculative.verify_cost import ATTENTION_MODES
from simulator.runs.deployment import Deployment, SchedulerLimits, StepCosts
from simulator.speculative import proposers
from simulator.util.errors import ConfigError
from simulator.util.inputs import check_table, distinct_values, non_empty_str as _non_empty_str, non_negative_int as _non_negative_int
from simulator.util.inputs import parse_toml, read_text, positive_int as _positive_int, positive_number as _positive_number, probability as _probability

_SECTIONS = {
    "run": {"model": str, "device": str, "seed": int, "max_num_seqs": int, "max_num_batched_tokens": int},
    "workload": {"num_requests": int, "prompt_tokens": int, "output_tokens": int, "seed": int},
    "grid": {"arrival_rate": list, "acceptance_rate": list, "num_speculative_tokens": list, "attention": list, "proposer": list},
    "baseline": {"arrival_rate": list},
    "progress": {
        "acceptance_rate": list,
        "num_speculative_tokens": list,
        "num_requests": int,
        "prompt_tokens": int,
        "output_tokens": int,
        "interarrival_s": float,
    },
}
_REQUIRED_SECTIONS = ("run", "workload", "grid", "baseline")
# keys a section may leave out (every other key is required); absent scheduler limits take RunConfig's defaults
_OPTIONAL_KEYS = {"run": ("max_num_seqs", "max_num_batched_tokens")}


@dataclass(frozen=True)
class WorkloadSpec:
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    seed: int


@dataclass(frozen=True)
class ProgressSpec:
    """Batch-1 runs (one request in flight) that check simulated progress per verify step
    against the closed form; arrivals are ``interarrival_s`` apart so requests never overlap."""

    acceptance_rates: tuple[float, ...]
    speculative_tokens: tuple[int, ...]
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    interarrival_s: float


@dataclass(frozen=True)
class SweepSpec:
    model: str
    device: str
    seed: int
    workload: WorkloadSpec
    arrival_rates: tuple[float, ...]
    acceptance_rates: tuple[float, ...]
    speculative_tokens: tuple[int, ...]
    attention_modes: tuple[str, ...]
    proposers: tuple[str, ...]
    baseline_rates: tuple[float, ...]
    progress: Optional[ProgressSpec] = None
    # vLLM's scheduler limits (RunConfig.batch_size_cap / chunk_size); None = RunConfig's defaults
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None

    def deployment(self, profile_dir: Optional[str] = None) -> Deployment:
        """The sweep's server (no speculation): its model on its device with the limits it sets
        (the run's defaults where it sets none) and, given one, a Vidur-format profile."""
        given = {"max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens}
        limits = SchedulerLimits(**{key: value for key, value in given.items() if value is not None})
        return Deployment(model=self.model, device=self.device, limits=limits, costs=StepCosts(profile_dir=profile_dir))

    @property
    def num_runs(self) -> int:
        grid = len(self.arrival_rates) * len(self.acceptance_rates) * len(self.speculative_tokens)
        return grid * len(self.attention_modes) * len(self.proposers) + len(self.baseline_rates)


# the seed sweep runs one model and no draft network: the proposers that draft with nothing
_NETWORKLESS = tuple(k.name for k in proposers.KINDS if not k.runs_network)


def _networkless(name) -> bool:
    return isinstance(name, str) and name in _NETWORKLESS


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec file."""
    path = Path(path)
    return parse_spec(read_text(path, "sweep spec"), source=str(path))


def parse_spec(text: str, source: str = "<spec>") -> SweepSpec:
    doc = parse_toml(text, source, "sweep spec")
    _check_shape(doc, source)

    def value(section: str, key: str):
        return doc[section][key]

    def scalar(section: str, key: str, check, what: str):
        v = value(section, key)
        if not check(v):
            raise ConfigError(f"sweep spec {source}: [{section}] {key} = {v!r} {what}")
        return v

    def optional(section: str, key: str):
        return scalar(section, key, _positive_int, "must be a positive integer") if key in doc[section] else None

    def values(section: str, key: str, check, what: str, convert=lambda v: v) -> tuple:
        return distinct_values(value(section, key), f"sweep spec {source}: [{section}] {key}", check, what, convert)

    workload = WorkloadSpec(
        num_requests=scalar("workload", "num_requests", _positive_int, "must be a positive integer"),
        prompt_tokens=scalar("workload", "prompt_tokens", _positive_int, "must be a positive integer"),
        output_tokens=scalar("workload", "output_tokens", _positive_int, "must be a positive integer"),
        seed=scalar("workload", "seed", _non_negative_int, "must be an integer >= 0"),
    )
    spec = SweepSpec(
        model=scalar("run", "model", _non_empty_str, "must be a non-empty string"),
        device=scalar("run", "device", _non_empty_str, "must be a non-empty string"),
        seed=scalar("run", "seed", _non_negative_int, "must be an integer >= 0"),
        workload=workload,
        arrival_rates=values("grid", "arrival_rate", _positive_number, "is not a positive number of requests per second", float),
        acceptance_rates=values("grid", "acceptance_rate", _probability, "is not a probability in [0, 1]", float),
        speculative_tokens=values("grid", "num_speculative_tokens", _positive_int, "is not a positive integer (baselines go in [baseline])"),
        attention_modes=values("grid", "attention", lambda v: v in ATTENTION_MODES, f"is not one of {list(ATTENTION_MODES)}"),
        proposers=values("grid", "proposer", _networkless, f"is not a proposer the seed sweep can run: it runs no draft network, so one of {', '.join(_NETWORKLESS)}"),
        baseline_rates=values("baseline", "arrival_rate", _positive_number, "is not a positive number of requests per second", float),
        progress=None,
        max_num_seqs=optional("run", "max_num_seqs"),
        max_num_batched_tokens=optional("run", "max_num_batched_tokens"),
    )
    missing = [r for r in spec.arrival_rates if r not in spec.baseline_rates]
    if missing:
        shown = ", ".join(f"{r:g}" for r in missing)
        raise ConfigError(
            f"sweep spec {source}: [grid] has speculative runs at {shown} req/s but [baseline] arrival_rate has no "
            f"baseline there; speedups need a no-speculation run at every load"
        )
    extra = [r for r in spec.baseline_rates if r not in spec.arrival_rates]
    if extra:
        shown = ", ".join(f"{r:g}" for r in extra)
        raise ConfigError(f"sweep spec {source}: [baseline] has a baseline at {shown} req/s but [grid] has no speculative runs there to compare")
    if "progress" in doc:
        p = "progress"
        progress = ProgressSpec(
            acceptance_rates=values(p, "acceptance_rate", _probability, "is not a probability in [0, 1]", float),
            speculative_tokens=values(p, "num_speculative_tokens", _positive_int, "is not a positive integer"),
            num_requests=scalar(p, "num_requests", _positive_int, "must be a positive integer"),
            prompt_tokens=scalar(p, "prompt_tokens", _positive_int, "must be a positive integer"),
            output_tokens=scalar(p, "output_tokens", lambda v: _positive_int(v) and v > 1, "must be an integer > 1"),
            interarrival_s=float(scalar(p, "interarrival_s", _positive_number, "must be a positive number of seconds")),
        )
        spec = SweepSpec(**{**spec.__dict__, "progress": progress})
    return spec


def _check_shape(doc: dict, source: str) -> None:
    for section in doc:
        if section not in _SECTIONS:
            raise ConfigError(f"sweep spec {source}: unknown section [{section}]; expected {sorted(_SECTIONS)}")
    for section in _REQUIRED_SECTIONS:
        if section not in doc:
            raise ConfigError(f"sweep spec {source}: missing section [{section}]")
    for section, body in doc.items():
        optional = _OPTIONAL_KEYS.get(section, ())
        required = tuple(key for key in _SECTIONS[section] if key not in optional)
        check_table(body, _SECTIONS[section], f"sweep spec {source}: [{section}]", required)


