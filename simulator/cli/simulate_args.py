"""The one reader of ``python -m simulator``'s parsed command line: the argparse Namespace in, typed values out.

Everything after :func:`read_flags` takes values, never the Namespace: the server
(:class:`~simulator.cli.server_flags.ServerFlags`), the speculation
(:class:`~simulator.cli.speculation_flags.SpeculationFlags`), the workload as ``vllm bench
serve``'s flags give it (:class:`~simulator.cli.bench_workload.BenchWorkload`), the seed of the
acceptance draws and where results go.  A ``--speculative-config`` is first expanded into the
flags it sets, as the pays-off command expands it, so the values hold the flags as if typed one
by one and every later refusal is in the flags' own names.  Nothing here checks a value: the
rules live with the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.cli.bench_workload import BenchWorkload
from simulator.cli.proposer_flags import given_options
from simulator.cli.server_flags import ServerFlags
from simulator.cli.speculation_flags import SpeculationFlags
from simulator.cli.speculative_config import Destinations, apply
from simulator.runs.deployment import Parallelism, Precision, StepCosts

# where a --speculative-config's settings land: this command's flags (its k is -k)
SPECULATIVE_CONFIG_FLAGS = Destinations(k=("num_speculative_tokens", "-k"))


@dataclass(frozen=True)
class SimulateFlags:
    """One ``python -m simulator`` command line: the run it asks for and where its results go."""

    server: ServerFlags
    speculation: SpeculationFlags
    workload: BenchWorkload
    acceptance_seed: int
    cache_dir: Optional[str]  # where trained predictors are kept
    json: Optional[str]
    requests_csv: Optional[str]


def read_flags(args) -> SimulateFlags:
    """The command line ``args`` (:func:`~simulator.cli.simulate_flags.build_parser`'s) as values."""
    expand_speculative_config(args)
    return SimulateFlags(
        server=ServerFlags(
            model=args.model,
            device=args.device,
            parallelism=Parallelism(tensor=args.tensor_parallel_size, pipeline=args.pipeline_stages, data=args.data_parallel_size, expert=args.enable_expert_parallel),
            precision=Precision(quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype),
            costs=StepCosts(
                engine_overhead_ms=args.engine_overhead_ms, lm_head=not args.no_lm_head, profile_dir=args.profile_dir,
                network_profile_dir=args.network_profile_dir, moe_routing_skew=args.moe_routing_skew,
            ),
            scheduler=args.scheduler,
            vllm_version=args.vllm_version,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            num_kv_blocks=args.num_kv_blocks,
            engine_profile=args.engine_profile,
            served_model_name=args.served_model_name,
        ),
        speculation=SpeculationFlags(
            proposer=args.proposer,
            k=args.num_speculative_tokens,
            k_schedule=args.k_schedule,
            adaptive_verification=args.adaptive_verification,
            acceptance=args.acceptance,
            acceptance_length=args.acceptance_length,
            acceptance_per_position=args.acceptance_per_position,
            options=given_options(args),
            draft_model=args.draft_model,
            draft_tensor_parallel_size=args.draft_tensor_parallel_size,
            draft_profile_dir=args.draft_profile_dir,
            proposal_probability=args.proposal_probability,
            attention=args.attention,
            interpolation=args.interpolation,
            ngram_overhead_ms=args.ngram_overhead_ms,
            draft_pass_overhead_ms=args.draft_pass_overhead_ms,
        ),
        workload=BenchWorkload(
            num_prompts=args.num_prompts,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            seed=args.workload_seed,
            request_rate=args.request_rate,
            max_concurrency=args.max_concurrency,
            range_ratio=args.random_range_ratio,
            dataset_name=args.dataset_name,
            trace=args.trace,
        ),
        acceptance_seed=args.acceptance_seed,
        cache_dir=args.cache_dir,
        json=args.json,
        requests_csv=args.requests_csv,
    )


def expand_speculative_config(args) -> None:
    """Once per parse: a ``--speculative-config`` becomes the flags it sets (a flag given as well is
    refused), so every later check and message is the flags' own."""
    if getattr(args, "_prepared", False):
        return
    if args.speculative_config is not None:
        apply(args, args.speculative_config, SPECULATIVE_CONFIG_FLAGS, target=args.model)
    args._prepared = True
