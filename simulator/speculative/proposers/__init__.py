"""The proposer registry: every kind of proposer the simulator models, one module each.

A module in this package that defines ``KIND`` (or ``KINDS``) is a registered kind
(:class:`~simulator.speculative.proposers.base.ProposerKind`): adding a proposer is one file here
and its tests.  Everything that names proposers (the run configuration, the command lines, the
sweeps, the published rows, the recommended ``--speculative-config``) asks this registry; nothing
compares proposer names itself.

Names: each kind answers to the simulator's name (``draft``, the CSVs' ``proposer`` column), to
vLLM's ``method`` (``draft_model``) and to the aliases vLLM accepts (its model-specific MTP names,
which vLLM 0.11.0 and later rewrite to ``mtp``).  vLLM methods the simulator does not model are
listed in :data:`NOT_MODELLED` with the reason, so a refusal can say why.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Optional

from simulator.util.errors import ConfigError
from simulator.speculative.proposers.base import ProposerKind

# vLLM --speculative-config methods (and SGLang algorithms) the simulator does not model, and why
NOT_MODELLED = {
    "medusa": "Medusa heads are not modelled",
    "mlp_speculator": "MLP speculators are not modelled (vLLM V1 accepts the method but has no proposer for it; docs/sources/proposers.md §6)",
    "custom_class": "a custom proposer class cannot be modelled without its code",
    "extract_hidden_states": "extract_hidden_states proposes no tokens",
    "dspark": "DSpark drafters are not modelled",
}


def _discover() -> tuple[ProposerKind, ...]:
    kinds = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name == "base":
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        kinds.extend(getattr(loaded, "KINDS", ()) or ((loaded.KIND,) if hasattr(loaded, "KIND") else ()))
    kinds.sort(key=lambda kind: (kind.rank, kind.name))
    names: dict[str, str] = {}
    for kind in kinds:
        for name in kind.names:
            if name in names and names[name] != kind.name:
                raise RuntimeError(f"proposer name {name!r} is claimed by both {names[name]!r} and {kind.name!r}")
            names[name] = kind.name
    return tuple(kinds)


KINDS: tuple[ProposerKind, ...] = _discover()
_BY_NAME = {name: kind for kind in KINDS for name in kind.names}


def names() -> tuple[str, ...]:
    """The simulator's proposer names, in listing order."""
    return tuple(kind.name for kind in KINDS)


def all_names() -> tuple[str, ...]:
    """Every name a proposer answers to: the simulator's, vLLM's methods and their aliases."""
    return tuple(_BY_NAME)


def draft_model_names() -> tuple[str, ...]:
    """Proposers that run a draft network named by ``draft_model``."""
    return tuple(kind.name for kind in KINDS if kind.needs_draft_model)


def cost_options() -> tuple[type, ...]:
    """The kinds' cost-knob dataclasses (:attr:`ProposerKind.Options`), each once, in listing order."""
    return tuple(dict.fromkeys(kind.Options for kind in KINDS))


def cost_default(name: str):
    """The default of the cost knob ``name`` as the kind that owns it declares it (one definition)."""
    for options in cost_options():
        for f in dataclasses.fields(options):
            if f.name == name:
                return f.default
    raise KeyError(f"{name}: no proposer kind has a cost knob of that name")


def find(name: str) -> Optional[ProposerKind]:
    return _BY_NAME.get(name)


def kind(name: str, what: str = "proposer") -> ProposerKind:
    """The kind ``name`` (any of its names), or a ConfigError that lists the valid ones."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    why = NOT_MODELLED.get(name)
    valid = ", ".join(names())
    if why:
        raise ConfigError(f"{what} = {name!r}: {why}; the simulator models {valid}")
    aliases = ", ".join(n for n in _BY_NAME if n not in names())
    raise ConfigError(f"{what} = {name!r}: unknown; use one of {valid} (vLLM's names {aliases} work too)")


def from_speculative_config(config: dict):
    """(kind, settings, draft model, draft TP) from a vLLM ``--speculative-config`` object: the kind
    its ``method`` names (vLLM's aliases included) whose fixed keys (``parallel_drafting``) it
    carries, and that kind's reading of the rest (:meth:`ProposerKind.from_speculative_config`)."""
    method = config.get("method")
    matches = [k for k in KINDS if k.engine == "vllm" and method in (k.vllm_method, *k.vllm_aliases)]
    flagged = [k for k in matches if k.config_flags and all(config.get(key) == value for key, value in k.config_flags.items())]
    chosen = flagged or [k for k in matches if not k.config_flags]
    if not chosen:
        kind(str(method), "method")  # raises, listing the valid names
    found = chosen[0]
    return (found, *found.from_speculative_config(config))


def tree_kind(chain: str) -> Optional[ProposerKind]:
    """The kind that drafts trees with ``chain``'s network (``eagle3`` -> ``eagle3_tree``), or None."""
    base = kind(chain)
    return next((k for k in KINDS if getattr(k, "chain", None) is base), None)


def options() -> dict:
    """Every option any kind takes, by name (one Option per name; kinds that share a name share it)."""
    found = {}
    for k in KINDS:
        for opt in k.options:
            found.setdefault(opt.name, opt)
    return found


def kinds_taking(option: str) -> tuple[str, ...]:
    return tuple(k.name for k in KINDS if k.option(option) is not None)


def help_text() -> str:
    """One line per kind for a command's --help: its names and what it drafts with."""
    def vllm(k: ProposerKind) -> str:
        if not k.vllm_method or k.vllm_method == k.name:
            return ""
        flags = "".join(f", {key}: {str(value).lower()}" for key, value in k.config_flags.items())
        return f" [vLLM: {k.vllm_method}{flags}]"

    return "; ".join(f"{k.name} = {k.label}{vllm(k)}" for k in KINDS)
