"""The sweep spec: the default grid, and every kind of bad spec refused with a clear message."""

from __future__ import annotations

import pytest

from simulator.util.errors import ConfigError
from repo import DATA_DIR
from simulator.sweep.runner import expand, expand_progress
from simulator.specs.sweep import load_spec, parse_spec

SMALL = """
[run]
model = "meta-llama/Llama-2-7b-hf"
device = "a100"
seed = 3

[workload]
num_requests = 12
prompt_tokens = 128
output_tokens = 32
seed = 7

[grid]
arrival_rate = [4.0, 2]
acceptance_rate = [0.7]
num_speculative_tokens = [2]
attention = ["per_token", "kv_once"]
proposer = ["ngram"]

[baseline]
arrival_rate = [2.0, 4.0]
"""


def test_default_spec_is_the_published_39_run_grid():
    spec = load_spec(DATA_DIR / "sweep.toml")
    configs = expand(spec)
    assert len(configs) == spec.num_runs == 39
    baselines = [c for c in configs if not c.speculation.enabled]
    assert sorted(c.workload.arrival_rate for c in baselines) == [2.0, 4.0, 6.0]
    speculative = [c for c in configs if c.speculation.enabled]
    assert {(c.speculation.acceptance_rate, c.speculation.num_speculative_tokens, c.speculation.attention) for c in speculative} == {
        (a, k, m) for a in (0.5, 0.7, 0.9) for k in (2, 4) for m in ("kv_once", "per_token")
    }
    assert {c.workload for c in configs if c.workload.arrival_rate == 4.0} == {baselines[1].workload}
    assert {(c.model, c.device, c.workload.num_requests, c.workload.prompt_tokens, c.workload.output_tokens) for c in configs} == {
        ("meta-llama/Llama-2-7b-hf", "a100", 300, 1024, 256)
    }
    assert all(c.speculation.proposer == "ngram" for c in speculative)


def test_expansion_is_sorted_by_inputs_whatever_the_spec_order():
    configs = expand(parse_spec(SMALL))
    keys = [(c.workload.arrival_rate, c.speculation.num_speculative_tokens, c.speculation.attention if c.speculation.enabled else "") for c in configs]
    assert keys == [(2.0, 0, ""), (2.0, 2, "kv_once"), (2.0, 2, "per_token"), (4.0, 0, ""), (4.0, 2, "kv_once"), (4.0, 2, "per_token")]
    assert all(c.seed == 3 and c.workload.seed == 7 for c in configs)


def test_progress_runs_never_overlap():
    spec = load_spec(DATA_DIR / "sweep.toml")
    runs = expand_progress(spec)
    assert len(runs) == len(spec.progress.acceptance_rates) * len(spec.progress.speculative_tokens)
    gaps = {b - a for r in runs for a, b in zip(r.workload.arrival_s, r.workload.arrival_s[1:])}
    assert gaps == {spec.progress.interarrival_s}
    assert expand_progress(parse_spec(SMALL)) == []


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s + "\n[extra]\nx = 1\n", "unknown section [extra]"),
        (lambda s: s.replace("seed = 3", "seed = 3\nsede = 4"), "[run]: unknown key 'sede'"),
        (lambda s: s.replace("num_requests = 12", "num_requests = 12.5"), "[workload]: num_requests = 12.5 must be an integer"),
        (lambda s: s.replace("num_requests = 12", "num_requests = 0"), "[workload] num_requests = 0 must be a positive integer"),
        (lambda s: s.replace("acceptance_rate = [0.7]", "acceptance_rate = [1.7]"), "[grid] acceptance_rate has 1.7"),
        (lambda s: s.replace("acceptance_rate = [0.7]", "acceptance_rate = []"), "[grid] acceptance_rate is empty"),
        (lambda s: s.replace('"per_token", "kv_once"', '"per_token", "flash"'), "[grid] attention has 'flash'"),
        (lambda s: s.replace("num_speculative_tokens = [2]", "num_speculative_tokens = [0, 2]"), "baselines go in [baseline]"),
        (lambda s: s.replace("arrival_rate = [4.0, 2]", "arrival_rate = [4.0, 4]"), "repeats a value"),
        (lambda s: s.replace("[baseline]\narrival_rate = [2.0, 4.0]", "[baseline]\narrival_rate = [2.0]"), "speculative runs at 4 req/s but [baseline]"),
        (lambda s: s.replace("[baseline]\narrival_rate = [2.0, 4.0]", ""), "missing section [baseline]"),
        (lambda s: s.replace("[baseline]\narrival_rate = [2.0, 4.0]", "[baseline]\narrival_rate = [2.0, 4.0, 8.0]"), "baseline at 8 req/s but [grid] has no"),
        (lambda s: s.replace("output_tokens = 32\n", ""), "[workload]: missing output_tokens"),
        (lambda s: s.replace("[grid]", "[grid"), "not valid TOML"),
        (lambda s: s.replace('proposer = ["ngram"]', 'proposer = ["draft"]'), "[grid] proposer has 'draft'"),
    ],
)
def test_bad_spec_is_refused_with_the_reason(change, message):
    with pytest.raises(ConfigError) as err:
        parse_spec(change(SMALL), source="spec.toml")
    assert "spec.toml" in str(err.value)
    assert message in str(err.value)


def test_missing_spec_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="absent.toml: file not found"):
        load_spec(tmp_path / "absent.toml")
