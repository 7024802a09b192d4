import sys

from simulator.validation.cli import main

sys.exit(main())
