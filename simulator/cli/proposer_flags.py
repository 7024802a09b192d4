"""The proposer's command-line flags, read from the proposer registry, for every command that takes one.

``python -m simulator``, ``python -m simulator.paysoff`` and the validation harness name a
proposer the same way: ``--proposer`` takes the simulator's name or vLLM's method name (its
aliases too), and each kind's options are flags of their own (``--suffix-max-tree-depth``,
``--speculative-eagle-topk`` ...), refused on a proposer that does not take them.  The flags and their
help come from :mod:`simulator.speculative.proposers`; nothing here names a kind.  This module adds
the flags to a parser and reads them from the Namespace; the rules on the values they give live in
:mod:`simulator.cli.speculation_flags`.
"""

from __future__ import annotations

from typing import Optional

from simulator.cli.argtypes import Synonyms
from simulator.cli.speculation_flags import checked_options, kind_named, option_flag
from simulator.speculative import proposers
from simulator.speculative.proposers.base import ProposerKind


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


def options_from_args(args, kind: ProposerKind) -> tuple:
    """The kind's options the flags gave (:func:`given_options`, :func:`checked_options`)."""
    return checked_options(given_options(args), kind)


def given_options(args) -> tuple:
    """Each option flag the command line gave, as (name, value) pairs in the registry's order: the
    one reader of the option flags :func:`add_proposer_flags` adds."""
    given = ((name, getattr(args, f"option_{name}", None)) for name in proposers.options())
    return tuple((name, value) for name, value in given if value is not None)


def draft_model_help() -> str:
    from simulator.cli.catalog_help import drafter_names

    return (
        "the draft network --proposer runs (" + ", ".join(proposers.draft_model_names()) + "): a local config.json, a draft model (any "
        "target of the catalog, e.g. JackFram/llama-68m), or one of the catalog's EAGLE heads and DFlash drafters: "
        + ", ".join(drafter_names()) + "; MTP needs none"
    )
