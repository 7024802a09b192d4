"""The model hash's on-disk memo: the same value as computing it, and never a stale one."""

import shutil

import pytest

from simulator.util import versions


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """A copy of the package, and an empty cache directory for its memo."""
    target = tmp_path / "simulator"
    shutil.copytree(versions.PACKAGE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("VIDUR_SPECDEC_CACHE", str(tmp_path / "cache"))
    return target


def _memos(package):
    return sorted((package.parent / "cache" / "model_hash").glob("*.txt"))


def test_the_memo_holds_the_computed_hash_and_is_read_back(package, monkeypatch):
    computed = versions.model_hash(package)
    assert versions.memoised_model_hash(package) == computed
    (memo,) = _memos(package)
    assert memo.read_text() == computed + "\n"

    def refuse(package_dir):
        raise AssertionError("recomputed although the memo matches")

    monkeypatch.setattr(versions, "model_hash", refuse)
    assert versions.memoised_model_hash(package) == computed


def test_an_edited_model_file_is_never_served_the_old_hash(package):
    before = versions.memoised_model_hash(package)
    path = package / "engine" / "memory_plan.py"
    path.write_text(path.read_text().replace("MEMORY_MARGIN = 0.1", "MEMORY_MARGIN = 0.2"))
    after = versions.memoised_model_hash(package)
    assert after != before and after == versions.model_hash(package)
    assert len(_memos(package)) == 2


def test_an_edit_that_keeps_the_hash_still_gets_its_own_memo(package):
    """The key is the raw bytes (and the normalizing code), not the normalized text: a comment
    added to a model file or to util/ is a new key with the same value."""
    before = versions.memoised_model_hash(package)
    for name in ("speculative/progress.py", "util/versions.py"):
        path = package / name
        path.write_text(path.read_text() + "\n# a comment\n")
        assert versions.memoised_model_hash(package) == before
    assert len(_memos(package)) == 3


def test_a_damaged_memo_is_recomputed_and_replaced(package):
    computed = versions.memoised_model_hash(package)
    (memo,) = _memos(package)
    memo.write_text("not a hash\n")
    assert versions.memoised_model_hash(package) == computed
    assert memo.read_text() == computed + "\n"


def test_an_unwritable_cache_still_gives_the_hash(package, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("VIDUR_SPECDEC_CACHE", str(blocker))  # its model_hash/ cannot be created
    assert versions.memoised_model_hash(package) == versions.model_hash(package)
