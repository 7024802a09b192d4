"""``python build.py``: the pipeline from sweep specs to recorded files to the site, published atomically."""
