"""Published speculative-decoding measurements, simulated row by row (a tool, not the model).

``data/published.toml`` holds the facts (setting, acceptance, published figure, link);
``data/published_assumptions.toml`` what a row leaves unstated (lengths, borrowed acceptance);
:mod:`.plan` turns a row into runs, :mod:`.reproduce` runs them and writes the comparison.
"""
