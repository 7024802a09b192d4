"""The specifications the build reads: every TOML input that says what to simulate, in one place.

Each module reads one family strictly (:mod:`simulator.util.inputs`: unknown keys, wrong types and
impossible values fail naming the file and the key) and returns frozen values; none runs anything.
The pays-off sweep's specification (``data/paysoff.toml``) lives with the pays-off feature, in
:mod:`simulator.paysoff.spec`.

* :mod:`.sweep`: the seed sweep (``data/sweep.toml``), expanded to runs by :mod:`simulator.sweep.runner`.
* :mod:`.measurements`: published measurements and the reproduction's assumptions
  (``data/published.toml``, ``data/published_assumptions.toml``), planned into runs by
  :mod:`simulator.published.plan`.
"""
