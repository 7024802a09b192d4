"""The server's own timings of its requests, from vLLM V1's histograms in ``/metrics``.

A client's clock carries its network and its own event loop; the engine's does not.  vLLM V1's
``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``) records, for every finished request,
its time in the queue, in prefill (scheduled to first token) and in decode (first to last
token), its end-to-end latency and its generated tokens, each as a histogram whose ``_sum`` and
``_count`` difference between two scrapes exactly.  A fit (:mod:`simulator.validation.fit`) reads
a level's mean TPOT, TTFT and end-to-end latency from those differences.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from simulator.util.errors import ConfigError

# field -> the histogram vLLM V1 exports (as ``<name>_sum`` and ``<name>_count``)
HISTOGRAMS = {
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "generated": "vllm:request_generation_tokens",
}
EXPORTED_BY = "vLLM's V1 engine exports (PrometheusStatLogger, vllm/v1/metrics/loggers.py, in every release this project models, 0.10.1 to 0.30.0) unless it runs with --disable-log-stats"


@dataclass(frozen=True)
class ServerTimes:
    """Sums over finished requests (seconds, or tokens for ``generated``) and how many finished."""

    e2e: float = 0.0
    queue: float = 0.0
    prefill: float = 0.0
    decode: float = 0.0
    generated: float = 0.0
    requests: float = 0.0

    def minus(self, before: "ServerTimes") -> "ServerTimes":
        return ServerTimes(*(getattr(self, f.name) - getattr(before, f.name) for f in fields(self)))

    @property
    def mean_tpot_s(self) -> float:
        """Decode time per output token after the first, as ``vllm bench serve`` defines TPOT."""
        return self.decode / (self.generated - self.requests)

    @property
    def mean_ttft_s(self) -> float:
        return (self.queue + self.prefill) / self.requests

    @property
    def mean_e2e_s(self) -> float:
        return self.e2e / self.requests


def parse_server_times(text: str, source: str) -> ServerTimes:
    """The histograms' sums and counts in one scrape (summed over label sets); a histogram the
    server does not export is a ConfigError naming it and the vLLM that exports it."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    by_name = {name: key for key, name in HISTOGRAMS.items()}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                base, _, suffix = sample.name.rpartition("_")
                if base in by_name and suffix in ("sum", "count"):
                    target = sums if suffix == "sum" else counts
                    target[by_name[base]] = target.get(by_name[base], 0.0) + sample.value
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ConfigError(f"{source}: not valid Prometheus text ({type(err).__name__}: {str(err)[:120]})") from None
    missing = [HISTOGRAMS[key] for key in HISTOGRAMS if key not in sums or key not in counts]
    if missing:
        raise ConfigError(f"{source} exports no {', '.join(missing)}: a fit reads the server's own request timings, which {EXPORTED_BY} exports")
    return ServerTimes(**sums, requests=counts["e2e"])
