"""Argument types and the spelling actions shared by ``python -m simulator``, the pays-off command
and the validation harness, so a flag means and checks the same thing in each: a request rate
(``inf`` included, as ``vllm bench serve`` takes it), a comma-separated list, a profile folder, one value under
several spellings (:class:`Synonyms`) and an old spelling kept for one release
(:class:`DeprecatedAlias`)."""

from __future__ import annotations

import argparse
import math
import sys


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be a positive integer")
    return value


def non_negative_int(text: str, why: str = "") -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0{why}")
    return value


def speculative_tokens(text: str) -> int:
    """A k as a server ran it: >= 0, 0 meaning speculation off."""
    return non_negative_int(text, " (the k the server ran with; 0 = speculation off)")


def _number(text: str, what: str = "a number") -> float:
    """``float(text)``, as vLLM's flags read numbers (``inf`` and ``nan`` included: callers bound them)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def finite(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def request_rate(text: str) -> float:
    """``--request-rate``: requests per second, or ``inf`` (every request at once), as vLLM's ``float()`` reads it."""
    value = _number(text, "a number of requests per second (or inf)")
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0 requests per second, or inf")
    return value


def burstiness(text: str) -> float:
    """``--burstiness``: the gamma shape of the arrival gaps, > 0 (``inf``: evenly spaced)."""
    value = _number(text)
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0 (1: Poisson arrivals)")
    return value


def range_ratio(text: str) -> float:
    """``--random-range-ratio``: lengths spread uniformly over [L(1 - r), L(1 + r)], r in [0, 1)."""
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be in [0, 1)")
    return value


def comma_floats(text: str, flag: str, what: str = "numbers", example: str = "") -> tuple[float, ...]:
    """A comma-separated list of numbers given to ``flag`` (e.g. per-position acceptance rates):
    not a list, or an empty one, is a ConfigError naming the flag and its text."""
    from simulator.util.errors import ConfigError

    hint = f"; e.g. {example}" if example else ""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a comma-separated list of {what}{hint}") from None
    if not values:
        raise ConfigError(f"{flag} {text!r}: empty; give at least one value{hint}")
    return values


def check_folder(flag: str, path) -> None:
    """A profile folder flag names a folder that exists (or is not given)."""
    from pathlib import Path

    from simulator.util.errors import ConfigError

    if path is not None and not Path(path).is_dir():
        raise ConfigError(f"{flag} {path}: not a directory; give a Vidur-format profile folder, or drop the flag for the built-in profile")


class Synonyms(argparse.Action):
    """Stores the value of an argument that has several spellings (``--prompt-tokens`` and
    ``--random-input-len``), and refuses two of them in one command, naming both, whatever their
    order: letting the last one win would silently drop a value the user typed.  The spellings
    seen are kept per parse on the namespace (under :data:`SEEN_ATTRIBUTE`), so a parser can be
    reused.  Giving the same spelling twice keeps argparse's rule (the last wins)."""

    def __init__(self, option_strings, dest, replacement: str = "", **kwargs):
        self.replacement = replacement
        super().__init__(option_strings, dest, **kwargs)

    @property
    def canonical(self) -> str:
        return self.replacement or self.option_strings[0]

    def _seen(self, parser, namespace, option_string) -> None:
        seen = getattr(namespace, SEEN_ATTRIBUTE, None)
        if seen is None:
            seen = {}
            setattr(namespace, SEEN_ATTRIBUTE, seen)
        given = seen.setdefault(self.dest, [])
        other = next((name for name in given if name != option_string), None)
        if other is not None:
            parser.error(self.conflict(other, option_string))
        if option_string not in given:
            given.append(option_string)

    def conflict(self, first: str, second: str) -> str:
        return f"{first} and {second} both set {self.canonical} (they are one flag): pass it once"

    def __call__(self, parser, namespace, values, option_string=None):
        self._seen(parser, namespace, option_string)
        setattr(namespace, self.dest, values)


class DeprecatedAlias(Synonyms):
    """Stores the value and warns when an old name was used: either every option string after the
    first (aliases declared with the flag), or, with ``replacement``, the whole argument (an old
    flag declared on its own that stores into its replacement's dest).  ``note`` is added to the
    warning (what the new flag means, where an old name could be misread).

    An old name given together with its new one (``--num-prompts 5 --num-requests 6``) is refused
    naming both (:class:`Synonyms`).  The replacement form sees the new flag only when the new
    flag's action is a ``Synonyms`` too; declare old names with the flag where a conflict must be
    caught.
    """

    def __init__(self, option_strings, dest, replacement: str = "", note: str = "", **kwargs):
        self.note = note
        super().__init__(option_strings, dest, replacement=replacement, **kwargs)

    def conflict(self, first: str, second: str) -> str:
        new = self.canonical
        old = second if second != new else first
        return f"{first} and {second} both set {new} ({old} is its deprecated name): pass only {new}"

    def __call__(self, parser, namespace, values, option_string=None):
        self._seen(parser, namespace, option_string)
        new = self.canonical
        if option_string is not None and option_string != new:
            note = f" ({self.note})" if self.note else ""
            print(f"warning: {option_string} is deprecated and will be removed in the next release; use {new}{note}", file=sys.stderr)
        setattr(namespace, self.dest, values)


SEEN_ATTRIBUTE = "_deprecated_alias_seen"  # dest -> option strings given, for Synonyms and DeprecatedAlias


def given(args, dest: str) -> bool:
    """Whether the command line set ``dest`` (through a :class:`Synonyms` action), whatever its default."""
    return dest in (getattr(args, SEEN_ATTRIBUTE, None) or {})
