"""The proposer's command-line flags, read from the proposer registry, for every command that takes one.

``python -m simulator``, ``python -m simulator.paysoff`` and the validation harness name a
proposer the same way: ``--proposer`` takes the simulator's name or vLLM's method name (its
aliases too), and each kind's options are flags of their own (``--suffix-max-tree-depth``,
``--speculative-eagle-topk`` ...), refused on a proposer that does not take them.  The flags, their
help and the refusals come from :mod:`simulator.speculative.proposers`; nothing here names a kind.
"""

from __future__ import annotations

from typing import Optional

from simulator.cli.argtypes import Synonyms
from simulator.util.errors import ConfigError
from simulator.speculative import proposers
from simulator.speculative.proposers.base import ProposerKind, SpeculationSettings

# The CLI flag of an option whose engine has a flag of its own (SGLang's tree settings).
ENGINE_FLAGS = {"eagle_topk": "--speculative-eagle-topk", "num_draft_tokens": "--speculative-num-draft-tokens"}
ACCEPTANCE_FLAGS = {"rate": "--acceptance", "per_position": "--acceptance-per-position", "length": "--acceptance-length"}


def option_flag(name: str) -> str:
    return ENGINE_FLAGS.get(name, "--" + name.replace("_", "-"))


def add_proposer_flags(group, default: Optional[str] = None, options: bool = True) -> None:
    """``--proposer`` (default: the run configuration's) and, with ``options``, one flag per option of any kind."""
    if default is None:
        from simulator.runs.speculation import SpeculationConfig

        default = SpeculationConfig().proposer
    group.add_argument(  # Synonyms: records that it was given (a --speculative-config's method conflicts with it)
        "--proposer",
        metavar="NAME",
        action=Synonyms,
        default=default,
        help=f"the speculative method, by the simulator's or vLLM's name: {proposers.help_text()}",
    )
    if not options:
        return
    for name, opt in proposers.options().items():
        takers = ", ".join(proposers.kinds_taking(name))
        default_text = "vLLM's" if opt.default is None else f"{opt.default:g}"
        group.add_argument(
            option_flag(name),
            dest=f"option_{name}",
            action=Synonyms,
            metavar=opt.kind.__name__.upper(),
            type=opt.kind,
            default=None,
            help=f"{opt.help} (--proposer {takers}; default {default_text}" + (f"; {opt.source}" if opt.source else "") + ")",
        )


def proposer_kind(args) -> ProposerKind:
    """The kind ``--proposer`` names (:func:`kind_named`), for a command that keeps its flags in the Namespace."""
    return kind_named(args.proposer)


def kind_named(name: str) -> ProposerKind:
    """The kind ``--proposer name`` names, or a ConfigError naming the flag and the valid names."""
    try:
        return proposers.kind(name)
    except ConfigError as exc:
        raise ConfigError(f"--proposer {name}: {str(exc).split(': ', 1)[1]}") from None


def options_from_args(args, kind: ProposerKind) -> tuple:
    """The kind's options the flags gave (:func:`given_options`, :func:`checked_options`)."""
    return checked_options(given_options(args), kind)


def given_options(args) -> tuple:
    """Each option flag the command line gave, as (name, value) pairs in the registry's order: the
    one reader of the option flags :func:`add_proposer_flags` adds."""
    given = ((name, getattr(args, f"option_{name}", None)) for name in proposers.options())
    return tuple((name, value) for name, value in given if value is not None)


def checked_options(given: tuple, kind: ProposerKind) -> tuple:
    """``given`` (name, value) option pairs, checked for ``kind``: a flag of another kind's option is
    refused naming the kinds that take it, a value the kind refuses names its flag."""
    for name, value in given:
        if kind.option(name) is None:
            takers = proposers.kinds_taking(name)
            raise ConfigError(
                f"{option_flag(name)} {value:g}: an option of --proposer {' / '.join(takers)}, not of --proposer {kind.name}; "
                f"drop it or use --proposer {takers[0]}"
            )
    try:
        kind.resolve_options(dict(given))
    except ConfigError as exc:
        name = str(exc).split(" = ", 1)[0]
        raise ConfigError(f"{option_flag(name)}: {exc}") from None
    return tuple(given)


def settings_for(kind: ProposerKind, k: int, options: tuple) -> SpeculationSettings:
    """What ``kind`` runs with at ``k`` and the ``options`` given (its defaults filled in)."""
    return SpeculationSettings(k=k, options=kind.resolve_options(dict(options)))


def check_acceptance_input(kind: ProposerKind, given: str) -> None:
    """``given`` ("rate", "per_position" or "length") is an acceptance input ``kind`` accepts."""
    if given in kind.acceptance_inputs:
        return
    accepted = " or ".join(ACCEPTANCE_FLAGS[i] for i in kind.acceptance_inputs)
    raise ConfigError(f"{ACCEPTANCE_FLAGS[given]}: --proposer {kind.name} takes {accepted} ({kind.acceptance_note})")


def draft_model_help() -> str:
    from simulator.cli.catalog_help import drafter_names

    return (
        "the draft network --proposer runs (" + ", ".join(proposers.draft_model_names()) + "): a local config.json, a draft model (any "
        "target of the catalog, e.g. JackFram/llama-68m), or one of the catalog's EAGLE heads and DFlash drafters: "
        + ", ".join(drafter_names()) + "; MTP needs none"
    )


def require_draft_model(kind: ProposerKind, draft_model: Optional[str], flag: str = "--draft-model") -> None:
    """A draft network is named exactly when the kind runs one that is not the target's own."""
    if kind.needs_draft_model and not draft_model:
        raise ConfigError(f"--proposer {kind.name} needs {flag} (the {kind.drafts_with.value.split(' (')[0].removeprefix('a ').removeprefix('an ')} vLLM loads)")
    if not kind.needs_draft_model and draft_model:
        raise ConfigError(
            f"{flag} {draft_model}: --proposer {kind.name} uses no draft model (it drafts with {kind.drafts_with.value}); drop it or pick "
            f"--proposer {' / '.join(proposers.draft_model_names())}"
        )

