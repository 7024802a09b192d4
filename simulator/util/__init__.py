"""Shared utilities: errors, hashing, inputs, atomic writes, progress, provenance, the result cache."""
