"""What a replay sends: its options (checked before anything is sent) and one request's body.

The options are ``vllm bench serve``'s flags for an OpenAI-compatible completions server; the
body asks for the workload's exact output length, so the measured request is the simulated one.
Kept apart from the client loop (:mod:`replay`) because bench and fit build these options from
their own flags without sending anything.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Optional
from urllib.parse import urlsplit

from simulator.util.errors import ConfigError
from simulator.validation.workload import Request


@dataclass(frozen=True)
class ReplayOptions:
    base_url: str  # the server root, as vllm bench serve's --base-url
    model: Optional[str] = None  # None: the first model the server lists; else checked against /v1/models
    concurrency: int = 256  # requests in flight at most (--max-concurrency); later ones wait (and say so)
    timeout_s: float = 300.0  # longest silence on a connection before the request is a timeout (not a total time)
    temperature: Optional[float] = 0.0  # None: not sent, the server's default (vllm bench serve without --temperature)
    sampling: tuple = ()  # (name, value) pairs sent with every request: top_p, top_k, min_p (bench's sampling flags)
    headers: tuple = ()  # (name, value) pairs sent with every request (bench's --header); only the names are saved
    retry_failed: bool = False  # also resend requests whose record is a failure
    request_token_ids: bool = True  # ask for token ids per chunk (vLLM >= 0.10.2: return_token_ids)
    progress: bool = False
    endpoint: str = "/v1/completions"  # as vllm bench serve's --endpoint
    # what the client times requests on (monotonic seconds); tests against a fake server with a
    # clock of its own pass that one, so the client's times and the server's histograms agree.
    # An open-loop replay sleeps real seconds until each arrival read on it: a clock slower than
    # real time is for closed loops (the fit's), whose requests are sent as slots free
    clock: Callable[[], float] = field(default=time.perf_counter, compare=False, repr=False)

    def __post_init__(self):
        if not (isinstance(self.concurrency, int) and self.concurrency > 0):
            raise ConfigError(f"--max-concurrency {self.concurrency!r}: must be a positive integer")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(f"--timeout {self.timeout_s!r}: must be > 0 seconds of silence")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"--base-url {self.base_url!r}: must start with http:// or https://, e.g. http://127.0.0.1:8000")
        if self.temperature is not None and not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ConfigError(f"--temperature {self.temperature!r}: must be a number >= 0 (0: greedy, as the simulated run)")
        for name, value in self.sampling:
            _check_sampling(name, value)
        try:
            parts = urlsplit(self.base_url)
            _ = parts.port  # parses the port, raising ValueError on a bad one
        except ValueError as err:
            raise ConfigError(f"--base-url {self.base_url!r}: not a valid URL ({err}); pass the server root, e.g. http://127.0.0.1:8000") from None
        if not parts.hostname:
            raise ConfigError(f"--base-url {self.base_url!r}: names no host; pass the server root, e.g. http://127.0.0.1:8000")
        path = parts.path.rstrip("/")
        if path.endswith("/completions"):
            root = self.base_url[: self.base_url.rstrip("/").rindex(path)]
            raise ConfigError(f"--base-url {self.base_url!r} names an endpoint: pass the server root ({root}) as --base-url, and the path with --endpoint (default /v1/completions)")
        if not (self.endpoint.startswith("/") and self.endpoint.rstrip("/").endswith("/completions") and not self.endpoint.rstrip("/").endswith("/chat/completions")):
            raise ConfigError(f"--endpoint {self.endpoint!r}: must be an OpenAI completions path such as /v1/completions (the harness sends token-id prompts, which the chat API does not take)")

    def saved(self, url: str) -> dict:
        """The options as a session's entry in replay-summary.json keeps them: header values
        are left out (they may carry credentials), their names kept."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "clock"}
        return kept | {"base_url": url, "headers": [name for name, _ in self.headers]}

    @property
    def root_url(self) -> str:
        """The server root: a trailing slash or ``/v1`` is dropped."""
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


# bench's sampling flags: the request field, and what a value must be (vLLM's SamplingParams rules)
SAMPLING = {
    "top_p": ("--top-p", lambda v: isinstance(v, (int, float)) and 0 < v <= 1, "a number in (0, 1]"),
    "top_k": ("--top-k", lambda v: isinstance(v, int) and (v == -1 or v >= 0), "an integer >= 0, or -1 (off)"),
    "min_p": ("--min-p", lambda v: isinstance(v, (int, float)) and 0 <= v <= 1, "a number in [0, 1]"),
}


def _check_sampling(name: str, value) -> None:
    if name not in SAMPLING:
        raise ConfigError(f"sampling parameter {name!r}: expected one of {', '.join(SAMPLING)}")
    flag, ok, what = SAMPLING[name]
    if isinstance(value, bool) or not ok(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{flag} {value!r}: must be {what}")


def request_body(request: Request, model: str, options: ReplayOptions) -> dict:
    """Exact output length: ``max_tokens`` = ``min_tokens`` = the workload's, EOS ignored.
    Sampling fields are sent only when given, as vllm bench serve sends them."""
    body = {
        "model": model,
        "prompt": list(request.prompt_token_ids),
        "max_tokens": request.output_tokens,
        "min_tokens": request.output_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.temperature is not None:
        body["temperature"] = options.temperature
    body.update(dict(options.sampling))
    if options.request_token_ids:
        body["return_token_ids"] = True
    return body
