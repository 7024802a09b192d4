"""``python -m simulator.paysoff``: the pays-off command (:mod:`simulator.paysoff.command`)."""

import sys

from simulator.paysoff.command import main

sys.exit(main())
