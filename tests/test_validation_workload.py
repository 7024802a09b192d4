"""Validation workloads: seeded generation, exact lengths, the file format and its checks."""

import json
from pathlib import Path

import numpy as np
import pytest

from repo import SHARED_DIR
from simulator.util.errors import ConfigError
from simulator.validation.cli import main
from simulator.validation.workload import WorkloadSpec, generate, read_length_trace, read_workload, write_workload

SHARED_TRACES = SHARED_DIR / "vidur-traces"


def _rewrite(path: Path, edit) -> None:
    """Apply ``edit(rows)`` to a workload file's JSON lines, keeping the header's hash as it was."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    edit(rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_same_seed_same_workload_byte_for_byte(tmp_path):
    spec = WorkloadSpec(num_requests=20, prompt_range=(8, 64), output_range=(4, 32), lengths="uniform", repeat_fraction=0.5, seed=3)
    write_workload(tmp_path / "a.jsonl", generate(spec))
    write_workload(tmp_path / "b.jsonl", generate(spec))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    other = generate(WorkloadSpec(num_requests=20, prompt_range=(8, 64), output_range=(4, 32), lengths="uniform", seed=4))
    assert other.workload_hash != generate(spec).workload_hash


def test_lengths_are_exact_and_prompts_are_token_ids():
    workload = generate(WorkloadSpec(num_requests=10, prompt_tokens=37, output_tokens=5, vocab_size=500, min_token_id=100))
    for request in workload.requests:
        assert request.prompt_tokens == 37 == len(request.prompt_token_ids)
        assert request.output_tokens == 5
        assert all(100 <= t < 500 for t in request.prompt_token_ids)
    assert len({r.prompt_token_ids for r in workload.requests}) == 10  # distinct prompts


def test_uniform_lengths_stay_in_range():
    workload = generate(WorkloadSpec(num_requests=200, lengths="uniform", prompt_range=(10, 20), output_range=(3, 4), seed=1))
    prompts = [r.prompt_tokens for r in workload.requests]
    outputs = [r.output_tokens for r in workload.requests]
    assert min(prompts) == 10 and max(prompts) == 20
    assert set(outputs) == {3, 4}


def test_poisson_and_fixed_arrivals():
    poisson = generate(WorkloadSpec(num_requests=2000, rate=5.0, prompt_tokens=4, output_tokens=2, seed=2))
    arrivals = np.array([r.arrival_s for r in poisson.requests])
    assert arrivals[0] == 0.0 and np.all(np.diff(arrivals) >= 0)
    assert (len(arrivals) - 1) / arrivals[-1] == pytest.approx(5.0, rel=0.1)
    gaps = np.diff(arrivals)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)  # exponential gaps
    fixed = generate(WorkloadSpec(num_requests=5, arrival="fixed", rate=4.0, prompt_tokens=4, output_tokens=2))
    assert [r.arrival_s for r in fixed.requests] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_changing_the_rate_keeps_the_prompts():
    a = generate(WorkloadSpec(num_requests=5, rate=1.0, prompt_tokens=16, output_tokens=2, seed=9))
    b = generate(WorkloadSpec(num_requests=5, rate=7.0, prompt_tokens=16, output_tokens=2, seed=9))
    assert [r.prompt_token_ids for r in a.requests] == [r.prompt_token_ids for r in b.requests]
    assert [r.arrival_s for r in a.requests] != [r.arrival_s for r in b.requests]


def _copied_spans(ids, span):
    """Span-aligned chunks that also occur earlier in the same prompt."""
    return sum(
        any(tuple(ids[start : start + span]) == tuple(ids[i : i + span]) for i in range(start))
        for start in range(span, len(ids) - span + 1, span)
    )


def test_repeated_spans_give_an_ngram_proposer_matches():
    plain = generate(WorkloadSpec(num_requests=5, prompt_tokens=256, output_tokens=2, repeat_span=8, seed=5))
    repeating = generate(WorkloadSpec(num_requests=5, prompt_tokens=256, output_tokens=2, repeat_span=8, repeat_fraction=0.5, seed=5))
    assert sum(_copied_spans(r.prompt_token_ids, 8) for r in plain.requests) == 0
    # 31 spans after the first per prompt, each copied with probability 0.5
    assert sum(_copied_spans(r.prompt_token_ids, 8) for r in repeating.requests) > 40


def test_lengths_from_a_trace_file(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.1,200,20\n0.3,5000,50\n0.4,4000,97\n")
    rows, skipped = read_length_trace(trace, max_total_tokens=4096)
    assert rows == ((100, 10), (200, 20)) and skipped == 2  # the rows beyond the context are dropped, and counted
    workload = generate(WorkloadSpec(num_requests=6, lengths="trace", trace_lengths=rows, seed=0))
    assert {(r.prompt_tokens, r.output_tokens) for r in workload.requests} <= set(rows)
    assert all(len(r.prompt_token_ids) == r.prompt_tokens for r in workload.requests)


def test_a_trace_without_length_columns_is_refused(tmp_path):
    trace = tmp_path / "bad.csv"
    trace.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="num_prefill_tokens"):
        read_length_trace(trace)


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/vidur-traces is absent (only in the development checkout)")
def test_vidur_traces_are_readable():
    for path in sorted(SHARED_TRACES.glob("*.csv")):
        rows, _ = read_length_trace(path, max_total_tokens=4096)
        assert len(rows) > 1000 and all(p >= 1 and o >= 1 and p + o <= 4096 for p, o in rows)


def test_round_trip(tmp_path):
    workload = generate(WorkloadSpec(num_requests=7, prompt_tokens=9, output_tokens=3, seed=1))
    write_workload(tmp_path / "w.jsonl", workload)
    again = read_workload(tmp_path / "w.jsonl")
    assert again.requests == workload.requests and again.workload_hash == workload.workload_hash


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda rows: rows[0].update(schema_version=99), "schema_version"),
        (lambda rows: rows[2].update(output_tokens=-4), "output_tokens = -4"),
        (lambda rows: rows[3].update(request_id=7), "request_id = 7"),
        (lambda rows: rows[3].update(arrival_s=-1.0), "arrival_s"),
        (lambda rows: rows[4].update(prompt_token_ids=rows[4]["prompt_token_ids"][:-1]), "prompt_token_ids holds"),
        (lambda rows: rows[1]["prompt_token_ids"].__setitem__(0, 7), "workload_hash"),
    ],
)
def test_bad_workload_files_are_refused(tmp_path, edit, message):
    path = tmp_path / "w.jsonl"
    write_workload(path, generate(WorkloadSpec(num_requests=5, arrival="fixed", rate=1.0, prompt_tokens=6, output_tokens=3)))
    _rewrite(path, edit)
    with pytest.raises(ConfigError, match=message) as err:
        read_workload(path)
    assert str(path) in str(err.value)


def test_unsorted_arrivals_are_refused(tmp_path):
    path = tmp_path / "w.jsonl"
    write_workload(path, generate(WorkloadSpec(num_requests=5, arrival="fixed", rate=1.0, prompt_tokens=6, output_tokens=3)))
    _rewrite(path, lambda rows: rows[3].update(arrival_s=0.5))
    with pytest.raises(ConfigError, match="arrivals must be sorted"):
        read_workload(path)


def test_generate_cli_writes_a_readable_file(tmp_path, capsys):
    out = tmp_path / "w.jsonl"
    assert main(["generate", "--out", str(out), "--num-prompts", "4", "--prompt-tokens", "8", "--output-tokens", "2"]) == 0
    assert len(read_workload(out)) == 4
    assert out.name in capsys.readouterr().out


def test_generate_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "w.jsonl"
    assert main(["generate", "--out", str(out), "--output-tokens", "-3"]) == 2
    assert "--output-tokens -3: must be a positive integer" in capsys.readouterr().err
    assert main(["generate", "--out", str(out), "--trace", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("keep, message", [(0, "empty file"), (40, "truncated file: it ends inside its header line"), (-30, "truncated file: it ends inside line 4")])
def test_a_cut_workload_file_says_where_it_was_cut(tmp_path, keep, message):
    path = tmp_path / "w.jsonl"
    write_workload(path, generate(WorkloadSpec(num_requests=3, prompt_tokens=6, output_tokens=3)))
    data = path.read_bytes()
    assert data.count(b"\n") == 4 and data.index(b"\n") > 40  # header + 3 requests; the cut at 40 is inside the header
    path.write_bytes(data[:keep])
    with pytest.raises(ConfigError, match=message) as err:
        read_workload(path)
    assert str(path) in str(err.value)
