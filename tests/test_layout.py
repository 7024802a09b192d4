"""The package's layering: every package imports only its own rank or a lower one (no folder
loops), the simulator never imports the tools built around it, and only the adapter package
imports Vidur."""

import ast
import re

import pytest

from simulator.util import versions

PACKAGE = versions.PACKAGE_DIR
TOOLS = ("simulator.sweep", "simulator.specs", "simulator.website", "simulator.validation", "simulator.published", "simulator.pipeline", "simulator.paysoff",
         "simulator.profiling")
# The simulator: modelling, Vidur glue, profiles, and what they are configured and reported with.
CORE = ("speculative", "engine", "vidur", "profiles", "models", "runs", "cli", "util", "__init__.py", "__main__.py", "schemas.py")


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_every_module_is_on_one_side_of_the_layering():
    """A new module must be placed: in the simulator (CORE) or among the tools (TOOLS), never both, never neither."""
    tools = {name.split(".", 1)[1] for name in TOOLS}
    placed = {}
    for entry in sorted(PACKAGE.iterdir()):
        if entry.name == "__pycache__" or not (entry.suffix == ".py" or (entry / "__init__.py").is_file()):
            continue
        sides = [side for side, found in (("core", entry.name in CORE), ("tools", entry.name.removesuffix(".py") in tools)) if found]
        placed[entry.name] = sides
    assert {name: sides for name, sides in placed.items() if len(sides) != 1} == {}


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
    assert not [m for m in _imports(PACKAGE / "models" / "catalog.py") if m.startswith("simulator.profiles")]


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
    (the pipeline, simulator/pipeline/build.py, calls it)."""
    forbidden = ("simulator.engine", "simulator.vidur", "simulator.pipeline.build", "simulator.sweep.executors", "simulator.runs.cache", "vidur")
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "website").rglob("*.py"))
        for module in _imports(path)
        if module.startswith(forbidden)
    ]
    assert offenders == []


def _simulator_imports(path):
    """The simulator modules a file imports: ``from simulator.x import y`` is x.y when y is a module, else x."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulator"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                yield name if _is_module(name) else node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("simulator"))


# What the site may read besides itself: the file contracts, input checking, the output folder,
# how numbers read (shared with the pays-off command's answer), the proposers' labels, and the committed verify profile's reader and fit (a profile is an input,
# not a recorded result).  Never a writer of a recorded file (the sweeps, the reproduction, the pipeline).
SITE_MAY_IMPORT = (
    "simulator.schemas", "simulator.util.errors", "simulator.util.inputs", "simulator.util.publication", "simulator.util.units", "simulator.speculative.proposers",
    "simulator.profiling.verify_fit", "simulator.profiling.verify_table",
    "simulator.sweep.error_bar",  # pure: the words of a recorded error bar (error_bar.summary), no writer
)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def test_the_site_reads_recorded_files_by_their_contract_not_their_writer():
    offenders = sorted(
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "website").rglob("*.py"))
        for module in _simulator_imports(path)
        if _is_module(module) and module != "simulator" and not module.startswith(("simulator.website",) + SITE_MAY_IMPORT)
    )
    assert offenders == []


def test_every_file_contract_is_defined_once_in_schemas():
    """A column list, threshold or field list shared by a writer and the site is assigned only in
    schemas.py; a writer that kept its own copy could drift from what the site checks."""
    from simulator import schemas

    contracts = {name for name in vars(schemas) if name.isupper()}
    redefined = sorted(
        f"{path.relative_to(PACKAGE)} defines {target.id}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "schemas.py"
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in contracts
    )
    assert redefined == []
    for writer in ("sweep/runner.py", "paysoff/runner.py", "published/reproduce.py", "pipeline/build.py", "validation/report.py"):
        assert "simulator.schemas" in set(_simulator_imports(PACKAGE / writer)), writer


def _module_name(path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict:
    """Module -> the simulator modules it imports, at any depth of the file (a deferred import inside
    a function is still an edge: deferring hides a circle, it does not break it)."""
    return {
        _module_name(path): {m for m in _simulator_imports(path) if _is_module(m)} - {_module_name(path)}
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _cycles(graph: dict) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan), sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_simulator_modules():
    """A package's __init__ re-exporting its own modules is not a circle between modules; every
    other loop (config <-> workloads was one) is: the lower layer must not know the upper."""
    graph = _import_graph()
    for name, imports in graph.items():  # a package may import its own modules, and they their siblings through it
        graph[name] = {m for m in imports if not (m.startswith(name + ".") or name.startswith(m + "."))}
    assert _cycles(graph) == []



# --- packages that only point down --------------------------------------------------------------
# Every top-level package and module of simulator/, lowest first.  A file may import its own rank or
# a lower one, never a higher one, and no two folders import each other (the same rank included),
# so the data flows up this list: checked inputs and the recorded files' contracts, models as
# values, the speculation model, the step costs, the adapter that turns them into Vidur's configs,
# a run's description, the simulation, the public API, the front ends' flags and the build's
# specifications, the tools that run simulations, the site that renders what they recorded, and the
# commands.  A new package takes its place here, where its imports put it.
RANKS = (
    ("util", "schemas.py"),  # errors, input checking, hashing, atomic writes, how numbers read; the recorded files' contracts
    ("models",),  # models as values: config.json specs, shapes, precision (nothing of Vidur)
    ("speculative",),  # the pure speculation model: acceptance, verify cost, progress, the proposer kinds
    ("profiles",),  # step costs: devices, engines, the analytic step model, Vidur-format profile directories
    ("vidur",),  # the adapter: Vidur's names, its model configs from the catalog's specs, its SKUs from the device table
    ("runs",),  # what one run is: config, workload, results, and the cache of results
    ("engine",),  # one run through Vidur's event loop
    ("__init__.py",),  # the public API: simulator.run
    ("cli", "specs"),  # the front ends' flags and vLLM's terms; the build's TOML specifications
    ("sweep", "validation", "published", "profiling"),  # the tools: sweeps, the vLLM harness, the published rows, measuring and fitting
    ("website",),  # pages from recorded files
    ("pipeline", "paysoff", "__main__.py"),  # the commands: the build's pipeline, the pays-off feature (python -m simulator.paysoff), python -m simulator
)
RANK = {name: rank for rank, names in enumerate(RANKS) for name in names}


def _folder(module: str) -> str:
    """Where a module stands: its folder under simulator/ ("speculative/proposers"), or, for a module
    beside the package's __init__, the module itself ("schemas.py", "__init__.py")."""
    parts = module.split(".")[1:]
    if _is_package(module):
        return "/".join(parts) or "__init__.py"
    return "/".join(parts[:-1]) or f"{parts[-1]}.py"


def _is_package(module: str) -> bool:
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").is_file()


def _folder_graph(modules: dict) -> dict:
    """Folder -> the folders its files import (a folder's import of itself left out)."""
    graph: dict = {}
    for module, imports in modules.items():
        here = _folder(module)
        graph.setdefault(here, set()).update(_folder(m) for m in imports if _folder(m) != here)
    return graph


def upward_imports(graph: dict, rank: dict) -> list[str]:
    """Each import of ``graph`` (folder -> folders) into a folder whose top-level entry ranks higher."""
    top = lambda folder: folder.split("/")[0]  # noqa: E731
    return sorted(
        f"{a} (rank {rank[top(a)]}) imports {b} (rank {rank[top(b)]})"
        for a, imports in graph.items() for b in imports if rank[top(b)] > rank[top(a)]
    )


def test_every_package_has_one_rank():
    entries = {e.name for e in PACKAGE.iterdir() if e.name != "__pycache__" and (e.suffix == ".py" or (e / "__init__.py").is_file())}
    named = [name for names in RANKS for name in names]
    assert len(named) == len(set(named)), "a package is ranked twice"
    assert set(named) == entries, f"unranked: {sorted(entries - set(named))}; ranked but absent: {sorted(set(named) - entries)}"


def test_the_rank_check_sees_an_import_that_points_up():
    rank = {"low": 0, "mid": 1, "high": 2}
    assert upward_imports({"high": {"low", "mid/sub"}, "mid/sub": {"low"}, "low": set()}, rank) == []
    assert upward_imports({"low": {"mid/sub"}, "mid/sub": {"high"}}, rank) == ["low (rank 0) imports mid/sub (rank 1)", "mid/sub (rank 1) imports high (rank 2)"]
    assert _folder("simulator") == "__init__.py" and _folder("simulator.schemas") == "schemas.py"
    assert _folder("simulator.speculative.proposers") == _folder("simulator.speculative.proposers.eagle") == "speculative/proposers"


def test_packages_import_only_their_own_rank_or_lower():
    """Every import inside simulator/ (deferred ones inside functions too) goes to the same rank or a
    lower one: no arrow of the tree points back up."""
    assert upward_imports(_folder_graph(_import_graph()), RANK) == []


def test_no_folder_imports_a_folder_that_imports_it():
    """No loop of folders, at any depth and within one rank too (A imports B, B imports A; or a
    longer ring): the module-circle test cannot see one whose modules do not form a circle."""
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    assert _cycles(_folder_graph(_import_graph())) == []


def test_the_benchmarks_run_without_the_test_extras():
    """Every bench/*.py starts (``--help``) with pytest unimportable: a benchmark may borrow a
    pytest-free helper from tests/ (stock_vidur.py), never a test module."""
    import subprocess
    import sys

    hide = "import runpy, sys; sys.modules['pytest'] = sys.modules['_pytest'] = None; sys.argv = [sys.argv[1], '--help']; runpy.run_path(sys.argv[0], run_name='__main__')"
    for script in sorted((PACKAGE.parent / "bench").glob("*.py")):
        result = subprocess.run([sys.executable, "-c", hide, str(script)], capture_output=True, text=True, cwd=PACKAGE.parent)
        assert result.returncode == 0 and "usage" in result.stdout, f"{script.name}: {result.stderr[-2000:]}"


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
