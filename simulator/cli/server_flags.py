"""The server ``python -m simulator``'s flags describe: ``vllm serve``'s flags and the GPU it runs on.

A :class:`ServerFlags` holds them as typed, the parallelism, precision and step costs already as the
deployment's own values (:mod:`simulator.runs.deployment`).  What is left open is settled here:
the vLLM version (the newest modelled), the scheduler limits (``vllm serve``'s defaults for that
version on that GPU, :mod:`simulator.cli.vllm_serve`), the name a printed ``vllm serve`` line uses,
and what a server's ``--engine-profile`` replaces (:func:`with_engine_profile`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from simulator.cli import vllm_serve
from simulator.cli.argtypes import check_folder
from simulator.runs.deployment import Parallelism, Precision, SchedulerLimits, StepCosts
from simulator.util.errors import ConfigError


@dataclass(frozen=True)
class ServerFlags:
    """The target model on a GPU, served by a vLLM version with its limits; None: left to vLLM."""

    model: str
    device: str
    parallelism: Parallelism
    precision: Precision
    costs: StepCosts
    scheduler: str
    vllm_version: Optional[str] = None
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    num_kv_blocks: Optional[int] = None
    engine_profile: Optional[str] = None  # a file fitted to a server (simulator.profiles.fitted)
    served_model_name: Optional[str] = None

    def version(self) -> str:
        """The vLLM release served, checked (``--vllm-version``, else the newest modelled)."""
        return vllm_serve.parse_version(self.vllm_version or vllm_serve.default_version())

    def limits(self, version: str) -> vllm_serve.Limits:
        """The scheduler limits given, else ``vllm serve``'s of ``version`` on the GPU."""
        return vllm_serve.limits(self.device, version, self.max_num_seqs, self.max_num_batched_tokens)

    def scheduler_limits(self, limits: vllm_serve.Limits) -> SchedulerLimits:
        """The deployment's scheduler limits: ``limits`` with the KV blocks and the scheduler asked for."""
        return SchedulerLimits(
            max_num_batched_tokens=limits.max_num_batched_tokens, max_num_seqs=limits.max_num_seqs, num_kv_blocks=self.num_kv_blocks, scheduler=self.scheduler,
        )

    def check_ranges(self) -> None:
        """A cost not below 0 ms and profile folders that exist."""
        if self.costs.engine_overhead_ms < 0:
            raise ConfigError(f"--engine-overhead-ms {self.costs.engine_overhead_ms:g}: must be >= 0 milliseconds")
        check_folder("--profile-dir", self.costs.profile_dir)
        check_folder("--network-profile-dir", self.costs.network_profile_dir)

    def served_name(self) -> str:
        """The model a printed ``vllm serve`` line names."""
        return vllm_serve.served_model_name(self.model, self.served_model_name)


def with_engine_profile(server: ServerFlags):
    """(the server, its fitted profile or None): an ``--engine-profile`` must have measured this
    deployment and this vLLM version, and its version, CPU time per step and kernel scales replace
    the flags' (a run then prices steps as that server ran them)."""
    if not server.engine_profile:
        return server, None
    from simulator.profiles.engines import get_engine
    from simulator.profiles.fitted import read_fitted_profile

    source = f"--engine-profile {server.engine_profile}"
    fitted = read_fitted_profile(server.engine_profile)
    fitted.check_run(server.model, server.device, server.parallelism.tensor, source)
    fitted_version = get_engine(fitted.engine).version
    if server.vllm_version is not None and vllm_serve.parse_version(server.vllm_version) != fitted_version:
        raise ConfigError(f"--vllm-version {server.vllm_version}: {source} was fitted to vLLM {fitted.vllm_version} (engine profile {fitted.engine}); drop one")
    costs = replace(server.costs, engine_overhead_ms=fitted.engine_overhead_ms, step_scales=fitted.scales)
    return replace(server, vllm_version=fitted_version, costs=costs), fitted
