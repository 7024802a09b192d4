"""Every check row priced by the engine that ran it (issue 31): the one rule that names a row's
engine profile and engine class, the columns it writes, the headline that counts only vLLM rows
run on their own version's profile, and an engine the loader does not know."""

from pathlib import Path

import pandas as pd
import pytest

from simulator.profiles.engines import load_engines
from simulator.published.plan import PROXY_ENGINE, VLLM_RELEASE_DATES, Plan, engine_identity
from simulator.published.reproduce import _row
from simulator.schemas import ENGINE_CLASSES, OTHER_ENGINE, PUBLISHED_COLUMNS, SIMULATED, VLLM, VLLM_UNKNOWN, VLLM_V0
from simulator.specs.measurements import Measurement, load_measurements
from simulator.util.errors import ConfigError
from simulator.website.published import context, headline

from repo import published_row
from simulator.website.published_summary import summary


def _row_of(engine="vllm", version=None, date=None) -> Measurement:
    return Measurement(
        id="x-1", source_url="https://example.org/x", engine=engine, model="meta-llama/Llama-3.1-8B-Instruct", proposer="none",
        metric="output_tokens_per_s", value=100.0, role="check", acceptance_class="same_source", engine_version=version,
        source_date=date, gpu="h100", batch_size=1, input_len=128, output_len=128,
    )


OLDEST = min((e for e in load_engines().values() if e.engine == "vllm"), key=lambda e: tuple(int(p) for p in e.version.split("."))).name


@pytest.mark.parametrize(
    "engine, version, date, profile, cls",
    [
        ("vllm", "0.15.1", None, "vllm-0.15.1", VLLM),  # its own profile
        ("vllm", "0.12", "2024-01-01", "vllm-0.11.0", VLLM),  # the newest at or below it; a stated version beats the date
        ("vllm", "0.9.2", None, "vllm-0.10.1", VLLM),  # V1 older than every profile: the oldest V1 profile
        ("vllm", "0.6.0", None, OLDEST, VLLM_V0),  # V0: no V1 profile models it
        ("sglang", None, "2025-12-01", "sglang-0.5.3", OTHER_ENGINE),  # by date, as vLLM rows: 0.5.3 (2025-10-06) was out, 0.5.6.post1 (2025-12-09) not
        ("sglang", None, "2025-01-02", PROXY_ENGINE, OTHER_ENGINE),  # older than every SGLang profile: the proxy
        ("sglang", None, None, PROXY_ENGINE, OTHER_ENGINE),
        ("sglang", "0.4.4", None, "sglang-0.4.4", OTHER_ENGINE),  # a stated SGLang version runs its SGLang profile (tests/test_sglang_profile.py)
        ("tensorrt-llm", None, None, PROXY_ENGINE, OTHER_ENGINE),
        ("vllm", None, "2025-11-24", "vllm-0.11.0", VLLM),  # by date: 0.11.0 (2025-10-04) was out, 0.14.0 (2026-01-20) not
        ("vllm", None, "2026-02-10", "vllm-0.15.1", VLLM),
        ("vllm", None, "2025-04-24", "vllm-0.10.1", VLLM),  # after 0.8.0 (V1 by default), before 0.10.1
        ("vllm", None, "2024-10-17", OLDEST, VLLM_V0),  # before 0.8.0: the V0 engine
        ("vllm", None, None, PROXY_ENGINE, VLLM_UNKNOWN),
    ],
)
def test_the_rule_at_hand_made_rows(engine, version, date, profile, cls):
    identity = engine_identity(_row_of(engine, version, date))
    assert (identity.profile, identity.engine_class) == (profile, cls)
    assert identity.basis  # the row says which, in words
    if date and not version and (engine == "vllm" or profile != PROXY_ENGINE):
        assert date in identity.basis


def test_the_row_says_how_its_profile_was_picked():
    assert "0.11.0 (released 2025-10-04)" in engine_identity(_row_of(version=None, date="2025-11-24")).basis
    assert "SGLang" in engine_identity(_row_of("sglang")).basis and PROXY_ENGINE in engine_identity(_row_of("sglang")).basis
    assert "multi-step scheduling, FlashAttention-2" in engine_identity(_row_of(version="0.6.0")).basis


def test_every_engine_profile_has_a_release_date_in_version_order():
    """A profile added without its release date would leave rows dated after it on an older one."""
    versions = {e.version for e in load_engines().values() if e.engine == "vllm"}  # SGLang's are not vLLM releases
    assert versions <= set(VLLM_RELEASE_DATES)
    key = lambda v: tuple(int(p) for p in v.split("."))  # noqa: E731
    ordered = sorted(VLLM_RELEASE_DATES, key=key)
    assert [VLLM_RELEASE_DATES[v] for v in ordered] == sorted(VLLM_RELEASE_DATES.values())


def test_the_csv_row_carries_the_engine_profile_and_class():
    row = _row(Plan(_row_of("sglang"), reason="not simulated here"), {})
    assert (row["engine_profile"], row["engine_class"]) == (PROXY_ENGINE, OTHER_ENGINE) and row["engine_basis"]
    assert {"engine_profile", "engine_class", "engine_basis"} <= set(PUBLISHED_COLUMNS)


def test_the_plan_runs_the_profile_the_rule_names():
    from simulator.published.plan import plan
    from simulator.specs.measurements import Assumptions

    for m in (_row_of(version="0.15.1"), _row_of(version=None, date="2025-11-24"), _row_of("sglang")):
        p = plan(m, Assumptions({}, {}), {})
        assert p.run is not None, p.reason
        assert p.run.engine == engine_identity(m).profile


def test_the_committed_rows_each_have_an_engine_class():
    rows = load_measurements(Path(__file__).resolve().parents[1] / "data" / "published.toml")
    classes = {m.id: engine_identity(m).engine_class for m in rows}
    assert set(classes.values()) <= set(ENGINE_CLASSES)
    assert {classes[m.id] for m in rows if m.engine == "sglang"} == {OTHER_ENGINE}
    assert {classes[m.id] for m in rows if m.engine_version == "0.6.0"} == {VLLM_V0}


# --- the headline counts only the vLLM class ---------------------------------------------------------
def _csv_row(id_, error, cls, profile, engine="vllm", version="", **extra):
    base = {c: "" for c in PUBLISHED_COLUMNS}
    base.update(
        id=id_, source_url="https://example.org/" + id_, metric="output_tokens_per_s", published=100.0, simulated=100.0 + error,
        error_pct=error, unit="output tokens/s", status=SIMULATED, role="check", acceptance_class="same_source", source=id_,
        engine=engine, engine_version=version, engine_profile=profile, engine_class=cls, engine_basis="why " + id_, gpu="h100", tp=1,
        model="meta-llama/Llama-3.1-8B-Instruct", proposer="none", batch_size=1, dataset="mt-bench",
    )
    base.update(extra)
    return base


FIXTURE = [
    _csv_row("vllm-a", 5.0, VLLM, "vllm-0.15.1", version="0.15.1"),
    _csv_row("vllm-b", -20.0, VLLM, "vllm-0.15.1", version="0.15.1", batch_size="", qps=4.0),
    _csv_row("vllm-c", 10.0, VLLM, "vllm-0.11.0"),
    _csv_row("sglang-a", -25.0, OTHER_ENGINE, PROXY_ENGINE, engine="sglang"),
    _csv_row("sglang-b", -28.0, OTHER_ENGINE, PROXY_ENGINE, engine="sglang", batch_size="", concurrency=16),
    _csv_row("v060-a", -18.0, VLLM_V0, "vllm-0.10.1", version="0.6.0", batch_size="", qps=8.0),
]


def test_the_headline_counts_only_vllm_rows_and_the_others_apart(tmp_path):
    path = tmp_path / "published.csv"
    pd.DataFrame(FIXTURE, columns=list(PUBLISHED_COLUMNS)).to_csv(path, index=False)
    page = context(path, "setup")
    s = page["summary"]
    assert s["check"]["rows"] == 3 and s["check"]["absolute_median_abs_error_pct"] == 10.0
    assert s["check"]["absolute_rows_within_15pct"] == 2
    assert s["at_load"]["rows"] == 1 and s["at_load"]["absolute_median_abs_error_pct"] == 20.0
    other = s["by_engine"][OTHER_ENGINE]
    assert (other["rows"], other["absolute_median_abs_error_pct"], other["profiles"]) == (2, 26.5, [PROXY_ENGINE])
    assert other["at_load"]["rows"] == 1
    assert s["by_engine"][VLLM_V0]["rows"] == 1 and s["by_engine"][VLLM_UNKNOWN]["rows"] == 0
    assert s["every_check"]["rows"] == 6
    assert [r["id"] for r in page["headline_misses"]] == ["vllm-b"] and len(page["misses"]) == 4
    lines = headline(page["rows"])
    assert lines[0] == "vLLM, on its own version's profile: 3 check rows; 1 miss by more than 15 %."
    assert any(line.startswith("Reported apart:") and "other engines 26 % (2 rows)" in line for line in lines)


def test_a_csv_recorded_before_engine_classes_counts_in_no_engine(tmp_path):
    path = tmp_path / "published.csv"
    frame = pd.DataFrame(FIXTURE, columns=list(PUBLISHED_COLUMNS)).drop(columns=["engine_profile", "engine_class", "engine_basis"])
    frame.to_csv(path, index=False)
    s = context(path, "setup")["summary"]
    assert s["check"]["rows"] == 0 and s["engine_unrecorded"] == 6


# --- bad input ---------------------------------------------------------------------------------------
ROW = published_row(engine="lmdeploy")


def test_an_engine_the_loader_does_not_know_is_refused_naming_the_row_and_field(tmp_path):
    path = tmp_path / "published.toml"
    path.write_text(ROW)
    with pytest.raises(ConfigError, match=r"measurement 1 \(a-b-c\) engine = 'lmdeploy' is not a known engine; expected one of"):
        load_measurements(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s.replace('engine = "lmdeploy"', 'engine = "vllm"\nsource_date = "April 2025"'), r"\(a-b-c\) source_date = 'April 2025' must be a date as YYYY-MM-DD"),
        (lambda s: s.replace('engine = "lmdeploy"', 'engine = "vllm"\nengine_version = "v1-main"'), r"\(a-b-c\) engine_version = 'v1-main' is not a vLLM version"),
    ],
)
def test_what_picks_the_profile_is_refused_when_it_cannot(tmp_path, change, message):
    path = tmp_path / "published.toml"
    path.write_text(change(ROW))
    with pytest.raises(ConfigError, match=message):
        load_measurements(path)


def test_the_build_exits_2_on_an_unknown_engine(tmp_path, committed_csvs, capsys):
    import importlib.util

    from repo import REPO_ROOT

    spec = importlib.util.spec_from_file_location("build_cli_engine", REPO_ROOT / "build.py")
    build_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_cli)
    import shutil

    sweep, progress = tmp_path / "sweep.csv", tmp_path / "progress.csv"
    shutil.copyfile(committed_csvs[0], sweep)
    shutil.copyfile(committed_csvs[1], progress)
    (tmp_path / "published.toml").write_text(ROW)
    (tmp_path / "assumptions.toml").write_text("acceptance = []\n[datasets]\n")
    args = ["--csv", str(sweep), "--progress-csv", str(progress), "--out", str(tmp_path / "site"), "--jobs", "1",
            "--published", str(tmp_path / "published.toml"), "--published-assumptions", str(tmp_path / "assumptions.toml"),
            "--published-csv", str(tmp_path / "published.csv"), "--no-paysoff"]
    before = sweep.read_bytes()
    assert build_cli.main(args) == 2
    err = capsys.readouterr().err
    assert "(a-b-c) engine = 'lmdeploy' is not a known engine" in err and len(err.strip().splitlines()) == 1
    assert sweep.read_bytes() == before and not (tmp_path / "published.csv").exists() and not (tmp_path / "site").exists()
