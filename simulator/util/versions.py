"""Provenance: which Vidur, which version of this package, and a hash of the model.

The model hash covers exactly what can change a simulated number: the speculative model, the
Vidur glue, the profile sources and the built-in profile's physics (with its device
constants), the run configuration, the catalog of models, the summaries, and the sweep's
derived metrics (speedups, crossovers, the published rows' mapping to runs) and the recorded
files' columns and thresholds (:mod:`simulator.schemas`).  It does not cover
the site, the validation client, the sweep's executors,
the profiler or the command-line front ends.  Python files are hashed as their AST dump with
docstrings removed, so comments, docstrings and formatting leave it unchanged; data files are
hashed as parsed, canonical JSON.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # simulator/ (this module is in simulator/util/)

# Relative to the package; a folder stands for every .py file below it except a command-line
# entry point (__main__.py).
MODEL_SOURCES = (
    "speculative",
    "engine",
    "vidur",
    "profiles",
    "runs",
    "models",
    "sweep/metrics.py",
    "schemas.py",
    "sweep/crossover.py",
    "sweep/error_bar.py",  # the error bar that switches a recommendation off
    "published/plan.py",
)
MODEL_DATA = ("profiles/*.toml", "models/data/*.json")  # a pattern stands for its files, sorted


# An installed package's version does not change under a running process; reading it parses its
# metadata, and a sweep asks once per run (provenance, cache keys).
@lru_cache(maxsize=1)
def vidur_version() -> str:
    return metadata.version("vidur")


@lru_cache(maxsize=1)
def simulator_version() -> str:
    try:
        return metadata.version("vidur-specdec")
    except metadata.PackageNotFoundError:  # running from a plain checkout
        return "0+unknown"


def normalized_source(text: str) -> str:
    """The AST dump of Python source without docstrings: comments and layout do not reach it."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def _model_files(package_dir: Path) -> list[Path]:
    files = []
    for entry in MODEL_SOURCES:
        path = package_dir / entry
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.py")) if p.name != "__main__.py")
        elif path.is_file():
            files.append(path)
    return files


def _normalized_data(path: Path) -> str:
    from simulator.util.inputs import read_json, read_toml

    read = read_json if path.suffix == ".json" else read_toml
    return json.dumps(read(path, "model data"), sort_keys=True)


def _data_files(package_dir: Path) -> list[Path]:
    return [path for pattern in MODEL_DATA for path in sorted(package_dir.glob(pattern))]


def model_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """16 hex digits over the normalized model code and data under ``package_dir``."""
    digest = hashlib.sha256()
    for path in _model_files(package_dir):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(normalized_source(path.read_text(encoding="utf-8")).encode() + b"\0")
    for path in _data_files(package_dir):
        entry = path.relative_to(package_dir).as_posix()
        digest.update(entry.encode() + b"\0" + _normalized_data(path).encode() + b"\0")
    return digest.hexdigest()[:16]


def _inputs_digest(package_dir: Path) -> str:
    """SHA-256 of everything :func:`model_hash` is a function of: the hashed files' names and raw
    bytes, the code that normalizes them (this package's ``util/`` modules: this one and the
    readers) and the Python that parses them (its AST dump and TOML reader).  Two equal digests
    have equal model hashes, so the hash may be memoised under it.  Reading and hashing the bytes
    takes milliseconds; normalizing (parsing every model file and dumping its AST) about 0.3 s, a
    third of a warm pays-off answer."""
    digest = hashlib.sha256(f"model-hash memo 1\0{sys.version}\0".encode())
    util = sorted((package_dir / "util").glob("*.py")) if (package_dir / "util").is_dir() else []
    for path in [*util, *_model_files(package_dir), *_data_files(package_dir)]:
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def memoised_model_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """:func:`model_hash`, memoised on disk under ``<cache dir>/model_hash/`` keyed on
    :func:`_inputs_digest`: any change to a hashed file, to the normalizing code or to Python
    gives a new key, so a memo is never stale.  An unreadable or malformed memo is recomputed; a
    memo that cannot be written is skipped."""
    from simulator.util.paths import default_cache_dir
    from simulator.util.textio import atomic_write_text

    key = _inputs_digest(package_dir)
    path = default_cache_dir() / "model_hash" / f"{key}.txt"
    try:
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 16 and all(c in "0123456789abcdef" for c in text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    value = model_hash(package_dir)
    try:
        atomic_write_text(path, value + "\n")
    except OSError:
        pass
    return value


@lru_cache(maxsize=1)
def source_hash() -> str:
    """This installation's model hash (cached: the code does not change under a running process;
    memoised on disk across processes, keyed on the hashed files' bytes)."""
    return memoised_model_hash()


def version_text() -> str:
    """What ``python -m simulator --version`` prints."""
    return f"vidur-specdec {simulator_version()}\nvidur {vidur_version()}\nmodel hash {source_hash()}"
