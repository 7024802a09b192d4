"""The seam to Vidur: one contract test per private hook, and no private access elsewhere.

A Vidur upgrade that renames, removes or reshapes a private member the project relies on fails
here with the hook's name (see ``simulator/engine/vidur_seam.py`` and docs/model.md, "The seam to
Vidur"), instead of somewhere inside a simulation.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from vidur.entities import Batch

from simulator.config import PoissonWorkload, RunConfig
from simulator.engine import simulation
from simulator.engine.resolve import resolve_run
from simulator.engine.vidur_seam import HOOKS, Hook, replica_scheduler
from simulator.versions import vidur_version

PACKAGE = Path(simulation.__file__).resolve().parents[1]
SEAM = PACKAGE / "engine" / "vidur_seam.py"


@pytest.fixture(scope="module")
def instances() -> dict:
    """One live instance of every Vidur class a hook reads or writes state of, from a real (tiny)
    simulation: instance attributes exist only once Vidur's constructors have run."""
    run = resolve_run(RunConfig(workload=PoissonWorkload(num_requests=3, prompt_tokens=64, output_tokens=4, arrival_rate=1.0)))
    simulation.reset_entity_ids()
    sim = simulation.Simulator(simulation.vidur_config(run))
    sim.run()
    scheduler = replica_scheduler(sim)
    request = simulation.generated_requests(sim)[0]
    batch = Batch(0, [request], [1], [request.total_tokens - 1])
    return {
        "scheduler": scheduler,
        "predictor": scheduler.execution_time_predictor,
        "simulator": sim,
        "global scheduler": sim.scheduler,
        "batch": batch,
        "stage": batch.to_batch_stage(0, scheduler.execution_time_predictor.get_execution_time(batch, 0)),
        "request": request,
    }


def _instance_for(hook: Hook, instances: dict):
    for instance in instances.values():
        if isinstance(instance, hook.owner):
            return instance
    raise AssertionError(f"no live instance of {hook.owner.__name__} to check hook '{hook.name}' against")


@pytest.mark.simulation
@pytest.mark.parametrize("hook", HOOKS, ids=[f"{h.name}:{h.member}" for h in HOOKS])
def test_hook_exists_in_this_vidur(hook: Hook, instances):
    where = f"Vidur hook '{hook.name}' ({hook.owner.__name__}.{hook.member}, {hook.kind}) with vidur {vidur_version()}"
    if hook.kind in ("override", "call"):
        member = getattr(hook.owner, hook.member, None)
        assert callable(member), f"{where}: no such method any more; see docs/model.md, 'The seam to Vidur'"
        if hook.params:
            params = [p for p in inspect.signature(member).parameters if p != "self"]
            assert params[: len(hook.params)] == list(hook.params), f"{where}: its parameters are now {params}, the seam relies on {list(hook.params)}"
    else:
        instance = _instance_for(hook, instances)
        assert hook.member in vars(instance) or hasattr(type(instance), hook.member), f"{where}: the attribute is gone"


def _vidur_private_names() -> set[str]:
    """Every underscore name Vidur's own classes define (methods and instance attributes)."""
    import vidur

    names = set()
    for path in Path(vidur.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"self\.(_[a-z]\w*)\s*(?::[^=]*)?=", text))
        names |= set(re.findall(r"def (_[a-z]\w*)\(", text))
    return names


def _imports_vidur(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vidur":
            return True
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "vidur" for alias in node.names):
            return True
    return False


def test_no_private_vidur_access_outside_the_seam():
    """Only vidur_seam.py touches Vidur's private members: in every other module that imports
    Vidur, an underscore attribute or method that Vidur also defines is an error (so the
    project's own private names cannot shadow Vidur's either)."""
    vidur_names = _vidur_private_names()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path == SEAM or not _imports_vidur(tree):
            continue
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.FunctionDef):
                name = node.name
            if name in vidur_names:
                offenders.append(f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.lineno} {name}")
    assert not offenders, "Vidur private members used outside simulator/engine/vidur_seam.py:\n" + "\n".join(offenders)


def test_every_hook_is_used_by_the_seam():
    """The hook list is the seam's own inventory: every member it names appears in the seam's code."""
    source = SEAM.read_text(encoding="utf-8")
    code = source[source.index("class SarathiSeam") :]
    unused = [h.member for h in HOOKS if h.member != "__init__" and h.member not in code]
    assert not unused, f"hooks listed but not used by the seam: {unused}"
