"""The side-by-side with AIConfigurator (issue 31): the page's reader of data/peer/aiconfigurator.csv
on a hand-made table (medians and counts worked by hand), and the bench's own arithmetic with a
stand-in for AIConfigurator (the package is an optional install; nothing here imports it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from repo import REPO_ROOT
from simulator.specs.measurements import Measurement
from simulator.util.errors import ConfigError
from simulator.website import peer

FIXTURE = Path(__file__).parent / "data" / "peer" / "aiconfigurator.csv"


def _bench():
    spec = importlib.util.spec_from_file_location("peer_aiconfigurator_bench", REPO_ROOT / "bench" / "peer_aiconfigurator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_figures_of_a_hand_made_table():
    context = peer.peer_context(FIXTURE)
    figures = context["figures"]
    # both express a, b, c, d: project |errors| 10, 20, 15, 25 -> median (15 + 20) / 2; peer 10, 5, 30, 10 -> (10 + 10) / 2
    assert figures["both"] == 4 and figures["rows"] == 6 and figures["not_expressed"] == 2
    assert figures["project_median_abs_error_pct"] == pytest.approx(17.5)
    assert figures["peer_median_abs_error_pct"] == pytest.approx(10.0)
    # within +-15 %, the boundary included: project 10 and 15; peer 10, 5 and 10
    assert figures["project_within_15pct"] == 2 and figures["peer_within_15pct"] == 3
    assert figures["closer"] == {"project": 1, "peer": 2, "tie": 1}
    assert [r["id"] for r in context["rows"]] == ["a-bs1", "b-bs8", "c-qps4", "d-qps8"]
    assert [r["id"] for r in context["not_expressed"]] == ["e-eagle-k3", "f-stale"]
    assert context["not_expressed"][0]["note"].startswith("speculative (eagle)")
    assert context["provenance"]["aiconfigurator_version"] == "0.12.0"


def test_no_table_means_the_comparison_was_not_run(tmp_path):
    assert peer.peer_context(tmp_path / "aiconfigurator.csv") is None
    assert "not run" in peer.NOT_RUN


def test_closer_and_its_tie():
    assert peer.closer(10.0, -10.4) == "tie"  # half a point apart or less is a tie
    assert peer.closer(10.0, 10.5) == "project"
    assert peer.closer(-20.0, 5.0) == "peer"


def test_a_table_of_other_columns_or_a_closer_without_a_peer_is_refused():
    header, *lines = FIXTURE.read_text().splitlines()
    with pytest.raises(ConfigError, match="columns"):
        peer.parse_rows("\n".join([header.replace("closer", "winner"), *lines]))
    bad = "\n".join([header, "x,tpot_ms,5,6,20.00,,,peer,,"])
    with pytest.raises(ConfigError, match="does not express"):
        peer.parse_rows(bad)


# ---- the bench, with a stand-in for AIConfigurator ---------------------------------------------

def _fake_estimate(model_dir, system, *, batch_size, osl, **kwargs):
    """TPOT 5 + 0.1 B ms, TTFT 20 ms: request latency 20 + (OSL - 1) TPOT, seq/s = B / latency."""
    tpot = 5.0 + 0.1 * batch_size
    latency = 20.0 + (osl - 1) * tpot
    return SimpleNamespace(tpot=tpot, ttft=20.0, seq_per_second=batch_size / (latency / 1e3), request_latency=latency,
                           backend_version="0.24.0", kv_cache_warning=None)


def _ask(**overrides):
    ask = {"id": "row", "metric": "tpot_mean_ms", "model": "meta-llama/Llama-3.1-8B-Instruct", "config": {"architectures": ["LlamaForCausalLM"]},
           "config_source": "test", "system": "h100_sxm", "backend": "vllm", "tp": 1, "isl": 573, "osl": 100, "ctx_tokens": 573,
           "max_num_seqs": 128, "row_engine": "vllm 0.15.1", "lengths": ""}
    ask.update(overrides)
    return ask


def test_a_request_rate_is_priced_where_its_own_rate_matches(tmp_path):
    bench = _bench()
    est = bench.Estimator(tmp_path, "SILICON", estimate=_fake_estimate)
    # B = 8: TPOT 5.8, latency 20 + 99 x 5.8 = 594.2 ms -> 13.463 req/s; B = 9: 5.9, 604.1 ms -> 14.898 req/s
    # qps 14 lies t = (14 - 13.463) / (14.898 - 13.463) = 0.374 of the way: TPOT 5.8374
    answer = bench.answer(est, _ask(qps=14.0))
    assert answer["value"] == pytest.approx(5.8374, abs=2e-4)
    assert "qps 14 -> batch 8.37" in answer["setting"]
    # past max_num_seqs = 4 (7.21 req/s) the engine is saturated: priced at B = 4
    saturated = bench.answer(est, _ask(qps=14.0, max_num_seqs=4))
    assert saturated["value"] == pytest.approx(5.4) and "saturated" in saturated["setting"]
    # below the batch-1 rate (1.905 req/s): batch 1
    assert bench.answer(est, _ask(qps=1.0))["value"] == pytest.approx(5.1)


def test_a_batch_row_reads_its_metric_off_the_estimate(tmp_path):
    bench = _bench()
    est = bench.Estimator(tmp_path, "SILICON", estimate=_fake_estimate)
    # B = 8 at OSL 100: 13.463 req/s x 100 output tokens
    assert bench.answer(est, _ask(metric="output_tokens_per_s", batch=8))["value"] == pytest.approx(8 / 0.5942 * 100)
    assert bench.answer(est, _ask(metric="decode_tokens_per_s", batch=1))["value"] == pytest.approx(1000 / 5.1)


def _row(**overrides) -> Measurement:
    fields = dict(id="r-qps8", source_url="https://example.org/r", engine="vllm", model="meta-llama/Llama-3.1-8B-Instruct", proposer="none",
                  metric="tpot_mean_ms", value=8.0, role="check", acceptance_class="same_source", tp=1, gpu="h100", qps=8.0,
                  engine_version="0.15.1", input_len=573, output_len=248)
    fields.update(overrides)
    return Measurement(**fields)


def _recorded(m: Measurement, simulated: float = 8.8) -> dict:
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    return {**{key: cell(getattr(m, key)) for key in ("metric", "engine", "engine_version", "gpu", "tp", "model", "proposer", "k", "batch_size",
                                                      "concurrency", "qps", "dataset", "input_len", "output_len")},
            "published": str(m.value), "simulated": str(simulated), "error_pct": str(100 * (simulated - m.value) / m.value), "status": "simulated",
            "role": "check"}


PLAN = SimpleNamespace(run=SimpleNamespace(workload=SimpleNamespace(prompt_tokens=573, output_tokens=248), chunk_size=2048, batch_size_cap=128,
                                           tensor_parallel_size=1), reason="", acceptance=None)


def test_what_the_peer_is_asked_and_why_a_row_is_not():
    bench = _bench()
    m = _row()
    ask = bench.ask_for(m, PLAN, _recorded(m))
    assert (ask["system"], ask["backend"], ask["isl"], ask["osl"], ask["qps"], ask["ctx_tokens"], ask["max_num_seqs"]) == ("h100_sxm", "vllm", 573, 248, 8.0, 573, 128)
    assert ask["config"]["architectures"] == ["LlamaForCausalLM"]
    eagle = _row(proposer="eagle3", k=3, draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert bench.ask_for(eagle, PLAN, _recorded(eagle)).startswith("speculative (eagle3): AIConfigurator prices speculation only as MTP")
    assert bench.ask_for(_row(gpu="a100_40gb"), PLAN, _recorded(_row(gpu="a100_40gb"))).startswith("GPU a100_40gb")
    stale = _recorded(m)
    stale["tp"] = "4"  # the peer is still asked; the project's value is left out
    assert bench.ask_for(m, PLAN, stale)["project_stale"].startswith("project value stale: published.csv was recorded with tp 4 (now 1)")
    assert bench.ask_for(m, PLAN, _recorded(m))["project_stale"] == ""
    assert bench.ask_for(m, PLAN, None).startswith("no project value")


def test_the_recorded_table_reads_back_with_its_figures():
    bench = _bench()
    ok, eagle = _row(), _row(id="r-eagle3", proposer="eagle3", k=3, draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    rows = [(ok, _recorded(ok, 8.8), bench.ask_for(ok, PLAN, _recorded(ok, 8.8))), (eagle, _recorded(eagle), bench.ask_for(eagle, PLAN, _recorded(eagle)))]
    text = bench.csv_text(bench.table_rows(rows, {"r-qps8": {"value": 7.6, "setting": "estimate agg ...", "notes": ["n"]}}))
    table = peer.parse_rows(text)
    # project +10.00 %, peer (7.6 - 8) / 8 = -5.00 %: the peer is closer
    assert [(r["id"], r["project_error"], r["peer_error"], r["closer"]) for r in table] == [("r-eagle3", 10.0, None, ""), ("r-qps8", 10.0, -5.0, "peer")]  # sorted by id
    assert peer.summarize(table)["closer"] == {"project": 0, "peer": 1, "tie": 0}


def test_a_stale_project_value_leaves_the_peer_alone_on_its_row():
    bench = _bench()
    m = _row()
    stale = _recorded(m)
    stale["output_len"] = "200"
    text = bench.csv_text(bench.table_rows([(m, stale, bench.ask_for(m, PLAN, stale))], {m.id: {"value": 8.4, "setting": "s", "notes": []}}))
    (row,) = peer.parse_rows(text)
    assert (row["project_simulated"], row["project_error"], row["peer_error"], row["closer"]) == (None, None, 5.0, "")
    assert row["note"].startswith("project value stale: published.csv was recorded with output_len 200 (now 248)")
    assert peer.summarize([row])["both"] == 0
