"""`python build.py` end to end, and every bad input: exit code 2, a message naming the input,
and the previous site and CSVs left exactly as they were."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from simulator.util.errors import ConfigError
from repo import REPO_ROOT, site_dirs
from simulator.pipeline.build import BuildOptions, build
from simulator.website.render import SiteSources, render_site

_spec = importlib.util.spec_from_file_location("build_cli", REPO_ROOT / "build.py")
build_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_cli)

SMALL = (REPO_ROOT / "data" / "sweep.toml").read_text()
for old, new in (("num_requests = 300", "num_requests = 10"), ("arrival_rate = [2.0, 4.0, 6.0]", "arrival_rate = [2.0, 4.0]"), ("arrival_rate = [2.0, 4.0, 6.0]", "arrival_rate = [2.0, 4.0]"),
                 ("acceptance_rate = [0.5, 0.7, 0.9]", "acceptance_rate = [0.7]"), ("num_speculative_tokens = [2, 4]", "num_speculative_tokens = [2]"),
                 ("prompt_tokens = 1024", "prompt_tokens = 128"), ("output_tokens = 256", "output_tokens = 24"),
                 ("num_speculative_tokens = [1, 2, 4, 8]", "num_speculative_tokens = [2]"), ("acceptance_rate = [0.5, 0.7, 0.9]\nnum_speculative_tokens = [2]\nnum_requests = 8", "acceptance_rate = [0.7]\nnum_speculative_tokens = [2]\nnum_requests = 2"),
                 ("output_tokens = 512", "output_tokens = 32")):
    assert old in SMALL, old
    SMALL = SMALL.replace(old, new, 1)


def tree_digest(path: Path) -> dict:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def workspace(tmp_path, committed_csvs):
    """A previously published site and CSVs, plus a small spec."""
    ws = {name: tmp_path / name for name in ("site", "sweep.csv", "progress.csv", "spec.toml")}
    shutil.copyfile(committed_csvs[0], ws["sweep.csv"])
    shutil.copyfile(committed_csvs[1], ws["progress.csv"])
    ws["spec.toml"].write_text(SMALL)
    render_site(SiteSources(sweep_csv=ws["sweep.csv"], progress_csv=ws["progress.csv"], **site_dirs()), ws["site"])
    ws["before"] = {"site": tree_digest(ws["site"]), "sweep": ws["sweep.csv"].read_bytes(), "progress": ws["progress.csv"].read_bytes()}
    return ws


def cli(ws, *extra) -> list[str]:
    # the published reproductions have tests of their own (tests/test_published.py); these builds skip them
    published = ["--no-published", "--published-csv", str(ws["site"].parent / "published.csv")]
    # and the pays-off sweep (tests/test_sweep_paysoff.py); its files point into the workspace, never at data/
    paysoff = ["--no-paysoff", *(x for flag, name in (("--paysoff-csv", "paysoff.csv"), ("--crossovers-csv", "crossovers.csv"), ("--schedules-json", "schedules.json"))
                                 for x in (flag, str(ws["site"].parent / name)))]
    published += paysoff
    return ["--spec", str(ws["spec.toml"]), "--csv", str(ws["sweep.csv"]), "--progress-csv", str(ws["progress.csv"]), "--out", str(ws["site"]), "--jobs", "2", *published, *extra]


def assert_untouched(ws):
    assert tree_digest(ws["site"]) == ws["before"]["site"]
    assert ws["sweep.csv"].read_bytes() == ws["before"]["sweep"]
    assert ws["progress.csv"].read_bytes() == ws["before"]["progress"]
    leftovers = [p.name for p in ws["site"].parent.iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"staging files left behind: {leftovers}"


@pytest.mark.simulation
def test_build_records_csvs_and_site_and_rebuilds_byte_identically(workspace, capsys):
    assert build_cli.main(cli(workspace)) == 0
    first = {"sweep": workspace["sweep.csv"].read_bytes(), "progress": workspace["progress.csv"].read_bytes()}
    frame = pd.read_csv(workspace["sweep.csv"])
    assert len(frame) == 2 + 2 * 2 and set(frame["num_requests"]) == {10}
    assert (workspace["site"] / "sweep.csv").read_bytes() == first["sweep"]
    assert 'value="4" selected' in (workspace["site"] / "index.html").read_text()
    assert build_cli.main(cli(workspace)) == 0
    assert workspace["sweep.csv"].read_bytes() == first["sweep"]
    assert workspace["progress.csv"].read_bytes() == first["progress"]
    site = tree_digest(workspace["site"])
    capsys.readouterr()
    assert build_cli.main(cli(workspace, "--skip-sweep")) == 0
    assert tree_digest(workspace["site"]) == site
    # it ends with a summary: its time, what it recorded, where to open the site (issue 33)
    summary = capsys.readouterr().out.splitlines()
    assert summary[0].startswith("build.py: built in ") and summary[-1].startswith(f"  open {workspace['site'] / 'index.html'}")
    assert any(line.startswith("  recorded: 6 seed-sweep runs (") for line in summary), summary


@pytest.mark.parametrize(
    "spec_text, message",
    [
        (SMALL.replace("[workload]", "[workload]\nburst = 3"), "[workload]: unknown key 'burst'"),
        (SMALL.replace("[baseline]\narrival_rate = [2.0, 4.0]", "[baseline]\narrival_rate = [2.0]"), "speculative runs at 4 req/s but [baseline]"),
        (SMALL.replace("seed = 42", "seed = [42]"), "[workload]: seed = [42] must be an integer"),
    ],
)
def test_bad_spec_exits_2_before_simulating(workspace, capsys, spec_text, message):
    workspace["spec.toml"].write_text(spec_text)
    assert build_cli.main(cli(workspace)) == 2
    err = capsys.readouterr().err
    assert message in err and str(workspace["spec.toml"]) in err
    assert_untouched(workspace)


def test_csv_missing_a_column_is_refused(workspace, capsys):
    frame = pd.read_csv(workspace["sweep.csv"]).drop(columns=["tpot_p50_s"])
    frame.to_csv(workspace["sweep.csv"], index=False)
    workspace["before"]["sweep"] = workspace["sweep.csv"].read_bytes()
    assert build_cli.main(cli(workspace, "--skip-sweep")) == 2
    assert "missing column(s) tpot_p50_s" in capsys.readouterr().err
    assert_untouched(workspace)


def test_csv_missing_rows_for_a_selector_value_is_refused(workspace, capsys):
    frame = pd.read_csv(workspace["sweep.csv"])
    gone = (frame["arrival_rate"] == 6) & (frame["acceptance_rate"] == 0.9) & (frame["num_speculative_tokens"] == 4) & (frame["attention"] == "per_token")
    assert gone.sum() == 1
    frame[~gone].to_csv(workspace["sweep.csv"], index=False)
    workspace["before"]["sweep"] = workspace["sweep.csv"].read_bytes()
    assert build_cli.main(cli(workspace, "--skip-sweep")) == 2
    assert "no row for load 6 req/s, acceptance 0.9, k = 4, attention per_token" in capsys.readouterr().err
    assert_untouched(workspace)


def test_csv_without_a_baseline_for_a_load_is_refused(workspace, capsys):
    frame = pd.read_csv(workspace["sweep.csv"])
    frame[~((frame["arrival_rate"] == 2) & (frame["num_speculative_tokens"] == 0))].to_csv(workspace["sweep.csv"], index=False)
    workspace["before"]["sweep"] = workspace["sweep.csv"].read_bytes()
    assert build_cli.main(cli(workspace, "--skip-sweep")) == 2
    assert "load 2 req/s needs exactly one baseline row" in capsys.readouterr().err
    assert_untouched(workspace)


def test_output_dir_that_is_a_file_is_refused(workspace, capsys, tmp_path):
    target = tmp_path / "site-file"
    target.write_text("not a directory")
    args = cli(workspace, "--skip-sweep")
    args[args.index("--out") + 1] = str(target)
    assert build_cli.main(args) == 2
    assert f"output dir {target} exists and is not a directory" in capsys.readouterr().err
    assert target.read_text() == "not a directory"
    assert_untouched(workspace)


def test_output_dir_that_cannot_be_written_is_refused(workspace, capsys, tmp_path):
    if os.geteuid() == 0:
        target = Path("/proc/vidur-specdec-site")  # not writable even for root
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        target = locked / "site"
    args = cli(workspace, "--skip-sweep")
    args[args.index("--out") + 1] = str(target)
    assert build_cli.main(args) == 2
    assert f"output dir {target}" in capsys.readouterr().err
    assert not target.exists()


@pytest.mark.parametrize("missing", ["templates/data.html", "templates/_setup.html", "content/modeling.md", "content/home/limits.md"])
def test_missing_template_or_content_file_is_refused_before_the_sweep(workspace, site_sources_copy, missing):
    root = site_sources_copy.templates_dir.parent
    (root / missing).unlink()
    options = BuildOptions(
        spec=workspace["spec.toml"], sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], out_dir=workspace["site"],
        sources=replace(site_sources_copy, sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"]), jobs=1, progress_bar=False,
    )

    def must_not_run(config):
        raise AssertionError("simulated despite a missing file")

    with pytest.raises(ConfigError, match=f"{Path(missing).name} is missing"):
        build(options, run=must_not_run)
    assert_untouched(workspace)


@pytest.mark.simulation
def test_a_run_that_fails_mid_sweep_publishes_nothing(workspace):
    from simulator import run as real_run

    calls = []

    def fails_on_third(config):
        calls.append(config)
        if len(calls) == 3:
            raise RuntimeError("simulated crash")
        return real_run(config)

    options = BuildOptions(
        spec=workspace["spec.toml"], sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], out_dir=workspace["site"],
        sources=SiteSources(sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], **site_dirs()), jobs=1, progress_bar=False,
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        build(options, run=fails_on_third)
    assert_untouched(workspace)


@pytest.mark.simulation
def test_a_broken_template_keeps_the_previous_site_and_csvs(workspace, site_sources_copy):
    """The sweep succeeds but rendering fails: neither the new CSV nor a half-built site appears."""
    (site_sources_copy.templates_dir / "data.html").write_text("{% extends 'base.html' %}{% block main %}{{ no_such_value }}{% endblock %}")
    options = BuildOptions(
        spec=workspace["spec.toml"], sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], out_dir=workspace["site"],
        sources=replace(site_sources_copy, sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"]), jobs=1, progress_bar=False,
    )
    with pytest.raises(Exception, match="no_such_value"):
        build(options)
    assert_untouched(workspace)


# --- publishing the CSVs and the site together ------------------------------------------------

from simulator.sweep.runner import SweepOutput  # noqa: E402
from simulator.pipeline import build as pipeline
from simulator.util import publication as publish  # noqa: E402

SWAP_RENAMES = 6  # three targets (two CSVs, the site), each: old one aside, new one in


@pytest.fixture
def recorded_build(workspace, committed_csvs, monkeypatch):
    """build() with the sweep replaced by the committed rows, one value changed so the new
    CSVs differ from the published ones: what a swap publishes is then visible."""
    rows = pd.read_csv(committed_csvs[0]).to_dict("records")
    for row in rows:
        row["makespan_s"] += 1.0
    progress = pd.read_csv(committed_csvs[1]).to_dict("records")
    monkeypatch.setattr(pipeline, "run_sweep", lambda *a, **k: SweepOutput(rows=rows, progress_rows=progress))
    options = BuildOptions(
        spec=workspace["spec.toml"], sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], out_dir=workspace["site"],
        sources=SiteSources(sweep_csv=workspace["sweep.csv"], progress_csv=workspace["progress.csv"], **site_dirs()), jobs=1, progress_bar=False,
    )
    return options


def renames(monkeypatch, on_call):
    """Wrap os.rename: ``on_call(n)`` runs before the n-th rename (1-based)."""
    real, calls = os.rename, []

    def rename(src, dst):
        calls.append((src, dst))
        on_call(len(calls))
        return real(src, dst)

    monkeypatch.setattr(publish.os, "rename", rename)
    return calls


def assert_published_together(ws):
    new_sweep = ws["sweep.csv"].read_bytes()
    assert new_sweep != ws["before"]["sweep"]
    assert (ws["site"] / "sweep.csv").read_bytes() == new_sweep
    assert (ws["site"] / "progress.csv").read_bytes() == ws["progress.csv"].read_bytes()
    leftovers = [p.name for p in ws["site"].parent.iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"left beside the targets: {leftovers}"


def test_a_build_swaps_csvs_and_site_with_six_renames(workspace, recorded_build, monkeypatch):
    calls = renames(monkeypatch, lambda n: None)
    build(recorded_build)
    assert len(calls) == SWAP_RENAMES
    assert_published_together(workspace)


@pytest.mark.parametrize("at", range(1, SWAP_RENAMES + 1))
def test_an_interrupt_at_any_swap_point_rolls_csvs_and_site_back(workspace, recorded_build, monkeypatch, at):
    def interrupt(n):
        if n == at:
            raise KeyboardInterrupt

    renames(monkeypatch, interrupt)
    with pytest.raises(KeyboardInterrupt):
        build(recorded_build)
    assert_untouched(workspace)


@pytest.mark.parametrize("at", [1, 3, SWAP_RENAMES])
def test_a_sigint_during_the_swap_waits_until_csvs_and_site_moved_together(workspace, recorded_build, monkeypatch, at):
    def signal_now(n):
        if n == at:
            os.kill(os.getpid(), signal.SIGINT)

    renames(monkeypatch, signal_now)
    with pytest.raises(KeyboardInterrupt):
        build(recorded_build)
    assert_published_together(workspace)


def test_leftovers_of_a_killed_build_are_removed(workspace, recorded_build):
    parent = workspace["site"].parent
    (parent / ".site.old-x1" / "site").mkdir(parents=True)
    (parent / ".site.staging-x2").mkdir()
    (parent / ".sweep.csv.staging-x3.tmp").write_text("half")
    build(recorded_build)
    assert_published_together(workspace)


def must_not_run(config):
    raise AssertionError("simulated although an output cannot be written")


def unwritable_dir(tmp_path) -> Path:
    """A folder nobody here can create files in: /proc for root (os.access says yes there), a
    read-only folder for anyone else."""
    if os.geteuid() == 0:
        return Path("/proc")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked


@pytest.mark.parametrize("which", ["sweep_csv", "progress_csv"])
@pytest.mark.parametrize("problem", ["is a directory", "folder is a file", "folder unwritable"])
def test_an_unwritable_csv_is_refused_before_the_sweep(workspace, tmp_path, which, problem, capsys):
    if problem == "is a directory":
        target = tmp_path / "csv-dir"
        target.mkdir()
        expected = "is a directory, expected a file"
    elif problem == "folder is a file":
        (tmp_path / "plain").write_text("x")
        target = tmp_path / "plain" / "out.csv"
        expected = "plain is a file, not a directory"
    else:
        target = unwritable_dir(tmp_path) / "out.csv"
        expected = "cannot write there"
    flag = {"sweep_csv": "--csv", "progress_csv": "--progress-csv"}[which]
    args = cli(workspace)
    args[args.index(flag) + 1] = str(target)
    assert build_cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"CSV {target}" in err and expected in err
    assert_untouched(workspace)


def test_an_output_dir_under_a_file_is_refused_before_the_sweep(workspace, tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    target = tmp_path / "plain" / "site"
    options = replace(pipeline_options(workspace), out_dir=target)
    with pytest.raises(ConfigError, match="is not a directory"):
        build(options, run=must_not_run)
    assert_untouched(workspace)


def pipeline_options(ws) -> BuildOptions:
    return BuildOptions(
        spec=ws["spec.toml"], sweep_csv=ws["sweep.csv"], progress_csv=ws["progress.csv"], out_dir=ws["site"],
        sources=SiteSources(sweep_csv=ws["sweep.csv"], progress_csv=ws["progress.csv"], **site_dirs()), jobs=1, progress_bar=False,
    )


def test_check_writable_dir_probes_instead_of_trusting_os_access(tmp_path):
    from simulator.util.textio import check_writable_dir, check_writable_file

    target = unwritable_dir(tmp_path)
    with pytest.raises(ConfigError, match="cannot write there"):
        check_writable_dir(target, "output dir")
    check_writable_dir(tmp_path, "output dir")
    check_writable_file(tmp_path / "new.csv", "CSV")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
