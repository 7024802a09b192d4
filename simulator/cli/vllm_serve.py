"""What ``vllm serve`` does with what a user leaves out, by vLLM version: the one place the command
lines (``python -m simulator``, ``python -m simulator.paysoff``) and the published rows read it.

* **Scheduler limits.** Without ``--max-num-seqs`` / ``--max-num-batched-tokens``, vLLM's
  ``EngineArgs`` picks them from the GPU (``get_batch_defaults``, the ``OPENAI_API_SERVER`` usage
  context ``vllm serve`` runs under).  :data:`SCHEDULER_RULES` holds that rule as each release
  range states it, read from ``vllm/engine/arg_utils.py`` of the releases named there; a command
  that runs "a vLLM server" must run it with these limits, or the same deployment gets two answers.
* **The version a run names.** ``--vllm-version`` picks the engine profile
  (:func:`simulator.profiles.engines.engine_for_version`: CUDA graphs, launches, async scheduling)
  and the scheduler rule; the run's configuration records both (``RunConfig.engine`` and the
  limits themselves), so the result cache and provenance see what was simulated, and this module
  is not part of the model hash.
* **What a pasted command names.** A ``vllm serve`` line is printed for the user to paste:
  :func:`served_model_name` names the model as vLLM loads it, not as a local ``config.json`` path.

Versions are compared as PEP 440 versions (:mod:`packaging.version`), as vLLM's own are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from packaging.version import InvalidVersion, Version

from simulator.profiles.engines import DEFAULT_ENGINE
from simulator.util.errors import ConfigError


@dataclass(frozen=True)
class Tier:
    """GPUs with at least ``min_memory_gib`` whose name contains none of ``excluded`` get these limits."""

    min_memory_gib: float
    max_num_seqs: int
    max_num_batched_tokens: int
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchedulerRule:
    """``vllm serve``'s default limits from release ``since`` on: the first tier a GPU meets, else ``otherwise``."""

    since: str
    tiers: tuple[Tier, ...]
    otherwise: tuple[int, int]  # (max_num_seqs, max_num_batched_tokens)
    source: str


# Read from vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults, or the block of
# _set_default_args before it moved there) of each release named; the OPENAI_API_SERVER values.
# "a100" is vLLM's own name check (PR #17885: larger limits cost A100 throughput).  v0.33.0 also
# keeps GB10 (compute capability 12.1) on the small tier; no such device is modelled.
SCHEDULER_RULES = (
    SchedulerRule(
        since="0.10.1",
        tiers=(Tier(70, 1024, 8192, excluded=("a100",)),),
        otherwise=(256, 2048),
        source="vllm/engine/arg_utils.py of v0.10.1, the same in v0.11.0, v0.14.0, v0.15.0, v0.18.0, v0.20.0, v0.24.0 and v0.27.0: "
        "1024 and 8192 on a GPU of 70 GiB or more that is not an A100, else 256 and 2048",
    ),
    SchedulerRule(
        since="0.28.0",
        tiers=(Tier(160, 1024, 16384), Tier(70, 1024, 8192, excluded=("a100",))),
        otherwise=(256, 2048),
        source="vllm/engine/arg_utils.py of v0.28.0 (the same in v0.30.0, v0.32.0 and v0.33.0): a tier for GPUs of 160 GiB or "
        "more (1024 and 16384) before v0.10.1's rule",
    ),
)
OLDEST_VERSION = SCHEDULER_RULES[0].since  # also the oldest engine profile (simulator/profiles/engines.toml)
# The first release whose SpeculativeConfig has num_speculative_tokens_per_batch_size (vllm/config/
# speculative.py declares it in v0.24.0 and not in v0.23.0): older ones refuse the key.
DYNAMIC_SD_VERSION = "0.24.0"


def default_version() -> str:
    """The vLLM version a command runs when none is named: the default engine profile's."""
    from simulator.profiles.engines import get_engine

    return get_engine(DEFAULT_ENGINE).version


def parse_version(text: str, flag: str = "--vllm-version") -> str:
    """A vLLM release as the user wrote it (``0.14.0``, ``v0.24.0``), normalised; refused below
    the oldest release the simulator models and above the newest's minor series (a 0.30.x patch
    runs as 0.30.0)."""
    try:
        version = Version(str(text).strip())
    except InvalidVersion:
        raise ConfigError(f"{flag} {text}: not a vLLM version; give a release such as {default_version()}") from None
    if version < Version(OLDEST_VERSION):
        raise ConfigError(
            f"{flag} {text}: older than vLLM {OLDEST_VERSION}, the oldest the simulator models (its V1 engine profiles, "
            f"simulator/profiles/engines.toml); give {OLDEST_VERSION} or later"
        )
    newest = Version(default_version())
    if (version.major, version.minor) > (newest.major, newest.minor):
        raise ConfigError(
            f"{flag} {text}: newer than vLLM {newest}, the newest release the simulator models (simulator/profiles/engines.toml); "
            f"its engine changes are not read yet: give {newest} or older"
        )
    return str(version)


def at_least(version: str, release: str) -> bool:
    """``version`` is ``release`` or later."""
    return Version(version) >= Version(release)


def engine_name(version: str) -> str:
    """The engine profile a run of vLLM ``version`` uses: the newest at or below it."""
    from simulator.profiles.engines import engine_for_version

    return engine_for_version(version).name


def scheduler_rule(version: str) -> SchedulerRule:
    """The rule of vLLM ``version``: the newest that starts at or below it (the oldest for an older one)."""
    return ([rule for rule in SCHEDULER_RULES if Version(rule.since) <= Version(version)] or [SCHEDULER_RULES[0]])[-1]


def scheduler_defaults(device: str, version: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) that ``vllm serve`` of ``version`` picks on ``device``
    when neither is given."""
    from simulator.profiles.hardware import get_device

    name = device.strip().lower()
    memory = get_device(name).datasheet.memory_gib
    rule = scheduler_rule(version)
    for tier in rule.tiers:
        if memory >= tier.min_memory_gib and not any(word in name for word in tier.excluded):
            return tier.max_num_seqs, tier.max_num_batched_tokens
    return rule.otherwise


@dataclass(frozen=True)
class Limits:
    """The scheduler limits a command runs with, and where each came from."""

    max_num_seqs: int
    max_num_batched_tokens: int
    seqs_given: bool
    tokens_given: bool
    device: str
    version: str

    def describe(self) -> str:
        """One line: each limit and whether it is vLLM's default or the user's."""
        defaults = scheduler_defaults(self.device, self.version)
        origin = f"vllm serve {self.version}'s default on {self.device}"

        def one(flag: str, value: int, given: bool, default: int) -> str:
            if not given:
                return f"{flag} {value} ({origin})"
            return f"{flag} {value} (given; {origin} is {default})" if value != default else f"{flag} {value} (given, = {origin})"

        return ", ".join(
            (
                one("--max-num-seqs", self.max_num_seqs, self.seqs_given, defaults[0]),
                one("--max-num-batched-tokens", self.max_num_batched_tokens, self.tokens_given, defaults[1]),
            )
        )

    @property
    def serve_flags(self) -> str:
        """The limits as ``vllm serve`` flags (always written: a pasted line then runs what was simulated)."""
        return f"--max-num-seqs {self.max_num_seqs} --max-num-batched-tokens {self.max_num_batched_tokens}"


def limits(device: str, version: str, max_num_seqs: Optional[int], max_num_batched_tokens: Optional[int]) -> Limits:
    """The limits a command runs with: the flags given, else ``vllm serve``'s for the device and
    version (an unknown ``--device`` is refused here, naming the flag)."""
    from simulator.profiles.hardware import get_device, load_devices

    try:
        get_device(device.strip().lower())
    except ConfigError:
        raise ConfigError(f"--device {device}: unknown; use one of {', '.join(sorted(load_devices()))} (any case)") from None
    seqs, tokens = scheduler_defaults(device, version)
    return Limits(
        max_num_seqs=seqs if max_num_seqs is None else max_num_seqs,
        max_num_batched_tokens=tokens if max_num_batched_tokens is None else max_num_batched_tokens,
        seqs_given=max_num_seqs is not None,
        tokens_given=max_num_batched_tokens is not None,
        device=device.strip().lower(),
        version=version,
    )


def check_concurrency(concurrency: Sequence[int], limits: Limits, flag: str) -> None:
    """A client's requests in flight fit the server's running batch.  ``vllm serve`` would queue the
    rest at the server: a different experiment from the one the flag names, so it is refused with
    both fixes (the one validator of both command lines; the pays-off spec checks its own keys)."""
    too_big = sorted(c for c in concurrency if c > limits.max_num_seqs)
    if not too_big:
        return
    origin = "" if limits.seqs_given else f" (vllm serve {limits.version}'s default on {limits.device})"
    shown = too_big[0] if len(too_big) == 1 else too_big
    raise ConfigError(
        f"{flag} {shown} exceeds --max-num-seqs {limits.max_num_seqs}{origin}: the requests beyond {limits.max_num_seqs} would "
        f"wait in the server's queue, not run; raise --max-num-seqs to {too_big[-1]} or lower {flag} to {limits.max_num_seqs}"
    )


def served_model_name(model: str, given: Optional[str] = None) -> str:
    """The model a printed ``vllm serve`` line names: ``given`` (``--served-model-name``), else for a
    local ``config.json`` its ``_name_or_path`` (the Hugging Face name it was saved from), else
    the Hugging Face repository of ``model`` (Vidur's few names that are not one are mapped)."""
    if given:
        return given
    from simulator.util.inputs import read_json
    from simulator.models.files import config_file, looks_like_path
    from simulator.vidur.models import repository

    path = config_file(model)
    if path is None:
        return repository(model)
    name = read_json(path, "config.json").get("_name_or_path")
    if isinstance(name, str) and name.strip() and not looks_like_path(name.strip()):
        return name.strip()
    return model


def served_name_hint(served: str) -> str:
    """Why a printed ``vllm serve`` line names a local path, and the fix ("" when it names a
    repository): a local config.json without ``_name_or_path`` leaves only its path to print."""
    from simulator.models.files import looks_like_path

    if not looks_like_path(served):
        return ""
    return (f"note: the vllm serve line names the local path {served}: its config.json has no _name_or_path; pass "
            "--served-model-name NAME (the repository or folder vLLM loads) to name it")
