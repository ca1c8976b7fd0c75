"""The worker's BLAS threads: one, unless the user chose.

numpy's BLAS reads its thread count from the environment once, when it loads; every process
the worker starts (Spark's Python workers in local mode, say) inherits it. The library keeps its
own matrix products on one thread anyway (``nbstream.utils.threads``); this covers the rest of the
process from the start. ``main`` calls ``one_blas_thread_unless_set`` before anything imports numpy.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# The variables OpenBLAS (OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS) and MKL read: one set by the
# user is theirs to keep, and then none is touched.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# What the worker sets: not OMP_NUM_THREADS, which Arrow also reads to size the thread pool that
# decodes Parquet.
SET_TO_ONE = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread_unless_set(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set BLAS to one thread in ``environ`` unless the user set any of ``THREAD_VARIABLES``;
    whether it did."""
    if any(name in environ for name in THREAD_VARIABLES):
        return False
    for name in SET_TO_ONE:
        environ[name] = "1"
    return True
