"""The compiled loops compiled before the tests run: a first compilation takes seconds, which a
test that bounds a command's time would otherwise count."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse

import nbstream
from nbstream.arrow.hashing import hashed_counts
from nbstream.utils import compiled
from nbstream.utils.compiled import compiled_available


def compile_the_loops() -> None:
    """Runs every compiled loop once on the argument types the tests use most (numba keeps the
    machine code in its cache, for the test processes to load)."""
    if not compiled_available():
        return
    smallest, compiled.SMALLEST_BATCH = compiled.SMALLEST_BATCH, 0  # these few rows too
    try:
        for ngram_max in (1, 2):
            hashed_counts(pa.array(["Free prize now", "ünïcode text", None]), 12, ngram_max)
        rows = np.array([[1, 0, 2], [0, 3, 1], [2, 2, 0]])
        for X in (rows.astype(np.uint8), rows.astype(np.float64), rows, scipy.sparse.csr_matrix(rows.astype(float))):
            nbstream.ComplementNB().partial_fit(X[:1], [0]).predict_proba_prequential(X, [0, 1, 0])
            nbstream.MultinomialNB(counts="sparse").partial_fit(X, [0, 1, 0]).predict_proba_prequential(X, [0, 1, 0])
    finally:
        compiled.SMALLEST_BATCH = smallest
