"""Where the checkout's own inputs live: the tests read the repository, the package never does."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"  # the inputs: specs (*.toml), calibration data, measured profiles
RESULTS_DIR = DATA_DIR / "results"  # what python build.py records
SHARED_DIR = REPO_ROOT.parent / "shared"


def site_dirs() -> dict:
    """The templates, content and docs folders build.py renders from."""
    return {"templates_dir": REPO_ROOT / "templates", "content_dir": REPO_ROOT / "content", "docs_dir": REPO_ROOT / "docs"}


# One published.toml row that every loader check starts from (a batch-1 throughput of an 8B
# model without speculation); tests change the fields they are about.
PUBLISHED_ROW = {
    "id": "a-b-c", "source_url": "https://example.org/x", "engine": "vllm", "gpu": "h100", "tp": 1,
    "model": "meta-llama/Llama-3.1-8B-Instruct", "proposer": "none", "k": 0, "batch_size": 1, "dataset": "mt-bench",
    "metric": "output_tokens_per_s", "value": 130.0, "role": "check", "acceptance_class": "same_source",
}


def published_row(**changes) -> str:
    """:data:`PUBLISHED_ROW` with ``changes``, as a ``[[measurement]]`` table of published.toml."""
    fields = {**PUBLISHED_ROW, **changes}
    lines = [f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}" for key, value in fields.items()]
    return "\n[[measurement]]\n" + "\n".join(lines) + "\n"
