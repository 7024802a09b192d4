"""Vidur's model configs for the catalog's models, registered from their specs (values).

Vidur finds a model config by walking ``BaseModelConfig`` subclasses for ``get_name()``, so
defining a subclass is the registration.  The catalog (:mod:`simulator.models.catalog`) holds each model
as an immutable :class:`~simulator.models.spec.ModelSpec`; this module turns a spec into the
subclass Vidur looks up, once per name, with the spec's numbers as its defaults.  The catalog
hands every spec here when it is built, and a local ``config.json`` when it is read, so nothing
else defines model classes.
"""

from __future__ import annotations

from types import MappingProxyType

import re
import sys
from dataclasses import dataclass, make_dataclass
from typing import Optional

from simulator.models.spec import ModelSpec
from simulator.models.shapes import LinearAttentionShape, MLAShape, MoEShape, Precision
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


def register(spec: ModelSpec, max_model_len: Optional[int] = None, home: str = __name__) -> type:
    """A ``BaseModelConfig`` subclass with ``spec``'s numbers as its defaults, named ``spec.name``;
    ``max_model_len``: a drafter's context (its targets'), in place of the spec's.  ``home``: the
    module the class is set on and pickles by (the catalog's, so that unpickling it in a fresh
    process imports the catalog, which builds its models: this package never imports upward).

    Registered once per name: Vidur returns the first subclass whose ``get_name()`` matches, so a
    second class for one name would never be seen.  The class is also set on this module under
    its class name in ``home``, so configs pickle by reference like hand-written classes.
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
    name, module = spec.name, sys.modules[home]
    class_name = _class_name(name)
    while class_name in vars(module):  # two names that read alike ("a/b", "a_b") get two classes
        class_name += "_"
    cls = make_dataclass(
        class_name,
        [(key, _TYPES.get(key, int), value) for key, value in fields.items()],
        bases=(base,),
        namespace={"get_name": staticmethod(lambda: name), "__doc__": f"{name}, from {spec.source}."},
    )
    cls.__module__ = home
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
