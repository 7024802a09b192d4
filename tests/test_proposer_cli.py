"""The proposers where a user meets them: vLLM's names on every command, each kind's options as
flags, and every bad proposer input refused with exit 2, one line naming the input and the fix,
and nothing written."""

from __future__ import annotations

import pytest

from simulator.cli import simulate as cli
from simulator.paysoff.command import main as paysoff_main
from simulator.validation.cli import main as validation_main

MIMO, QWEN3, DFLASH = "XiaomiMiMo/MiMo-7B-Base", "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"
LLAMA31, EAGLE3 = "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
TREE = ["--proposer", "eagle3_tree", "--model", LLAMA31, "--draft-model", EAGLE3, "--device", "h100"]


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle4"], ["--proposer eagle4: unknown; use one of ngram, ngram_gpu, suffix, draft, eagle, eagle3", "mtp, dflash"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "medusa"], ["--proposer medusa: Medusa heads are not modelled; the simulator models ngram"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "mtp", "--model", QWEN3], [f"model {QWEN3}: its config.json has no field 'num_nextn_predict_layers' or 'mtp_num_hidden_layers'"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "mimo_mtp"], ["model meta-llama/Llama-2-7b-hf", "no multi-token-prediction layers"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "mtp", "--model", MIMO, "--draft-model", "JackFram/llama-68m"], ["--draft-model JackFram/llama-68m: --proposer mtp uses no draft model"]),
        (["-k", "16", "--acceptance", "0.5", "--proposer", "dflash", "--model", QWEN3, "--draft-model", DFLASH], ["-k 16: --draft-model", "block_size = 16", "k must be at most 15"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "dflash", "--model", QWEN3, "--draft-model", EAGLE3], [f"--draft-model {EAGLE3}: an EAGLE3 head, but --proposer dflash"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "dflash", "--model", QWEN3], ["--proposer dflash needs --draft-model"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "ngram", "--suffix-max-tree-depth", "12"], ["--suffix-max-tree-depth 12: an option of --proposer suffix, not of --proposer ngram"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle3", "--model", LLAMA31, "--draft-model", EAGLE3, "--speculative-eagle-topk", "4"], ["--speculative-eagle-topk 4: an option of --proposer eagle_tree / eagle3_tree"]),
        (["-k", "8", "--acceptance-length", "3", "--proposer", "suffix"], ["--acceptance-length: --proposer suffix takes --acceptance or --acceptance-per-position"]),
        (["-k", "4", "--acceptance", "0.5", "--proposer", "suffix", "--suffix-mean-draft-length", "30"], ["--suffix-mean-draft-length 30: above the longest draft", "--suffix-max-tree-depth 24"]),
        ([*TREE, "-k", "5", "--acceptance", "0.6"], ["--acceptance: --proposer eagle3_tree takes --acceptance-length"]),
        ([*TREE, "-k", "5", "--speculative-num-draft-tokens", "64", "--speculative-eagle-topk", "8", "--acceptance-length", "6.5"], ["--acceptance-length 6.5: a tree of depth 5", "advances at most 6 tokens", "[1, 6]"]),
        ([*TREE, "-k", "2", "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1", "--acceptance-length", "3.5"], ["--acceptance-length 3.5: a tree of depth 2", "[1, 3]"]),
        ([*TREE, "-k", "2", "--speculative-num-draft-tokens", "64", "--speculative-eagle-topk", "2", "--acceptance-length", "2"], ["--speculative-num-draft-tokens 64: a tree of depth 2", "--speculative-eagle-topk 2", "at most 7 tokens"]),
        ([*TREE, "-k", "3", "--speculative-num-draft-tokens", "3", "--speculative-eagle-topk", "1", "--acceptance-length", "2"], ["--speculative-num-draft-tokens 3: with --speculative-eagle-topk 1", "give 4"]),
        ([*TREE, "--k-schedule", "[[1,256,3]]", "--acceptance-length", "2"], ["--k-schedule: --proposer eagle3_tree drafts a tree at one depth"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle3_parallel", "--model", LLAMA31, "--draft-model", EAGLE3], ["no 'pard_token' or 'ptd_token_id'", "use --proposer eagle3"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "ngram_gpu", "--prompt-lookup-min", "5", "--prompt-lookup-max", "3"], ["--prompt-lookup-min 5: above --prompt-lookup-max 3"]),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "suffix", "--suffix-min-token-prob", "1.5"], ["--suffix-min-token-prob", "<= 1"]),
    ],
)
def test_bad_proposer_input_exits_2_naming_the_input(argv, needles, capsys, tmp_path):
    out = tmp_path / "out.json"
    code = cli.main([*argv, "--num-prompts", "4", "--json", str(out)])
    stdout, stderr = capsys.readouterr()
    line = _one_line(stderr)
    assert code == 2 and line.startswith("error: "), stderr
    for needle in needles:
        assert needle in line, line
    assert stdout == "" and not out.exists()


def test_vllms_names_select_the_kinds():
    args = cli.build_parser().parse_args(["--proposer", "draft_model", "--draft-model", "JackFram/llama-68m", "-k", "2", "--acceptance", "0.5"])
    config, _ = cli.config_from_args(args)
    assert config.speculation.proposer == "draft"
    args = cli.build_parser().parse_args(["--proposer", "mimo_mtp", "--model", MIMO, "-k", "1", "--acceptance", "0.9"])
    assert cli.config_from_args(args)[0].speculation.proposer == "mtp"
    args = cli.build_parser().parse_args(["--proposer", "suffix", "-k", "12", "--acceptance", "0.5", "--suffix-max-tree-depth", "16"])
    spec = cli.config_from_args(args)[0].speculation
    assert spec.options == (("suffix_max_tree_depth", 16),) and spec.option_values["suffix_mean_draft_length"] == pytest.approx(3.260117)


SMALL = ["--concurrency", "1,8", "--k-range", "1-2", "--prompt-tokens", "128", "--output-tokens", "32", "--min-requests", "4", "--jobs", "1", "--no-progress"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--proposer", "nope", "--acceptance", "0.7"], "--proposer nope: unknown; use one of ngram"),
        (["--proposer", "mtp", "--acceptance", "0.7"], "no multi-token-prediction layers"),
        ([*TREE, "--acceptance-length", "3", "-k", "3"], "--proposer eagle3_tree: drafts a tree at one depth"),
        (["--proposer", "suffix", "--acceptance-length", "2", "-k", "3"], "--acceptance-length: --proposer suffix takes --acceptance or --acceptance-per-position"),
        (["--proposer", "ngram", "--suffix-max-tree-depth", "3", "--acceptance", "0.7"], "--suffix-max-tree-depth 3: an option of --proposer suffix"),
        (["--proposer", "dflash", "--model", QWEN3, "--draft-model", DFLASH, "--acceptance", "0.7", "--k-range", "1-16"], "k must be at most 15"),
    ],
)
def test_paysoff_refuses_bad_proposer_input(argv, needle, capsys, tmp_path):
    outputs = [tmp_path / "a.json", tmp_path / "a.csv"]
    code = paysoff_main([*SMALL, *argv, "--json", str(outputs[0]), "--csv", str(outputs[1])])
    out, err = capsys.readouterr()
    assert code == 2 and needle in _one_line(err), err
    assert out == "" and not any(p.exists() for p in outputs)


def test_the_validation_harness_takes_vllms_names(capsys, tmp_path):
    code = validation_main(["simulate", "--workload", "w", "--calibration", "c", "--out", str(tmp_path / "o"), "--proposer", "dflash"])
    assert code == 2 and "--proposer dflash needs --draft-model" in _one_line(capsys.readouterr().err)
    code = validation_main(["simulate", "--workload", "w", "--calibration", "c", "--out", str(tmp_path / "o"), "--proposer", "eagle7"])
    assert code == 2 and "--proposer eagle7: unknown; use one of" in _one_line(capsys.readouterr().err)


def test_mtp_on_deepseek_v3_drafts_with_its_own_mla_moe_layer():
    """The target's MTP layer is a decoder layer of the target's last kind: DeepSeek-V3's has
    latent attention and experts, and is costed as one."""
    from simulator import RunConfig, SpeculationConfig
    from simulator.runs.workload_kinds import ClosedLoopWorkload
    from simulator.engine.resolve import resolve_run

    config = RunConfig(
        workload=ClosedLoopWorkload.fixed(1, 2, 100, 10), model="deepseek-ai/DeepSeek-V3", device="h200", tensor_parallel_size=8,
        speculation=SpeculationConfig(proposer="deepseek_mtp", num_speculative_tokens=1, acceptance_rate=0.8),
    )
    draft = resolve_run(config).draft
    assert draft.name.endswith("(MTP layer)") and draft.model.num_layers == 1
    assert draft.shape.mla is not None and draft.shape.moe is not None
    assert [(kind.attention, kind.ffn, n) for kind, n in draft.shape.layer_groups(1)] == [("full", "moe", 1)]


# --- vLLM's --speculative-config as input (issue 26 §3) -----------------------------------------


def _config(*argv):
    return cli.config_from_args(cli.build_parser().parse_args(list(argv)))[0]


@pytest.mark.parametrize(
    ("speculative_config", "flags"),
    [
        ('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3}', ["--proposer", "ngram", "-k", "4", "--prompt-lookup-max", "3"]),
        ('{"model":"[ngram]","num_speculative_tokens":2,"prompt_lookup_max":3}', ["--proposer", "ngram", "-k", "2", "--prompt-lookup-max", "3"]),  # vLLM infers the method
        (f'{{"method":"eagle3","model":"{EAGLE3}","num_speculative_tokens":3}}', ["--proposer", "eagle3", "--draft-model", EAGLE3, "-k", "3"]),
        ('{"method":"suffix","num_speculative_tokens":12,"suffix_decoding_max_tree_depth":16}', ["--proposer", "suffix", "-k", "12", "--suffix-max-tree-depth", "16"]),
        ('{"method":"mimo_mtp","num_speculative_tokens":1}', ["--proposer", "mtp", "-k", "1"]),
        (f'{{"method":"mtp","model":"{MIMO}","num_speculative_tokens":1}}', ["--proposer", "mtp", "-k", "1"]),  # vLLM fills the target in
        ('{"method":"ngram","num_speculative_tokens":4}', ["--proposer", "ngram", "-k", "4"]),  # vLLM's unset lookup is the flags' default (issue 33)
        ('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"num_speculative_tokens_per_batch_size":[[1,16,4],[17,256,2]]}',
         ["--proposer", "ngram", "-k", "4", "--prompt-lookup-max", "3", "--k-schedule", "[[1,16,4],[17,256,2]]"]),
    ],
)
def test_a_speculative_config_runs_what_the_same_flags_run(speculative_config, flags):
    target = ["--model", MIMO] if "mtp" in speculative_config else ["--model", LLAMA31] if "eagle3" in speculative_config else []
    assert _config(*target, "--speculative-config", speculative_config, "--acceptance", "0.7") == _config(*target, *flags, "--acceptance", "0.7")


def test_vllms_prompt_lookup_defaults_apply_to_an_ngram_config():
    """vLLM runs 5..5 when a config names neither bound (the simulator's own flags default to the same)."""
    spec = _config("--speculative-config", '{"method":"ngram_gpu","num_speculative_tokens":3}', "--acceptance", "0.7").speculation
    assert spec.option_values["prompt_lookup_max"] == 5 and spec.kind.window(_settings(spec)) == (5, 5)
    spec = _config("--speculative-config", '{"method":"ngram_gpu","num_speculative_tokens":3,"prompt_lookup_min":2}', "--acceptance", "0.7").speculation
    assert spec.kind.window(_settings(spec)) == (2, 2)


def _settings(spec):
    from simulator.speculative.proposers.base import SpeculationSettings

    return SpeculationSettings(k=spec.num_speculative_tokens, options=spec.option_values)


NGRAM4 = '{"method":"ngram","num_speculative_tokens":4}'


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--speculative-config", NGRAM4, "-k", "2"], ["--speculative-config and -k both set num_speculative_tokens: give it once"]),
        (["--speculative-config", NGRAM4, "--proposer", "suffix"], ["--speculative-config and --proposer both set method"]),
        (["--speculative-config", '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}', "--prompt-lookup-max", "3"],
         ["--speculative-config and --prompt-lookup-max both set prompt_lookup_max"]),
        (["--speculative-config", '{"method":"ngram","num_speculative_tokens":4,"foo":1}'], ["--speculative-config: unknown key 'foo'; the keys it reads are"]),
        (["--speculative-config", '{"method":"ngram","num_speculative_tokens":4,"enforce_eager":true}'], ["enforce_eager is a vLLM key the simulator does not model; drop it"]),
        (["--speculative-config", f'{{"method":"eagle3","model":"{EAGLE3}","num_speculative_tokens":3,"prompt_lookup_max":3}}', "--model", LLAMA31],
         ["prompt_lookup_max is a key of method ngram / ngram_gpu, not of method eagle3"]),
        (["--speculative-config", '{"method":"eagle","model":"x","num_speculative_tokens":3,"parallel_drafting":true}'],
         ["parallel_drafting = true is modelled for method eagle3 (eagle3_parallel) only, not for method eagle"]),
        (["--speculative-config", '{"method":"ngram"}'], ["num_speculative_tokens is missing"]),
        (["--speculative-config", '{"method":"ngram","num_speculative_tokens":0}'], ["num_speculative_tokens = 0 must be an integer >= 1"]),
        (["--speculative-config", '{"method":"eagle3","num_speculative_tokens":3}'], ["method eagle3 needs \"model\""]),
        (["--speculative-config", '{"method":"ngram","model":"JackFram/llama-68m","num_speculative_tokens":3}'], ["method ngram drafts with nothing", "drop \"model\""]),
        (["--speculative-config", '{"method":"medusa","num_speculative_tokens":3}'], ["Medusa heads are not modelled"]),
        (["--speculative-config", '{"method":"suffix","num_speculative_tokens":8,"suffix_decoding_max_tree_depth":0}'], ["suffix_decoding_max_tree_depth = 0: proposer 'suffix' needs an integer >= 1"]),
        (["--speculative-config", "{'method': 'ngram'}"], ["--speculative-config \"{'method': 'ngram'}\": not valid JSON"]),
        (["--speculative-config", "[4]"], ["must be a JSON object"]),
    ],
)
def test_a_bad_speculative_config_exits_2_naming_the_key(argv, needles, capsys, tmp_path):
    out = tmp_path / "out.json"
    code = cli.main([*argv, "--acceptance", "0.7", "--num-prompts", "4", "--json", str(out)])
    stdout, stderr = capsys.readouterr()
    line = _one_line(stderr)
    assert code == 2 and line.startswith("error: "), stderr
    for needle in needles:
        assert needle in line, line
    assert stdout == "" and not out.exists()


def test_paysoff_reads_a_speculative_config_as_the_deployment_and_the_measured_k():
    from simulator.paysoff import command as paysoff

    args = paysoff.build_parser().parse_args(["--model", LLAMA31, "--device", "h100", "--speculative-config",
                                              f'{{"method":"eagle3","model":"{EAGLE3}","num_speculative_tokens":3}}', "--acceptance-length", "2.5", *SMALL[:4]])
    spec = paysoff.spec_from_args(args)
    profile = spec.profiles[0]
    flags = paysoff.build_parser().parse_args(["--model", LLAMA31, "--device", "h100", "--proposer", "eagle3", "--draft-model", EAGLE3,
                                               "--acceptance-length", "2.5", "-k", "3", *SMALL[:4]])
    assert profile == paysoff.spec_from_args(flags).profiles[0]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--speculative-config", NGRAM4, "-k", "4", "--acceptance-length", "2"], "--speculative-config and -k both set num_speculative_tokens"),
        (["--speculative-config", '{"method":"ngram","num_speculative_tokens":4,"num_speculative_tokens_per_batch_size":[[1,256,4]]}', "--acceptance", "0.7"],
         "num_speculative_tokens_per_batch_size is what this command recommends"),
    ],
)
def test_paysoff_refuses_a_conflicting_speculative_config(argv, needle, capsys, tmp_path):
    code = paysoff_main([*SMALL, *argv, "--json", str(tmp_path / "a.json")])
    out, err = capsys.readouterr()
    assert code == 2 and needle in _one_line(err), err
    assert out == "" and not (tmp_path / "a.json").exists()
