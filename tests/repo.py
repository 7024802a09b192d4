"""Where the checkout's own inputs live: the tests read the repository, the package never does."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"  # the inputs: specs (*.toml), calibration data, measured profiles
RESULTS_DIR = DATA_DIR / "results"  # what python build.py records
SHARED_DIR = REPO_ROOT.parent / "shared"


def site_dirs() -> dict:
    """The templates, content and docs folders build.py renders from."""
    return {"templates_dir": REPO_ROOT / "templates", "content_dir": REPO_ROOT / "content", "docs_dir": REPO_ROOT / "docs"}
