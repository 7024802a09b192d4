"""EAGLE proposers, the LM head, closed-loop load and trace lengths, and their bad inputs."""

import subprocess
import sys

import numpy as np
import pytest

import simulator
from simulator import ClosedLoopWorkload, RunConfig, SpeculationConfig
from simulator.engine.resolve import resolve_run
from simulator.util.errors import ConfigError
from simulator.runs.workloads import draw_lengths, read_trace, trace_workload

from repo import SHARED_DIR

TARGET = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE1 = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
ONE_AT_A_TIME = ClosedLoopWorkload.fixed(1, 4, 100, 96)


def _run(engine=None, **speculation):
    spec = SpeculationConfig(**speculation) if speculation else SpeculationConfig()
    pinned = {"engine": engine} if engine else {}
    return simulator.run(RunConfig(workload=ONE_AT_A_TIME, model=TARGET, device="h100", speculation=spec, **pinned))


@pytest.fixture(scope="module")
def baseline():
    return _run()


@pytest.mark.slow
@pytest.mark.simulation
def test_eagle_heads_cost_k_passes_and_speed_up_batch_one(baseline):
    def run(proposer, k):
        # vLLM 0.10.1's engine issues both alike (synchronous, one capture grid); from 0.19 an EAGLE head keeps
        # async scheduling and, from 0.29, Model Runner V2, where the n-gram proposer does not
        extra = dict(draft_model=EAGLE1) if proposer == "eagle" else dict(ngram_overhead_ms=0.0)
        return _run(engine="vllm-0.10.1", num_speculative_tokens=k, acceptance_rate=0.7, proposer=proposer, **extra)

    draft_time = {}
    for k in (1, 3):
        eagle, free = run("eagle", k), run("ngram", k)
        assert eagle.summary["tpot_p50_s"] < baseline.summary["tpot_p50_s"]
        # same draws, same steps: the difference is the head's passes alone
        assert eagle.summary["forward_passes"] == free.summary["forward_passes"]
        draft_time[k] = (eagle.summary["makespan_s"] - free.summary["makespan_s"]) / eagle.summary["forward_passes"]
        assert eagle.provenance["draft_profile_source"] == "builtin"
    # k = 3 runs the head three times per step, k = 1 once
    assert 2.0 * draft_time[1] < draft_time[3] < 4.0 * draft_time[1]


@pytest.mark.slow
@pytest.mark.simulation
def test_eagle3_head_is_cheaper_than_eagle1_per_step(baseline):
    # same acceptance draws; EAGLE-3 scores a 32k draft vocabulary instead of the target's 128k
    one = _run(num_speculative_tokens=3, acceptance_rate=0.7, proposer="eagle", draft_model=EAGLE1)
    three = _run(num_speculative_tokens=3, acceptance_rate=0.7, proposer="eagle3", draft_model=EAGLE3)
    assert one.summary["accepted_tokens"] == three.summary["accepted_tokens"]
    assert three.summary["tpot_p50_s"] < one.summary["tpot_p50_s"]


@pytest.mark.parametrize(
    "speculation, model, message",
    [
        (dict(proposer="eagle", draft_model="yuhuili/EAGLE-Nope"), TARGET, "unknown model 'yuhuili/EAGLE-Nope'"),
        (dict(proposer="medusa", draft_model=EAGLE1), TARGET, "proposer = 'medusa'"),
        (dict(proposer="eagle", draft_model=EAGLE1), "meta-llama/Meta-Llama-3-70B-Instruct", "hidden size 4096 cannot serve"),
        (dict(proposer="eagle3", draft_model=EAGLE1), TARGET, "an EAGLE head, but proposer = 'eagle3'"),
        (dict(proposer="eagle", draft_model="JackFram/llama-68m"), TARGET, "not an EAGLE head"),
        (dict(proposer="draft", draft_model=EAGLE1), TARGET, "use proposer = 'eagle'"),
        (dict(proposer="eagle"), TARGET, "draft_model = None: is required"),
        (dict(proposer="eagle", draft_model=EAGLE1), "meta-llama/Llama-2-7b-hf", "trained for another target"),
        (dict(proposer="eagle3", draft_model=EAGLE3), "meta-llama/Llama-2-7b-hf", "trained for another target"),
    ],
)
def test_bad_proposers_are_refused_naming_the_field(speculation, model, message):
    with pytest.raises(ConfigError, match=message):
        simulator.run(RunConfig(workload=ONE_AT_A_TIME, model=model, device="h100", speculation=SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.5, **speculation)))


def test_eagle_head_memory_is_one_layer_plus_fc():
    config = RunConfig(model=TARGET, device="h100", speculation=SpeculationConfig(num_speculative_tokens=2, acceptance_rate=0.5, proposer="eagle3", draft_model=EAGLE3))
    head = resolve_run(config).memory.draft
    layer_params = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336  # qkv, o, gated MLP
    fc_and_vocab = 3 * 4096 * 4096 + 32000 * 4096
    assert head.weight_bytes == pytest.approx(2 * (layer_params + fc_and_vocab), rel=0.01)
    assert head.kv_bytes_per_token == 2 * 2 * 128 * 8  # K and V, 8 KV heads of 128, one layer


@pytest.mark.simulation
def test_closed_loop_keeps_exactly_n_in_flight():
    result = simulator.run(RunConfig(workload=ClosedLoopWorkload.fixed(3, 12, 256, 32)))
    f = result.requests
    starts, ends = f.arrival_s.to_numpy(), (f.arrival_s + f.e2e_s).to_numpy()
    in_flight = [int(((starts <= t) & (ends > t)).sum()) for t in starts]
    assert max(in_flight) == 3
    assert (starts[:3] == 0).all() and (starts[3:] > 0).all()
    # every later arrival is some earlier request's completion
    assert all(np.isclose(ends, t).any() for t in starts[3:])


@pytest.mark.simulation
def test_closed_loop_of_one_never_overlaps():
    f = simulator.run(RunConfig(workload=ClosedLoopWorkload.fixed(1, 5, 128, 16))).requests
    assert np.allclose(f.arrival_s.to_numpy()[1:], (f.arrival_s + f.e2e_s).to_numpy()[:-1])


def _trace(tmp_path, text):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the file is empty"),
        ("num_prefill_tokens,num_decode_tokens\n", "has a header but no rows"),
        ("prompt,output\n10,5\n", r"missing column\(s\) \['num_prefill_tokens', 'num_decode_tokens'\]"),
        ("num_prefill_tokens,num_decode_tokens\n10,5\n4000,200\n", "data row 2 needs 4200 tokens"),
        ("num_prefill_tokens,num_decode_tokens\n10,0\n", "data row 1 has num_prefill_tokens = 10, num_decode_tokens = 0;"),
        ("num_prefill_tokens,num_decode_tokens\n10,5\ninf,5\n", "data row 2 has num_prefill_tokens = inf, num_decode_tokens = 5;"),
    ],
)
def test_bad_traces_are_refused(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        read_trace(_trace(tmp_path, text), 4096)


def test_missing_trace_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        read_trace(tmp_path / "absent.csv", 4096)


def test_trace_lengths_are_seeded_draws_of_its_rows(tmp_path):
    lengths = read_trace(_trace(tmp_path, "num_prefill_tokens,num_decode_tokens,extra\n10,5,x\n20,7,y\n30,9,z\n"), 4096)
    a, b = draw_lengths(lengths, 50, seed=3), draw_lengths(lengths, 50, seed=3)
    assert a == b and set(zip(*a)) <= {(10, 5), (20, 7), (30, 9)} and len(set(zip(*a))) == 3
    assert draw_lengths(lengths, 50, seed=4) != a
    closed = trace_workload(_trace(tmp_path, "num_prefill_tokens,num_decode_tokens\n10,5\n"), 4096, 6, 0, concurrency=2)
    assert isinstance(closed, ClosedLoopWorkload) and closed.prompt_tokens == (10,) * 6


@pytest.mark.shared
@pytest.mark.skipif(not (SHARED_DIR / "vidur-traces").is_dir(), reason="../shared/vidur-traces is absent (not part of a clone)")
def test_a_vidur_trace_runs():
    path = SHARED_DIR / "vidur-traces" / "splitwise_code.csv"
    workload = trace_workload(path, 8192, 20, 1, rate=2.0)
    result = simulator.run(RunConfig(workload=workload, model=TARGET, device="h100"))
    assert list(result.requests.prompt_tokens) == list(workload.prompt_tokens)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrency", "0"], "--max-concurrency/--concurrency: 0 must be a positive integer"),
        (["--concurrency", "4", "--rate", "2"], "--max-concurrency 4 and --request-rate 2: arrivals both paced and capped are not modelled"),
        (["--trace", "/nonexistent/trace.csv"], "file not found"),
        (["-k", "2", "--acceptance", "0.5", "--proposer", "eagle", "--draft-model", "JackFram/llama-68m"], "not an EAGLE head"),
    ],
)
def test_cli_bad_workload_and_proposer_exit_2(args, message, tmp_path):
    out = subprocess.run([sys.executable, "-m", "simulator", *args, "--json", str(tmp_path / "out.json")], capture_output=True, text=True)
    assert out.returncode == 2 and message in out.stderr
    assert not (tmp_path / "out.json").exists()


def test_one_trace_reader_two_stated_policies(tmp_path):
    """The simulator refuses an unusable row, naming it; the validation workload skips it (a server
    can only replay exact, servable lengths); a file with no usable row is refused under both."""
    path = _trace(tmp_path, "num_prefill_tokens,num_decode_tokens\n10,5\n0,5\n4000,200\nx,3\n20,7\n")
    with pytest.raises(ConfigError, match="data row 2 has num_prefill_tokens = 0, num_decode_tokens = 5;"):
        read_trace(path, 4096)
    assert read_trace(path, 4096, unusable="skip").tolist() == [[10, 5], [20, 7]]
    assert read_trace(path, None, unusable="skip").tolist() == [[10, 5], [4000, 200], [20, 7]]
    infinite = _trace(tmp_path, "num_prefill_tokens,num_decode_tokens\n10,5\ninf,5\n")
    assert read_trace(infinite, None, unusable="skip").tolist() == [[10, 5]]
    with pytest.raises(ConfigError, match="no row has integer lengths >= 1 within 10 total tokens"):
        read_trace(path, 10, unusable="skip")
