"""Reading vLLM's Prometheus ``/metrics``: speculative-decoding counters and KV cache size.

The text format is parsed by ``prometheus_client``'s parser.  Counters are summed over label
sets (several engines or models), and a run's counts are the difference between a scrape
before and one after.  ``prometheus_client`` and ``httpx`` come with the ``validation`` extra
and are imported where they are used, so the steps that need neither run without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from simulator.util.errors import ConfigError

COUNTERS = {
    # V1 engine
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    # V0 engine
    "emitted_tokens": "vllm:spec_decode_num_emitted_tokens_total",
    # both
    "generation_tokens": "vllm:generation_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# V0's gauges: rates since the server started, which cannot be differenced between scrapes.
V0_GAUGES = ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")
CACHE_INFO = "vllm:cache_config_info"
# Exported by every Prometheus client library: a restarted server has a new value.
START_TIME = "process_start_time_seconds"
# Present on any vLLM server that logs statistics (V0 and V1); its absence means this is
# not vLLM's /metrics, or the server runs with --disable-log-stats.
REQUIRED = "generation_tokens"


@dataclass(frozen=True)
class Snapshot:
    """Counter values at one instant; ``None`` where the server does not export the counter."""

    drafts: Optional[float] = None
    draft_tokens: Optional[float] = None
    accepted_tokens: Optional[float] = None
    emitted_tokens: Optional[float] = None
    generation_tokens: Optional[float] = None
    accepted_per_pos: dict = field(default_factory=dict)  # position -> count
    block_size: Optional[int] = None
    num_gpu_blocks: Optional[int] = None
    process_start_time: Optional[float] = None  # identifies the server process that was scraped
    v0_gauges: tuple = ()  # names of V0's spec-decode gauges present (rates, not counts)

    @property
    def engine(self) -> Optional[str]:
        """Which counter family is present: "v1" (drafts), "v0" (emitted tokens) or None."""
        if self.drafts is not None:
            return "v1"
        if self.emitted_tokens is not None:
            return "v0"
        return None


COUNTER_FIELDS = tuple(COUNTERS)


def parse_metrics(text: str, source: str) -> Snapshot:
    """Parse Prometheus text exposition; ``source`` names it in error messages."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    cache_labels: Optional[dict] = None
    start_time: Optional[float] = None
    gauges: set = set()
    by_sample = {name: key for key, name in COUNTERS.items()}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in by_sample:
                    key = by_sample[sample.name]
                    totals[key] = totals.get(key, 0.0) + sample.value
                elif sample.name == PER_POSITION:
                    position = _int_label(sample.labels, "position", source)
                    per_pos[position] = per_pos.get(position, 0.0) + sample.value
                elif sample.name == CACHE_INFO and cache_labels is None:
                    cache_labels = dict(sample.labels)
                elif sample.name == START_TIME and start_time is None:
                    start_time = sample.value
                elif sample.name in V0_GAUGES:
                    gauges.add(sample.name)
    except (ValueError, TypeError, IndexError, KeyError) as err:  # the parser's errors on garbage are not all ValueErrors
        raise ConfigError(f"{source}: not valid Prometheus text ({type(err).__name__}: {str(err)[:120]})") from None
    block_size = num_blocks = None
    if cache_labels is not None:
        block_size = _optional_int(cache_labels.get("block_size"))
        num_blocks = _optional_int(cache_labels.get("num_gpu_blocks"))
    return Snapshot(**totals, accepted_per_pos=per_pos, block_size=block_size, num_gpu_blocks=num_blocks, process_start_time=start_time, v0_gauges=tuple(sorted(gauges)))


def spec_counter_problem(snapshot: Snapshot, source: str) -> Optional[str]:
    """Why ``snapshot`` cannot give acceptance (no spec-decode counters of either engine), or None."""
    if snapshot.engine is not None or snapshot.accepted_per_pos or snapshot.draft_tokens is not None:
        return None
    if snapshot.v0_gauges:
        return (
            f"{source} exports only V0's spec-decode gauges ({', '.join(snapshot.v0_gauges)}), rates since the server started that "
            f"cannot be differenced between scrapes; calibration needs V0's counters ({COUNTERS['draft_tokens']}, {COUNTERS['emitted_tokens']}) "
            "or a vLLM with the V1 engine"
        )
    return f"{source} exports no spec-decode counters ({COUNTERS['drafts']} for vLLM V1, {COUNTERS['emitted_tokens']} for V0)"


def draft_positions(snapshot: Snapshot) -> Optional[int]:
    """The k a server speculates with, as its ``/metrics`` shows it: the draft positions V1's
    per-position counter counts (vLLM exports one per position from the start), 0 when it
    exports no spec-decode metrics at all (speculation off), None when it cannot tell (V0's
    counters, which count no positions)."""
    if snapshot.accepted_per_pos:
        return max(snapshot.accepted_per_pos) + 1
    if snapshot.engine is None and snapshot.draft_tokens is None and not snapshot.v0_gauges:
        return 0
    return None


def check_vllm_metrics(text: str, url: str) -> Snapshot:
    """What a replay requires of ``/metrics`` before it sends anything: Prometheus text that
    holds vLLM's counters.  A proxy's HTML page or another program's metrics fail here."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")[:80]
    try:
        snapshot = parse_metrics(text, url)
    except ConfigError as err:
        raise ConfigError(f"{err}; the first line reads {first_line!r}. Is {url} a vLLM server's /metrics?") from None
    if getattr(snapshot, REQUIRED) is None:
        raise ConfigError(
            f"{url} holds no {COUNTERS[REQUIRED]}: it is not vLLM's /metrics, or the server runs with --disable-log-stats "
            f"(the harness needs vLLM's counters; first line: {first_line!r})"
        )
    return snapshot


def _int_label(labels: dict, name: str, source: str) -> int:
    value = _optional_int(labels.get(name))
    if value is None or value < 0:
        raise ConfigError(f"{source}: {PER_POSITION} has {name}={labels.get(name)!r}, expected an integer >= 0")
    return value


def _optional_int(text) -> Optional[int]:
    """vLLM writes ``None`` for unset cache fields (e.g. before memory profiling)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


class CounterWentDown(ConfigError):
    """A counter is lower in the later scrape: the server restarted in between."""


def delta(before: Snapshot, after: Snapshot, source: str) -> Snapshot:
    """after - before for every counter present in both; refuses counters that went down
    (the server restarted between the scrapes, so the difference means nothing)."""
    values = {}
    for name in COUNTER_FIELDS:
        a, b = getattr(after, name), getattr(before, name)
        if a is None or b is None:
            continue
        if a < b:
            raise CounterWentDown(f"{source}: counter {COUNTERS[name]} went down from {b:g} to {a:g} (server restarted between scrapes?)")
        values[name] = a - b
    per_pos = {}
    for position in sorted(set(after.accepted_per_pos) | set(before.accepted_per_pos)):
        a, b = after.accepted_per_pos.get(position, 0.0), before.accepted_per_pos.get(position, 0.0)
        if a < b:
            raise CounterWentDown(f"{source}: counter {PER_POSITION}{{position=\"{position}\"}} went down from {b:g} to {a:g} (server restarted between scrapes?)")
        per_pos[position] = a - b
    return Snapshot(**values, accepted_per_pos=per_pos, block_size=after.block_size, num_gpu_blocks=after.num_gpu_blocks, v0_gauges=after.v0_gauges)


def add(left: Snapshot, right: Snapshot) -> Snapshot:
    """Sum of two deltas (several replay sessions); a counter missing from either is dropped."""
    values = {}
    for name in COUNTER_FIELDS:
        a, b = getattr(left, name), getattr(right, name)
        if a is not None and b is not None:
            values[name] = a + b
    positions = set(left.accepted_per_pos) | set(right.accepted_per_pos)
    per_pos = {p: left.accepted_per_pos.get(p, 0.0) + right.accepted_per_pos.get(p, 0.0) for p in sorted(positions)}
    return Snapshot(
        **values,
        accepted_per_pos=per_pos,
        block_size=right.block_size if right.block_size is not None else left.block_size,
        num_gpu_blocks=right.num_gpu_blocks if right.num_gpu_blocks is not None else left.num_gpu_blocks,
        v0_gauges=tuple(sorted(set(left.v0_gauges) | set(right.v0_gauges))),
    )


async def scrape(client, base_url: str) -> str:
    """GET ``{base_url}/metrics`` with an ``httpx.AsyncClient``; any failure is a ConfigError naming the URL."""
    import httpx

    url = f"{base_url}/metrics"
    try:
        response = await client.get(url)
    except httpx.HTTPError as err:
        raise ConfigError(f"cannot scrape {url}: {type(err).__name__}: {err}") from None
    if response.status_code != 200:
        raise ConfigError(f"cannot scrape {url}: HTTP {response.status_code}")
    return response.text
