"""A check that never saw its rows (issue 31): sources compared by identity, every calibration
entry screened, and a row examined while a constant was set is a calibration row.

Every refusal below passed the guard before it compared identities: it compared one normalised
spelling (``source_key``), screened only constants against check rows, and knew no examined rows.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.util.errors import ConfigError
from simulator.profiling import calibration_guard
from simulator.profiling.__main__ import main as profiling_main
from simulator.profiling.source_identity import NO_ALIASES, canonical, implied_identities, parse_aliases, same_source
from simulator.specs.measurements import Measurement, load_measurements

from repo import DATA_DIR, published_row

PUBLISHED = DATA_DIR / "published.toml"
CALIBRATION = DATA_DIR / "calibration"
PR = "https://github.com/vllm-project/vllm/pull/24111"
PAPER = "https://arxiv.org/abs/2407.08608"
FIT = "https://github.com/SpecDecode-Bench/simulator/blob/main/predictor.py"

STEP_TIME = f"""
[[constant]]
name = "devices.h100.network.custom_twoshot_us"
value = 12.7
vllm_version = "0.11"
source_url = "{PR}"
quote = "(128, 8192) 2.00 MB 0.022 0.027"
settings = "four H100s"
derivation = "arithmetic"
examined_rows = []

[[constant]]
name = "devices.h100.attention.prefill_compute_eff"
value = 0.485
vllm_version = "FA3"
source_url = "{PAPER}"
quote = "1.5-2.0x"
settings = "H100"
derivation = "arithmetic"
examined_rows = []

[[constant]]
name = "engines.vllm-0.10.1.graph_kernel_gap_us"
value = 0.9
vllm_version = "0.10.1"
source_url = "https://github.com/acme/fastkernel/blob/main/bench.md"
quote = "0.9 us"
settings = "H100"
derivation = "arithmetic"
examined_rows = []

[[assumption]]
name = "devices.h100.attention.combine_us"
value = 3.0
why = "about two elementwise kernels, as https://example.org/blog/kernels/post shows"
examined_rows = []

[[check]]
name = "a held-out GEMM benchmark"
source_url = "https://github.com/vllm-project/vllm/pull/17126"
quote = "q"
settings = "s"
what = "w"
"""

ENGINE_COSTS = f"""
[engine_overhead]
value_ms = 1.2
vllm_version = "0.10.1"
gpu = "h100"
source_url = "{FIT}"
source_value_ms = 1.2
quote = "overhead_constant_per_step = 1.2e-03"
fitted_on = "its own runs"
rounding = "0.1 ms"
examined_rows = []

[[engine_overhead.corroboration]]
source_url = "https://github.com/tenstorrent/vllm-tt-plugin/pull/130"
value_ms = 1.283
what = "host time per step"
vllm_version = "V1"

[draft_pass]
value_ms = 0.37
vllm_version = "0.10.1"
gpu = "h100"
source_url = "{FIT}"
quote = "draft_c_fixed = 2.1e-03"
source_c_kv_ms = 0.0
source_c_token_ms = 0.0
source_c_fixed_ms = 2.1
passes = 3
kv_cache_size = 300
batch_sizes = [1]
modelled_draft_step_ms = [0.9]
evidence = ["https://github.com/vllm-project/vllm/pull/15729"]
examined_rows = []

[verify_attention]
default_series = "prefill"
default_reason = "why"
examined_rows = []

[[verify_attention.series]]
name = "prefill"
kernel = "a prefill kernel"
source_url = "https://github.com/flashinfer-ai/flashinfer/issues/1832"
measured_by = "vLLM developers"
columns = ["batch_size", "kv_cache_size", "num_query_tokens", "ms"]
rows = [[1, 1024, 1, 0.041], [1, 1024, 4, 0.041]]
"""

ALIASES = """
[[host]]
host = "blog.vllm.ai"
same_as = "vllm-project.github.io"
why = "the blog's own domain"

[[identity]]
name = "SpecDecode-Bench"
what = "one study's page, paper and code"
addresses = ["https://specdecode-bench.github.io", "https://arxiv.org/abs/2601.11580", "https://github.com/SpecDecode-Bench"]
"""


def _files(tmp_path, step_time=STEP_TIME, engine_costs=ENGINE_COSTS, aliases=ALIASES):
    (tmp_path / "step_time.toml").write_text(step_time, encoding="utf-8")
    (tmp_path / "engine_costs.toml").write_text(engine_costs, encoding="utf-8")
    (tmp_path / "source_aliases.toml").write_text(aliases, encoding="utf-8")
    return tmp_path / "step_time.toml"


def _row(id_, url, role="check", by=None) -> Measurement:
    return Measurement(id_, url, "vllm", "meta-llama/Llama-3.1-8B-Instruct", "none", "output_tokens_per_s", 100.0, role, "same_source", calibrated_by=by)


def _guard(tmp_path, rows, **files):
    step_time = _files(tmp_path, **files)
    calibration_guard.check_published_roles(rows, step_time, step_time.with_name("engine_costs.toml"))


def test_the_hand_made_files_pass(tmp_path):
    _guard(tmp_path, [_row("other", "https://github.com/vllm-project/vllm/pull/16937"), _row("sdb", "https://specdecode-bench.github.io", "calibration", FIT)])


# --- (a) another spelling of a calibration source is the same source -----------------------------
# spellings the guard let through when it compared one normalised spelling (source_key)
MISSED_BEFORE = [
    "https://www.github.com/vllm-project/vllm/pull/24111",
    "https://github.com/vllm-project/vllm/pulls/24111",
    "https://arxiv.org/pdf/2407.08608v2",
    "https://arxiv.org/html/2407.08608v1",
    "https://arxiv.org/abs/2407.08608v3",
    "https://huggingface.co/papers/2407.08608",
    "https://acme.github.io/fastkernel/",  # the project page of the repository a constant cites
    "https://m.example.org/blog/kernels/post/index.html",
    "https://example.org/blog/kernels/post.html",
]
# spellings it already caught, kept caught
CAUGHT_BEFORE = [
    "http://github.com/vllm-project/vllm/pull/24111",
    "https://github.com/vllm-project/vllm/pull/24111/",
    "https://github.com/vllm-project/vllm/pull/24111/files",
    "https://github.com/vllm-project/vllm/pull/24111/commits",
    "https://github.com/vllm-project/vllm/pull/24111#issuecomment-3241",
    "https://github.com/vllm-project/vllm/pull/24111?notification_referrer_id=x",
    "https://github.com/vllm-project/vllm/issues/24111",
    "https://GitHub.com/VLLM-Project/vLLM/pull/24111",
]


@pytest.mark.parametrize("spelling", MISSED_BEFORE + CAUGHT_BEFORE)
def test_a_check_row_under_another_spelling_of_a_calibration_source_is_refused(tmp_path, spelling):
    with pytest.raises(ConfigError, match=r"published measurement spelt: is a check row, but its source .* is a source of calibration data \(.* cites "):
        _guard(tmp_path, [_row("spelt", spelling)])


def test_a_declared_alias_host_is_the_same_site():
    aliases = parse_aliases({"host": [{"host": "blog.vllm.ai", "same_as": "vllm-project.github.io", "why": "w"}]}, "aliases")
    assert same_source("https://blog.vllm.ai/2024/09/05/perf-update.html", "https://vllm-project.github.io/2024/09/05/perf-update", aliases)
    assert not same_source("https://blog.vllm.ai/2024/09/05/perf-update.html", "https://vllm-project.github.io/2024/10/17/spec-decode.html", aliases)


@pytest.mark.parametrize(
    "a, b",
    [
        (PR, "https://github.com/vllm-project/vllm/pull/24112"),  # another thread
        (PR, "https://github.com/vllm-project/vllm/blob/main/README.md"),  # the repository's files are not its threads
        (PAPER, "https://arxiv.org/abs/2407.08609"),
        ("https://vllm-project.github.io/2024/09/05/perf-update.html", "https://vllm-project.github.io/2024/10/17/spec-decode.html"),
        ("https://github.com/SpecDecode-Bench/simulator", "https://github.com/SpecDecode-Bench/simulator2"),
    ],
)
def test_different_sources_stay_different(a, b):
    assert not same_source(a, b)


def test_canonical_identities():
    assert canonical("https://github.com/vllm-project/vllm/pull/16937#issuecomment-2828889840") == "github.com/vllm-project/vllm#16937"
    assert canonical(FIT) == "github.com/specdecode-bench/simulator"
    assert canonical("https://arxiv.org/pdf/2407.08608v2.pdf") == "arxiv:2407.08608"
    assert canonical("https://blog.vllm.ai/2024/09/05/perf-update.html#appendix") == "blog.vllm.ai/2024/09/05/perf-update"
    assert "github.com/acme/fastkernel" in implied_identities("https://acme.github.io/fastkernel/docs/", NO_ALIASES)


# --- (b) a calibration row relabelled check --------------------------------------------------------
def test_a_row_of_a_calibration_source_relabelled_check_is_refused(tmp_path):
    """The page the SpecDecode-Bench rows are read from and the repository whose fit set the
    overhead are one source (the declared identity), however their addresses differ."""
    with pytest.raises(ConfigError, match=r"published measurement sdb: is a check row, but its source https://specdecode-bench.github.io is a source of calibration data .*'SpecDecode-Bench'"):
        _guard(tmp_path, [_row("sdb", "https://specdecode-bench.github.io")])


def test_a_committed_specdecode_bench_row_relabelled_check_is_refused():
    rows = load_measurements(PUBLISHED)
    relabelled = [replace(m, role="check", calibrated_by=None) if m.id == "specdecode-bench-llama8b-sharegpt-eagle-bs1" else m for m in rows]
    step_time = CALIBRATION / "step_time.toml"
    with pytest.raises(ConfigError, match=r"specdecode-bench-llama8b-sharegpt-eagle-bs1: is a check row, but its source"):
        calibration_guard.check_published_roles(relabelled, step_time, step_time.with_name("engine_costs.toml"))


# --- (c) a cross-check whose source set a constant is not held out ---------------------------------
@pytest.mark.parametrize("url", [PR + "#issuecomment-1", FIT.replace("blob/main/predictor.py", ""), "https://acme.github.io/fastkernel"])
def test_a_check_entry_whose_source_is_a_calibration_source_is_refused(tmp_path, url):
    step_time = STEP_TIME.replace('source_url = "https://github.com/vllm-project/vllm/pull/17126"', f'source_url = "{url}"')
    with pytest.raises(ConfigError, match=r"check 1 \(a held-out GEMM benchmark\): is not held out: its source .* is a source of calibration data .*declare it \[\[in_sample\]\]"):
        _guard(tmp_path, [], step_time=step_time)


def test_an_in_sample_comparison_may_share_a_calibration_source(tmp_path):
    entry = f'\n[[in_sample]]\nname = "the fit"\nsource_url = "{FIT}"\nquote = "q"\nsettings = "s"\nwhat = "w"\nwhy = "it set the overhead"\nfitted_on_rows = ["other"]\n'
    _guard(tmp_path, [_row("other", "https://example.org/other")], step_time=STEP_TIME + entry)


@pytest.mark.parametrize(
    "url, entry",
    [
        ("https://example.org/blog/kernels/post", "assumption 1 \\(devices.h100.attention.combine_us\\) why"),  # a link in an assumption's text
        ("https://github.com/tenstorrent/vllm-tt-plugin/pull/130", r"\[engine_overhead\] corroboration\[0\].source_url"),
        ("https://github.com/vllm-project/vllm/pull/15729/files", r"\[draft_pass\] evidence\[0\]"),
        ("https://github.com/flashinfer-ai/flashinfer/issues/1832", r"\[verify_attention\] series\[0\].source_url"),
    ],
)
def test_every_entry_kind_is_screened(tmp_path, url, entry):
    with pytest.raises(ConfigError, match=entry):
        _guard(tmp_path, [_row("seen", url)])


# --- (d) a row examined while a constant was set is a calibration row ------------------------------
def _examined(text, rows='["seen"]'):
    return text.replace("examined_rows = []", f"examined_rows = {rows}", 1)


def test_a_check_row_in_a_constants_examined_rows_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"published measurement seen: is a check row, but .*constant 1 \(devices.h100.network.custom_twoshot_us\) examined it while being set: "
                                          r"make it a calibration row \(role = \"calibration\", calibrated_by = \"devices.h100.network.custom_twoshot_us\"\)"):
        _guard(tmp_path, [_row("seen", "https://example.org/elsewhere")], step_time=_examined(STEP_TIME))


def test_an_engine_costs_entry_examines_rows_too(tmp_path):
    with pytest.raises(ConfigError, match=r"\[engine_overhead\] examined it while being set"):
        _guard(tmp_path, [_row("seen", "https://example.org/elsewhere")], engine_costs=_examined(ENGINE_COSTS))


def test_the_examined_row_relabelled_calibration_passes(tmp_path):
    row = _row("seen", "https://example.org/elsewhere", "calibration", "devices.h100.network.custom_twoshot_us")
    _guard(tmp_path, [row], step_time=_examined(STEP_TIME))


@pytest.mark.parametrize(
    "row, step_time, message",
    [
        (_row("seen", "https://example.org/x", "calibration", "devices.h100.attention.prefill_compute_eff"), _examined(STEP_TIME),
         r"seen: calibrated_by = 'devices.h100.attention.prefill_compute_eff', whose examined_rows do not list this row"),
        (_row("seen", "https://example.org/x", "calibration", "devices.h100.nope"), STEP_TIME, r"calibrated_by = 'devices.h100.nope' names no calibration entry"),
        (_row("seen", "https://example.org/x", "calibration", FIT), STEP_TIME, r"is not data its own source https://example.org/x released"),
        (_row("seen", "https://example.org/x", "calibration", "https://example.org/x"), STEP_TIME, r"is none of the calibration data's sources"),
    ],
)
def test_a_calibration_row_names_what_calibrated_from_it(tmp_path, row, step_time, message):
    with pytest.raises(ConfigError, match=message):
        _guard(tmp_path, [row], step_time=step_time)


def test_an_examined_or_fitted_on_row_that_is_no_row_is_refused(tmp_path):
    step_time = _files(tmp_path, step_time=_examined(STEP_TIME))
    with pytest.raises(ConfigError, match=r"constant 1 \(devices.h100.network.custom_twoshot_us\): examined_rows lists \['seen'\], which no published measurement is"):
        calibration_guard.check_row_ids([_row("other", "https://example.org/x")], step_time, step_time.with_name("engine_costs.toml"))


def test_examined_rows_must_be_said(tmp_path):
    with pytest.raises(ConfigError, match=r"constant 1 \(devices.h100.network.custom_twoshot_us\): missing examined_rows"):
        _guard(tmp_path, [], step_time=STEP_TIME.replace("examined_rows = []\n", "", 1))


@pytest.mark.parametrize(
    "aliases, message",
    [
        ('[[identity]]\nname = "x"\nwhat = "w"\naddresses = ["https://a.org"]\n', "must be two or more links"),
        ('[[identity]]\nname = "x"\nwhat = "w"\naddresses = ["https://a.org", "https://b.org"]\n[[identity]]\nname = "y"\nwhat = "w"\naddresses = ["http://www.a.org/", "https://c.org"]\n',
         r"http://www.a.org/ is already in identity 'x'"),
        ('[[host]]\nhost = "a.org"\nsame_as = "a.org"\nwhy = "w"\n', "must name two different hosts"),
    ],
)
def test_a_bad_alias_table_is_refused_naming_the_entry(tmp_path, aliases, message):
    with pytest.raises(ConfigError, match=message):
        _guard(tmp_path, [], aliases=aliases)


# --- the committed data and the command ---------------------------------------------------------
def test_the_committed_rows_and_calibration_data_pass():
    step_time, rows = CALIBRATION / "step_time.toml", load_measurements(PUBLISHED)
    calibration_guard.check_published_roles(rows, step_time, step_time.with_name("engine_costs.toml"))
    calibration_guard.check_row_ids(rows, step_time, step_time.with_name("engine_costs.toml"))


ROW = published_row(source_url="{url}")


def test_the_command_exits_2_with_one_line_naming_the_row(tmp_path, capsys):
    step_time = _files(tmp_path)
    (tmp_path / "published.toml").write_text(ROW.format(url="https://www.github.com/vllm-project/vllm/pulls/24111/files"), encoding="utf-8")
    assert profiling_main(["check-sources", "--published", str(tmp_path / "published.toml"), "--calibration", str(step_time)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "published measurement a-b-c: is a check row" in err and "pull/24111" in err
    (tmp_path / "published.toml").write_text(ROW.format(url="https://example.org/x"), encoding="utf-8")
    assert profiling_main(["check-sources", "--published", str(tmp_path / "published.toml"), "--calibration", str(step_time)]) == 0
