"""The fake vLLM server speaks the streaming completions protocol and counts like vLLM V1."""

import json
import signal
import subprocess
import sys

import httpx
import pytest

from fake_vllm import FakeServer, FakeServerConfig
from repo import REPO_ROOT
from simulator.validation.metrics import parse_metrics

FAST = dict(step_base_s=0.0005, step_per_token_s=0.0)


def stream(url, prompt, max_tokens, **extra):
    """(list of parsed events, saw [DONE]) for one streamed completion."""
    body = {"model": "fake-model", "prompt": prompt, "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True, **extra}
    events, done = [], False
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                if data == "[DONE]":
                    done = True
                else:
                    events.append(json.loads(data))
    return events, done


def test_stream_carries_exact_tokens_usage_and_done():
    with FakeServer(FakeServerConfig(num_speculative_tokens=3, acceptance_rate=0.8, **FAST)) as server:
        events, done = stream(server.url, list(range(100, 140)), 30)
        metrics = parse_metrics(httpx.get(f"{server.url}/metrics").text, "fake")
    content = [e for e in events if e["choices"]]
    counts = [len(e["choices"][0]["token_ids"]) for e in content]
    assert done and sum(counts) == 30
    assert counts[0] == 1  # the prefill step emits one token
    assert all(1 <= c <= 4 for c in counts[1:]) and max(counts) > 1  # speculation: several tokens per step
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 30
    # V1 counters: one draft of k tokens per decode step
    assert metrics.drafts == len(counts) - 1
    assert metrics.draft_tokens == 3 * metrics.drafts
    assert metrics.accepted_tokens >= sum(c - 1 for c in counts[1:])  # the last step may be cut short
    assert metrics.accepted_per_pos[0] >= metrics.accepted_per_pos[1] >= metrics.accepted_per_pos[2]
    assert sum(metrics.accepted_per_pos.values()) == metrics.accepted_tokens
    assert metrics.generation_tokens == 30
    assert (metrics.num_gpu_blocks, metrics.block_size) == (2048, 16)


def test_a_prompt_always_gets_the_same_tokens_and_chunking():
    with FakeServer(FakeServerConfig(**FAST)) as server:
        first, _ = stream(server.url, [5, 6, 7], 20)
        second, _ = stream(server.url, [5, 6, 7], 20)
        other, _ = stream(server.url, [5, 6, 8], 20)
    ids = lambda events: [e["choices"][0]["token_ids"] for e in events if e["choices"]]
    assert ids(first) == ids(second) and ids(first) != ids(other)


def test_without_speculation_one_token_per_chunk_and_no_spec_counters():
    with FakeServer(FakeServerConfig(num_speculative_tokens=0, **FAST)) as server:
        events, _ = stream(server.url, [1, 2, 3], 12)
        metrics = parse_metrics(httpx.get(f"{server.url}/metrics").text, "fake")
    assert [len(e["choices"][0]["token_ids"]) for e in events if e["choices"]] == [1] * 12
    assert metrics.engine is None and metrics.generation_tokens == 12


def test_fault_choice_is_a_deterministic_function_of_the_prompt():
    config = FakeServerConfig(fault_http_500=0.2, fault_drop=0.1, fault_stall=0.1)
    prompts = [[i, i + 1] for i in range(2000)]
    faults = [config.fault_for(p) for p in prompts]
    assert faults == [config.fault_for(p) for p in prompts]
    assert faults.count("http_500") / 2000 == pytest.approx(0.2, abs=0.03)
    assert faults.count("drop") / 2000 == pytest.approx(0.1, abs=0.03)
    assert faults.count("malformed") == 0
    with pytest.raises(ValueError, match="add up to"):
        FakeServerConfig(fault_http_500=0.7, fault_drop=0.5)


def test_http_500_and_a_missing_counter():
    config = FakeServerConfig(fault_http_500=1.0, metrics_missing=("vllm:spec_decode_num_drafts_total",), **FAST)
    with FakeServer(config) as server:
        response = httpx.post(f"{server.url}/v1/completions", json={"prompt": [1, 2], "max_tokens": 4, "stream": True})
        text = httpx.get(f"{server.url}/metrics").text
    assert response.status_code == 500
    assert "vllm:spec_decode_num_drafts_total" not in text and "vllm:spec_decode_num_draft_tokens_total" in text


def test_bad_requests_get_400():
    with FakeServer(FakeServerConfig(**FAST)) as server:
        assert httpx.post(f"{server.url}/v1/completions", json={"prompt": "text", "max_tokens": 4}).status_code == 400
        assert httpx.post(f"{server.url}/v1/completions", json={"prompt": [1], "max_tokens": 0}).status_code == 400
        assert httpx.post(f"{server.url}/v1/completions", json={"prompt": [1], "model": "other"}).status_code == 404
        models = httpx.get(f"{server.url}/v1/models").json()
    assert models["data"][0]["id"] == "fake-model"


def test_non_streaming_completion():
    with FakeServer(FakeServerConfig(**FAST)) as server:
        body = httpx.post(f"{server.url}/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 9, "return_token_ids": True}).json()
    assert len(body["choices"][0]["token_ids"]) == 9 and body["usage"]["completion_tokens"] == 9


def test_run_by_hand_it_serves_until_interrupted(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "fake_vllm" / "server.py"), "--port", "0", "--k", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # blocks until the server is listening (or has died: "")
        assert "listening on " in line, process.stderr.read() if process.poll() is not None else line
        url = line.split("listening on ")[1].split()[0]
        assert httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"] == "fake-model"
        assert 'position="1"' in httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            pytest.fail(f"the server was still running 30 s after Ctrl-C; its stderr:\n{stderr}")
        assert process.returncode == 0, stderr


def test_v0_counters_count_emitted_tokens_and_accept_at_any_position():
    """V0 exports draft, accepted and emitted tokens (no drafts, no per-position counters) and
    two gauges; its accepted count includes tokens accepted after an earlier rejection."""
    with FakeServer(FakeServerConfig(engine="v0", num_speculative_tokens=3, acceptance_rate=0.6, **FAST)) as server:
        events, done = stream(server.url, list(range(200, 240)), 60)
        text = httpx.get(f"{server.url}/metrics").text
    metrics = parse_metrics(text, "fake")
    counts = [len(e["choices"][0]["token_ids"]) for e in events if e["choices"]]
    steps = len(counts) - 1
    assert done and metrics.engine == "v0" and metrics.drafts is None and not metrics.accepted_per_pos
    assert metrics.draft_tokens == 3 * steps
    assert metrics.emitted_tokens >= sum(counts[1:])  # the last step may be cut short of what it emitted
    assert metrics.accepted_tokens >= metrics.emitted_tokens - steps  # any-position acceptance >= the accepted prefix
    assert metrics.v0_gauges == ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")


def test_v0_gauges_only_and_a_stream_without_done():
    with FakeServer(FakeServerConfig(engine="v0-gauges", fault_no_done=1.0, **FAST)) as server:
        events, done = stream(server.url, [7, 8, 9], 10)
        metrics = parse_metrics(httpx.get(f"{server.url}/metrics").text, "fake")
    assert not done and sum(len(e["choices"][0]["token_ids"]) for e in events if e["choices"]) == 10
    assert events[-1]["usage"]["completion_tokens"] == 10
    assert metrics.engine is None and metrics.draft_tokens is None and len(metrics.v0_gauges) == 2
