"""The one exception type for bad user input: its message names the input and what is wrong."""


class ConfigError(ValueError):
    """Raised for invalid configuration or input files; CLIs turn it into exit code 2."""
