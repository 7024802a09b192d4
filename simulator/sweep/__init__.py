"""Parameter sweeps: a TOML spec expands to runs, an executor runs them, rows go to one CSV."""
