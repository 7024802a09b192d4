"""The server's own timings of its requests, from vLLM V1's histograms in ``/metrics``.

A client's clock carries its network and its own event loop; the engine's does not.  vLLM V1's
``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``) records, for every finished request,
its time in the queue, in prefill (scheduled to first token) and in decode (first to last
token), its end-to-end latency and its generated tokens, each as a histogram whose ``_sum`` and
``_count`` difference between two scrapes exactly.  A fit (:mod:`simulator.validation.fit`) reads
a level's mean TPOT, TTFT and end-to-end latency from those differences.

Two per-step histograms say what the engine's steps were, apart from the requests:

- the inter-token latency, observed once per output a running request receives after its first
  (``IterationStats.update_from_output``, ``vllm/v1/metrics/stats.py``): one step apart, however
  many tokens a speculative step emitted.  Its name moved: ``vllm:time_per_output_token_seconds``
  until vLLM 0.11 deprecated it for ``vllm:inter_token_latency_seconds`` (PR #24110; 0.11 and 0.12
  export both with the same observations, PR #32661 removed the old name), so the new name is read
  where the server has it and the old one otherwise, never both;
- ``vllm:iteration_tokens_total``, observed once per engine step that gave outputs (the output
  handler of ``vllm/v1/engine/async_llm.py`` builds its ``IterationStats`` only when a step has
  outputs; a step that only advances a prompt chunk is not counted) with the prompt tokens of the
  requests whose prefill ended in it plus the tokens it emitted.
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
# the inter-token latency under its names, newest first: the first one the server exports is read
INTER_TOKEN = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
ITERATION_TOKENS = "vllm:iteration_tokens_total"
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
    inter_token: float = 0.0  # the inter-token latencies' sum (seconds) and how many there were
    outputs: float = 0.0
    steps: float = 0.0  # engine steps that gave outputs

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

    @property
    def mean_itl_s(self) -> float:
        """Time between a running request's outputs: one engine step, as its requests saw it."""
        return self.inter_token / self.outputs

    def require_steps(self, where: str) -> None:
        """A ConfigError where these differences hold no inter-token latency or no engine step
        (a server whose stats stopped between the scrapes): the level's ITL and steps are read from them."""
        if self.outputs <= 0 or self.steps <= 0:
            raise ConfigError(
                f"{where}: the server counted no inter-token latency or no engine steps between the scrapes "
                f"({' or '.join(INTER_TOKEN)}, {ITERATION_TOKENS}); is it logging stats?"
            )


def parse_server_times(text: str, source: str) -> ServerTimes:
    """The histograms' sums and counts in one scrape (summed over label sets); a histogram the
    server does not export is a ConfigError naming it and the vLLM that exports it."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    wanted = {*HISTOGRAMS.values(), *INTER_TOKEN, ITERATION_TOKENS}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                base, _, suffix = sample.name.rpartition("_")
                if base in wanted and suffix in ("sum", "count"):
                    target = sums if suffix == "sum" else counts
                    target[base] = target.get(base, 0.0) + sample.value
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ConfigError(f"{source}: not valid Prometheus text ({type(err).__name__}: {str(err)[:120]})") from None
    exported = [name for name in wanted if name in sums and name in counts]
    missing = [name for name in (*HISTOGRAMS.values(), ITERATION_TOKENS) if name not in exported]
    inter_token = next((name for name in INTER_TOKEN if name in exported), None)
    if inter_token is None:
        missing.append(" or ".join(INTER_TOKEN))
    if missing:
        raise ConfigError(f"{source} exports no {', '.join(missing)}: a fit reads the server's own request and step timings, which {EXPORTED_BY} exports")
    return ServerTimes(
        **{key: sums[name] for key, name in HISTOGRAMS.items()}, requests=counts[HISTOGRAMS["e2e"]],
        inter_token=sums[inter_token], outputs=counts[inter_token], steps=counts[ITERATION_TOKENS],
    )
