"""The model run through Vidur's event loop: subclasses of the Vidur names :mod:`simulator.vidur`
exports (the one package that imports Vidur), registered into Vidur's registries, and the function
that runs one simulation."""
