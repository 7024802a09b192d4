"""Models and devices beyond Vidur's built-in ones, registered the way Vidur expects.

Vidur finds model configs by walking ``BaseModelConfig`` subclasses for ``get_name()`` and
devices by walking ``BaseDeviceSKUConfig`` subclasses for ``str(get_type())``, so defining
the subclasses is the registration.  Enum values start at 100 so they can never collide
with Vidur's own (its IntEnums compare equal across types).
"""

from __future__ import annotations

from dataclasses import dataclass

from vidur.config.device_sku_config import BaseDeviceSKUConfig
from vidur.config.model_config import BaseModelConfig, Llama2ModelConfig
from vidur.types import BaseIntEnum

from simulator.errors import ConfigError
from simulator.profiles.roofline import ModelShape


class ExtraDeviceType(BaseIntEnum):
    H200 = 100


@dataclass
class H200DeviceSKUConfig(BaseDeviceSKUConfig):
    fp16_tflops: int = 989
    total_memory_gb: int = 141

    @staticmethod
    def get_type():
        return ExtraDeviceType.H200


@dataclass
class TinyLlama11BModelConfig(Llama2ModelConfig):
    """TinyLlama-1.1B: Llama-2 architecture and tokenizer, grouped-query attention (4 KV heads)."""

    num_layers: int = 22
    num_q_heads: int = 32
    num_kv_heads: int = 4
    embedding_dim: int = 2048
    mlp_hidden_dim: int = 5632
    max_model_len: int = 2048
    vocab_size: int = 32000

    @staticmethod
    def get_name():
        return "TinyLlama/TinyLlama-1.1B-Chat-v1.0"


@dataclass
class Llama68MModelConfig(Llama2ModelConfig):
    """JackFram/llama-68m: a 2-layer Llama draft model sharing Llama-2's tokenizer."""

    num_layers: int = 2
    num_q_heads: int = 12
    num_kv_heads: int = 12
    embedding_dim: int = 768
    mlp_hidden_dim: int = 3072
    max_model_len: int = 2048
    vocab_size: int = 32000

    @staticmethod
    def get_name():
        return "JackFram/llama-68m"


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
    return sorted(n for n in _named_configs() if "Config" not in n)


def model_config(name: str) -> BaseModelConfig:
    configs = _named_configs()
    if name not in configs or "Config" in name:
        raise ConfigError(f"unknown model '{name}'; known models: {', '.join(known_models())}")
    return configs[name]()


def model_shape(name: str) -> ModelShape:
    cfg = model_config(name)
    return ModelShape(
        num_q_heads=cfg.num_q_heads,
        num_kv_heads=cfg.num_kv_heads,
        embedding_dim=cfg.embedding_dim,
        mlp_hidden_dim=cfg.mlp_hidden_dim,
        vocab_size=cfg.vocab_size,
        use_gated_mlp=cfg.use_gated_mlp,
    )
