"""The validation harness's exit codes, and the one message a replay that left requests unfinished prints.

Apart from the command-line module so a step (``bench``) can return the same codes without
importing the front end that dispatches to it.
"""

from __future__ import annotations

# also listed in --help (validation/cli.py: EXIT_CODES) and docs/validation.md
EXIT_OK = 0
EXIT_BAD_INPUT = 2  # a ConfigError: bad input, unreachable or non-vLLM server, unusable output path
EXIT_REQUESTS_FAILED = 3  # replay: some requests have no successful record; every record is kept
EXIT_CLOSING_SCRAPE_FAILED = 4  # replay: the closing /metrics scrape failed (server down?); records kept
EXIT_INTERRUPTED = 130


def unfinished_message(workload, results, unfinished: list) -> str:
    """"N of M requests have no successful record (k short: ...)": how many, and why."""
    from simulator.validation.replay_files import STATUS_WORDS

    records = results.records if results else {}
    why: dict[str, int] = {}
    for rid in unfinished:
        status = (records.get(rid) or {}).get("status", "not_sent")
        why[status] = why.get(status, 0) + 1
    words = ", ".join(f"{n} {status}: {STATUS_WORDS.get(status, 'no record yet')}" for status, n in sorted(why.items()))
    return f"{len(unfinished)} of {len(workload)} requests have no successful record ({words}; e.g. request {unfinished[0]})"
