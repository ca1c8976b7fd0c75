"""Where examples come from: each source yields record batches with their position."""
