"""Models as data: the catalog's config files, a user's config.json path, and what is refused.

The expected numbers below are copied from the models' public Hugging Face configs (model cards),
not from the code, so the catalog's files are checked against their source.
"""

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

import simulator
from simulator import ClosedLoopWorkload, RunConfig, SpeculationConfig
from simulator.models.catalog import CATALOG
from simulator.vidur.models import eagle_head, known_models, model_config, model_shape, shape_of
from simulator.util.errors import ConfigError
from simulator.models.context import TABLE_FLOOR, table_tokens
from simulator.models.spec import parse_config
from simulator.models.shapes import ModelShape

from repo import REPO_ROOT as ROOT

HF = ROOT / "tests" / "data" / "hf_configs"

# name: (layers, q heads, kv heads, hidden, intermediate, vocabulary scored, context), from each model's config.json
CARDS = {
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": (22, 32, 4, 2048, 5632, 32000, 2048),
    "JackFram/llama-68m": (2, 12, 12, 768, 3072, 32000, 2048),
    "meta-llama/Llama-2-7b-chat-hf": (32, 32, 32, 4096, 11008, 32000, 4096),
    "meta-llama/Meta-Llama-3-8B-Instruct": (32, 32, 8, 4096, 14336, 128256, 8192),
    "meta-llama/Llama-3.1-8B-Instruct": (32, 32, 8, 4096, 14336, 128256, 131072),
    "meta-llama/Llama-3.2-1B-Instruct": (16, 32, 8, 2048, 8192, 128256, 131072),
    "meta-llama/Meta-Llama-3-70B-Instruct": (80, 64, 8, 8192, 28672, 128256, 8192),
    "meta-llama/Llama-3.3-70B-Instruct": (80, 64, 8, 8192, 28672, 128256, 131072),
    "turboderp/Qwama-0.5B-Instruct": (24, 14, 2, 896, 4864, 128256, 32768),
    "meta-llama/Llama-3.1-70B-Instruct": (80, 64, 8, 8192, 28672, 128256, 131072),
    "Qwen/Qwen2.5-7B-Instruct": (28, 28, 4, 3584, 18944, 152064, 32768),
    "Qwen/Qwen3-8B": (36, 32, 8, 4096, 12288, 151936, 40960),
    "Qwen/Qwen3-14B": (40, 40, 8, 5120, 17408, 151936, 40960),
    # MiMo-7B: a Qwen2-shaped decoder with one MTP layer beside it (num_nextn_predict_layers = 1)
    "XiaomiMiMo/MiMo-7B-Base": (36, 32, 8, 4096, 11008, 151680, 32768),
}
# EAGLE heads: one layer at the target's width; EAGLE-3 scores its 32,000-token draft vocabulary.
# Context: the target's.  (name: shapes as above, method, fc inputs, target)
HEADS = {
    "yuhuili/EAGLE-LLaMA3.1-Instruct-8B": ((1, 32, 8, 4096, 14336, 128256, 131072), "eagle", 2, "meta-llama/Llama-3.1-8B-Instruct"),
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": ((1, 32, 8, 4096, 14336, 32000, 131072), "eagle3", 3, "meta-llama/Llama-3.1-8B-Instruct"),
    "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B": ((1, 32, 8, 4096, 14336, 128256, 8192), "eagle", 2, "meta-llama/Meta-Llama-3-8B-Instruct"),
    "yuhuili/EAGLE-LLaMA3-Instruct-70B": ((1, 64, 8, 8192, 28672, 128256, 8192), "eagle", 2, "meta-llama/Meta-Llama-3-70B-Instruct"),
    "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B": ((1, 64, 8, 8192, 28672, 32000, 131072), "eagle3", 3, "meta-llama/Llama-3.3-70B-Instruct"),
    "lmzheng/sglang-EAGLE-llama2-chat-7B": ((1, 32, 32, 4096, 11008, 32000, 4096), "eagle", 2, "meta-llama/Llama-2-7b-chat-hf"),
    "lmsys/SGLang-EAGLE3-Llama-3.3-70B-Instruct-SpecForge": (
        (1, 64, 8, 8192, 28672, 32000, 131072), "eagle3", 3, "meta-llama/Llama-3.3-70B-Instruct",
    ),
}
# DFlash drafters: several layers at the target's width, sharing its vocabulary; context its target's
DRAFTERS = {"z-lab/Qwen3-8B-DFlash-b16": ((5, 32, 8, 4096, 12288, 151936, 40960), 16, (1, 9, 17, 25, 33), "Qwen/Qwen3-8B")}
# Today's models (simulator/models/data/README.md gives each one's source): layer kinds, experts,
# attention and precision, from the model cards' configs (name: (layers, q heads, kv heads, hidden,
# dense FFN width, vocabulary, context), then the MoE (experts, per token, expert width, shared
# width) or None, the layer groups and the checkpoint's quantization method)
MODERN = {
    "Qwen/Qwen3-30B-A3B": ((48, 32, 4, 2048, 6144, 151936, 40960), (128, 8, 768, 0), [("full+moe", 48)], ""),
    "deepseek-ai/DeepSeek-V3": ((61, 128, 128, 7168, 18432, 129280, 163840), (256, 8, 2048, 2048), [("full+dense", 3), ("full+moe", 58)], "fp8"),
    "openai/gpt-oss-20b": ((24, 64, 8, 2880, 2880, 201088, 131072), (32, 4, 2880, 0), [("sliding(128)+moe", 12), ("full+moe", 12)], "mxfp4"),
    "openai/gpt-oss-120b": ((36, 64, 8, 2880, 2880, 201088, 131072), (128, 4, 2880, 0), [("sliding(128)+moe", 18), ("full+moe", 18)], "mxfp4"),
    "mistralai/Mistral-7B-v0.1": ((32, 32, 8, 4096, 14336, 32000, 32768), None, [("sliding(4096)+dense", 32)], ""),
}
# EAGLE-3 heads for them: one dense Llama layer at the target's width (SpecForge's training configs)
MODERN_HEADS = {
    "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge": ((1, 32, 4, 2048, 12288, 32000, 40960), "Qwen/Qwen3-30B-A3B"),
    "zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead": ((1, 32, 4, 2048, 12288, 32000, 40960), "Qwen/Qwen3-30B-A3B"),
    "Dogacel/specdrift-gpt-oss-120b-eagle3": ((1, 64, 8, 2880, 17280, 32000, 131072), "openai/gpt-oss-120b"),
    "Dogacel/specdrift-gpt-oss-20b-eagle3": ((1, 64, 8, 2880, 17280, 32000, 131072), "openai/gpt-oss-20b"),
}
# the contexts the catalog capped at 8,192 before they came from the configs
CAPPED = {"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"}


def _numbers(cfg):
    return (cfg.num_layers, cfg.num_q_heads, cfg.num_kv_heads, cfg.embedding_dim, cfg.mlp_hidden_dim, cfg.vocab_size, cfg.max_model_len)


@pytest.mark.parametrize("name", sorted(CARDS))
def test_catalog_models_match_their_model_cards(name):
    cfg = model_config(name)
    assert _numbers(cfg) == CARDS[name]
    assert cfg.use_gated_mlp and eagle_head(name) is None
    shape = model_shape(name)
    assert (shape.num_q_heads, shape.num_kv_heads, shape.embedding_dim, shape.mlp_hidden_dim, shape.vocab_size) == CARDS[name][1:6]


@pytest.mark.parametrize("name", sorted(HEADS))
def test_catalog_eagle_heads_match_their_configs(name):
    numbers, method, fc_inputs, target = HEADS[name]
    head = eagle_head(name)
    assert head is not None and _numbers(head) == numbers
    assert (head.method, head.fc_inputs, head.targets) == (method, fc_inputs, (target,))
    assert head.max_model_len == model_config(target).max_model_len


@pytest.mark.parametrize("name", sorted(MODERN))
def test_todays_models_match_their_model_cards(name):
    numbers, moe, groups, method = MODERN[name]
    cfg = model_config(name)
    assert _numbers(cfg) == numbers and eagle_head(name) is None
    shape = model_shape(name)
    assert [(kind.label, count) for kind, count in shape.layer_groups(cfg.num_layers)] == groups
    assert (None if shape.moe is None else (shape.moe.num_experts, shape.moe.experts_per_token, shape.moe.expert_hidden_dim, shape.moe.shared_hidden_dim)) == moe
    assert shape.precision.method == method


def test_deepseek_v3_keeps_its_mla_and_mtp_fields():
    from simulator.vidur.models import model_facts

    def mtp_layers(name):
        return model_facts(name, model_config(name)).mtp_layers

    shape = model_shape("deepseek-ai/DeepSeek-V3")
    mla = shape.mla
    assert (mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim) == (1536, 512, 128, 64, 128)
    assert mla.latent_dim == 576  # the latent cached per token and layer, once for all heads
    assert mtp_layers("deepseek-ai/DeepSeek-V3") == 1  # num_nextn_predict_layers, for an MTP proposer
    assert mtp_layers("Qwen/Qwen3-30B-A3B") == 0
    assert shape.precision == shape.precision.__class__(attention="fp8", ffn="fp8", experts="fp8", method="fp8")


@pytest.mark.parametrize("name", sorted(MODERN_HEADS))
def test_eagle3_heads_for_todays_models(name):
    numbers, target = MODERN_HEADS[name]
    head = eagle_head(name)
    assert head is not None and _numbers(head) == numbers and head.targets == (target,) and head.method == "eagle3"
    assert head.embedding_dim == model_config(target).embedding_dim


def test_the_catalog_is_values_that_cannot_be_changed():
    """The catalog's specs are built once, as immutable values: Vidur's classes are made from them
    (by the adapter package), and no caller can edit a model's numbers in place."""
    name = "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(TypeError):
        CATALOG[name] = CATALOG[name]  # a read-only mapping
    with pytest.raises(dataclasses.FrozenInstanceError):
        CATALOG[name].num_layers = 1
    assert model_config(name).num_layers == CATALOG[name].num_layers == 32


def test_every_catalog_entry_is_checked_here_and_names_are_unchanged():
    ours = {n for n in known_models() if model_config(n).__class__.__module__ == "simulator.vidur.models" and not n.endswith(" (MTP layer)")}
    assert ours == set(CATALOG) == set(CARDS) | set(HEADS) | set(DRAFTERS) | set(MODERN) | set(MODERN_HEADS)
    assert "meta-llama/Llama-2-7b-hf" in known_models()  # Vidur's own models stay known


def test_context_comes_from_the_config_not_a_cap():
    for name in CAPPED:
        assert model_config(name).max_model_len > 8192


def test_catalog_configs_pickle_by_reference():
    cfg = model_config("meta-llama/Llama-3.1-8B-Instruct")
    assert pickle.loads(pickle.dumps(cfg)) == cfg


# --- a user's config.json ---------------------------------------------------------------------
# path: (layers, q heads, kv heads, hidden, intermediate, vocabulary, context, tied embeddings)
USER = {
    "Qwen2.5-7B-Instruct": (28, 28, 4, 3584, 18944, 152064, 32768, False),
    "Qwen2.5-0.5B-Instruct": (24, 14, 2, 896, 4864, 151936, 32768, True),
    "Qwen3-8B": (36, 32, 8, 4096, 12288, 151936, 40960, False),
    "Mistral-7B-Instruct-v0.3/config.json": (32, 32, 8, 4096, 14336, 32768, 32768, False),
    "Qwen3-0.6B": (28, 16, 8, 1024, 3072, 151936, 40960, True),
}


@pytest.mark.parametrize("path", sorted(USER))
def test_user_configs_load_from_a_directory_or_the_file(path):
    cfg = model_config(str(HF / path))
    assert _numbers(cfg) + (cfg.tie_word_embeddings,) == USER[path]
    assert model_shape(str(HF / path)).vocab_size == USER[path][5]
    assert str(HF / path) not in known_models()


def test_explicit_head_dim():
    # Qwen3-8B states head_dim 128 = 4096 / 32: the shape is the derived one
    qwen3 = model_shape(str(HF / "Qwen3-8B"))
    assert (qwen3.head_dim, qwen3.head_size, qwen3.qkv_dim) == (128, 0, (32 + 2 * 8) * 128)
    # a head size that is not hidden / heads (Qwen3-4B: 2560 / 32 = 80, head_dim 128) widens QKV
    wide = ModelShape(num_q_heads=32, num_kv_heads=8, embedding_dim=2560, mlp_hidden_dim=9728, vocab_size=151936, head_size=128)
    assert (wide.head_dim, wide.sharded(2).qkv_dim) == (128, (16 + 2 * 4) * 128)


def test_an_explicit_head_dim_is_costed_and_holds_kv():
    from simulator.engine.memory_plan import model_memory
    from simulator.vidur.configs import ReplicaConfig

    name = str(HF / "Qwen3-0.6B")  # head_dim 128 where hidden / heads = 1024 / 16 = 64
    shape = model_shape(name)
    assert (shape.head_dim, shape.qkv_dim) == (128, (16 + 2 * 8) * 128)
    replica = ReplicaConfig(model_name=name, device="a100", network_device="a100_dgx", num_pipeline_stages=1, tensor_parallel_size=1)
    memory = model_memory(replica, include_embeddings=False, shape=shape)
    assert memory.kv_bytes_per_token == 2 * 2 * 128 * 8 * 28  # K and V, 16-bit, 8 KV heads of 128, 28 layers
    # Q, K, V and O at 128 per head (the config's 0.44B non-embedding parameters), not at Vidur's 64
    per_layer = 1024 * 128 * (16 + 2 * 8) + 16 * 128 * 1024 + 3 * 1024 * 3072
    assert memory.weight_bytes == 2 * 28 * per_layer


def test_a_llama_config_from_a_path_equals_the_catalog_entry(tmp_path):
    from importlib import resources

    text = (resources.files("simulator.models") / "data" / "meta-llama--Llama-3.1-8B-Instruct.json").read_text()
    (tmp_path / "config.json").write_text(text)
    assert _numbers(model_config(str(tmp_path))) == CARDS["meta-llama/Llama-3.1-8B-Instruct"]
    assert model_shape(str(tmp_path)) == model_shape("meta-llama/Llama-3.1-8B-Instruct")


def _tiny_run(model, device="h100", **speculation):
    workload = ClosedLoopWorkload.fixed(2, 4, 200, 24)
    spec = SpeculationConfig(**speculation) if speculation else SpeculationConfig()
    return simulator.run(RunConfig(workload=workload, model=model, device=device, speculation=spec))


@pytest.mark.slow
@pytest.mark.parametrize("path", ["Qwen2.5-7B-Instruct", "Qwen3-8B", "Qwen3-0.6B", "Mistral-7B-Instruct-v0.3/config.json"])
@pytest.mark.simulation
def test_each_architecture_simulates(path):
    result = _tiny_run(str(HF / path))
    assert result.summary["num_requests"] == 4 and result.summary["tpot_p50_s"] > 0


@pytest.mark.slow
@pytest.mark.simulation
def test_bigger_models_decode_slower():
    # a memory-bound decode step reads the weights: 7.6B parameters take longer than 0.5B
    big, small = _tiny_run(str(HF / "Qwen2.5-7B-Instruct")), _tiny_run(str(HF / "Qwen2.5-0.5B-Instruct"))
    assert big.summary["tpot_p50_s"] > 2 * small.summary["tpot_p50_s"]


@pytest.mark.slow
@pytest.mark.simulation
def test_a_draft_model_and_an_eagle3_head_from_paths_simulate():
    draft = _tiny_run(
        str(HF / "Qwen2.5-7B-Instruct"), num_speculative_tokens=2, acceptance_rate=0.6, proposer="draft",
        draft_model=str(HF / "Qwen2.5-0.5B-Instruct"),
    )
    assert draft.summary["proposed_tokens"] > 0
    head = eagle_head(str(HF / "EAGLE3-LLaMA3.1-Instruct-8B"))
    assert (head.method, head.fc_inputs, head.vocab_size, head.max_model_len) == ("eagle3", 3, 32000, 131072)
    eagle3 = _tiny_run(
        "meta-llama/Llama-3.1-8B-Instruct", num_speculative_tokens=2, acceptance_rate=0.6, proposer="eagle3",
        draft_model=str(HF / "EAGLE3-LLaMA3.1-Instruct-8B"),
    )
    same = _tiny_run(
        "meta-llama/Llama-3.1-8B-Instruct", num_speculative_tokens=2, acceptance_rate=0.6, proposer="eagle3",
        draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    )
    # the same head from a path and from the catalog costs the same
    assert eagle3.summary["tpot_p50_s"] == pytest.approx(same.summary["tpot_p50_s"], rel=1e-9)


# --- the context limit and the tables ------------------------------------------------------------
def test_tables_cover_the_run_not_the_context():
    assert table_tokens(4096, 1100) == 4096  # a context under the floor: its tables, as before the cap went
    assert table_tokens(8192, 8192) == 8192
    assert table_tokens(131072, 2000) == TABLE_FLOOR == 8192  # Llama-3.1-8B, a normal run: as when capped
    assert table_tokens(131072, 8193) == 16384
    assert table_tokens(131072, 100_000) == 131072
    assert table_tokens(40960, 40000) == 40960  # never past the context


@pytest.mark.slow
@pytest.mark.simulation
def test_a_request_past_the_old_cap_runs_on_llama_31():
    workload = ClosedLoopWorkload.fixed(1, 1, 12000, 8)
    result = simulator.run(RunConfig(workload=workload, model="meta-llama/Llama-3.1-8B-Instruct", device="h100"))
    assert result.summary["num_requests"] == 1


def test_a_request_past_the_real_context_is_refused():
    workload = ClosedLoopWorkload.fixed(1, 1, 32768, 8)
    with pytest.raises(ConfigError, match="exceeds .*Qwen2.5-7B-Instruct's context of 32768"):
        simulator.run(RunConfig(workload=workload, model=str(HF / "Qwen2.5-7B-Instruct"), device="h100"))


# --- refusals ------------------------------------------------------------------------------------
def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


MIXTRAL = json.loads((HF / "Mixtral-8x7B-v0.1" / "config.json").read_text())


@pytest.mark.parametrize(
    "config, field",
    [
        ({**MIXTRAL, "num_experts_per_tok": 9}, "num_experts_per_tok"),  # more experts per token than experts
        ({**MIXTRAL, "architectures": ["Llama4ForConditionalGeneration"]}, "architectures"),
        ({**MIXTRAL, "layer_types": ["chunked_attention"] * 32}, "layer_types"),  # an attention variant not modelled
    ],
)
def test_unsupported_models_exit_2_naming_the_field_and_file(config, field, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out.json"
    proc = _cli("--model", str(tmp_path / "model"), "--json", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"'{field}'" in lines[0] and str(tmp_path / "model" / "config.json") in lines[0]
    assert not out.exists()


BASE = json.loads((HF / "Qwen3-8B" / "config.json").read_text())


@pytest.mark.parametrize(
    "change, field",
    [
        ({"architectures": ["GPT2LMHeadModel"]}, "architectures"),
        ({"architectures": "Qwen3ForCausalLM"}, "architectures"),
        ({"hidden_size": None}, "hidden_size"),
        ({"num_attention_heads": "32"}, "num_attention_heads"),
        ({"num_hidden_layers": 36.0}, "num_hidden_layers"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"num_key_value_heads": 5}, "num_key_value_heads"),
        ({"tie_word_embeddings": "no"}, "tie_word_embeddings"),
        ({"num_experts": 128}, "num_experts"),  # experts on a dense architecture
        ({"num_experts": 128, "architectures": ["Qwen3MoeForCausalLM"]}, "moe_intermediate_size"),
        ({"use_sliding_window": True, "sliding_window": 4096}, "use_sliding_window"),
        ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types"),
        ({"quantization_config": {"quant_method": "awq"}}, "quantization_config"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"eagle_targets": ["meta-llama/Llama-3.1-8B-Instruct"]}, "eagle_targets"),
    ],
)
def test_bad_configs_are_refused_naming_the_field(change, field, tmp_path):
    config = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as error:
        model_config(str(tmp_path))
    message = str(error.value)
    assert f"'{field}'" in message and str(tmp_path / "config.json") in message and "\n" not in message


def test_a_window_no_shorter_than_the_context_is_full_attention():
    # Qwen2.5 ships sliding_window 131072 with use_sliding_window false; Qwama ships 32768 = its context
    assert parse_config({**BASE, "sliding_window": 40960}, "x", "x").max_model_len == 40960
    assert parse_config({**BASE, "sliding_window": 4096, "use_sliding_window": False}, "x", "x").max_model_len == 40960


def test_an_eagle_head_must_name_its_targets(tmp_path):
    config = json.loads((HF / "EAGLE3-LLaMA3.1-Instruct-8B" / "config.json").read_text())
    del config["eagle_targets"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="missing field 'eagle_targets'"):
        eagle_head(str(tmp_path))
    config["eagle_targets"] = ["nobody/Model-7B"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="field 'eagle_targets': unknown model 'nobody/Model-7B'"):
        eagle_head(str(tmp_path / "other"))


def test_unknown_names_and_missing_paths_say_what_to_give(tmp_path):
    with pytest.raises(ConfigError, match="unknown model 'Qwen/Qwen2.5-7B'.*local path to a Hugging Face config.json"):
        model_config("Qwen/Qwen2.5-7B")
    with pytest.raises(ConfigError, match="no config.json at"):
        model_config(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        model_config(str(tmp_path))


def test_a_head_for_another_target_is_refused_from_a_path():
    with pytest.raises(ConfigError, match="trained for"):
        _tiny_run(
            "meta-llama/Meta-Llama-3-8B-Instruct", num_speculative_tokens=2, acceptance_rate=0.6, proposer="eagle3",
            draft_model=str(HF / "EAGLE3-LLaMA3.1-Instruct-8B"),
        )



def test_the_catalogs_files_are_part_of_the_model_hash(tmp_path):
    import shutil

    from simulator.util import versions

    package = tmp_path / "simulator"
    shutil.copytree(versions.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = versions.model_hash(package)
    path = package / "models" / "data" / "meta-llama--Llama-3.1-8B-Instruct.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps(config))  # layout only
    assert versions.model_hash(package) == before
    path.write_text(json.dumps({**config, "intermediate_size": 14337}))
    assert versions.model_hash(package) != before


def test_an_edited_config_gets_a_new_result_cache_key(tmp_path):
    # each process reads a path once; a later process must not reuse results of the file's old numbers
    path = tmp_path / "model"
    path.mkdir()
    script = (
        # profile_hash: the part of the run key that covers the files a run reads (the rest is the
        # run's settings, the package's model hash and Vidur's version)
        "import sys; from simulator import RunConfig; from simulator.runs.cache import profile_hash; "
        "print(profile_hash(RunConfig(model=sys.argv[1], device='h100')))"
    )

    def key():
        return subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True, cwd=ROOT).stdout

    (path / "config.json").write_text(json.dumps(BASE))
    first = key()
    (path / "config.json").write_text(json.dumps({**BASE, "intermediate_size": 12800}))
    assert key() != first
    (path / "config.json").write_text(json.dumps(BASE, indent=4))  # layout only: the same numbers
    assert key() == first


def test_tied_embeddings_are_one_matrix_in_a_drafts_memory():
    """A draft model with tied embeddings (Qwen2.5-0.5B) holds its embedding and LM head as one matrix."""
    from simulator.engine.memory_plan import model_memory, network_memory
    from simulator.speculative import proposers
    from simulator.speculative.proposers.base import SpeculationSettings
    from simulator.vidur.configs import ReplicaConfig

    def draft_memory(replica, _):
        return proposers.kind("draft").draft_memory(network_memory(replica, shape_of(replica.model_config)), SpeculationSettings(k=1))

    name = str(HF / "Qwen2.5-0.5B-Instruct")
    model_shape(name)  # reads the config.json and registers it with Vidur
    replica = ReplicaConfig(model_name=name, device="a100", network_device="a100_dgx", num_pipeline_stages=1, tensor_parallel_size=1)
    model = replica.model_config
    assert model.tie_word_embeddings
    layers = model_memory(replica, include_embeddings=False, shape=shape_of(model)).weight_bytes
    assert draft_memory(replica, None).weight_bytes - layers == 2 * model.vocab_size * model.embedding_dim  # one 16-bit matrix
    untied_name = str(HF / "Qwen2.5-7B-Instruct")  # tie_word_embeddings false: embedding and LM head are two matrices
    model_shape(untied_name)
    untied = ReplicaConfig(model_name=untied_name, device="a100", network_device="a100_dgx", num_pipeline_stages=1, tensor_parallel_size=1)
    m = untied.model_config
    assert not m.tie_word_embeddings
    extra = draft_memory(untied, None).weight_bytes - model_memory(untied, include_embeddings=False, shape=shape_of(m)).weight_bytes
    assert extra == 2 * 2 * m.vocab_size * m.embedding_dim


@pytest.mark.parametrize("name", sorted(DRAFTERS))
def test_catalog_dflash_drafters_match_their_configs(name):
    from simulator.vidur.models import model_facts

    numbers, block, taps, target = DRAFTERS[name]
    cfg = model_config(name)
    assert _numbers(cfg) == numbers
    facts = model_facts(name, cfg)
    assert (facts.drafter, facts.block_size, facts.target_layer_ids, facts.fc_inputs, facts.targets) == ("dflash", block, taps, len(taps), (target,))


def test_mtp_layers_are_read_from_the_targets_config():
    from simulator.vidur.models import model_facts, mtp_layer_model

    facts = model_facts("XiaomiMiMo/MiMo-7B-Base", model_config("XiaomiMiMo/MiMo-7B-Base"))
    assert (facts.architecture, facts.mtp_layers, facts.mtp_field) == ("MiMoForCausalLM", 1, "num_nextn_predict_layers")
    name, layer = mtp_layer_model("XiaomiMiMo/MiMo-7B-Base")
    assert name == "XiaomiMiMo/MiMo-7B-Base (MTP layer)"
    assert _numbers(layer) == (1,) + CARDS["XiaomiMiMo/MiMo-7B-Base"][1:]  # one decoder layer at the target's shape
    assert model_facts("Qwen/Qwen3-8B", model_config("Qwen/Qwen3-8B")).mtp_layers == 0


def test_mtp_layer_fields_of_other_families_are_read_generically():
    base = json.loads((HF / "Qwen3-8B" / "config.json").read_text())
    assert parse_config({**base, "mtp_num_hidden_layers": 2}, "x", "test").mtp_layers == 2
    assert parse_config({**base, "num_nextn_predict_layers": 3}, "x", "test").mtp_field == "num_nextn_predict_layers"
    with pytest.raises(ConfigError, match="num_nextn_predict_layers"):
        parse_config({**base, "num_nextn_predict_layers": -1}, "x", "test")


# --- a local path is read when the run is built ----------------------------------------------
def test_a_local_model_is_read_when_its_run_config_is_built_and_resolution_reads_no_file(tmp_path):
    from simulator.vidur.models import known_model

    (tmp_path / "model").mkdir()
    bad = {k: v for k, v in {**BASE, "hidden_act": "gelu"}.items() if v is not None}
    (tmp_path / "model" / "config.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="'hidden_act'"):  # refused at construction, before any resolution
        RunConfig(model=str(tmp_path / "model"))
    # the lookup resolution makes reads nothing: a path no RunConfig has read is unknown to it
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "config.json").write_text(json.dumps(BASE))
    with pytest.raises(ConfigError, match="unknown model"):
        known_model(str(tmp_path / "good"))
    config = RunConfig(model=str(tmp_path / "good"))
    assert known_model(config.model).num_layers == BASE["num_hidden_layers"]


def test_a_pickled_run_config_reads_its_local_model_in_the_process_it_arrives_in(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(BASE))
    blob = pickle.dumps(RunConfig(model=str(tmp_path)))
    script = (
        "import pickle, sys\n"
        "from simulator.vidur.models import known_model\n"
        "config = pickle.loads(sys.stdin.buffer.read())\n"
        "print(known_model(config.model).num_layers)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], input=blob, capture_output=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == str(BASE["num_hidden_layers"])
