"""Arrays as tests compare them."""

import numpy as np


def dense(table) -> np.ndarray:
    """A model's table as an ndarray, whether it is held dense or as a scipy.sparse array."""
    return table.toarray() if hasattr(table, "toarray") else np.asarray(table)
