"""A model per key: the keys' own counts, beside each partition's state."""
