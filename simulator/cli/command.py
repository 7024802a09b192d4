"""How ``python -m simulator`` and ``python -m simulator.paysoff`` fail: one line, in the flags' names.

* **Bad input** exits 2 with one line on stderr that names the flag(s) and the fix, before
  anything is written.  argparse's own usage errors become one line too (:class:`Parser`).
* **The configuration's words become the flags'.**  The run configuration and the engine refuse
  with the field and its value (``tensor_parallel_size = 3: ...``), which is right for a library
  caller and wrong for someone who typed ``--tensor-parallel-size 3``: :func:`in_flags` rewrites
  the fields a command's flags set, using that command's map (:data:`RUN_FLAGS` and the options'
  flags), so the two refusals cannot drift apart.
* **Ctrl-C** exits 130 with one line.  Outputs are written atomically after the work, and each
  simulated run is kept by the result cache as it finishes, so nothing is half-written and the
  same command resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

import argparse
import re
import sys
from typing import Callable, Mapping, Union

from simulator.util.errors import ConfigError

@dataclass(frozen=True)
class WorkloadDefaults:
    """The workload both commands draw when no flag says otherwise, so one deployment gets one TPOT
    from either: vllm bench serve's random dataset at 512 prompt and 256 output tokens, fixed in an
    open loop and uniform within ±50% in a closed loop, as the pays-off sweep draws them (a closed
    loop of equal lengths would drain and refill in lockstep, which no server sees; 128 requests of
    these fit every catalog GPU's KV cache beside a 7-8B model, so the concurrency is the running
    batch).  The Python API's own default (:class:`~simulator.runs.workload_kinds.PoissonWorkload`) keeps
    its lengths: the benchmarks and tests measure that run."""

    prompt_tokens: int = 512
    output_tokens: int = 256
    closed_loop_range_ratio: float = 0.5

    def describe(self) -> str:
        return f"{self.prompt_tokens}/{self.output_tokens} tokens, ±{self.closed_loop_range_ratio:.0%} in a closed loop"


DEFAULT_WORKLOAD = WorkloadDefaults()

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it (the validation harness uses the same)

# RunConfig / SpeculationConfig fields -> the flag that sets them (python -m simulator's names;
# the pays-off command overrides the k).  Proposer options are added from the registry.
RUN_FLAGS = {
    "model": "--model",
    "device": "--device",
    "tensor_parallel_size": "--tensor-parallel-size",
    "draft_tensor_parallel_size": "--draft-tensor-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "chunk_size": "--max-num-batched-tokens",
    "batch_size_cap": "--max-num-seqs",
    "num_kv_blocks": "--num-kv-blocks",
    "profile_dir": "--profile-dir",
    "draft_profile_dir": "--draft-profile-dir",
    "network_profile_dir": "--network-profile-dir",
    "pipeline_stages": "--pipeline-stages",
    "engine_overhead_ms": "--engine-overhead-ms",
    "proposer": "--proposer",
    "draft_model": "--draft-model",
    "num_speculative_tokens": "-k",
    "k_schedule": "--k-schedule",
    "adaptive_verification": "--adaptive-verification",
    "acceptance_rate": "--acceptance",
    "acceptance_per_position": "--acceptance-per-position",
    "proposal_probability": "--proposal-probability",
    "ngram_overhead_ms": "--ngram-overhead-ms",
    "draft_pass_overhead_ms": "--draft-pass-overhead-ms",
    "interpolation": "--interpolation",
}


def command_flags(**overrides: str) -> dict:
    """The field -> flag map of a command: :data:`RUN_FLAGS`, every proposer option's flag, ``overrides``."""
    from simulator.cli.speculation_flags import option_flag
    from simulator.speculative import proposers

    return {**RUN_FLAGS, **{name: option_flag(name) for name in proposers.options()}, **overrides}


def in_flags(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with each ``field = value`` of a mapped field written as ``--flag value`` (not
    the right-hand field of a sum, ``a + b = 9``), and
    each other mention of a mapped field that is an identifier (has an underscore) as its flag;
    on one line.  A message that starts with a flag (``-k 3: ...``, ``--speculative-config: ...``)
    is already in the command's words and keeps them (a JSON key there is the user's own word)."""
    if message.startswith("-"):
        return " ".join(message.split())
    names = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True))
    assigned = re.compile(rf"(?<![\w.\-/])(?<!\+ )({names}) = (?:'([^']*)'|([^\s:;,)]+))")
    text = assigned.sub(lambda m: f"{flags[m.group(1)]} {m.group(2) if m.group(2) is not None else m.group(3)}", message)
    bare = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True) if "_" in name)
    if bare:
        text = re.sub(rf"(?<![\w.\-/'])({bare})(?![\w])", lambda m: flags[m.group(1)], text)
    return " ".join(text.split())


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the flag, ``prefix`` first, and exit 2."""

    def __init__(self, *args, error_prefix: str = "error: ", **kwargs):
        self.error_prefix = error_prefix
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        program = "" if self.prog in self.error_prefix else f"{self.prog} "  # the command's name once per line
        print(f"{self.error_prefix}{message}; see {program}--help", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def guarded(body: Callable[[], int], *, error_prefix: str, flags: Mapping[str, str], interrupted: Union[str, Callable[[], str]]) -> int:
    """Run a command's ``body``: a ConfigError is one line in the flags' names and exit 2; Ctrl-C
    is the ``interrupted`` line and exit 130."""
    try:
        return body()
    except ConfigError as exc:
        print(error_prefix + in_flags(str(exc), flags), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(interrupted() if callable(interrupted) else interrupted, file=sys.stderr)
        return EXIT_INTERRUPTED
