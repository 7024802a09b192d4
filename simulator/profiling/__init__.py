"""Measuring and fitting execution-time profiles: the profiler (PyTorch), device-constant and
verify fits, accuracy reports.  Nothing here runs during a simulation; ``simulator.profiles``
holds the run-time model these tools measure and fit."""
