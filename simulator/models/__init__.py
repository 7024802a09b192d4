"""Models as data: Hugging Face ``config.json`` files, the catalog's own and a user's.

:mod:`~simulator.models.spec` checks a config (dense decoders and EAGLE heads only),
:mod:`~simulator.models.files` finds them (package data or a local path), and
:mod:`~simulator.models.context` sizes the tables a run needs; :mod:`~simulator.models.catalog` holds the
catalog's specs as read-only values.  Nothing here imports Vidur: the adapter
(:mod:`simulator.vidur.models`) turns each spec into the ``BaseModelConfig`` subclass Vidur looks
models up by, and is where a model is looked up by name.
"""
