"""Validation against a real vLLM server: workload -> replay -> calibrate -> simulate -> compare.

Every step reads and writes files, so any step can be rerun on its own; ``python -m
simulator.validation --help`` lists the commands.  ``fake_server`` is a small vLLM stand-in
that lets the whole path run without a GPU.
"""
