"""Vidur glue: subclasses registered into Vidur's registries, and the function that runs one simulation."""
