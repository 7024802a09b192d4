"""A fake vLLM server for the validation harness's tests (see :mod:`fake_vllm.server`)."""

from fake_vllm.server import FAULTS, SPEC_COUNTERS, BlackHole, FakeServer, FakeServerConfig

__all__ = ["FAULTS", "SPEC_COUNTERS", "BlackHole", "FakeServer", "FakeServerConfig"]
