"""The seam to Vidur: one contract test per private hook, the hook list exactly the private names
the seam spells, and no private access anywhere else.

A Vidur upgrade that renames, removes or reshapes a private member the project relies on fails
here with the hook's name (see ``simulator/vidur/seam.py`` and docs/model.md, "The seam to
Vidur"), instead of somewhere inside a simulation.  Which modules may import Vidur at all is
``tests/test_layout.py``'s to check.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from simulator.vidur.models import model_shape
from simulator.runs.config import RunConfig
from simulator.runs.workload_kinds import PoissonWorkload
from simulator.engine import simulation
from simulator.engine.resolve import resolve_run
from simulator.profiles import builtin
from simulator.profiles.hardware import get_device
from simulator.profiles.vidur_format import write_profile
from simulator.util.versions import vidur_version
from simulator.vidur import seam
from simulator.vidur.entities import Batch
from simulator.vidur.runtime import RequestArrivalEvent, Simulator
from simulator.vidur.seam import generated_requests, queued_events, queued_requests, replica_scheduler, reset_entity_ids
from simulator.vidur.seam_hooks import HOOKS, Hook

REPO = Path(simulation.__file__).resolve().parents[2]
SEAM = Path(seam.__file__).resolve()
# every Python file that could reach into Vidur: the package, the tests, the benchmarks
SCANNED = ("simulator", "tests", "bench")


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> dict:
    """One live instance of every Vidur class a hook reads or writes state of, from real (tiny)
    simulations, one on the built-in profile and one on a Vidur-format profile directory (whose
    predictor is Vidur's forest): instance attributes exist only once Vidur's constructors have run."""
    workload = PoissonWorkload(num_requests=3, prompt_tokens=64, output_tokens=4, arrival_rate=1.0)
    run = resolve_run(RunConfig(workload=workload))
    reset_entity_ids()
    queued = Simulator(simulation.vidur_config(run))  # not run: its arrival events are still queued
    arrival = next(event for event in queued_events(queued) if isinstance(event, RequestArrivalEvent))
    reset_entity_ids()
    sim = Simulator(simulation.vidur_config(run))
    sim.run()
    scheduler = replica_scheduler(sim)
    request = generated_requests(sim)[0]
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
        "arrival": arrival,
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
    names = set()
    for path in seam.vidur_source_dir().rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"self\.(_[a-z]\w*)\s*(?::[^=]*)?=", text))
        names |= set(re.findall(r"def (_[a-z]\w*)\(", text))
    return names


def spelled_names(tree: ast.AST) -> set[str]:
    """Every name a module spells as an attribute, a method or a keyword, and every string constant
    that is a whole identifier (``setattr(cls, "_get_next_batch", ...)``, a forwarding table)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def _python_files():
    for folder in SCANNED:
        yield from sorted((REPO / folder).rglob("*.py"))


VIDUR_FACING = ("simulator.vidur", "simulator.engine")  # the adapter, and the engine that subclasses its names


def _faces_vidur(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        if any(m == prefix or m.startswith(prefix + ".") for m in modules for prefix in VIDUR_FACING):
            return True
    return False


def test_no_private_vidur_access_outside_the_seam():
    """Only simulator/vidur/seam.py touches Vidur's private members: in every other file of the
    package, the tests and the benchmarks that handles Vidur's objects (it imports the adapter or
    the engine), an underscore attribute, method or keyword that Vidur also defines is an error (so
    the project's own private names cannot shadow Vidur's either)."""
    vidur_names = _vidur_private_names()
    offenders = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.resolve() == SEAM or not _faces_vidur(tree):
            continue
        methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif id(node) in methods:  # a method of that name would override Vidur's (a module's function cannot)
                name = node.name
            elif isinstance(node, ast.keyword):
                name = node.arg
            if name in vidur_names:
                offenders.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno} {name}")
    assert not offenders, "Vidur private members used outside simulator/vidur/seam.py:\n" + "\n".join(offenders)


def test_the_hooks_are_exactly_the_private_names_the_seam_spells():
    """HOOKS is the seam's inventory, compared by exact name both ways: every member it lists is
    spelled in the seam's code (``__init__``, the one dunder, is called by constructing the class),
    and every underscore name of Vidur's that the seam spells is listed."""
    spelled = spelled_names(ast.parse(SEAM.read_text(encoding="utf-8")))
    listed = {h.member for h in HOOKS}
    unused = sorted(m for m in listed - spelled if m != "__init__")
    assert not unused, f"hooks listed but not spelled in the seam: {unused}"
    unlisted = sorted((spelled & _vidur_private_names()) - listed)
    assert not unlisted, f"Vidur private members the seam uses but HOOKS does not list: {unlisted}"


def test_the_inventory_check_compares_whole_names():
    """The check above cannot pass on a substring: ``_id`` is not spelled by code that spells only
    ``batch_id`` or ``_ids``, and a listed member the code lacks is reported."""
    tree = ast.parse("def f(batch):\n    return batch.batch_id, batch._ids, dict(_idx=1)\n")
    spelled = spelled_names(tree)
    assert {"batch_id", "_ids", "_idx"} <= spelled and "_id" not in spelled
    assert "_id" in spelled_names(ast.parse("cls._id = -1"))
    assert "_get_next_batch" in spelled_names(ast.parse("FORWARDS = {'_get_next_batch': 'next_batch'}"))


@pytest.mark.simulation
def test_a_whole_step_predictor_is_never_asked_for_vidurs_per_op_pieces(instances):
    """The built-in profile's predictor costs steps whole; each of Vidur's per-op pieces refuses,
    naming itself, so a Vidur that started calling one would fail loudly, not silently mix models.
    The tiny run of the fixture completed, so Vidur asked for none of them."""
    predictor, batch = instances["predictor"], instances["batch"]
    assert predictor.get_execution_time(batch, 0).total_time > 0
    for member in seam.PER_OP_HOOKS:
        with pytest.raises(NotImplementedError, match=member):
            getattr(predictor, member)(batch)


@pytest.mark.simulation
def test_queued_requests_are_the_generated_ones(instances):
    """The seam's view of a simulator not yet run: the requests its arrival events carry."""
    workload = PoissonWorkload(num_requests=3, prompt_tokens=64, output_tokens=4, arrival_rate=1.0)
    reset_entity_ids()
    sim = Simulator(simulation.vidur_config(resolve_run(RunConfig(workload=workload))))
    assert sorted(r.id for r in queued_requests(sim)) == [r.id for r in generated_requests(sim)] == [0, 1, 2]


def test_training_frames_are_read_by_vidurs_own_filters(tmp_path):
    """The seam's reader of a profile directory (what tests/test_measure.py checks measured profiles
    with): Vidur's loaders keep only the rows of the model and block size asked for, and add
    Vidur's derived attention features."""
    from simulator.vidur.models import model_config

    name = "meta-llama/Llama-2-7b-hf"
    shape, dev = model_shape(name), get_device("a100")
    write_profile(tmp_path, builtin.mlp_table(shape, dev, 1024), builtin.attention_table(shape, dev, 1024, max_batch=8), {})
    mlp, attention = seam.training_frames(tmp_path / "mlp.csv", tmp_path / "attention.csv", model_config(name), 16)
    assert len(mlp) > 0 and len(attention) > 0
    assert {"num_tokens", "is_decode", "prefill_chunk_size_squared"} <= set(attention.columns)
    other, _ = seam.training_frames(tmp_path / "mlp.csv", tmp_path / "attention.csv", model_config("meta-llama/Llama-2-70b-hf"), 16)
    _, other_block = seam.training_frames(tmp_path / "mlp.csv", tmp_path / "attention.csv", model_config(name), 32)
    assert len(other) == 0 and len(other_block) == 0
