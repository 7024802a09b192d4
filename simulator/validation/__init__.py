"""Validation against a real vLLM server: generate -> replay -> calibrate -> simulate -> compare.

Every step reads and writes files, so any step can be rerun on its own; ``python -m
simulator.validation --help`` lists the commands.  The fake vLLM server the tests run
against lives in ``tests/fake_vllm/``, outside the package.
"""
