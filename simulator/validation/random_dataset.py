"""``vllm bench serve --dataset-name random`` as a validation workload: its lengths, its
prompts and its arrival times, drawn the way vLLM draws them.

Lengths and prompts follow vLLM's ``RandomDataset`` (``vllm/benchmarks/datasets``): one
``numpy.random.default_rng(seed)`` draws the input lengths, integers uniform in
[floor(L(1 - r)), ceil(L(1 + r))], then the output lengths likewise (at least 1), then one
offset per request, then a shared random prefix of ``--random-prefix-len`` tokens; request i's
own tokens are the consecutive ids ``allowed[(offset_i + i + arange(len_i)) % len(allowed)]``.
vLLM then decodes and re-encodes the prompt with the model's tokenizer; the harness sends token
ids and has no tokenizer, so it skips that step: the allowed ids are
[``min_token_id``, ``vocab_size``) instead of the tokenizer's vocabulary less its special
tokens, and no special tokens are subtracted from the input length.

Arrivals follow vLLM's ``get_request``: with ``--request-rate inf`` every request arrives at 0;
otherwise the gaps are gamma-distributed with shape ``burstiness`` and scale
1 / (rate x burstiness) (burstiness 1: a Poisson process), drawn one per request from numpy's
legacy global generator seeded with ``--seed`` (vLLM calls ``np.random.seed(args.seed)`` and
``np.random.gamma``), summed, and rescaled so the last request arrives at num_prompts / rate.
With ``--ramp-up-strategy`` each request has its own rate, climbing from
``--ramp-up-start-rps`` to ``--ramp-up-end-rps`` (linearly, or geometrically with
``exponential``), as vLLM's ``_get_current_request_rate`` gives it, and the gaps are not
rescaled (vLLM rescales only at a fixed rate).  Same flags and seed, same workload, byte for byte.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from simulator.util.errors import ConfigError
from simulator.validation.workload import MAX_REQUEST_TOKENS, MAX_WORKLOAD_PROMPT_TOKENS, Request, Workload, is_int

RAMP_UP_STRATEGIES = ("linear", "exponential")


@dataclass(frozen=True)
class RandomDataset:
    """vllm bench serve's random-dataset and traffic flags, with vLLM's defaults."""

    num_prompts: int = 1000
    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 0.0
    prefix_len: int = 0
    request_rate: float = math.inf
    burstiness: float = 1.0
    seed: int = 0
    vocab_size: int = 32000  # no tokenizer here: ids drawn from [min_token_id, vocab_size)
    min_token_id: int = 1000
    ramp_up_strategy: Optional[str] = None  # "linear" or "exponential": the rate climbs from start to end rps
    ramp_up_start_rps: Optional[int] = None
    ramp_up_end_rps: Optional[int] = None

    def __post_init__(self):
        def need(ok: bool, flag: str, value, what: str) -> None:
            if not ok:
                raise ConfigError(f"{flag} {value}: {what}")

        need(is_int(self.num_prompts) and self.num_prompts > 0, "--num-prompts", self.num_prompts, "must be a positive integer")
        need(is_int(self.input_len) and self.input_len >= 0, "--random-input-len", self.input_len, "must be an integer >= 0")
        need(is_int(self.output_len) and self.output_len > 0, "--random-output-len", self.output_len, "must be a positive integer")
        need(is_int(self.prefix_len) and self.prefix_len >= 0, "--random-prefix-len", self.prefix_len, "must be an integer >= 0")
        need(isinstance(self.range_ratio, (int, float)) and 0 <= self.range_ratio < 1, "--random-range-ratio", self.range_ratio, "must be in [0, 1), as in vllm bench serve")
        need(isinstance(self.request_rate, (int, float)) and not math.isnan(self.request_rate) and self.request_rate > 0, "--request-rate", self.request_rate, "must be > 0 requests per second, or inf (every request at once)")
        need(isinstance(self.burstiness, (int, float)) and not math.isnan(self.burstiness) and self.burstiness > 0, "--burstiness", self.burstiness, "must be > 0 (1: Poisson arrivals; below 1 burstier, above 1 more even)")
        need(is_int(self.seed) and self.seed >= 0, "--seed", self.seed, "must be an integer >= 0")
        need(is_int(self.min_token_id) and self.min_token_id >= 0, "--min-token-id", self.min_token_id, "must be an integer >= 0")
        need(is_int(self.vocab_size) and self.vocab_size > self.min_token_id, "--vocab-size", self.vocab_size, "must be an integer above --min-token-id")
        self._check_ramp_up()
        low_in, high_in = self.input_bounds
        if self.prefix_len + low_in < 1:
            raise ConfigError(
                f"--random-input-len {self.input_len}: with --random-range-ratio {self.range_ratio:g} and --random-prefix-len {self.prefix_len} "
                "a prompt could have no token; raise --random-input-len or --random-prefix-len, or lower --random-range-ratio"
            )
        longest = self.prefix_len + high_in + self.output_bounds[1]
        if longest > MAX_REQUEST_TOKENS:
            raise ConfigError(
                f"--random-input-len {self.input_len}: requests of up to {longest} tokens (prefix + input + output) are beyond the harness's bound of "
                f"{MAX_REQUEST_TOKENS} tokens per request; ask for shorter ones (the server's max_model_len is checked too, before anything is sent)"
            )
        if self.num_prompts * (self.prefix_len + high_in) > MAX_WORKLOAD_PROMPT_TOKENS:
            raise ConfigError(
                f"--num-prompts {self.num_prompts}: {self.num_prompts} prompts of up to {self.prefix_len + high_in} tokens are beyond the harness's bound of "
                f"{MAX_WORKLOAD_PROMPT_TOKENS} prompt tokens per workload (such a file takes minutes to write); ask for fewer or shorter prompts"
            )

    def _check_ramp_up(self) -> None:
        """vllm bench serve's ramp-up rules: a strategy needs both rates, and then no
        --request-rate (the ramp sets it); rates are integers, start <= end; and, as vLLM's
        ``get_request`` asserts a positive rate for every request, the start is above 0."""
        given = [flag for flag, value in (("--ramp-up-start-rps", self.ramp_up_start_rps), ("--ramp-up-end-rps", self.ramp_up_end_rps)) if value is not None]
        if self.ramp_up_strategy is None:
            if given:
                raise ConfigError(f"{' and '.join(given)}: {'apply' if len(given) > 1 else 'applies'} to --ramp-up-strategy linear or exponential only; pass one, or drop {'them' if len(given) > 1 else 'it'}")
            return
        if self.ramp_up_strategy not in RAMP_UP_STRATEGIES:
            raise ConfigError(f"--ramp-up-strategy {self.ramp_up_strategy}: expected one of {', '.join(RAMP_UP_STRATEGIES)}")
        if len(given) < 2:
            raise ConfigError(f"--ramp-up-strategy {self.ramp_up_strategy} needs both --ramp-up-start-rps and --ramp-up-end-rps")
        if not math.isinf(self.request_rate):
            raise ConfigError(f"--request-rate {self.request_rate:g}: with --ramp-up-strategy the ramp sets the rate; drop --request-rate")
        start, end = self.ramp_up_start_rps, self.ramp_up_end_rps
        if not (is_int(start) and is_int(end) and 0 < start <= end):
            raise ConfigError(
                f"--ramp-up-start-rps {start} --ramp-up-end-rps {end}: must be integers with 0 < start <= end (vLLM asserts a positive rate for every request)"
            )

    @property
    def input_bounds(self) -> tuple[int, int]:
        return math.floor(self.input_len * (1 - self.range_ratio)), math.ceil(self.input_len * (1 + self.range_ratio))

    @property
    def output_bounds(self) -> tuple[int, int]:
        return max(1, math.floor(self.output_len * (1 - self.range_ratio))), max(1, math.ceil(self.output_len * (1 + self.range_ratio)))

    def describe(self) -> dict:
        """How the workload was made (its provenance); an infinite rate is spelt "inf", as vLLM's result JSON spells it."""
        data = {"dataset_name": "random", **asdict(self)}
        data["request_rate"] = json_rate(self.request_rate)
        data["burstiness"] = json_rate(self.burstiness)
        return data


def json_rate(value: float):
    """A rate or a burstiness as JSON spells it: ``"inf"`` for infinity, as vLLM's result JSON
    spells an infinite ``request_rate``.  Strict JSON has no infinity (vLLM's own ``json.dump``
    writes ``Infinity`` for ``--burstiness inf``, which strict readers refuse)."""
    return "inf" if math.isinf(value) else value


def request_rates(num_prompts: int, request_rate: float, ramp_up: Optional[tuple] = None) -> np.ndarray:
    """Each request's rate, as vLLM's ``_get_current_request_rate``: ``request_rate`` for every
    request, or with ``ramp_up`` = (strategy, start, end) a rate that climbs from start to end
    over the requests, linearly or geometrically."""
    if ramp_up is None:
        return np.full(num_prompts, float(request_rate))
    strategy, start, end = ramp_up
    progress = np.arange(num_prompts) / max(num_prompts - 1, 1)
    if strategy == "linear":
        return start + (end - start) * progress
    return start * (end / start) ** progress


def arrival_times(num_prompts: int, request_rate: float, burstiness: float, seed: int, ramp_up: Optional[tuple] = None) -> np.ndarray:
    """vLLM's ``get_request`` delays: seconds after the start at which each request is sent."""
    rates = request_rates(num_prompts, request_rate, ramp_up)
    if np.isinf(rates).all():
        return np.zeros(num_prompts)
    if math.isinf(burstiness):
        delays = 1.0 / rates
    else:
        legacy = np.random.RandomState(seed)  # what np.random.seed(seed) seeds
        delays = np.array([legacy.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)) for rate in rates])
    cumulative = np.cumsum(delays)
    if ramp_up is None and cumulative[-1] != 0:  # without a ramp vLLM rescales so the run spans num_prompts / rate exactly
        cumulative = cumulative * ((num_prompts / request_rate) / cumulative[-1])
    return np.round(cumulative, 6)


def generate_random(dataset: RandomDataset) -> Workload:
    """The workload ``vllm bench serve --dataset-name random`` would send, as token ids."""
    rng = np.random.default_rng(dataset.seed)
    n = dataset.num_prompts
    low_in, high_in = dataset.input_bounds
    low_out, high_out = dataset.output_bounds
    input_lens = rng.integers(low_in, high_in + 1, size=n)
    output_lens = rng.integers(low_out, high_out + 1, size=n)
    offsets = rng.integers(0, dataset.vocab_size, size=n)
    allowed = np.arange(dataset.min_token_id, dataset.vocab_size)
    prefix = allowed[rng.integers(0, len(allowed), size=dataset.prefix_len)].tolist() if dataset.prefix_len > 0 else []
    ramp_up = (dataset.ramp_up_strategy, dataset.ramp_up_start_rps, dataset.ramp_up_end_rps) if dataset.ramp_up_strategy else None
    arrivals = arrival_times(n, dataset.request_rate, dataset.burstiness, dataset.seed, ramp_up)
    requests = []
    for i in range(n):
        inner = allowed[(int(offsets[i]) + i + np.arange(int(input_lens[i]))) % len(allowed)].tolist()
        ids = tuple(int(t) for t in prefix + inner)
        requests.append(Request(request_id=i, arrival_s=float(arrivals[i]), prompt_tokens=len(ids), output_tokens=int(output_lens[i]), prompt_token_ids=ids))
    return Workload(requests=tuple(requests), generator=dataset.describe())
