import sys

from simulator.cli.simulate import main

sys.exit(main())
