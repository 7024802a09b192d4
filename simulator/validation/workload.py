"""Validation workloads: exact requests with prompts as token ids, and their file format.

A workload fixes everything a replay and a simulation must agree on: arrival times, exact
prompt and output lengths, and the prompt token ids themselves (so a real server sees the
same prompts on every rerun).  Its hash identifies it in every later file, so results from
different workloads are never compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from simulator.util.errors import ConfigError
from simulator.util.inputs import read_text
from simulator.validation.files import canonical_json, check_schema, parse_jsonl, sha256_hex, write_jsonl_atomic

SCHEMA = "vidur-specdec/validation-workload"
SCHEMA_VERSION = 1
ARRIVALS = ("poisson", "fixed")
LENGTHS = ("fixed", "uniform", "trace")
TRACE_COLUMNS = ("num_prefill_tokens", "num_decode_tokens")
# Bounds on what a workload may ask for, so a typo (--prompt-tokens 5000000) stops at once instead
# of writing for minutes: one request's prompt + output, and a workload's prompt tokens in all
# (2**24 take about a minute to draw and write).  replay also refuses requests longer than the
# server's max_model_len before it sends anything.
MAX_REQUEST_TOKENS = 2**20
MAX_WORKLOAD_PROMPT_TOKENS = 2**24


@dataclass(frozen=True)
class Request:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prompt_token_ids: tuple[int, ...]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["prompt_token_ids"] = list(self.prompt_token_ids)
        return data


@dataclass(frozen=True)
class Workload:
    requests: tuple[Request, ...]
    generator: dict = field(default_factory=dict)  # how it was made; provenance, not hashed

    @property
    def workload_hash(self) -> str:
        return workload_hash(self.requests)

    def __len__(self) -> int:
        return len(self.requests)


def workload_hash(requests) -> str:
    return sha256_hex(canonical_json([r.to_dict() for r in requests]))


def is_int(value) -> bool:
    """An integer, numpy's included, but not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class WorkloadSpec:
    """How to generate a workload.  ``trace_lengths`` holds (prompt, output) rows already read."""

    num_requests: int = 100
    arrival: str = "poisson"
    rate: float = 2.0  # requests per second
    lengths: str = "fixed"
    prompt_tokens: int = 512
    output_tokens: int = 128
    prompt_range: Optional[tuple[int, int]] = None
    output_range: Optional[tuple[int, int]] = None
    trace_lengths: Optional[tuple[tuple[int, int], ...]] = None
    trace_name: Optional[str] = None
    trace_rows_skipped: int = 0  # rows of the trace beyond the context, left out (provenance)
    vocab_size: int = 32000
    min_token_id: int = 1000  # keeps clear of special and byte-fallback tokens
    repeat_fraction: float = 0.0
    repeat_span: int = 16
    seed: int = 0

    def __post_init__(self):
        def need(ok, name, what):
            if not ok:
                raise ConfigError(f"{name} = {getattr(self, name)!r}: {what}")

        need(is_int(self.num_requests) and self.num_requests > 0, "num_requests", "must be a positive integer")
        need(self.arrival in ARRIVALS, "arrival", f"must be one of {ARRIVALS}")
        need(isinstance(self.rate, (int, float)) and math.isfinite(self.rate) and self.rate > 0, "rate", "must be a finite number of requests per second > 0")
        need(self.lengths in LENGTHS, "lengths", f"must be one of {LENGTHS}")
        if self.lengths == "fixed":
            need(is_int(self.prompt_tokens) and self.prompt_tokens > 0, "prompt_tokens", "must be a positive integer")
            need(is_int(self.output_tokens) and self.output_tokens > 0, "output_tokens", "must be a positive integer")
        if self.lengths == "uniform":
            for name in ("prompt_range", "output_range"):
                lo_hi = getattr(self, name)
                need(
                    lo_hi is not None and len(lo_hi) == 2 and all(is_int(v) for v in lo_hi) and 0 < lo_hi[0] <= lo_hi[1],
                    name,
                    "must be two integers 0 < MIN <= MAX",
                )
        if self.lengths == "trace":
            need(bool(self.trace_lengths), "trace_lengths", "a trace with at least one usable row is required")
        need(is_int(self.min_token_id) and self.min_token_id >= 0, "min_token_id", "must be an integer >= 0")
        need(is_int(self.vocab_size) and self.vocab_size > self.min_token_id, "vocab_size", "must be an integer > min_token_id")
        need(isinstance(self.repeat_fraction, (int, float)) and 0 <= self.repeat_fraction <= 1, "repeat_fraction", "must be a number in [0, 1]")
        need(is_int(self.repeat_span) and self.repeat_span > 0, "repeat_span", "must be a positive integer")
        need(is_int(self.seed) and self.seed >= 0, "seed", "must be an integer >= 0")
        self._check_bounds()

    def _longest(self) -> tuple[int, int]:
        """The longest prompt and the longest prompt + output this spec can draw."""
        if self.lengths == "fixed":
            return self.prompt_tokens, self.prompt_tokens + self.output_tokens
        if self.lengths == "uniform":
            return self.prompt_range[1], self.prompt_range[1] + self.output_range[1]
        return max(p for p, _ in self.trace_lengths), max(p + o for p, o in self.trace_lengths)

    def _check_bounds(self) -> None:
        prompt, total = self._longest()
        name = {"fixed": "prompt_tokens", "uniform": "prompt_range", "trace": "trace_lengths"}[self.lengths]
        if total > MAX_REQUEST_TOKENS:
            raise ConfigError(
                f"{name} = {getattr(self, name) if self.lengths != 'trace' else '...'}: a request of up to {total} tokens (prompt + output) is beyond "
                f"the harness's bound of {MAX_REQUEST_TOKENS} tokens per request; ask for shorter requests (replay also refuses any longer than the server's max_model_len)"
            )
        if self.num_requests * prompt > MAX_WORKLOAD_PROMPT_TOKENS:
            raise ConfigError(
                f"num_requests = {self.num_requests}: {self.num_requests} requests of up to {prompt} prompt tokens are up to {self.num_requests * prompt} prompt tokens, "
                f"beyond the harness's bound of {MAX_WORKLOAD_PROMPT_TOKENS} per workload (such a file takes minutes to write); ask for fewer or shorter prompts"
            )

    def describe(self) -> dict:
        data = asdict(self)
        data.pop("trace_lengths")
        if self.trace_lengths is not None:
            data["trace_rows"] = len(self.trace_lengths)
        return data


def generate(spec: WorkloadSpec) -> Workload:
    """Pure and seeded: the same spec always gives the same workload.

    Arrivals, lengths and prompt tokens draw from independent child streams of the seed, so
    changing, say, the arrival rate leaves the prompts unchanged.
    """
    arrival_rng, length_rng, token_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(3))
    n = spec.num_requests
    arrivals = _arrivals(spec, arrival_rng, n)
    prompts, outputs = _lengths(spec, length_rng, n)
    requests = tuple(
        Request(
            request_id=i,
            arrival_s=float(arrivals[i]),
            prompt_tokens=int(prompts[i]),
            output_tokens=int(outputs[i]),
            prompt_token_ids=_prompt_ids(spec, token_rng, int(prompts[i])),
        )
        for i in range(n)
    )
    return Workload(requests=requests, generator=spec.describe())


def _arrivals(spec: WorkloadSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    if spec.arrival == "fixed":
        gaps = np.full(n - 1, 1.0 / spec.rate)
    else:
        gaps = rng.exponential(1.0 / spec.rate, size=n - 1)
    # The first request arrives at 0; microsecond resolution keeps the file readable.
    return np.round(np.concatenate([[0.0], np.cumsum(gaps)]), 6)


def _lengths(spec: WorkloadSpec, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if spec.lengths == "fixed":
        return np.full(n, spec.prompt_tokens), np.full(n, spec.output_tokens)
    if spec.lengths == "uniform":
        prompts = rng.integers(spec.prompt_range[0], spec.prompt_range[1] + 1, size=n)
        outputs = rng.integers(spec.output_range[0], spec.output_range[1] + 1, size=n)
        return prompts, outputs
    rows = np.asarray(spec.trace_lengths)
    picks = rng.choice(len(rows), size=n, replace=n > len(rows))
    return rows[picks, 0], rows[picks, 1]


def _prompt_ids(spec: WorkloadSpec, rng: np.random.Generator, length: int) -> tuple[int, ...]:
    """Random token ids; with ``repeat_fraction`` > 0 some spans copy an earlier span of the
    same prompt, giving an n-gram proposer something to match."""
    span = spec.repeat_span
    tokens: list[int] = []
    while len(tokens) < length:
        if spec.repeat_fraction > 0 and len(tokens) >= span and rng.random() < spec.repeat_fraction:
            start = int(rng.integers(0, len(tokens) - span + 1))
            tokens.extend(tokens[start : start + span])
        else:
            tokens.extend(int(t) for t in rng.integers(spec.min_token_id, spec.vocab_size, size=span))
    return tuple(tokens[:length])


def read_length_trace(path: Path, max_total_tokens: Optional[int] = None) -> tuple[tuple[tuple[int, int], ...], int]:
    """(prompt, output) rows of a Vidur-style length trace CSV, and how many were skipped.

    Read by the project's one trace reader under its ``"refuse"`` policy, so a row whose
    lengths are missing, garbage, not integers or below 1 (``100,-5``) is an error naming the
    row: it is a broken trace, not a row to leave out quietly.  Rows longer in total than
    ``max_total_tokens`` (the server's context) are dropped rather than clipped, so every kept
    length is exact and servable, and the caller reports how many; without the limit a row
    beyond the harness's :data:`MAX_REQUEST_TOKENS` is refused, naming it.
    """
    from simulator.runs.workloads import read_trace

    rows = read_trace(path, None, unusable="refuse")
    totals = rows.sum(axis=1)
    if max_total_tokens is None:
        beyond = np.flatnonzero(totals > MAX_REQUEST_TOKENS)
        if len(beyond):
            row = int(beyond[0])
            raise ConfigError(
                f"trace {path}: data row {row + 1} needs {int(totals[row])} tokens (prompt + output), beyond the harness's bound of "
                f"{MAX_REQUEST_TOKENS} per request; pass --max-total-tokens (the server's context) to skip rows longer than it"
            )
        return tuple((int(p), int(o)) for p, o in rows), 0
    kept = rows[totals <= max_total_tokens]
    if not len(kept):
        raise ConfigError(f"trace {path}: none of its {len(rows)} rows fits within --max-total-tokens {max_total_tokens} (prompt + output); pass the server's context")
    return tuple((int(p), int(o)) for p, o in kept), int(len(rows) - len(kept))


def write_workload(path: Path, workload: Workload) -> None:
    header = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "workload_hash": workload.workload_hash,
        "num_requests": len(workload),
        "generator": workload.generator,
    }
    write_jsonl_atomic(path, [header] + [r.to_dict() for r in workload.requests])


def read_workload(path: Path) -> Workload:
    """Read and check a workload file; every problem names the file, line and field."""
    path = Path(path)
    text = read_text(path, "workload file")
    if not text.strip():
        raise ConfigError(f"{path}: empty file, expected a workload header line")
    if not text.endswith("\n"):  # written whole, newline-terminated: an unterminated tail was cut off
        where = "inside its header line" if "\n" not in text else f"inside line {text.count(chr(10)) + 1}"
        raise ConfigError(f"{path}: truncated file: it ends {where} (no final newline); copy or generate it again")
    lines = list(parse_jsonl(text, path))
    _, header = lines[0]
    check_schema(path, header, SCHEMA, SCHEMA_VERSION)
    requests = []
    for index, (number, row) in enumerate(lines[1:]):
        requests.append(_request_from_row(path, number, index, row, requests[-1] if requests else None))
    if not requests:
        raise ConfigError(f"{path}: the workload holds no requests")
    if header.get("num_requests") != len(requests):
        raise ConfigError(f"{path}: header says num_requests = {header.get('num_requests')!r} but the file holds {len(requests)}")
    workload = Workload(requests=tuple(requests), generator=header.get("generator") or {})
    if header.get("workload_hash") != workload.workload_hash:
        raise ConfigError(f"{path}: the requests do not match the header's workload_hash (was the file edited after generation?)")
    return workload


def _request_from_row(path: Path, number: int, index: int, row: dict, previous: Optional[Request]) -> Request:
    where = f"{path}:{number}"

    def fail(name, what):
        raise ConfigError(f"{where}: {name} = {row.get(name)!r}: {what}")

    if row.get("request_id") != index:
        fail("request_id", f"expected {index} (requests are numbered 0..n-1 in arrival order)")
    arrival = row.get("arrival_s")
    if not (isinstance(arrival, (int, float)) and not isinstance(arrival, bool) and math.isfinite(arrival) and arrival >= 0):
        fail("arrival_s", "must be a finite time in seconds >= 0")
    if previous is not None and arrival < previous.arrival_s:
        fail("arrival_s", f"arrivals must be sorted (the previous request arrives at {previous.arrival_s})")
    for name in ("prompt_tokens", "output_tokens"):
        if not (is_int(row.get(name)) and row[name] > 0):
            fail(name, "must be a positive integer")
    ids = row.get("prompt_token_ids")
    if not (isinstance(ids, list) and all(is_int(t) and t >= 0 for t in ids)):
        fail("prompt_token_ids", "must be a list of token ids >= 0")
    if len(ids) != row["prompt_tokens"]:
        raise ConfigError(f"{where}: prompt_token_ids holds {len(ids)} ids but prompt_tokens = {row['prompt_tokens']}")
    return Request(index, float(arrival), row["prompt_tokens"], row["output_tokens"], tuple(ids))
