"""Every committed result names the model code that recorded it.

Each CSV under data/results/ with a ``simulator_source_hash`` column and each JSON file with a
``simulator_source_hash`` field must name this package's model hash: the hash ignores comments,
docstrings and layout, so only a modelling change fails this, and the fix is to re-record with
``python build.py``.  The list of files is found, not kept by hand: a new recorded file is
covered the day it is committed, and a test fails if no recorded file is found at all.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from repo import DATA_DIR, RESULTS_DIR
from simulator.util import versions

HASH_FIELD = "simulator_source_hash"


def _recorded_files():
    files = []
    for path in sorted(RESULTS_DIR.glob("*.csv")):
        if HASH_FIELD in pd.read_csv(path, nrows=0).columns:
            files.append(path)
    for path in sorted(RESULTS_DIR.glob("*.json")):
        if HASH_FIELD in json.loads(path.read_text(encoding="utf-8")):
            files.append(path)
    return files


RECORDED = _recorded_files()


def test_the_recorded_results_are_found():
    names = {path.name for path in RECORDED}
    expected = {"sweep.csv", "progress.csv", "paysoff.csv", "published.csv", "recommended_schedules.json"}
    assert expected <= names, f"recorded files without a {HASH_FIELD}: {sorted(expected - names)}"


@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_by_the_current_model(path):
    if path.suffix == ".csv":
        hashes = set(pd.read_csv(path)[HASH_FIELD].dropna())
    else:
        hashes = {json.loads(path.read_text(encoding="utf-8"))[HASH_FIELD]}
    assert hashes == {versions.source_hash()}, f"data/results/{path.name} was recorded by model {sorted(hashes)}; re-record with python build.py"


def test_inputs_and_recorded_results_live_apart():
    """data/ holds what a build reads (specs as TOML, calibration/, profiles/); data/results/ only
    what it records, so a reader can tell an input from an output by its folder."""
    assert sorted(p.name for p in DATA_DIR.iterdir() if p.is_file() and p.suffix != ".toml") == []
    assert sorted(p.name for p in RESULTS_DIR.iterdir() if p.suffix not in (".csv", ".json")) == []
