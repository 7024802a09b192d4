"""Models and devices beyond Vidur's built-in ones, registered the way Vidur expects.

Vidur finds model configs by walking ``BaseModelConfig`` subclasses for ``get_name()`` and
devices by walking ``BaseDeviceSKUConfig`` subclasses for ``str(get_type())``, so defining
the subclasses is the registration.  Enum values start at 100 so they can never collide
with Vidur's own (its IntEnums compare equal across types).

Models are data, not classes: the catalog's own entries are Hugging Face ``config.json`` files
shipped with the package (:mod:`simulator.models`), and a local path to a directory holding a
``config.json`` (or to the file) works wherever a model name does.  Each is turned into a
``BaseModelConfig`` subclass here, once per name, so Vidur finds it like its own models.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import dataclasses
from dataclasses import asdict, dataclass, make_dataclass
from typing import Optional

from vidur.config.device_sku_config import BaseDeviceSKUConfig
from vidur.config.model_config import BaseModelConfig, Llama2ModelConfig
from vidur.config.node_sku_config import BaseNodeSKUConfig
from vidur.types import BaseIntEnum

from simulator.errors import ConfigError
from simulator.models.files import catalog_specs, config_file, read_spec
from simulator.models.spec import ModelSpec
from simulator.shapes import LinearAttentionShape, MLAShape, ModelShape, MoEShape, Precision
from simulator.speculative.proposers.base import ModelFacts


class ExtraDeviceType(BaseIntEnum):
    H200 = 100
    A100_40GB = 101
    B200 = 102


class ExtraNodeType(BaseIntEnum):
    B200_DGX = 100


@dataclass
class H200DeviceSKUConfig(BaseDeviceSKUConfig):
    fp16_tflops: int = 989
    total_memory_gb: int = 141

    @staticmethod
    def get_type():
        return ExtraDeviceType.H200


@dataclass
class A10040GBDeviceSKUConfig(BaseDeviceSKUConfig):
    fp16_tflops: int = 312
    total_memory_gb: int = 40

    @staticmethod
    def get_type():
        return ExtraDeviceType.A100_40GB


@dataclass
class B200DeviceSKUConfig(BaseDeviceSKUConfig):
    # dense BF16 tensor TFLOPS and memory (GB) of the HGX B200 datasheet (simulator/profiles/devices.toml)
    fp16_tflops: int = 2250
    total_memory_gb: int = 180

    @staticmethod
    def get_type():
        return ExtraDeviceType.B200


@dataclass
class B200DgxNodeSKUConfig(BaseNodeSKUConfig):
    """Eight B200s on NVLink 5 switches (DGX / HGX B200)."""

    num_devices_per_node: int = 8

    @staticmethod
    def get_type():
        return ExtraNodeType.B200_DGX


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


# name -> the class registered for it from a config file (the catalog's or a user's path)
_REGISTERED: dict[str, type] = {}
_SPECS: dict[str, ModelSpec] = {}  # name -> the spec it was registered from
_FROM_PATHS: set[str] = set()  # the names above that are local paths


def _class_name(name: str) -> str:
    return "HF_" + re.sub(r"\W", "_", name) + "_ModelConfig"


def _register(spec: ModelSpec) -> type:
    """A ``BaseModelConfig`` subclass with ``spec``'s numbers as its defaults, named ``spec.name``.

    Registered once per name: Vidur returns the first subclass whose ``get_name()`` matches, so a
    second class for one name would never be seen.  The class is also set on this module under
    its class name, so configs pickle by reference like the hand-written classes they replace.
    """
    if spec.name in _REGISTERED:
        return _REGISTERED[spec.name]
    fields = {
        "num_layers": spec.num_layers,
        "num_q_heads": spec.num_q_heads,
        "num_kv_heads": spec.num_kv_heads,
        "embedding_dim": spec.embedding_dim,
        "mlp_hidden_dim": spec.mlp_hidden_dim,
        "max_model_len": spec.max_model_len,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size,
        "rope_theta": spec.rope_theta,
        "use_qkv_bias": spec.use_qkv_bias,
        "tie_word_embeddings": spec.tie_word_embeddings,
        # what Vidur's config has no field for (its own code never reads these): the layer kinds,
        # experts, latent or linear attention and the checkpoint's precision, for shape_of
        "layer_kinds": spec.layers,
        "moe": spec.moe,
        "mla": spec.mla,
        "linear_attention": spec.linear,
        "precision": spec.precision,
        "gated_attention": spec.gated_attention,
    }
    base = Llama2ModelConfig
    targets, key = (), ""
    if spec.eagle is not None:
        base, targets, key = EagleHeadConfig, spec.eagle.targets, "eagle_targets"
        fields.update(fc_inputs=spec.eagle.fc_inputs, method=spec.eagle.method, targets=targets)
    if spec.dflash is not None:
        base, targets, key = DFlashDrafterConfig, spec.dflash.targets, "draft_targets"
        fields.update(block_size=spec.dflash.block_size, target_layer_ids=spec.dflash.target_layer_ids, targets=targets)
    if targets:
        try:
            fields["max_model_len"] = max(known_model(t).max_model_len for t in targets)
        except ConfigError as exc:
            raise ConfigError(f"{spec.source}: field '{key}': {exc}") from None
    types = {
        "targets": tuple, "target_layer_ids": tuple, "method": str, "rope_theta": Optional[float], "use_qkv_bias": bool, "tie_word_embeddings": bool,
        "layer_kinds": tuple, "moe": Optional[MoEShape], "mla": Optional[MLAShape], "linear_attention": Optional[LinearAttentionShape],
        "precision": Precision, "gated_attention": bool,
    }
    name, module = spec.name, sys.modules[__name__]
    class_name = _class_name(name)
    while hasattr(module, class_name):  # two names that read alike ("a/b", "a_b") get two classes
        class_name += "_"
    cls = make_dataclass(
        class_name,
        [(key, types.get(key, int), value) for key, value in fields.items()],
        bases=(base,),
        namespace={"get_name": staticmethod(lambda: name), "__doc__": f"{name}, from {spec.source}."},
    )
    cls.__module__ = __name__
    setattr(module, class_name, cls)
    _REGISTERED[name] = cls
    _SPECS[name] = spec
    return cls


def _register_catalog() -> None:
    """The catalog's files: ordinary models first, so each head can take its target's context."""
    specs = catalog_specs()
    for spec in sorted(specs, key=lambda s: s.eagle is not None or s.dflash is not None):
        _register(spec)


def eagle_head(name: str) -> Optional[EagleHeadConfig]:
    """The EAGLE head config named ``name``, or None when it names an ordinary model."""
    return as_eagle_head(model_config(name))


def _named_configs() -> dict[str, type]:
    found, stack = {}, [BaseModelConfig]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        try:
            found[cls.get_name()] = cls
        except (AttributeError, NotImplementedError, TypeError):
            continue
    return found


def known_models() -> list[str]:
    """Every model known by name: Vidur's and the catalog's (not paths read in this process)."""
    return sorted(n for n in _named_configs() if "Config" not in n and n not in _FROM_PATHS)


def model_config(name: str) -> BaseModelConfig:
    """The config of the model ``name``: a catalog name (Vidur's or ours), or a local path to a
    directory holding ``config.json`` or to the file, read once per process.  A catalog name wins
    over a local directory of the same name, so a catalog model's numbers never depend on the
    working directory."""
    configs = _named_configs()
    if name in configs and "Config" not in name:
        return configs[name]()
    path = config_file(name)
    if path is None:
        raise ConfigError(
            f"unknown model '{name}'; known models: {', '.join(known_models())}; "
            "or give a local path to a Hugging Face config.json (or its directory)"
        )
    cls = _register(read_spec(name, path))
    _FROM_PATHS.add(name)
    return cls()


def known_model(name: str) -> BaseModelConfig:
    """The config of a model this process knows already: a catalog name (Vidur's or ours), or a local
    path read when its :class:`~simulator.config.RunConfig` was built (:func:`model_config`).  No
    file is read here, so resolving a run looks its models up as values."""
    configs = _named_configs()
    if name in configs and "Config" not in name:
        return configs[name]()
    raise ConfigError(
        f"unknown model '{name}'; known models: {', '.join(known_models())}; "
        "or give a local path to a Hugging Face config.json (or its directory)"
    )


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
    spec = _SPECS.get(name)
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


MTP_LAYER_SUFFIX = " (MTP layer)"


def mtp_layer_model(target: str) -> tuple[str, BaseModelConfig]:
    """One of ``target``'s multi-token-prediction layers as a model of its own, registered with
    Vidur so it gets a predictor like any draft: one decoder layer at the target's shape (its fc
    layer and norms are its kind's to count), scoring the target's vocabulary with the target's
    LM head.  Named ``"<target> (MTP layer)"``."""
    spec = _SPECS.get(target)
    if spec is None:
        raise ConfigError(f"model {target}: Vidur's own config of it carries no multi-token-prediction layers; give its config.json to use MTP")
    name = target + MTP_LAYER_SUFFIX
    if name not in _REGISTERED:
        # the MTP layer is a decoder layer of the target's last kind (DeepSeek-V3's: MLA with experts)
        kinds = ((spec.layers[-1][0], 1),) if spec.layers else ()
        layer = dataclasses.replace(
            spec, name=name, source=f"{spec.source} (its MTP layer)", num_layers=1, layers=kinds, mtp_layers=0, mtp_field="", tie_word_embeddings=False,
        )
        _register(layer)
        if target in _FROM_PATHS:
            _FROM_PATHS.add(name)
    return name, _REGISTERED[name]()


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


_register_catalog()
