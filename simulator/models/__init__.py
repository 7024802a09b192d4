"""Models as data: Hugging Face ``config.json`` files, the catalog's own and a user's.

:mod:`~simulator.models.spec` checks a config (the decoder families the cost model covers), with
:mod:`~simulator.models.drafters` for draft networks (EAGLE heads, DFlash drafters, MTP layers),
:mod:`~simulator.models.precision` for its quantization and :mod:`~simulator.models.config_fields`
for the typed reads all three share; :mod:`~simulator.models.files` finds them (package data or a local path), and
:mod:`~simulator.models.context` sizes the tables a run needs; :mod:`~simulator.models.catalog` holds the
catalog's specs as read-only values.  Nothing here imports Vidur: the adapter
(:mod:`simulator.vidur.models`) turns each spec into the ``BaseModelConfig`` subclass Vidur looks
models up by, and is where a model is looked up by name.
"""
