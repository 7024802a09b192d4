"""Vidur's model configs: one class per model spec, registered from the spec's values, and the
lookup of a model by name.

Vidur finds a model config by walking ``BaseModelConfig`` subclasses for ``get_name()``, so
defining a subclass is the registration.  The catalog (:mod:`simulator.models.catalog`) holds each
model as an immutable :class:`~simulator.models.spec.ModelSpec`; this module turns a spec into the
subclass Vidur looks up, once per name, with the spec's numbers as its defaults: every catalog
spec when it is imported, a local ``config.json`` when it is read (:func:`model_config`) and a
target's MTP layer when it is asked for (:func:`mtp_layer_model`), so nothing else defines model
classes.  Every lookup by name goes through here: Vidur's own models and the registered ones, as
configs (:func:`model_config`, :func:`known_model`), shapes (:func:`model_shape`) and what a
proposer kind reads of them (:func:`model_facts`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass, make_dataclass
from types import MappingProxyType
from typing import Optional

from simulator.models.catalog import CATALOG, MTP_LAYER_SUFFIX, mtp_layer_spec
from simulator.models.files import config_file, read_spec
from simulator.models.spec import ModelSpec
from simulator.models.shapes import LinearAttentionShape, MLAShape, ModelShape, MoEShape, Precision
from simulator.speculative.proposers.base import ModelFacts
from simulator.util.errors import ConfigError
from simulator.vidur.configs import BaseModelConfig, Llama2ModelConfig


@dataclass
class EagleHeadConfig(Llama2ModelConfig):
    """An EAGLE draft head: one decoder layer at its target's width.

    Its context is its targets' (it runs over the target's sequence, at the target's positions),
    not the ``max_position_embeddings`` it was trained with.

    ``fc_inputs`` hidden states are projected to one by an fc layer before the decoder layer
    (EAGLE-1: the token embedding and the target's last hidden state, 2; EAGLE-3: three of the
    target's hidden layers, 3).  ``vocab_size`` is the vocabulary its LM head scores: the
    target's for EAGLE-1 (it reuses the target's LM head), a smaller draft vocabulary for EAGLE-3.
    """

    num_layers: int = 1
    num_q_heads: int = 0  # each head's config sets its shapes
    num_kv_heads: int = 0
    embedding_dim: int = 0
    mlp_hidden_dim: int = 0
    max_model_len: int = 0
    fc_inputs: int = 2
    method: str = "eagle"
    targets: tuple = ()  # the targets it was trained for (the only ones it can serve)


@dataclass
class DFlashDrafterConfig(Llama2ModelConfig):
    """A DFlash block drafter (vLLM's ``dflash``): ``num_layers`` decoder layers at its target's
    width that fill a block of ``block_size`` positions (one anchor token, ``block_size - 1`` mask
    slots) in one non-causal pass, reading the hidden states of ``target_layer_ids`` through an fc
    layer.  It shares its target's embedding and LM head; its context is its targets'."""

    num_layers: int = 0
    num_q_heads: int = 0
    num_kv_heads: int = 0
    embedding_dim: int = 0
    mlp_hidden_dim: int = 0
    max_model_len: int = 0
    block_size: int = 0
    target_layer_ids: tuple = ()
    targets: tuple = ()


# name -> the class registered for it (the catalog's specs, a user's config.json, an MTP layer)
_REGISTERED: dict[str, type] = {}

_TYPES = {
    "targets": tuple, "target_layer_ids": tuple, "method": str, "rope_theta": Optional[float], "use_qkv_bias": bool, "tie_word_embeddings": bool,
    "layer_kinds": tuple, "moe": Optional[MoEShape], "mla": Optional[MLAShape], "linear_attention": Optional[LinearAttentionShape],
    "precision": Precision, "gated_attention": bool,
}


def _class_name(name: str) -> str:
    return "HF_" + re.sub(r"\W", "_", name) + "_ModelConfig"


def registered(name: str) -> Optional[type]:
    """The class registered for ``name`` here, or None."""
    return _REGISTERED.get(name)


def register(spec: ModelSpec, max_model_len: Optional[int] = None) -> type:
    """A ``BaseModelConfig`` subclass with ``spec``'s numbers as its defaults, named ``spec.name``;
    ``max_model_len``: a drafter's context (its targets'), in place of the spec's.

    Registered once per name: Vidur returns the first subclass whose ``get_name()`` matches, so a
    second class for one name would never be seen.  The class is also set on this module under
    its class name, so configs pickle by reference like hand-written classes (unpickling one in a
    fresh process imports this module, which registers the catalog's models).
    """
    if spec.name in _REGISTERED:
        return _REGISTERED[spec.name]
    fields = {
        "num_layers": spec.num_layers,
        "num_q_heads": spec.num_q_heads,
        "num_kv_heads": spec.num_kv_heads,
        "embedding_dim": spec.embedding_dim,
        "mlp_hidden_dim": spec.mlp_hidden_dim,
        "max_model_len": spec.max_model_len if max_model_len is None else max_model_len,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size,
        "rope_theta": spec.rope_theta,
        "use_qkv_bias": spec.use_qkv_bias,
        "tie_word_embeddings": spec.tie_word_embeddings,
        # what Vidur's config has no field for (its own code never reads these): the layer kinds,
        # experts, latent or linear attention and the checkpoint's precision, for the cost model's shape
        "layer_kinds": spec.layers,
        "moe": spec.moe,
        "mla": spec.mla,
        "linear_attention": spec.linear,
        "precision": spec.precision,
        "gated_attention": spec.gated_attention,
    }
    base = Llama2ModelConfig
    if spec.eagle is not None:
        base = EagleHeadConfig
        fields.update(fc_inputs=spec.eagle.fc_inputs, method=spec.eagle.method, targets=spec.eagle.targets)
    if spec.dflash is not None:
        base = DFlashDrafterConfig
        fields.update(block_size=spec.dflash.block_size, target_layer_ids=spec.dflash.target_layer_ids, targets=spec.dflash.targets)
    name, module = spec.name, sys.modules[__name__]
    class_name = _class_name(name)
    while class_name in vars(module):  # two names that read alike ("a/b", "a_b") get two classes
        class_name += "_"
    cls = make_dataclass(
        class_name,
        [(key, _TYPES.get(key, int), value) for key, value in fields.items()],
        bases=(base,),
        namespace={"get_name": staticmethod(lambda: name), "__doc__": f"{name}, from {spec.source}."},
    )
    cls.__module__ = __name__
    setattr(module, class_name, cls)
    _REGISTERED[name] = cls
    return cls


# Vidur's own model names that are not Hugging Face repositories, and the repository each one's
# config is (Vidur 0.0.26 names Meta's Llama 3 base models without the "Meta-" prefix the Hub uses).
REPOSITORIES = MappingProxyType({
    "meta-llama/Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3-70B": "meta-llama/Meta-Llama-3-70B",
})


def repository(name: str) -> str:
    """The Hugging Face repository ``vllm serve`` loads for a model Vidur knows as ``name``."""
    return REPOSITORIES.get(name, name)


def named_configs() -> dict[str, type]:
    """Every model config Vidur can find by name (its own and those registered here)."""
    found, stack = {}, [BaseModelConfig]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        try:
            found[cls.get_name()] = cls
        except (AttributeError, NotImplementedError, TypeError):
            continue
    return found


# --- the lookup by name ---------------------------------------------------------------------------
_READ: dict[str, ModelSpec] = {}  # specs registered in this process beyond the catalog: local paths and MTP layers
_FROM_PATHS: set[str] = set()  # the names above that are local paths (or a local path's MTP layer)
_OR_A_PATH = "or give a local path to a Hugging Face config.json (or its directory)"


def _register_spec(spec: ModelSpec) -> type:
    """Vidur's config class for ``spec`` (:func:`register`), once per name; a drafter (an EAGLE
    head, a DFlash drafter) runs over its targets' sequence, so its context is the longest of theirs."""
    cls = registered(spec.name)
    if cls is not None:
        return cls
    targets, key = (), ""
    if spec.eagle is not None:
        targets, key = spec.eagle.targets, "eagle_targets"
    if spec.dflash is not None:
        targets, key = spec.dflash.targets, "draft_targets"
    context = None
    if targets:
        try:
            context = max(known_model(t).max_model_len for t in targets)
        except ConfigError as exc:
            raise ConfigError(f"{spec.source}: field '{key}': {exc}") from None
    return register(spec, context)


def _spec(name: str) -> Optional[ModelSpec]:
    """The spec a model name was registered from (None for Vidur's own models)."""
    return CATALOG.get(name) or _READ.get(name)


def eagle_head(name: str) -> Optional[EagleHeadConfig]:
    """The EAGLE head config named ``name``, or None when it names an ordinary model."""
    return as_eagle_head(model_config(name))


def known_models() -> list[str]:
    """Every model known by name: Vidur's and the catalog's (not paths read in this process)."""
    return sorted(n for n in named_configs() if "Config" not in n and n not in _FROM_PATHS)


def model_config(name: str) -> BaseModelConfig:
    """The config of the model ``name``: a catalog name (Vidur's or ours), or a local path to a
    directory holding ``config.json`` or to the file, read once per process.  A catalog name wins
    over a local directory of the same name, so a catalog model's numbers never depend on the
    working directory."""
    configs = named_configs()
    if name in configs and "Config" not in name:
        return configs[name]()
    path = config_file(name)
    if path is None:
        raise ConfigError(f"unknown model '{name}'; known models: {', '.join(known_models())}; {_OR_A_PATH}")
    spec = read_spec(name, path)
    cls = _register_spec(spec)
    _READ.setdefault(spec.name, spec)
    _FROM_PATHS.add(name)
    return cls()


def known_model(name: str) -> BaseModelConfig:
    """The config of a model this process knows already: a catalog name (Vidur's or ours), or a local
    path read when its :class:`~simulator.runs.config.RunConfig` was built (:func:`model_config`).  No
    file is read here, so resolving a run looks its models up as values."""
    configs = named_configs()
    if name in configs and "Config" not in name:
        return configs[name]()
    raise ConfigError(f"unknown model '{name}'; known models: {', '.join(known_models())}; {_OR_A_PATH}")


@dataclass(frozen=True)
class ModelEntry:
    """A model as a run's resolution needs it, looked up once: Vidur's config of it, the cost
    model's shape (the checkpoint's) and what a proposer kind reads of it."""

    config: BaseModelConfig
    shape: ModelShape
    facts: ModelFacts


def known_entry(name: str) -> ModelEntry:
    """:func:`known_model`'s model as an entry (its shape and facts with it)."""
    config = known_model(name)
    return ModelEntry(config, shape_of(config), model_facts(name, config))


def mtp_layer_entry(target: str) -> ModelEntry:
    """The target's multi-token-prediction layer (:func:`mtp_layer_model`) as an entry."""
    name, config = mtp_layer_model(target)
    return ModelEntry(config, shape_of(config), model_facts(name, config))


def config_digest(name: str) -> Optional[str]:
    """For a model read from a local ``config.json``: a digest of the numbers this process simulates
    it with, so a result cache keyed on the path cannot serve an edited file's old results.  None
    for a catalog name (the model hash covers the catalog's files)."""
    config = model_config(name)
    if name not in _FROM_PATHS:
        return None
    numbers = json.dumps(asdict(config), sort_keys=True, default=str)
    return hashlib.sha256(numbers.encode()).hexdigest()[:16]


def model_shape(name: str) -> ModelShape:
    return shape_of(model_config(name))


def model_facts(name: str, config: BaseModelConfig) -> ModelFacts:
    """What a proposer kind reads from model ``name`` (its config already looked up): the facts
    of the ``config.json`` it was registered from; Vidur's own models are plain Llama decoders."""
    spec = _spec(name)
    facts = dict(name=name, hidden_size=config.embedding_dim, vocab_size=config.vocab_size, num_layers=config.num_layers)
    if spec is None:
        return ModelFacts(architecture=f"Vidur's {type(config).__name__}", **facts)
    drafter, fc_inputs, targets, block, layers, mask = None, 0, (), 0, (), False
    if spec.eagle is not None:
        drafter, fc_inputs, targets, mask = spec.eagle.method, spec.eagle.fc_inputs, spec.eagle.targets, spec.eagle.mask_token
    if spec.dflash is not None:
        drafter, targets, block, layers = "dflash", spec.dflash.targets, spec.dflash.block_size, spec.dflash.target_layer_ids
        fc_inputs = len(layers)
    return ModelFacts(
        architecture=spec.architecture, drafter=drafter, fc_inputs=fc_inputs, targets=targets, mtp_layers=spec.mtp_layers, mtp_field=spec.mtp_field,
        block_size=block, target_layer_ids=layers, mask_token=mask, **facts,
    )


def mtp_layer_model(target: str) -> tuple[str, BaseModelConfig]:
    """One of ``target``'s multi-token-prediction layers as a model of its own
    (:func:`simulator.models.catalog.mtp_layer_spec`), registered so it gets a predictor like any
    draft.  Named ``"<target> (MTP layer)"``."""
    spec = _spec(target)
    if spec is None:
        raise ConfigError(f"model {target}: Vidur's own config of it carries no multi-token-prediction layers; give its config.json to use MTP")
    name = target + MTP_LAYER_SUFFIX
    if registered(name) is None:
        layer = mtp_layer_spec(spec)
        _register_spec(layer)
        _READ.setdefault(name, layer)
        if target in _FROM_PATHS:
            _FROM_PATHS.add(name)
    return name, registered(name)()


def as_eagle_head(config: BaseModelConfig) -> Optional[EagleHeadConfig]:
    """``config`` as an EAGLE head, or None for an ordinary model (no lookup: for a config in hand)."""
    return config if isinstance(config, EagleHeadConfig) else None


def shape_of(cfg: BaseModelConfig) -> ModelShape:
    """The shape the cost model needs, from a model config already looked up (Vidur's own models
    and heads carry no layer kinds, experts or precision: dense 16-bit decoders)."""
    return ModelShape(
        num_q_heads=cfg.num_q_heads,
        num_kv_heads=cfg.num_kv_heads,
        embedding_dim=cfg.embedding_dim,
        mlp_hidden_dim=cfg.mlp_hidden_dim,
        vocab_size=cfg.vocab_size,
        use_gated_mlp=cfg.use_gated_mlp,
        head_size=_explicit_head_size(cfg),
        layers=getattr(cfg, "layer_kinds", ()),
        moe=getattr(cfg, "moe", None),
        mla=getattr(cfg, "mla", None),
        linear=getattr(cfg, "linear_attention", None),
        precision=getattr(cfg, "precision", Precision()),
        gated_attention=getattr(cfg, "gated_attention", False),
    )


def _explicit_head_size(cfg: BaseModelConfig) -> int:
    """A config's ``head_dim`` where it is not ``embedding_dim / num_q_heads`` (Qwen3-4B: 128, not 80); else 0."""
    head_dim = getattr(cfg, "head_dim", 0)
    return head_dim if head_dim and head_dim != cfg.embedding_dim // cfg.num_q_heads else 0


def _register_catalog() -> None:
    """Every catalog spec, in the catalog's order: ordinary models first, so a drafter can take its
    targets' context."""
    for spec in CATALOG.values():
        _register_spec(spec)


_register_catalog()
