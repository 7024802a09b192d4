"""The package's layering: the simulator never imports the tools built around it."""

import ast

from simulator import versions

PACKAGE = versions.PACKAGE_DIR
TOOLS = ("simulator.sweep", "simulator.website", "simulator.validation", "simulator.published", "simulator.pipeline", "simulator.paysoff",
         "simulator.profiling")
# The simulator: modelling, Vidur glue, profiles, and what they are configured and reported with.
CORE = ("speculative", "engine", "profiles", "models", "config.py", "catalog.py", "shapes.py", "results.py", "workloads.py",
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
    forbidden = ("simulator.engine", "simulator.pipeline", "simulator.sweep.executors", "simulator.run_cache", "vidur")
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "website").rglob("*.py"))
        for module in _imports(path)
        if module.startswith(forbidden)
    ]
    assert offenders == []
