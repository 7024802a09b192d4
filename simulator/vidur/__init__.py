"""The adapter to Vidur (PyPI ``vidur`` 0.0.26): the only package that imports ``vidur``.

Everything Vidur-facing that would change with a Vidur upgrade is here, so an upgrade touches
this folder and nothing else (``tests/test_layout.py`` fails on a ``vidur`` import anywhere else
in ``simulator/``, ``tests/`` or ``bench/``):

* :mod:`.configs` -- Vidur's config classes the project builds or subclasses, the two config
  subclasses that keep a run in memory (metrics off, no config dump), and, on import, the SKUs;
* :mod:`.models` -- Vidur's model configs, one class per model spec of the catalog
  (:mod:`simulator.models.catalog` holds the specs as values, and this module registers them), the
  EAGLE-head and DFlash-drafter config classes, and the lookup of a model by name (its config, its
  shape, what a proposer kind reads of it);
* :mod:`.skus` -- Vidur's device and node SKUs generated from ``simulator/profiles/devices.toml``
  (a new GPU is one TOML table, no Python);
* :mod:`.entities` -- Vidur's batch and request entities, the request with its 0.0.26
  ``restart`` fixes, and the step time that adds time outside Vidur's op set;
* :mod:`.runtime` -- Vidur's registries, request generators, events, simulator, memory planner
  and parameter counter (the heavy imports: scikit-learn, SciPy), and the stock synthetic
  request stream with its id reset;
* :mod:`.seam` -- every private Vidur member the project touches, under public names, with
  :data:`~simulator.vidur.seam_hooks.HOOKS` listing each one (``tests/test_vidur_seam.py`` checks
  the list against the installed Vidur and against the names the seam spells, exactly).

Why a package of its own rather than ``simulator/engine``: the engine is the project's model
run through Vidur's event loop (the speculative scheduler, the predictors, the batches), and it
changes with the model; this package changes with Vidur.  The engine subclasses and registers
the names exported here, and owns no Vidur-version behaviour.

The package's ``__init__`` imports nothing, and :mod:`.configs` and :mod:`.logs` load only Vidur's
config classes and logger (a few hundredths of a second), so resolving a run never pays for the
predictor machinery :mod:`.seam`, :mod:`.entities` and :mod:`.runtime` import.
"""
