"""Models and devices beyond Vidur's built-in ones, registered the way Vidur expects.

Vidur finds model configs by walking ``BaseModelConfig`` subclasses for ``get_name()`` and
devices by walking ``BaseDeviceSKUConfig`` subclasses for ``str(get_type())``, so defining
the subclasses is the registration.  Enum values start at 100 so they can never collide
with Vidur's own (its IntEnums compare equal across types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from vidur.config.device_sku_config import BaseDeviceSKUConfig
from vidur.config.model_config import BaseModelConfig, Llama2ModelConfig, Llama38BModelConfig, Llama370BModelConfig
from vidur.types import BaseIntEnum

from simulator.errors import ConfigError
from simulator.shapes import ModelShape


class ExtraDeviceType(BaseIntEnum):
    H200 = 100
    A100_40GB = 101


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


@dataclass
class Llama31_8BInstructModelConfig(Llama38BModelConfig):
    """Llama-3.1-8B-Instruct: Llama-3-8B's shapes and 128,256-token vocabulary.

    Its real context is 131,072 tokens; the simulator's tables stop at 8,192 (the built-in
    profile grows with the context), so longer requests are refused with a clear error.
    """

    max_model_len: int = 8192

    @staticmethod
    def get_name():
        return "meta-llama/Llama-3.1-8B-Instruct"


@dataclass
class Llama3_8BInstructModelConfig(Llama38BModelConfig):
    max_model_len: int = 8192

    @staticmethod
    def get_name():
        return "meta-llama/Meta-Llama-3-8B-Instruct"


@dataclass
class Llama3_70BInstructModelConfig(Llama370BModelConfig):
    @staticmethod
    def get_name():
        return "meta-llama/Meta-Llama-3-70B-Instruct"


@dataclass
class Llama33_70BInstructModelConfig(Llama370BModelConfig):
    """Llama-3.3-70B-Instruct: Llama-3-70B's shapes (context capped at 8,192 as above)."""

    @staticmethod
    def get_name():
        return "meta-llama/Llama-3.3-70B-Instruct"


@dataclass
class Llama2_7BChatModelConfig(Llama2ModelConfig):
    """Llama-2-7b-chat-hf: the shapes of Vidur's Llama-2-7B."""

    num_layers: int = 32
    num_q_heads: int = 32
    num_kv_heads: int = 32
    embedding_dim: int = 4096
    mlp_hidden_dim: int = 11008
    max_model_len: int = 4096
    vocab_size: int = 32000

    @staticmethod
    def get_name():
        return "meta-llama/Llama-2-7b-chat-hf"


@dataclass
class QwamaHalfBModelConfig(Llama2ModelConfig):
    """turboderp/Qwama-0.5B-Instruct: Qwen2-0.5B's shapes with Llama-3's vocabulary, the draft of
    vLLM's 70B speculative-decoding blog (its QKV biases are ignored)."""

    num_layers: int = 24
    num_q_heads: int = 14
    num_kv_heads: int = 2
    embedding_dim: int = 896
    mlp_hidden_dim: int = 4864
    max_model_len: int = 8192
    vocab_size: int = 128256

    @staticmethod
    def get_name():
        return "turboderp/Qwama-0.5B-Instruct"


@dataclass
class Llama32_1BInstructModelConfig(Llama38BModelConfig):
    """Llama-3.2-1B-Instruct, a draft for Llama-3 70B targets (context capped at 8,192 as above)."""

    num_layers: int = 16
    num_q_heads: int = 32
    num_kv_heads: int = 8
    embedding_dim: int = 2048
    mlp_hidden_dim: int = 8192
    max_model_len: int = 8192

    @staticmethod
    def get_name():
        return "meta-llama/Llama-3.2-1B-Instruct"


@dataclass
class EagleHeadConfig(Llama2ModelConfig):
    """An EAGLE draft head: one decoder layer at its target's width.

    ``fc_inputs`` hidden states are projected to one by an fc layer before the decoder layer
    (EAGLE-1: the token embedding and the target's last hidden state, 2; EAGLE-3: three of the
    target's hidden layers, 3).  ``vocab_size`` is the vocabulary its LM head scores: the
    target's for EAGLE-1 (it reuses the target's LM head), a smaller draft vocabulary for EAGLE-3.
    """

    num_layers: int = 1
    num_q_heads: int = 0  # each head below sets its shapes
    num_kv_heads: int = 0
    embedding_dim: int = 0
    mlp_hidden_dim: int = 0
    max_model_len: int = 0
    fc_inputs: int = 2
    method: str = "eagle"
    targets: tuple = ()  # the targets it was trained for (the only ones it can serve)


@dataclass
class EagleLlama31_8BConfig(EagleHeadConfig):
    targets: tuple = ("meta-llama/Llama-3.1-8B-Instruct",)
    num_q_heads: int = 32
    num_kv_heads: int = 8
    embedding_dim: int = 4096
    mlp_hidden_dim: int = 14336
    max_model_len: int = 8192
    vocab_size: int = 128256

    @staticmethod
    def get_name():
        return "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"


@dataclass
class Eagle3Llama31_8BConfig(EagleLlama31_8BConfig):
    targets: tuple = ("meta-llama/Llama-3.1-8B-Instruct",)
    fc_inputs: int = 3
    method: str = "eagle3"
    vocab_size: int = 32000  # draft_vocab_size

    @staticmethod
    def get_name():
        return "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


@dataclass
class EagleLlama3_8BConfig(EagleLlama31_8BConfig):
    targets: tuple = ("meta-llama/Meta-Llama-3-8B-Instruct",)
    @staticmethod
    def get_name():
        return "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"


@dataclass
class EagleLlama3_70BConfig(EagleHeadConfig):
    targets: tuple = ("meta-llama/Meta-Llama-3-70B-Instruct",)
    num_q_heads: int = 64
    num_kv_heads: int = 8
    embedding_dim: int = 8192
    mlp_hidden_dim: int = 28672
    max_model_len: int = 8192
    vocab_size: int = 128256

    @staticmethod
    def get_name():
        return "yuhuili/EAGLE-LLaMA3-Instruct-70B"


@dataclass
class Eagle3Llama33_70BConfig(EagleLlama3_70BConfig):
    targets: tuple = ("meta-llama/Llama-3.3-70B-Instruct",)
    fc_inputs: int = 3
    method: str = "eagle3"
    vocab_size: int = 32000

    @staticmethod
    def get_name():
        return "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"


@dataclass
class EagleLlama2Chat7BConfig(EagleHeadConfig):
    targets: tuple = ("meta-llama/Llama-2-7b-chat-hf",)
    num_q_heads: int = 32
    num_kv_heads: int = 32
    embedding_dim: int = 4096
    mlp_hidden_dim: int = 11008
    max_model_len: int = 4096
    vocab_size: int = 32000

    @staticmethod
    def get_name():
        return "lmzheng/sglang-EAGLE-llama2-chat-7B"


def eagle_head(name: str) -> Optional[EagleHeadConfig]:
    """The EAGLE head config named ``name``, or None when it names an ordinary model."""
    config = model_config(name)
    return config if isinstance(config, EagleHeadConfig) else None


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
