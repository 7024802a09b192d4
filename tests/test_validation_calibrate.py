"""Reading /metrics and turning vLLM's counters into the simulator's acceptance inputs."""

import pytest

from simulator.util.errors import ConfigError
from simulator.speculative.acceptance_convert import conditional_from_unconditional
from simulator.validation.counter_acceptance import acceptance_from_counters, iid_alpha
from simulator.validation.metrics import Snapshot, delta, parse_metrics
from simulator.validation.replay_files import scrape_path
from simulator.validation.session_counters import collect_counters


def exposition(drafts, draft_tokens, accepted, per_pos, engines=("0",), blocks="1000", extra=""):
    """vLLM V1-style /metrics text; counts are split evenly over ``engines``."""
    n = len(engines)
    lines = []
    for name, value in (("drafts", drafts), ("draft_tokens", draft_tokens), ("accepted_tokens", accepted)):
        lines.append(f"# TYPE vllm:spec_decode_num_{name} counter")
        lines += [f'vllm:spec_decode_num_{name}_total{{engine="{e}",model_name="m"}} {value / n}' for e in engines]
    lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
    for position, value in enumerate(per_pos):
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="{position}"}} {value / n}' for e in engines]
    lines.append("# TYPE vllm:cache_config_info gauge")
    lines.append(f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",num_gpu_blocks="{blocks}"}} 1.0')
    return "\n".join(lines) + "\n" + extra


def test_parse_sums_engines_and_reads_the_cache_config():
    snapshot = parse_metrics(exposition(100, 300, 150, (80, 50, 20), engines=("0", "1")), "test")
    assert (snapshot.drafts, snapshot.draft_tokens, snapshot.accepted_tokens) == (100, 300, 150)
    assert snapshot.accepted_per_pos == {0: 80, 1: 50, 2: 20}
    assert (snapshot.block_size, snapshot.num_gpu_blocks) == (16, 1000)
    assert snapshot.engine == "v1"


def test_unset_block_count_and_absent_counters_read_as_none():
    snapshot = parse_metrics('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0\n', "test")
    assert snapshot.num_gpu_blocks is None and snapshot.block_size == 16
    assert snapshot.engine is None and snapshot.drafts is None


def test_garbage_is_not_prometheus_text():
    with pytest.raises(ConfigError, match="scrape.prom"):
        parse_metrics("vllm:spec_decode_num_drafts_total{engine= 5\n", "scrape.prom")


def test_delta_subtracts_and_refuses_counters_going_down():
    before = parse_metrics(exposition(10, 30, 12, (8, 3, 1)), "before")
    after = parse_metrics(exposition(110, 330, 162, (88, 53, 21)), "after")
    d = delta(before, after, "pair")
    assert (d.drafts, d.draft_tokens, d.accepted_tokens) == (100, 300, 150)
    assert d.accepted_per_pos == {0: 80, 1: 50, 2: 20}
    with pytest.raises(ConfigError, match="went down.*restarted"):
        delta(after, before, "pair")


def test_conditional_from_unconditional():
    # i.i.d. alpha = 0.5: u = 0.5, 0.25, 0.125 -> p = 0.5 each
    assert conditional_from_unconditional((0.5, 0.25, 0.125)) == pytest.approx((0.5, 0.5, 0.5))
    assert conditional_from_unconditional((0.8, 0.4, 0.1)) == pytest.approx((0.8, 0.5, 0.25))
    # a position never reached cannot be accepted; later ones neither
    assert conditional_from_unconditional((0.6, 0.0, 0.0)) == pytest.approx((0.6, 0.0, 0.0))
    assert conditional_from_unconditional((0.0, 0.0)) == (0.0, 0.0)


@pytest.mark.parametrize("alpha, k", [(0.3, 1), (0.7, 3), (0.9, 5)])
def test_iid_alpha_inverts_the_expected_accepted_tokens(alpha, k):
    mean_accepted = sum(alpha**i for i in range(1, k + 1))
    assert iid_alpha(mean_accepted, k) == pytest.approx(alpha, abs=1e-9)
    assert iid_alpha(0.0, k) == 0.0 and iid_alpha(k, k) == 1.0


def test_v1_acceptance_from_counters():
    counts = Snapshot(drafts=100, draft_tokens=300, accepted_tokens=150, accepted_per_pos={0: 80, 1: 50, 2: 20})
    result = acceptance_from_counters(counts, None, "test")
    assert result.engine == "v1" and result.num_speculative_tokens == 3
    assert result.acceptance_rate == pytest.approx(0.5)
    assert result.mean_acceptance_length == pytest.approx(2.5)
    assert result.acceptance_per_position_unconditional == pytest.approx((0.8, 0.5, 0.2))
    assert result.acceptance_per_position == pytest.approx((0.8, 0.625, 0.4))
    assert acceptance_from_counters(counts, 3, "test") == result
    with pytest.raises(ConfigError, match="3 draft positions but k = 4"):
        acceptance_from_counters(counts, 4, "test")


def test_v0_acceptance_from_emitted_tokens():
    # k = 2, alpha = 0.5: 100 steps emit 100 * (1 + 0.5 + 0.25) tokens
    counts = Snapshot(draft_tokens=200, accepted_tokens=90, emitted_tokens=175)
    result = acceptance_from_counters(counts, 2, "test")
    assert result.engine == "v0"
    assert result.acceptance_per_position == pytest.approx((0.5, 0.5))
    assert result.mean_acceptance_length == pytest.approx(1.75)
    with pytest.raises(ConfigError, match="--num-speculative-tokens"):
        acceptance_from_counters(counts, None, "test")


def test_missing_counters_when_speculation_is_expected():
    with pytest.raises(ConfigError, match="no spec-decode counters.*--speculative-config"):
        acceptance_from_counters(Snapshot(generation_tokens=50), 3, "scrapes")
    partial = Snapshot(draft_tokens=300, accepted_tokens=150, accepted_per_pos={0: 80})
    with pytest.raises(ConfigError, match="missing vllm:spec_decode_num_drafts_total"):
        acceptance_from_counters(partial, None, "scrapes")
    with pytest.raises(ConfigError, match="no draft tokens"):
        acceptance_from_counters(Snapshot(drafts=0, draft_tokens=0, accepted_tokens=0, accepted_per_pos={0: 0}), 1, "scrapes")


def test_no_counters_and_nothing_expected_means_speculation_off():
    result = acceptance_from_counters(Snapshot(generation_tokens=50), None, "scrapes")
    assert result.num_speculative_tokens == 0 and result.engine is None


START = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1700000000.0\n"


@pytest.mark.parametrize("start_time", [True, False], ids=["start-time", "no-start-time"])
def test_sessions_are_summed_and_an_interrupted_one_is_closed_by_the_next(tmp_path, start_time):
    """Session 0 was killed (no closing scrape); session 1 opens where it stopped.  Its opening
    scrape closes session 0 only when process_start_time_seconds shows the same process: without
    it a restart in between (and another client's traffic after it) would pass as session 0's."""
    extra = START if start_time else ""
    scrapes = {
        (0, "before"): exposition(0, 0, 0, (0, 0), extra=extra),
        (1, "before"): exposition(40, 80, 40, (25, 15), extra=extra),
        (1, "after"): exposition(100, 200, 110, (70, 40), extra=extra),
    }
    for (session, when), text in scrapes.items():
        path = scrape_path(tmp_path, session, when)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    counters = collect_counters(tmp_path)
    if not start_time:
        assert counters.used == [1] and [d["session"] for d in counters.dropped] == [0]
        assert "exports no process_start_time_seconds" in counters.dropped[0]["reason"]
        return
    assert counters.used == [0, 1] and counters.dropped == []
    assert (counters.total.drafts, counters.total.accepted_tokens, counters.total.accepted_per_pos) == (100, 110, {0: 70, 1: 40})
    assert "session 0: no closing scrape" in counters.notes[0]


def test_a_lone_interrupted_session_cannot_be_calibrated(tmp_path):
    path = scrape_path(tmp_path, 0, "before")
    path.parent.mkdir(parents=True)
    path.write_text(exposition(0, 0, 0, (0,)))
    with pytest.raises(ConfigError, match="no replay session can be measured.*no closing scrape"):
        collect_counters(tmp_path)


@pytest.mark.parametrize("text, message", [("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object"), ('{"schema": "other"}', "schema is 'other'")])
def test_a_bad_calibration_file_is_named_in_the_error(tmp_path, text, message):
    from simulator.validation.calibrate import read_calibration

    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        read_calibration(path)
    assert str(path) in str(err.value)
    with pytest.raises(ConfigError, match=r"calibration file .*missing\.json: file not found"):
        read_calibration(tmp_path / "missing.json")


def record(chunks, status="ok", tokens=1, session=1):
    """A replay record with one prefill chunk and ``chunks - 1`` decode chunks of ``tokens`` each."""
    return {"session": session, "status": status, "length_mismatch": False, "expected_output_tokens": 1 + (chunks - 1) * tokens, "chunks": [[0.1 * i, 1 if i == 0 else tokens] for i in range(chunks)]}


def test_proposal_probability_is_drafts_per_decode_chunk():
    from simulator.validation.calibrate import proposal_probability

    # 2 complete requests of 1 prefill chunk + 50 decode chunks each, and one that never streamed
    records = [record(51), record(51), {"session": 1, "status": "http_error", "length_mismatch": None, "expected_output_tokens": 10, "chunks": []}]
    notes = []
    ratio, probability, how = proposal_probability(Snapshot(drafts=60, generation_tokens=102), records, 3, notes)
    assert ratio == probability == pytest.approx(0.6)
    assert "drafted at 0.600" in notes[0] and "V1 drafts" in how
    # merged chunks (more drafts than chunks) cap at 1; k = 0 or no drafts counter: unknown
    assert proposal_probability(Snapshot(drafts=120, generation_tokens=102), records, 3, [])[:2] == (pytest.approx(1.2), 1.0)
    assert proposal_probability(Snapshot(drafts=60), records, 0, []) == (None, None, None)
    notes = []
    assert proposal_probability(Snapshot(), records, 3, notes) == (None, None, None)
    assert "simulated as a draft at every step" in notes[0]


def test_v0_counters_give_the_proposal_probability_as_draft_tokens_over_k():
    """Defect 2: no drafts counter in V0, but draft tokens / k are the drafts."""
    from simulator.validation.calibrate import proposal_probability

    records = [record(51), record(51)]
    ratio, probability, how = proposal_probability(Snapshot(draft_tokens=4 * 73, emitted_tokens=150, generation_tokens=102), records, 4, [])
    assert probability == pytest.approx(0.73) and "V0 draft tokens / k = 4" in how


def test_failed_requests_drafts_are_weighed_out_by_their_share_of_generated_tokens():
    """Defect 4: a timed-out request's drafts are in the counters but the client saw one chunk
    of it; the drafts are scaled by the complete requests' share of generated decode tokens."""
    from simulator.validation.calibrate import proposal_probability

    # 2 complete requests (100 decode chunks, 100 decode tokens) and one that timed out after its
    # first chunk while the server generated 100 more decode tokens with it; a draft at 70% of steps
    records = [record(51), record(51), record(2, status="timeout")]
    generated = 3 + 100 + 100  # first tokens + complete decode tokens + the timed-out one's
    _, probability, _ = proposal_probability(Snapshot(drafts=0.7 * 200, generation_tokens=generated), records, 3, [])
    assert probability == pytest.approx(0.7)
    # counting every chunk (the old estimate) would have said 140 / 101


def test_restarts_without_a_start_time_are_told_by_the_sessions_records(tmp_path):
    """Defect 1, unit level: no process_start_time_seconds.  Session 0's counters did not rise
    by the tokens its records received (a restart from zero: zero deltas); session 1's
    generation counter rose but its drafts did not, while its records show multi-token chunks;
    session 2 is consistent and is the only one used."""

    def scrape(drafts, generated):
        return exposition(drafts, 3 * drafts, drafts, (drafts, 0, 0), extra=f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {generated}\n")

    texts = {(0, "before"): scrape(0, 0), (0, "after"): scrape(0, 0), (1, "before"): scrape(10, 40), (1, "after"): scrape(10, 400), (2, "before"): scrape(10, 400), (2, "after"): scrape(30, 441)}
    for (session, when), text in texts.items():
        path = scrape_path(tmp_path, session, when)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    history = [record(21, tokens=2, session=0), record(21, tokens=2, session=1), record(21, tokens=2, session=2)]  # 41 tokens each
    counters = collect_counters(tmp_path, history)
    assert counters.used == [2]
    reasons = {d["session"]: d["reason"] for d in counters.dropped}
    assert "rose by 0 generated tokens while its 1 records received 41" in reasons[0]
    assert "spec-decode counters did not move while its records show 20 multi-token decode chunks" in reasons[1]
    # without the records (an older caller) nothing tells them apart
    assert collect_counters(tmp_path).used == [0, 1, 2]


def test_rising_counters_are_refused_as_every_other_input_is():
    """One conversion, one behaviour (issue 34): a server whose per-position counters rise is
    refused naming the counter, not clamped silently; a spec's or a flag's rising rates are
    refused by the same conversion."""
    from simulator.speculative.acceptance_convert import AcceptanceInput
    from simulator.util.errors import ConfigError

    rising = Snapshot(drafts=100, draft_tokens=200, accepted_tokens=120, accepted_per_pos={0: 50, 1: 70})
    with pytest.raises(ConfigError, match=r"vllm:spec_decode_num_accepted_tokens_per_pos_total / drafts\[1\] = 0.7: exceeds position 0's 0.5"):
        acceptance_from_counters(rising, 2, "scrapes")
    with pytest.raises(ConfigError, match=r"--acceptance-per-position-vllm\[1\] = 0.7: exceeds position 0's 0.5"):
        AcceptanceInput.given(unconditional=(0.5, 0.7), names={"unconditional": "--acceptance-per-position-vllm"})
