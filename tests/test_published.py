"""Published measurements: acceptance conversions, the strict spec, the row -> run mapping, the
committed comparison and its targets."""


import numpy as np
import pandas as pd
import pytest

from simulator.util.errors import ConfigError
from simulator.published.plan import plan, simulated_value
from simulator.schemas import SIMULATED
from simulator.website.published_summary import summary
from simulator.specs.measurements import load, load_assumptions, load_measurements
from simulator.speculative.acceptance_convert import (
    acceptance_length,
    conditional_from_lengths,
    conditional_from_unconditional,
    iid_rate_from_length,
    unconditional_rates,
)
from simulator.speculative.progress import expected_progress

from repo import DATA_DIR, RESULTS_DIR, published_row

PUBLISHED, ASSUMPTIONS = DATA_DIR / "published.toml", DATA_DIR / "published_assumptions.toml"


# --- conversions ------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha, k", [(0.0, 1), (0.3, 3), (0.62, 4), (0.9, 7), (1.0, 2)])
def test_length_to_iid_rate_round_trips(alpha, k):
    assert iid_rate_from_length(expected_progress(alpha, k), k) == pytest.approx(alpha, abs=1e-9)


def test_per_position_rates_round_trip():
    conditional = (0.8, 0.7, 0.6, 0.5)
    assert conditional_from_unconditional(unconditional_rates(conditional)) == pytest.approx(conditional)
    assert acceptance_length(conditional) == pytest.approx(1 + 0.8 + 0.56 + 0.336 + 0.168)


def test_lengths_at_consecutive_k_give_a_decaying_profile():
    truth = (0.75, 0.7, 0.6, 0.5, 0.4)
    lengths = {k: acceptance_length(truth[:k]) for k in range(2, 6)}
    recovered = conditional_from_lengths(lengths)
    # the lengths separate P(first i + 1 accepted) for i >= 2 exactly; the first two share a rate
    assert unconditional_rates(recovered)[2:] == pytest.approx(unconditional_rates(truth)[2:])
    assert acceptance_length(recovered) == pytest.approx(lengths[5])  # and the total is kept


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: iid_rate_from_length(5.0, 3), "must be between 1 and k \\+ 1 = 4"),
        (lambda: iid_rate_from_length(0.5, 3), "must be between 1"),
        (lambda: conditional_from_unconditional([0.5, 0.6]), "cannot increase"),
        (lambda: conditional_from_lengths({2: 2.0, 4: 2.5}), "consecutive k"),
    ],
)
def test_impossible_acceptance_figures_are_refused(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


# --- the spec -----------------------------------------------------------------------------------
ROW = published_row()


def _load(tmp_path, text):
    path = tmp_path / "published.toml"
    path.write_text(text)
    return load_measurements(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s.replace('metric = "output_tokens_per_s"', 'metric = "tokens_per_fortnight"'), "metric = 'tokens_per_fortnight' is an unknown unit"),
        (lambda s: s.replace('model = "meta-llama/Llama-3.1-8B-Instruct"\n', ""), r"measurement 1: missing model"),
        (lambda s: s.replace("value = 130.0", "value = -1.0"), r"\(a-b-c\) value = -1.0 must be a positive number"),
        (lambda s: s.replace("batch_size = 1", "qps = 2.0\nbatch_size = 1"), "needs exactly one of"),
        (lambda s: s.replace("tp = 1", "tp = 1\ncolour = \"red\""), "unknown key 'colour'"),
        (lambda s: s + s, r"repeats id\(s\) \['a-b-c'\]"),
        (lambda s: s.replace("value = 130.0", 'value = 130.0\nbaseline_id = "nope"'), "baseline_id 'nope' is not a row"),
        (lambda s: s.replace('proposer = "none"\nk = 0', 'proposer = "eagle"\nk = -3'), "k = -3: a speculative chain row needs k >= 1"),
        (lambda s: s.replace('proposer = "none"\nk = 0', 'proposer = "ngram"\nk = 2\nacceptance_length = 3.5'), "exceeds k \\+ 1 = 3"),
        (lambda s: s.replace('proposer = "none"\nk = 0', 'proposer = "ngram"\nk = 2\nacceptance_per_position = [0.5, 0.6]'), "cannot increase"),
        (lambda s: s.replace('k = 0\n', 'k = 2\n'), "a row without speculation has k = 0"),
        # roles and acceptance classes (issue: refused at load time, the row named)
        (lambda s: s.replace('role = "check"\n', ""), r"measurement 1: missing role"),
        (lambda s: s.replace('acceptance_class = "same_source"\n', ""), r"measurement 1: missing acceptance_class"),
        (lambda s: s.replace('role = "check"', 'role = "evidence"'), r"\(a-b-c\) role = 'evidence'; expected one of"),
        (lambda s: s.replace('"same_source"', '"vibes"'), r"\(a-b-c\) acceptance_class = 'vibes'"),
        (lambda s: s.replace('role = "check"', 'role = "check"\ncalibrated_by = "https://example.org/fit"'), r"\(a-b-c\) is a check row but calibrated_by"),
        (lambda s: s.replace('role = "check"', 'role = "calibration"'), r"is a calibration row: name the calibration data its source released"),
        (lambda s: s.replace('role = "check"', 'role = "calibration"\ncalibrated_by = "ftp://x"'), r"is a calibration row: name the calibration data"),
        (lambda s: s.replace('role = "check"', 'role = "calibration"\ncalibrated_by = "the TP 4 constants"'), r"or the declared calibration entry that examined it"),
        (lambda s: s.replace('role = "check"', 'role = "check"\narrivals = "bursty"'), r"arrivals = 'bursty'"),
        (lambda s: s.replace('value = 130.0', 'value = 130.0\nplausible = { tp = [2, 4] }'), r"plausible.tp = \[2, 4\] must list two or more tensor-parallel degrees, the row's tp = 1 among them"),
        (lambda s: s.replace("value = 130.0", "value = 130.0\nplausible = { output_len = [300, 200] }"), r"plausible.output_len = \[300, 200\] must be \[low, high\]"),
        (lambda s: s.replace("value = 130.0", "value = 130.0\nplausible = { seed = [1, 2] }"), r"plausible.seed: only"),
        (lambda s: s.replace("value = 130.0", 'value = 130.0\nplausible = { gpu = ["a100", "h200"] }'), r"the row's gpu = 'h100' among them"),
        (lambda s: s.replace("value = 130.0", "value = 130.0\ndraft_tp = 1"), r"draft_tp is for rows whose proposer runs a draft network"),
    ],
)
def test_bad_published_rows_are_refused_naming_the_field(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, change(ROW))


def test_an_assumption_for_an_unknown_row_is_refused(tmp_path):
    rows = _load(tmp_path, ROW)
    path = tmp_path / "assumptions.toml"
    path.write_text('[datasets]\n[[acceptance]]\napplies_to = ["zzz"]\nwhy = "x"\nacceptance_rate = 0.5\nacceptance_class = "assumed"\n')
    with pytest.raises(ConfigError, match="applies_to names 'zzz'"):
        load_assumptions(path, rows)


SPEC_ROW = ROW.replace('proposer = "none"\nk = 0', 'proposer = "ngram"\nk = 2')


def _spec_row(row_id: str, cls: str, extra: str = "", dataset: str = "mt-bench") -> str:
    return (SPEC_ROW.replace('id = "a-b-c"', f'id = "{row_id}"').replace('"same_source"', f'"{cls}"')
            .replace('dataset = "mt-bench"', f'dataset = "{dataset}"') + extra)


@pytest.mark.parametrize(
    "rows, assumption, message",
    [
        # the row's own acceptance is same_source, nothing else
        (_spec_row("own", "assumed", "acceptance_length = 1.5\n"), "", r"own: acceptance_class = 'assumed' contradicts its acceptance source \(its acceptance is its own\); expected same_source"),
        # a row without speculation borrows nothing
        (ROW.replace('"same_source"', '"other_dataset"'), "", r"a-b-c: acceptance_class = 'other_dataset' contradicts .*no speculation"),
        # no acceptance anywhere: only "assumed" (it stays out of reach until one is)
        (_spec_row("none", "same_source"), "", r"none: acceptance_class = 'same_source' contradicts .*no acceptance is published"),
        # borrowing from another run whose dataset differs is not "the same setting"
        (_spec_row("x-1", "same_setting_other_run") + _spec_row("x-2", "same_source", "acceptance_length = 1.5\n", dataset="gsm8k"),
         'applies_to = ["x-1"]\nfrom_measurement = "x-2"\nwhy = "w"\nacceptance_class = "same_setting_other_run"\n',
         r"x-1: acceptance_class = 'same_setting_other_run' contradicts .*do not state the same dataset\)"),
        # the row and its assumption disagree
        (_spec_row("y-1", "assumed"), 'applies_to = ["y-1"]\nacceptance_rate = 0.5\nwhy = "w"\nacceptance_class = "other_dataset"\n',
         r"y-1: acceptance_class = 'assumed' contradicts .*assumption says other_dataset"),
    ],
)
def test_an_acceptance_class_contradicting_its_source_is_refused_at_load(tmp_path, rows, assumption, message):
    measurements = _load(tmp_path, rows)
    path = tmp_path / "assumptions.toml"
    path.write_text("[datasets]\n[[acceptance]]\n" + assumption if assumption else "acceptance = []\n[datasets]\n")
    with pytest.raises(ConfigError, match=message):
        load_assumptions(path, measurements)


def test_same_setting_borrowing_is_accepted_and_classified(tmp_path):
    rows = _spec_row("x-1", "same_setting_other_run") + _spec_row("x-2", "same_source", "acceptance_length = 1.5\n")
    measurements = _load(tmp_path, rows)
    path = tmp_path / "assumptions.toml"
    path.write_text('[datasets]\n[[acceptance]]\napplies_to = ["x-1"]\nfrom_measurement = "x-2"\nwhy = "w"\nacceptance_class = "same_setting_other_run"\n')
    assert load_assumptions(path, measurements).acceptance["x-1"].from_measurement == "x-2"


def test_committed_rows_every_one_with_a_role_and_class_and_the_calibration_rows_are_the_declared_ones():
    """Calibration rows are SpecDecode-Bench's (its simulator's fit set the 1.2 ms per-step overhead)
    and the rows a calibration entry examined while it was set (its examined_rows); every other row
    is a check row."""
    from simulator.profiling.calibration_guard import calibration_entries

    calibration = DATA_DIR / "calibration"
    examined: dict[str, set] = {}
    for entry in calibration_entries(calibration / "step_time.toml", calibration / "engine_costs.toml"):
        for row in entry.examined_rows:
            examined.setdefault(row, set()).add(entry.name)
    measurements, _ = load(PUBLISHED, ASSUMPTIONS)
    for m in measurements:
        if m.id.startswith("specdecode-bench"):
            assert m.role == "calibration" and "SpecDecode-Bench/simulator" in m.calibrated_by, m.id
        elif m.id in examined:
            assert m.role == "calibration" and m.calibrated_by in examined[m.id], m.id
        else:
            assert m.role == "check" and m.calibrated_by is None, m.id
    assert len(examined) == 22


def test_the_committed_measurements_load_and_have_enough_known_hardware():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    known = [m for m in measurements if m.gpu in ("a100", "h100", "h200")]
    sources = {m.source_url.split("#")[0] for m in known}
    assert len(known) >= 16 and len(sources) >= 4


# --- the mapping ----------------------------------------------------------------------------------
def test_rows_map_to_runs_by_one_rule():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    batch = plan(rows["vllm-pr16937-eagle1-k2"], assumptions, rows)
    assert batch.run.workload.concurrency == 1 and batch.run.device == "h100" and batch.baseline is None
    # no acceptance in the row: borrowed from the same head, target and k in issue #20780
    assert batch.acceptance.conditional == pytest.approx((iid_rate_from_length(2.1, 2),) * 2)
    assert "vllm-issue20780-eagle1-k2" in batch.acceptance.description
    poisson = plan(rows["vllm-blog2024-ngram-qps1"], assumptions, rows)
    gaps = np.diff(poisson.run.workload.arrival_s)  # drawn lengths: the Poisson stream as explicit arrivals
    assert gaps.mean() == pytest.approx(1.05, rel=0.15) and poisson.run.tensor_parallel_size == 4  # Vidur's capped gaps: ~1.05 x 1/rate
    assert poisson.baseline is not None and not poisson.baseline.speculation.enabled
    inferred = plan(rows["vllm-issue20780-eagle1-k2"], assumptions, rows)  # GPU inferred, the H200 run as its range
    assert inferred.run.device == "h100" and [run.device for _, run, _ in inferred.variants] == ["h100", "h200"]
    assert "rtx4090" in plan(rows["vllm-pr24243-minicpm3-eagle3-c1"], assumptions, rows).reason


def test_unknowable_settings_run_at_both_ends_and_draft_tp_comes_from_the_row():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    blog = plan(rows["vllm-blog2024-draft-qps4"], assumptions, rows)
    assert blog.run.speculation.draft_tensor_parallel_size == 1 and blog.run.tensor_parallel_size == 4
    # drawn lengths around vLLM's ShareGPT benchmark mean (201), not SpecDecode-Bench's 728
    assert np.mean(blog.run.workload.output_tokens) == pytest.approx(201, rel=0.03)
    labels = [label for label, _, _ in blog.variants]
    assert labels == ["output_len 170", "output_len 210"]
    assert [np.mean(run.workload.output_tokens) for _, run, _ in blog.variants] == pytest.approx([170, 210], rel=0.03)
    assert all(base is not None and not base.speculation.enabled for _, _, base in blog.variants)  # a baseline at each end
    sglang = plan(rows["sglang-pr4716-nospec"], assumptions, rows)
    assert sglang.run.workload.prompt_tokens[0] == 150 and np.mean(sglang.run.workload.output_tokens) == pytest.approx(512, rel=0.03)  # both turns
    multiturn = plan(rows["vllm-pr29334-eagle-k1"], assumptions, rows)
    assert multiturn.measurement.metric == "decode_tokens_per_s" and [r.workload.prompt_tokens[0] for _, r, _ in multiturn.variants] == [100, 1224]
    assert plan(rows["vllm-pr16937-eagle1-k2"], assumptions, rows).variants == ()  # no unknowable setting declared


def test_the_draft_tp_rule_is_the_run_configs_and_a_row_names_its_own_key():
    """A row whose draft_tp the run configuration refuses is out of reach, saying why in the row's keys."""
    import dataclasses

    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    blog = rows["vllm-blog2024-draft-qps4"]
    assert blog.tp == 4
    refused = plan(dataclasses.replace(blog, draft_tp=2), assumptions, rows)
    assert refused.run is None
    assert refused.reason == "the simulator refuses the setting: draft_tp = 2: must be 1 or the target's tp (4)"


def test_the_error_range_spans_the_variants_results():
    from simulator.published.reproduce import _error_range

    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    p = plan(rows["sglang-pr4716-nospec"], assumptions, rows)  # published 88.61 tok/s
    (_, low, _), (_, high, _) = p.variants
    by_config = {low: {"throughput_tok_s": 88.61 * 0.9}, high: {"throughput_tok_s": 88.61 * 1.05}}
    assert _error_range(p, by_config) == "-10.0 to +5.0"
    assert _error_range(plan(rows["vllm-pr16937-nospec"], assumptions, rows), {}) == ""


def test_simulated_metrics():
    class M:
        metric, qps = "speedup", 2.0

    assert simulated_value(M, {"e2e_p50_s": 1.0}, {"e2e_p50_s": 3.0}) == 3.0
    M.qps = None
    assert simulated_value(M, {"throughput_tok_s": 200.0}, {"throughput_tok_s": 100.0}) == 2.0
    M.metric = "tpot_ms"
    assert simulated_value(M, {"tpot_p50_s": 0.007}, None) == pytest.approx(7.0)
    M.metric = "decode_tokens_per_s"
    assert simulated_value(M, {"tpot_p50_s": 0.008}, None) == pytest.approx(125.0)


# --- the committed comparison ------------------------------------------------------------------------
def test_the_comparison_is_committed():
    assert (RESULTS_DIR / "published.csv").is_file(), "data/results/published.csv is a committed result; run `python build.py` to record it"


@pytest.fixture(scope="module")
def committed():
    path = RESULTS_DIR / "published.csv"
    if not path.is_file():
        pytest.fail("data/results/published.csv is a committed result; run `python build.py` to record it")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def test_every_row_is_simulated_or_says_why(committed):
    measurements, _ = load(PUBLISHED, ASSUMPTIONS)
    assert list(committed.id) == [m.id for m in measurements]
    simulated = committed[committed.status == SIMULATED]
    assert simulated.error_pct.notna().all()
    assert (committed[committed.status != SIMULATED].reason.str.len() > 0).all()
    recomputed = 100 * (simulated.simulated - simulated.published) / simulated.published
    assert recomputed.to_numpy() == pytest.approx(simulated.error_pct.to_numpy(), abs=1e-3)


# Targets of the published-measurements issue.  A miss fails here: fix the model, or report it.
MEDIAN_ABS_ERROR_TARGET = 10.0
SPEEDUP_TARGET = 15.0


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: the vLLM check rows' median |error| is 10.02% "
                   "(recorded 2026-12-03, 47 rows, each on its own version's profile; 34 within 15%); the other engines' rows, "
                   "reported apart on a proxy profile, are at 20% (content/published-misses.md)")
def test_median_absolute_error_target(committed):
    rows = committed.to_dict("records")
    assert summary(rows)["check"]["absolute_median_abs_error_pct"] <= MEDIAN_ABS_ERROR_TARGET


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: no speedup check row runs on a vLLM V1 engine "
                   "(recorded 2026-12-03): the blog's 9 rows ran vLLM 0.6.0 (V0) and the EAGLE-3 paper's 21 ran SGLang, both "
                   "reported apart on a proxy profile; the PR #16937 rows became calibration rows (they set the draft pass)")
def test_speedup_target(committed):
    rows = committed.to_dict("records")
    s = summary(rows)["check"]
    assert s["speedup_rows"] > 0, "no speedup check rows recorded"
    assert s["speedup_rows_within_15pct"] >= 0.8 * s["speedup_rows"]


# --- through build.py ---------------------------------------------------------------------------------
SMALL_PUBLISHED = """
[[measurement]]
id = "tiny-nospec"
source_url = "https://example.org/tiny"
engine = "vllm"
gpu = "a100"
tp = 1
model = "meta-llama/Llama-2-7b-hf"
proposer = "none"
k = 0
batch_size = 1
input_len = 64
output_len = 32
metric = "output_tokens_per_s"
value = 80.0
role = "check"
acceptance_class = "same_source"

[[measurement]]
id = "tiny-ngram"
source_url = "https://example.org/tiny"
engine = "vllm"
gpu = "a100"
tp = 1
model = "meta-llama/Llama-2-7b-hf"
proposer = "ngram"
k = 2
batch_size = 1
input_len = 64
output_len = 32
acceptance_length = 1.8
metric = "speedup"
value = 1.5
role = "check"
acceptance_class = "same_source"

[[measurement]]
id = "tiny-unknown-gpu"
source_url = "https://example.org/other"
engine = "vllm"
tp = 1
model = "meta-llama/Llama-2-7b-hf"
proposer = "none"
batch_size = 1
metric = "tpot_ms"
value = 9.0
role = "check"
acceptance_class = "same_source"
"""


@pytest.fixture
def build_workspace(tmp_path, committed_csvs):
    import importlib.util
    import shutil

    from repo import REPO_ROOT

    spec = importlib.util.spec_from_file_location("build_cli_published", REPO_ROOT / "build.py")
    build_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_cli)
    ws = {name: tmp_path / name for name in ("sweep.csv", "progress.csv", "site", "published.toml", "assumptions.toml", "published.csv", "spec.toml")}
    shutil.copyfile(committed_csvs[0], ws["sweep.csv"])
    shutil.copyfile(committed_csvs[1], ws["progress.csv"])
    ws["published.toml"].write_text(SMALL_PUBLISHED)
    ws["assumptions.toml"].write_text("acceptance = []\n[datasets]\n")
    ws["spec.toml"].write_text((DATA_DIR / "sweep.toml").read_text().replace("num_requests = 300", "num_requests = 12")
                               .replace("arrival_rate = [2.0, 4.0, 6.0]", "arrival_rate = [2.0]"))
    args = ["--spec", str(ws["spec.toml"]), "--csv", str(ws["sweep.csv"]), "--progress-csv", str(ws["progress.csv"]),
            "--out", str(ws["site"]), "--jobs", "1", "--published", str(ws["published.toml"]),
            "--published-assumptions", str(ws["assumptions.toml"]), "--published-csv", str(ws["published.csv"]),
            "--no-paysoff"]  # without it the build ran the whole pays-off sweep into data/results/paysoff.csv
    return build_cli, ws, args


@pytest.mark.slow
@pytest.mark.simulation
def test_build_reproduces_rows_and_publishes_the_page(build_workspace):
    build_cli, ws, args = build_workspace
    assert build_cli.main(args) == 0
    frame = pd.read_csv(ws["published.csv"], keep_default_na=False, na_values=[""])
    assert list(frame.id) == ["tiny-nospec", "tiny-ngram", "tiny-unknown-gpu"]
    assert list(frame.status) == [SIMULATED, SIMULATED, "not reproducible"]
    assert frame.simulated[1] > 1  # n-gram at acceptance length 1.8 speeds up one request at a time
    page = (ws["site"] / "published.html").read_text()
    assert "tiny-ngram" in page and "the source does not state the GPU" in page
    assert (ws["site"] / "published.csv").read_bytes() == ws["published.csv"].read_bytes()
    first = ws["published.csv"].read_bytes()
    assert build_cli.main(args) == 0
    assert ws["published.csv"].read_bytes() == first  # deterministic


def test_a_bad_published_file_stops_the_build_before_any_work(build_workspace, capsys):
    build_cli, ws, args = build_workspace
    ws["published.toml"].write_text(SMALL_PUBLISHED.replace('metric = "tpot_ms"', 'metric = "furlongs"'))
    before = ws["sweep.csv"].read_bytes()
    assert build_cli.main(args) == 2
    assert "metric = 'furlongs' is an unknown unit" in capsys.readouterr().err
    assert ws["sweep.csv"].read_bytes() == before and not ws["published.csv"].exists() and not ws["site"].exists()


# --- the direction of each published trend ----------------------------------------------------------
def _by_id(committed):
    return committed.set_index("id")


def test_speedup_falls_with_load_as_published(committed):
    """The trends of check rows (the SpecDecode-Bench batch series are calibration rows: not evidence)."""
    rows = _by_id(committed)
    assert set(rows.loc[[i for i in rows.index if i.startswith("vllm-blog2024")], "role"]) == {"check"}
    series = [
        [f"vllm-blog2024-draft-qps{q}" for q in (1, 2, 4, 8)],
        [f"vllm-blog2024-ngram-qps{q}" for q in (1, 2, 4, 8)],
        [f"eagle3-paper-sglang-eagle-bs{b}" for b in (2, 64)],  # SGLang, chain of 3, H100: falls with batch size
        [f"eagle3-paper-sglang-eagle3-bs{b}" for b in (2, 64)],
    ]
    for ids in series:
        published, simulated = rows.loc[ids, "published"].to_numpy(), rows.loc[ids, "simulated"].to_numpy()
        assert published[0] > published[-1]
        assert simulated[0] > simulated[-1], f"{ids[0]}..{ids[-1]}: simulated speedup does not fall"
    assert rows.loc["vllm-blog2024-ngram-qps1", "simulated"] > 1 > rows.loc["vllm-blog2024-ngram-qps8", "simulated"]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: at the blog's own request lengths (about 200 output "
                   "tokens, docs/published-sources.md) the model keeps the draft model's speedup above 1 at QPS 10 (1.17 simulated "
                   "against 0.71 published, recorded 2026-12-01); with SpecDecode-Bench's 728-token outputs it had crossed "
                   "below 1 only because the simulated server was overloaded")
def test_the_draft_models_speedup_crosses_below_one_at_the_blogs_highest_load(committed):
    rows = _by_id(committed)
    assert rows.loc["vllm-blog2024-draft-qps1", "simulated"] > 1 > rows.loc["vllm-blog2024-draft-qps10", "simulated"]


def test_best_k_at_batch_one_as_published(committed):
    rows = _by_id(committed)
    ids = [f"vllm-pr16937-eagle1-k{k}" for k in (2, 4, 7)]
    assert rows.loc[ids, "simulated"].idxmax() == rows.loc[ids, "published"].idxmax()


def test_summary_counts_check_rows_only_by_class_and_calibration_apart():
    def row(role, cls, metric, error, status=SIMULATED, by=""):  # vLLM rows on their own version's profile (test_engine_identity.py: the rest)
        return {"status": status, "role": role, "acceptance_class": cls, "metric": metric, "error_pct": error, "calibrated_by": by, "engine_class": "vllm"}

    rows = [
        row("calibration", "same_source", "speedup", 40.0, by="https://example.org/fit"),
        row("check", "same_source", "tpot_ms", -4.0),
        row("check", "same_source", "output_tokens_per_s", 20.0),
        row("check", "assumed", "speedup", 10.0),
        row("check", "assumed", "speedup", -30.0),
        row("check", "same_source", "tpot_ms", float("nan"), status="not reproducible"),
        row(float("nan"), float("nan"), "tpot_ms", 1.0),  # as read back from a CSV recorded before roles
    ]
    s = summary(rows)
    assert (s["rows"], s["simulated"], s["not_reproducible"], s["unlabelled"]) == (7, 6, 1, 1)
    check = s["check"]
    assert (check["rows"], check["absolute_rows"], check["absolute_median_abs_error_pct"]) == (4, 2, 12.0)
    assert (check["speedup_rows"], check["speedup_rows_within_15pct"], check["speedup_max_abs_error_pct"]) == (2, 1, 30.0)
    assert s["by_class"]["same_source"]["rows"] == 2 and s["by_class"]["assumed"]["median_abs_error_pct"] == 20.0
    assert s["by_class"]["other_dataset"]["rows"] == 0
    assert s["calibration"]["rows"] == 1 and s["calibration"]["median_abs_error_pct"] == 40.0  # not in the check figures
    assert s["calibrated_by"] == ["https://example.org/fit"]


# --- draft trees --------------------------------------------------------------------------------
TREE_ROWS = ("sglang-docs-eagle2", "sglang-docs-eagle3", "sglang-pr4716-eagle3-tree", "eagle-pr173-sglang-eagle-tree")


def test_the_tree_rows_are_simulated_with_their_trees():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    for row_id in TREE_ROWS:
        m = rows[row_id]
        p = plan(m, assumptions, rows)
        assert p.run is not None, (row_id, p.reason)
        spec = p.run.speculation
        assert spec.proposer == m.proposer + "_tree" and spec.num_speculative_tokens == m.k  # the depth
        assert dict(spec.options) == {"eagle_topk": m.eagle_topk, "num_draft_tokens": m.num_draft_tokens}
    # PR #4716 states its accept length; the others borrow its rate (an assumption, so their class says so)
    assert plan(rows["sglang-pr4716-eagle3-tree"], assumptions, rows).acceptance.description.endswith("(this row): i.i.d. 0.889")
    assert all(rows[r].acceptance_class == "assumed" for r in TREE_ROWS if r != "sglang-pr4716-eagle3-tree")


def test_a_tree_row_without_its_settings_is_out_of_reach_naming_them():
    measurements, assumptions = load(PUBLISHED, ASSUMPTIONS)
    rows = {m.id: m for m in measurements}
    from dataclasses import replace

    bare = replace(rows["sglang-pr4716-eagle3-tree"], eagle_topk=None, num_draft_tokens=None)
    assert plan(bare, assumptions, rows).reason == "the source does not state the tree's eagle_topk, num_draft_tokens (depth, top-k, tokens verified)"


def test_tree_settings_on_a_chain_row_are_refused(tmp_path):
    text = PUBLISHED.read_text().replace('k = 2\nbatch_size = 1\n', 'k = 2\neagle_topk = 4\nbatch_size = 1\n', 1)
    path = tmp_path / "published.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="eagle_topk is a tree's setting"):
        load_measurements(path)


def test_the_sources_page_counts_the_rows_and_sources_the_file_holds():
    """Issue 31: docs/published-sources.md said 79 rows and 11 sources long after the file grew."""
    import re

    from repo import REPO_ROOT

    rows = load_measurements(REPO_ROOT / "data" / "published.toml")
    text = " ".join((REPO_ROOT / "docs" / "published-sources.md").read_text(encoding="utf-8").split())
    stated = re.search(r"holds (\d+) rows from (\d+) source pages", text)
    assert stated, "the sources page no longer states its counts"
    assert (int(stated.group(1)), int(stated.group(2))) == (len(rows), len({r.source_url.split("#")[0] for r in rows}))


def test_the_method_page_describes_the_scheduler_limits_the_rows_run_with():
    """Issue 31: content/published-method.md said Sarathi chunks of 512 tokens; rows run their engine's vllm serve limits."""
    from repo import REPO_ROOT

    text = " ".join((REPO_ROOT / "content" / "published-method.md").read_text(encoding="utf-8").split())
    assert "chunks of 512 tokens" not in text and "what `vllm serve` of the row's engine profile picks on its GPU" in text
