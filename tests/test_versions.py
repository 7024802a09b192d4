"""The model hash: it tracks the code that can change a simulated number, and nothing else."""

import shutil
import subprocess
import sys

from simulator.util import versions


def _copy_package(tmp_path):
    target = tmp_path / "simulator"
    shutil.copytree(versions.PACKAGE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _installed_hash(package_root) -> str:
    """``source_hash()`` as a fresh process that imports the package from ``package_root`` reports it."""
    code = "from simulator.util import versions; print(versions.source_hash())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=package_root, check=True)
    return result.stdout.strip()


def test_the_reported_hash_follows_the_imported_packages_model_code(tmp_path):
    """What provenance and cache keys carry is the hash of the model code actually imported: a
    copy of the package reports the same 16 hex digits until one of its model constants changes."""
    package = _copy_package(tmp_path)
    same = _installed_hash(tmp_path)
    assert len(same) == 16 and int(same, 16) >= 0
    assert same == versions.source_hash()
    path = package / "engine" / "memory_plan.py"
    path.write_text(path.read_text().replace("MEMORY_MARGIN = 0.1", "MEMORY_MARGIN = 0.2"))
    assert _installed_hash(tmp_path) != same


def test_comments_docstrings_and_layout_keep_the_hash(tmp_path):
    package = _copy_package(tmp_path)
    before = versions.model_hash(package)
    path = package / "speculative" / "progress.py"
    text = path.read_text()
    edited = '"""A rewritten module docstring."""\n# a new comment\n' + text.split('"""', 2)[2]
    edited = edited.replace("def expected_progress(alpha: float, k: int) -> float:\n", "def expected_progress(alpha: float, k: int) -> float:  # reformatted\n\n")
    path.write_text(edited)
    assert edited != text
    assert versions.model_hash(package) == before


def test_a_changed_constant_changes_the_hash(tmp_path):
    package = _copy_package(tmp_path)
    before = versions.model_hash(package)
    path = package / "engine" / "memory_plan.py"
    text = path.read_text()
    assert "MEMORY_MARGIN = 0.1" in text
    path.write_text(text.replace("MEMORY_MARGIN = 0.1", "MEMORY_MARGIN = 0.2"))
    assert versions.model_hash(package) != before


def test_device_constants_are_part_of_the_model(tmp_path):
    package = _copy_package(tmp_path)
    before = versions.model_hash(package)
    path = package / "profiles" / "devices.toml"
    path.write_text(path.read_text() + "\n# only a comment\n")
    assert versions.model_hash(package) == before
    path.write_text(path.read_text().replace("memory_gib = 80", "memory_gib = 81", 1))
    assert versions.model_hash(package) != before


def test_site_and_validation_code_are_not_part_of_the_model(tmp_path):
    package = _copy_package(tmp_path)
    before = versions.model_hash(package)
    for name in ("website/render.py", "validation/cli.py", "cli/simulate.py"):
        path = package / name
        path.write_text(path.read_text() + "\nUNRELATED = 1\n")
    assert versions.model_hash(package) == before


def test_version_flag_prints_versions_and_hash():
    out = subprocess.run([sys.executable, "-m", "simulator", "--version"], capture_output=True, text=True, check=True).stdout
    assert versions.vidur_version() in out and versions.simulator_version() in out and versions.source_hash() in out


# Imported by the simulation but unable to change a number: errors, input checking, file
# writing, the cache location, provenance itself.
NOT_MODEL = {f"util/{name}.py" for name in ("errors", "inputs", "textio", "paths", "versions", "hashing", "progress")} | {"__init__.py"}


def _module_file(module: str):
    parts = module.split(".")[1:]
    base = versions.PACKAGE_DIR.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    path = base.with_suffix(".py")
    return path if path.is_file() else None


def _simulator_imports(path):
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulator"):
            yield node.module
            for alias in node.names:  # "from simulator.engine import generator" names a module
                yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("simulator"))


def test_every_module_a_simulation_imports_is_hashed():
    """The import closure of one run must be model code (hashed) or harmless plumbing."""
    hashed = {p.relative_to(versions.PACKAGE_DIR).as_posix() for p in versions._model_files(versions.PACKAGE_DIR)}
    seen, todo = set(), [versions.PACKAGE_DIR / "engine" / "simulation.py"]
    while todo:
        path = todo.pop()
        relative = path.relative_to(versions.PACKAGE_DIR).as_posix()
        if relative in seen:
            continue
        seen.add(relative)
        todo.extend(f for f in (_module_file(m) for m in _simulator_imports(path)) if f is not None)
    unhashed = sorted(r for r in seen - hashed if r not in NOT_MODEL and not r.endswith("/__init__.py"))
    assert unhashed == []
