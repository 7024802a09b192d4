"""vLLM's ``--speculative-config`` as input: the JSON a user passes to ``vllm serve``, read the way
vLLM reads it and mapped through the proposer registry onto the command's own flags.

Both command lines take it (``python -m simulator`` simulates it; ``python -m simulator.paysoff``
reads the deployment and the k its acceptance was measured at).  :func:`parse` checks the JSON
with :mod:`json` and the registry's facts: ``method`` (vLLM's names and aliases; absent, it is
inferred as vLLM 0.24.0's ``SpeculativeConfig`` infers it: ``ngram`` for ``"model": "ngram"``,
else ``draft_model``), ``model``, ``num_speculative_tokens``, ``draft_tensor_parallel_size``,
``num_speculative_tokens_per_batch_size``, the method's option keys (``prompt_lookup_max``,
``suffix_decoding_*``) and its fixed keys (``parallel_drafting``).  Anything else is refused in
one line: a key of another method, a vLLM key the simulator does not model, or an unknown key.
:func:`apply` then sets the command's flags from it, refusing a flag given as well (two values
for one setting), so every later check and message is the flags' own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.speculative import proposers
from simulator.speculative.proposers.base import ProposerKind

FLAG = "--speculative-config"
EXAMPLE = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'
GENERAL_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "num_speculative_tokens_per_batch_size", "enable_adaptive_verification")
# vLLM keys that change no simulated number (which revision of the same weights is loaded)
NEUTRAL_KEYS = ("revision", "code_revision")
# SpeculativeConfig's other user-facing keys (vLLM 0.10.1 to 0.33.0): accepted by vLLM, not modelled here
NOT_MODELLED_KEYS = (
    "enforce_eager", "quantization", "max_model_len", "disable_by_batch_size", "disable_padded_drafter_batch", "disable_logprobs",
    "disable_log_stats", "enable_chunked_prefill", "speculative_token_tree", "tensor_parallel_size", "moe_backend", "attention_backend",
    "kv_cache_dtype", "index_share_for_mtp_iteration", "disable_eagle_block_drop", "disable_lookahead_block_hashes",
    "draft_lm_head_quantization", "use_local_argmax_reduction", "use_heterogeneous_vocab", "draft_load_config", "rejection_sample_method",
    "synthetic_acceptance_rates", "synthetic_acceptance_length", "draft_sample_method",
    "dspark_draft_topk", "xpress_topc", "fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k",
)
NGRAM_MODEL_NAMES = ("ngram", "[ngram]")  # vLLM's legacy way to ask for n-gram


@dataclass(frozen=True)
class SpeculativeInput:
    """What a ``--speculative-config`` sets, in the simulator's terms."""

    kind: ProposerKind
    k: int
    options: tuple  # (name, value) pairs the config set (vLLM's reading of absent keys included)
    draft_model: Optional[str]
    draft_tensor_parallel_size: Optional[int]
    k_schedule: Optional[tuple]  # num_speculative_tokens_per_batch_size, checked
    adaptive_verification: bool = False  # enable_adaptive_verification


def _vllm_kinds() -> list[ProposerKind]:
    return [k for k in proposers.KINDS if k.engine == "vllm"]


def _option_keys() -> dict[str, list[str]]:
    """vLLM key -> the methods whose kinds take it."""
    keys: dict[str, list[str]] = {}
    for kind in _vllm_kinds():
        for opt in kind.options:
            if opt.vllm_key:
                keys.setdefault(opt.vllm_key, [])
                if kind.vllm_method not in keys[opt.vllm_key]:
                    keys[opt.vllm_key].append(kind.vllm_method)
    return keys


def _flag_keys() -> dict[str, list[ProposerKind]]:
    """A kind's fixed key (``parallel_drafting``) -> the kinds that carry it."""
    keys: dict[str, list[ProposerKind]] = {}
    for kind in _vllm_kinds():
        for key in kind.config_flags:
            keys.setdefault(key, []).append(kind)
    return keys


def _integer(config: dict, key: str, minimum: int) -> Optional[int]:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{FLAG}: {key} = {json.dumps(value)} must be an integer >= {minimum}")
    return value


def parse(text: str, target: Optional[str] = None) -> SpeculativeInput:
    """The ``--speculative-config`` JSON ``text``, checked; ``target`` is the model served (MTP's
    ``model`` may name it, as vLLM fills it in)."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{FLAG} {text!r}: not valid JSON ({exc.msg} at character {exc.pos}); e.g. {FLAG} '{EXAMPLE}'") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{FLAG} {text!r}: must be a JSON object, e.g. {FLAG} '{EXAMPLE}'")
    option_keys, flag_keys = _option_keys(), _flag_keys()
    for key in config:
        if key in GENERAL_KEYS or key in NEUTRAL_KEYS or key in option_keys or key in flag_keys:
            continue
        if key in NOT_MODELLED_KEYS:
            raise ConfigError(f"{FLAG}: {key} is a vLLM key the simulator does not model; drop it (the simulator's inputs are this command's flags, --help)")
        known = ", ".join(sorted(set(GENERAL_KEYS) | set(option_keys) | set(flag_keys)))
        raise ConfigError(f"{FLAG}: unknown key {key!r}; the keys it reads are {known}")
    method, model = config.get("method"), config.get("model")
    if model is not None and not (isinstance(model, str) and model.strip()):
        raise ConfigError(f"{FLAG}: model = {json.dumps(model)} must be a model name")
    if method is None:  # vLLM 0.24.0's inference
        if model is None:
            raise ConfigError(f"{FLAG}: no method; give one, e.g. \"method\": \"ngram\" (vLLM's methods: {', '.join(sorted({k.vllm_method for k in _vllm_kinds()}))})")
        method = "ngram" if model in NGRAM_MODEL_NAMES else "draft_model"
    if method == "[ngram]":
        method = "ngram"
    if not isinstance(method, str):
        raise ConfigError(f"{FLAG}: method = {json.dumps(method)} must be a method name such as \"ngram\"")
    if model in NGRAM_MODEL_NAMES and method == "ngram":
        model = None
    k = _integer(config, "num_speculative_tokens", 1)
    if k is None:
        raise ConfigError(f"{FLAG}: num_speculative_tokens is missing; give the k your server runs, e.g. \"num_speculative_tokens\": 4")
    draft_tp = _integer(config, "draft_tensor_parallel_size", 1)
    try:  # the kind from the method and its fixed keys; its options are checked below, by their vLLM keys
        kind = proposers.from_speculative_config({"method": method, "num_speculative_tokens": k, **{key: config[key] for key in flag_keys if key in config}})[0]
    except ConfigError as exc:
        raise ConfigError(f"{FLAG}: {exc}") from None
    _check_keys(config, kind, option_keys, flag_keys)
    if kind.needs_draft_model and model is None:
        raise ConfigError(f"{FLAG}: method {method} needs \"model\": the {kind.drafts_with.value.split(' (')[0].removeprefix('a ').removeprefix('an ')} vLLM loads")
    if model is not None and not kind.needs_draft_model:
        if kind.runs_network and target is not None and model == target:
            model = None  # MTP: vLLM fills the target in as the model
        else:
            raise ConfigError(f"{FLAG}: model = {json.dumps(model)}: method {method} drafts with {kind.drafts_with.value}, not a draft model; drop \"model\"")
    given = kind.options_from_speculative_config(config)
    try:
        kind.resolve_options(dict(given))
    except ConfigError as exc:
        name = str(exc).split(" = ", 1)[0]
        key = next((o.vllm_key for o in kind.options if o.name == name), name)
        raise ConfigError(f"{FLAG}: {key}{str(exc)[len(name):]}") from None
    schedule = None
    if "num_speculative_tokens_per_batch_size" in config:
        from simulator.speculative.k_schedule import check_schedule

        schedule = check_schedule(config["num_speculative_tokens_per_batch_size"], k, f"{FLAG} num_speculative_tokens_per_batch_size")
    adaptive = config.get("enable_adaptive_verification", False)
    if not isinstance(adaptive, bool):
        raise ConfigError(f"{FLAG}: enable_adaptive_verification = {json.dumps(adaptive)} must be true or false")
    return SpeculativeInput(kind, k, tuple(sorted(given.items())), model, draft_tp, schedule, adaptive)


def _check_keys(config: dict, kind: ProposerKind, option_keys: dict, flag_keys: dict) -> None:
    """No key of another method, and no fixed key the chosen kind does not carry."""
    own = {o.vllm_key for o in kind.options if o.vllm_key}
    for key, methods in option_keys.items():
        if key in config and key not in own:
            raise ConfigError(f"{FLAG}: {key} is a key of method {' / '.join(methods)}, not of method {kind.vllm_method}; drop it or change the method")
    for key, kinds in flag_keys.items():
        if key in config and key not in kind.config_flags and config[key]:
            methods = " / ".join(f"{k.vllm_method} ({k.name})" for k in kinds)
            raise ConfigError(f"{FLAG}: {key} = {json.dumps(config[key])} is modelled for method {methods} only, not for method {kind.vllm_method}")


@dataclass(frozen=True)
class Destinations:
    """Where a command keeps each setting: (argparse dest, flag) per setting; None refuses it."""

    k: tuple[str, str]
    k_schedule: Optional[tuple[str, str]] = ("k_schedule", "--k-schedule")
    proposer: tuple[str, str] = ("proposer", "--proposer")
    draft_model: tuple[str, str] = ("draft_model", "--draft-model")
    draft_tensor_parallel_size: tuple[str, str] = ("draft_tensor_parallel_size", "--draft-tensor-parallel-size")
    adaptive_verification: Optional[tuple[str, str]] = ("adaptive_verification", "--adaptive-verification")


def apply(args, text: str, destinations: Destinations, target: Optional[str] = None, schedule_refusal: str = "") -> SpeculativeInput:
    """Set ``args``'s flags from the config ``text``; a flag given as well is refused naming both."""
    from simulator.cli.argtypes import given
    from simulator.cli.speculation_flags import option_flag
    from simulator.speculative.k_schedule import to_vllm

    parsed = parse(text, target)
    values: list[tuple[tuple[str, str], object, str]] = [
        (destinations.proposer, parsed.kind.name, "method"),
        (destinations.k, parsed.k, "num_speculative_tokens"),
        (destinations.draft_model, parsed.draft_model, "model"),
        (destinations.draft_tensor_parallel_size, parsed.draft_tensor_parallel_size, "draft_tensor_parallel_size"),
    ]
    if parsed.k_schedule is not None:
        if destinations.k_schedule is None:
            raise ConfigError(f"{FLAG}: num_speculative_tokens_per_batch_size {schedule_refusal}")
        values.append((destinations.k_schedule, json.dumps(to_vllm(parsed.k_schedule), separators=(",", ":")), "num_speculative_tokens_per_batch_size"))
    if parsed.adaptive_verification:
        if destinations.adaptive_verification is None:
            raise ConfigError(f"{FLAG}: enable_adaptive_verification {schedule_refusal}")
        values.append((destinations.adaptive_verification, True, "enable_adaptive_verification"))
    for name, value in parsed.options:
        key = next(o.vllm_key for o in parsed.kind.options if o.name == name)
        values.append(((f"option_{name}", option_flag(name)), value, key))
    for (dest, flag), _, key in values:
        if given(args, dest):
            raise ConfigError(f"{FLAG} and {flag} both set {key}: give it once (in the JSON, as vLLM takes it, or as {flag} without {FLAG})")
    for (dest, _), value, _ in values:
        if value is not None:
            setattr(args, dest, value)
    return parsed
