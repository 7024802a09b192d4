"""The package's layering: the simulator never imports the tools built around it, and only the
adapter package imports Vidur."""

import ast
import re

import pytest

from simulator import versions

PACKAGE = versions.PACKAGE_DIR
TOOLS = ("simulator.sweep", "simulator.website", "simulator.validation", "simulator.published", "simulator.pipeline", "simulator.paysoff",
         "simulator.profiling")
# The simulator: modelling, Vidur glue, profiles, and what they are configured and reported with.
CORE = ("speculative", "engine", "vidur", "profiles", "models", "config.py", "catalog.py", "shapes.py", "results.py", "workloads.py",
        "inputs.py", "textio.py", "errors.py", "paths.py", "versions.py", "hashing.py", "progress.py", "argtypes.py", "cli.py", "__init__.py", "__main__.py",
        "run_cache.py", "vllm_serve.py", "command.py", "speculative_config.py", "proposer_flags.py")


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _core_files():
    for entry in CORE:
        path = PACKAGE / entry
        yield from (sorted(path.rglob("*.py")) if path.is_dir() else [path])


def test_the_simulator_never_imports_the_tools():
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _core_files()
        for module in _imports(path)
        if module.startswith(TOOLS)
    ]
    assert offenders == []


def test_catalog_and_profiles_import_one_way():
    # the profiles may ask the catalog for a model's shape; the catalog never imports the profiles
    assert not [m for m in _imports(PACKAGE / "catalog.py") if m.startswith("simulator.profiles")]


def test_the_run_time_profiles_take_nothing_from_the_profiling_tools():
    """profiles/ is what a simulation runs on; profiling/ measures and fits it and may import it,
    never the other way (so the model hash can cover profiles/ as a whole folder)."""
    offenders = [f"{p.relative_to(PACKAGE)} imports {m}" for p in sorted((PACKAGE / "profiles").rglob("*.py")) for m in _imports(p) if m.startswith("simulator.profiling")]
    assert offenders == []
    assert "profiles" in versions.MODEL_SOURCES and not (PACKAGE / "profiles" / "__main__.py").exists()


def test_the_site_takes_nothing_from_the_validation_harness():
    for path in sorted((PACKAGE / "website").rglob("*.py")):
        assert not [m for m in _imports(path) if m.startswith("simulator.validation")], path


def test_the_site_only_renders():
    """website/ turns recorded files into pages: it never runs a simulation or the build pipeline
    (the pipeline, simulator/pipeline.py, calls it)."""
    forbidden = ("simulator.engine", "simulator.vidur", "simulator.pipeline", "simulator.sweep.executors", "simulator.run_cache", "vidur")
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "website").rglob("*.py"))
        for module in _imports(path)
        if module.startswith(forbidden)
    ]
    assert offenders == []


# --- one adapter package to Vidur ---------------------------------------------------------------
REPO = PACKAGE.parent
ADAPTER = PACKAGE / "vidur"
SCANNED = ("simulator", "tests", "bench")  # every Python file of the checkout that could import Vidur
VIDUR = "vidur"  # spelled once: this file's own samples below must not read as imports of it
# an import written in code that is run from a string (``python -c``, ``exec``)
IMPORT_IN_TEXT = re.compile(rf"(?m)(?:^|[;\s])(?:import\s+{VIDUR}\b|from\s+{VIDUR}(?:\.\w+)*\s+import\b)")


def _is_vidur(module: str) -> bool:
    return module == VIDUR or module.startswith(VIDUR + ".")


def vidur_imports(source: str) -> list[str]:
    """Where ``source`` imports Vidur: import statements at any depth (inside functions too),
    ``importlib.import_module`` and ``__import__`` calls naming it, and code in string constants
    (what a test hands ``python -c``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _is_vidur(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_vidur(node.module):
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and _is_vidur(node.args[0].value):
                found.append(f"{node.lineno}: {name}({node.args[0].value!r})")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and IMPORT_IN_TEXT.search(node.value):
            found.append(f"{node.lineno}: code in a string imports {VIDUR}")
    return found


def _scanned_files():
    for folder in SCANNED:
        yield from sorted((REPO / folder).rglob("*.py"))


def test_only_the_adapter_package_imports_vidur():
    """simulator/vidur/ is the one importer of Vidur in the package, the tests and the benchmarks,
    so a Vidur upgrade touches that folder only."""
    files = list(_scanned_files())
    assert any(p.is_relative_to(ADAPTER) for p in files) and any(p.parent.name == "tests" for p in files)
    offenders = [
        f"{path.relative_to(REPO).as_posix()}:{hit}"
        for path in files
        if not path.is_relative_to(ADAPTER)
        for hit in vidur_imports(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "Vidur imported outside simulator/vidur/ (import its names from simulator.vidur.*):\n" + "\n".join(offenders)
    assert vidur_imports((ADAPTER / "configs.py").read_text(encoding="utf-8")), "the adapter itself must be seen importing Vidur"


@pytest.mark.parametrize("source", [
    f"import {VIDUR}",
    f"import numpy, {VIDUR}.config as c",
    f"from {VIDUR}.entities import Request",
    f"def f():\n    from {VIDUR} import simulator\n",
    f"import importlib\nimportlib.import_module('{VIDUR}.logger')",
    f"__import__('{VIDUR}')",
    f"code = 'import sys; from {VIDUR}.config import ReplicaConfig'",
    f"script = \"import os\\nimport {VIDUR}.simulator\\n\"",
])
def test_the_vidur_import_check_sees_every_form(source):
    assert vidur_imports(source), source


@pytest.mark.parametrize("source", [
    "from simulator.vidur.configs import ReplicaConfig",
    "from simulator.vidur import seam",
    "from . import vidur_format",
    f"name = '{VIDUR}-specdec'",
    f"print('Simulated with Vidur 0.0.26 + {VIDUR}-specdec')",
    f"metadata.version('{VIDUR}')",
])
def test_the_vidur_import_check_passes_the_adapters_names(source):
    assert vidur_imports(source) == [], source
