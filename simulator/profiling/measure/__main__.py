"""``python -m simulator.profiling.measure``: the same as ``python -m simulator.profiling measure``."""

import argparse
import sys

import simulator.profiling.measure as package
from simulator.util.errors import ConfigError
from simulator.profiling.measure.cli import add_arguments, main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m simulator.profiling.measure", description=package.__doc__.split("\n\n")[0])
    add_arguments(parser)
    try:
        sys.exit(main(parser.parse_args()))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
