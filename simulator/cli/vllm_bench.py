"""The ``vllm bench serve`` line that measures what an answer simulated, so it can be checked on a
GPU: vLLM's random dataset at the same lengths and spread, the same request count, and the same
arrivals (a request rate, or every request at once under a concurrency cap).  One function for
both commands (``python -m simulator`` prints one run's line, ``paysoff`` one per concurrency)."""

from __future__ import annotations

import math
from typing import Optional


def bench_serve_command(model: str, *, prompt_tokens: int, output_tokens: int, range_ratio: float, num_prompts, seed: int,
                        request_rate=math.inf, max_concurrency=None) -> str:
    """``vllm bench serve`` with vLLM's own flags.  ``num_prompts``, ``request_rate`` and
    ``max_concurrency`` may be shell expressions (``$c``) for a loop.  ``--ignore-eos`` makes every
    request run to its output length, as the simulator's do; vLLM draws its own lengths from the
    same distribution (its seed is not the simulator's), so the two agree in distribution."""
    parts = [f"vllm bench serve --model {model} --dataset-name random --random-input-len {prompt_tokens} --random-output-len {output_tokens}"]
    if range_ratio:
        parts.append(f"--random-range-ratio {range_ratio:g}")
    parts.append(f"--num-prompts {num_prompts}")
    rate = request_rate if isinstance(request_rate, str) else "inf" if math.isinf(request_rate) else format(request_rate, "g")
    parts.append(f"--request-rate {rate}")
    if max_concurrency is not None:
        parts.append(f"--max-concurrency {max_concurrency}")
    parts.append(f"--ignore-eos --seed {seed}")
    return " ".join(parts)


def closed_loop_grid(model: str, concurrencies, *, requests_per_slot: int, min_requests: int, prompt_tokens: int, output_tokens: int,
                     range_ratio: float, seed: int) -> str:
    """One shell loop running the closed-loop grid: at each concurrency c, max(min, per slot x c)
    requests, every one sent at once under ``--max-concurrency c``."""
    count = f"$((c*{requests_per_slot}>{min_requests}?c*{requests_per_slot}:{min_requests}))"  # one word: no spaces
    line = bench_serve_command(model, prompt_tokens=prompt_tokens, output_tokens=output_tokens, range_ratio=range_ratio, num_prompts=count,
                               seed=seed, max_concurrency="$c")
    return f"for c in {' '.join(str(int(c)) for c in concurrencies)}; do {line}; done"


def open_loop_grid(model: str, rates, *, num_prompts: int, prompt_tokens: int, output_tokens: int, range_ratio: float, seed: int) -> Optional[str]:
    """The open-loop grid as a loop over Poisson request rates (None without rates)."""
    if not rates:
        return None
    line = bench_serve_command(model, prompt_tokens=prompt_tokens, output_tokens=output_tokens, range_ratio=range_ratio, num_prompts=num_prompts,
                               seed=seed, request_rate="$r")  # type: ignore[arg-type]
    return f"for r in {' '.join(format(r, 'g') for r in rates)}; do {line}; done"
