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

from simulator.catalog import model_shape
from simulator.config import PoissonWorkload, RunConfig
from simulator.engine import simulation, vidur_seam
from simulator.engine.resolve import resolve_run
from simulator.engine.vidur_seam import HOOKS, Hook, replica_scheduler
from simulator.profiles import builtin
from simulator.profiles.hardware import get_device
from simulator.profiles.vidur_format import write_profile
from simulator.versions import vidur_version

PACKAGE = Path(simulation.__file__).resolve().parents[1]
SEAM = PACKAGE / "engine" / "vidur_seam.py"


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> dict:
    """One live instance of every Vidur class a hook reads or writes state of, from real (tiny)
    simulations, one on the built-in profile and one on a Vidur-format profile directory (whose
    predictor is Vidur's forest): instance attributes exist only once Vidur's constructors have run."""
    workload = PoissonWorkload(num_requests=3, prompt_tokens=64, output_tokens=4, arrival_rate=1.0)
    run = resolve_run(RunConfig(workload=workload))
    simulation.reset_entity_ids()
    sim = simulation.Simulator(simulation.vidur_config(run))
    sim.run()
    scheduler = replica_scheduler(sim)
    request = simulation.generated_requests(sim)[0]
    batch = Batch(0, [request], [1], [request.total_tokens - 1])
    directory = tmp_path_factory.mktemp("profile")
    shape, dev = model_shape("meta-llama/Llama-2-7b-hf"), get_device("a100")
    write_profile(directory, builtin.mlp_table(shape, dev, 1024), builtin.attention_table(shape, dev, 1024, max_batch=8), {})
    forest_run = resolve_run(RunConfig(workload=workload, profile_dir=str(directory)))
    return {
        "scheduler": scheduler,
        "predictor": scheduler.execution_time_predictor,
        "forest predictor": simulation.side_predictor(forest_run, forest_run.target),
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
    """The hook list is the seam's own inventory: every member it names appears in the seam's code,
    or (an override) is defined by one of the seam's classes."""
    source = SEAM.read_text(encoding="utf-8")
    code = source[source.index("class SarathiSeam") :]
    seam_classes = [c for c in vars(vidur_seam).values() if isinstance(c, type) and c.__module__ == vidur_seam.__name__]
    overridden = {name for cls in seam_classes for name in vars(cls)}
    unused = [
        h.member for h in HOOKS
        if h.member != "__init__" and h.member not in code and not (h.kind == "override" and h.member in overridden)
    ]
    assert not unused, f"hooks listed but not used by the seam: {unused}"


@pytest.mark.simulation
def test_a_whole_step_predictor_is_never_asked_for_vidurs_per_op_pieces(instances):
    """The built-in profile's predictor costs steps whole; each of Vidur's per-op pieces refuses,
    naming itself, so a Vidur that started calling one would fail loudly, not silently mix models.
    The tiny run of the fixture completed, so Vidur asked for none of them."""
    predictor, batch = instances["predictor"], instances["batch"]
    assert predictor.get_execution_time(batch, 0).total_time > 0
    for member in vidur_seam.PER_OP_HOOKS:
        with pytest.raises(NotImplementedError, match=member):
            getattr(predictor, member)(batch)
