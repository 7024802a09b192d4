"""The pays-off spec (``data/paysoff.toml``): where speculation stops paying, and which k to run.

Strict like the seed sweep's spec: unknown sections or keys, wrong types, repeated values and
acceptance profiles too short for the largest k are :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from simulator.config import ATTENTION_MODES, PROPOSERS
from simulator.errors import ConfigError
from simulator.inputs import check_table, distinct_values, non_empty_str, non_negative_int, parse_toml, positive_int, positive_number, probability, read_text

_SECTIONS = {
    "run": ({"model": str, "device": str, "seed": int, "batch_size_cap": int, "chunk_size": int}, None),
    "workload": ({"prompt_tokens": int, "output_tokens": int, "length_spread": float, "seed": int}, None),
    "closed_loop": ({"concurrency": list, "requests_per_slot": int, "min_requests": int}, None),
    "poisson": ({"arrival_rate": list, "num_requests": int, "num_speculative_tokens": list}, None),
    "grid": ({"num_speculative_tokens": list, "attention": list, "proposer": str}, None),
    "acceptance": ({"iid": list, "profile": list}, ("iid",)),
}
_PROFILE_FIELDS = {"name": str, "label": str, "per_position": list, "source": str, "method": str, "draft_model": str, "target_model": str}
_PROFILE_REQUIRED = ("name", "label", "per_position", "source")
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


@dataclass(frozen=True)
class AcceptanceProfile:
    """One acceptance input: i.i.d. ``rate`` or a published ``per_position`` profile."""

    name: str  # CSV key, e.g. "iid-0.7" or "eagle3-llama3.1-8b"
    label: str
    rate: float | None = None
    per_position: tuple[float, ...] | None = None
    source: str = ""
    method: str = "ngram"  # vLLM's speculative_config method for the recommendation
    draft_model: str | None = None
    target_model: str | None = None  # the model a draft or head serves (None: the sweep's model)


@dataclass(frozen=True)
class PaysoffSpec:
    model: str
    device: str
    seed: int
    batch_size_cap: int
    chunk_size: int  # Sarathi's token budget per step (vLLM's max_num_batched_tokens)
    prompt_tokens: int
    output_tokens: int
    length_spread: float  # closed-loop lengths uniform in [(1 - s) x, (1 + s) x]
    workload_seed: int
    concurrency: tuple[int, ...]
    requests_per_slot: int
    min_requests: int
    arrival_rates: tuple[float, ...]
    poisson_requests: int
    poisson_k: tuple[int, ...]
    speculative_tokens: tuple[int, ...]
    attention_modes: tuple[str, ...]
    proposer: str
    profiles: tuple[AcceptanceProfile, ...]


def load_paysoff_spec(path) -> PaysoffSpec:
    path = Path(path)
    return parse_paysoff_spec(read_text(path, "pays-off spec"), str(path))


def parse_paysoff_spec(text: str, source: str = "<spec>") -> PaysoffSpec:
    doc = parse_toml(text, source, "pays-off spec")
    where = f"pays-off spec {source}"
    for section in doc:
        if section not in _SECTIONS:
            raise ConfigError(f"{where}: unknown section [{section}]; expected {sorted(_SECTIONS)}")
    for section, (fields, required) in _SECTIONS.items():
        if section not in doc:
            raise ConfigError(f"{where}: missing section [{section}]")
        check_table(doc[section], fields, f"{where}: [{section}]", required)

    def scalar(section, key, check, what):
        value = doc[section][key]
        if not check(value):
            raise ConfigError(f"{where}: [{section}] {key} = {value!r} {what}")
        return value

    def values(section, key, check, what, convert=lambda v: v):
        return distinct_values(doc[section][key], f"{where}: [{section}] {key}", check, what, convert)

    ks = values("grid", "num_speculative_tokens", positive_int, "is not a positive integer (k = 0 runs are the baselines)")
    poisson_k = values("poisson", "num_speculative_tokens", positive_int, "is not a positive integer")
    extra = [k for k in poisson_k if k not in ks]
    if extra:
        raise ConfigError(f"{where}: [poisson] num_speculative_tokens has {extra}, which [grid] num_speculative_tokens does not")
    spread = float(scalar("workload", "length_spread", lambda v: 0 <= v < 1, "must be in [0, 1)"))
    profiles = [
        AcceptanceProfile(name=f"iid-{alpha:g}", label=f"i.i.d. {alpha:g}", rate=alpha)
        for alpha in values("acceptance", "iid", probability, "is not a probability in [0, 1]", float)
    ]
    for i, table in enumerate(doc["acceptance"].get("profile", [])):
        at = f"{where}: [[acceptance.profile]] {i}"
        check_table(table, _PROFILE_FIELDS, at, _PROFILE_REQUIRED)
        name = table["name"]
        if not _NAME.match(name) or name.startswith("iid-"):
            raise ConfigError(f"{at}: name = {name!r} must be lower-case letters, digits, '.' and '-', not starting with 'iid-'")
        rates = table["per_position"]
        for j, p in enumerate(rates):
            if not probability(p):
                raise ConfigError(f"{at}: per_position[{j}] = {p!r} is not a probability in [0, 1]")
        if len(rates) < max(ks):
            raise ConfigError(f"{at}: per_position has {len(rates)} entries; k up to {max(ks)} needs {max(ks)}")
        method = table.get("method", "ngram")
        if method not in PROPOSERS:
            raise ConfigError(f"{at}: method = {method!r} must be one of {list(PROPOSERS)}")
        for key in ("label", "source"):
            if not non_empty_str(table[key]):
                raise ConfigError(f"{at}: {key} must be a non-empty string")
        if method != "ngram" and not table.get("draft_model"):
            raise ConfigError(f"{at}: method = {method!r} needs draft_model (the draft or EAGLE head vLLM loads)")
        profiles.append(
            AcceptanceProfile(
                name, table["label"], None, tuple(float(p) for p in rates), table["source"], method, table.get("draft_model"), table.get("target_model")
            )
        )
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: [acceptance] profile names repeat: {names}")
    proposer = scalar("grid", "proposer", lambda v: v == "ngram", "must be 'ngram' (the sweep costs proposals as n-gram lookups)")
    return PaysoffSpec(
        model=scalar("run", "model", non_empty_str, "must be a non-empty string"),
        device=scalar("run", "device", non_empty_str, "must be a non-empty string"),
        seed=scalar("run", "seed", non_negative_int, "must be an integer >= 0"),
        batch_size_cap=scalar("run", "batch_size_cap", positive_int, "must be a positive integer"),
        chunk_size=scalar("run", "chunk_size", positive_int, "must be a positive integer"),
        prompt_tokens=scalar("workload", "prompt_tokens", positive_int, "must be a positive integer"),
        output_tokens=scalar("workload", "output_tokens", lambda v: positive_int(v) and v > 1, "must be an integer > 1"),
        length_spread=spread,
        workload_seed=scalar("workload", "seed", non_negative_int, "must be an integer >= 0"),
        concurrency=values("closed_loop", "concurrency", positive_int, "is not a positive integer"),
        requests_per_slot=scalar("closed_loop", "requests_per_slot", positive_int, "must be a positive integer"),
        min_requests=scalar("closed_loop", "min_requests", positive_int, "must be a positive integer"),
        arrival_rates=values("poisson", "arrival_rate", positive_number, "is not a positive number of requests per second", float),
        poisson_requests=scalar("poisson", "num_requests", positive_int, "must be a positive integer"),
        poisson_k=poisson_k,
        speculative_tokens=ks,
        attention_modes=values("grid", "attention", lambda v: v in ATTENTION_MODES, f"is not one of {list(ATTENTION_MODES)}"),
        proposer=proposer,
        profiles=tuple(profiles),
    )
