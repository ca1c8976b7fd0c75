"""Loops compiled to machine code by numba, where it is installed (the ``fast`` extra, which the
``worker`` extra brings): work that numpy can only do in many passes over the data.

A kernel is written as a plain Python function over arrays and wrapped in ``Kernel``, which
compiles it on its first call (numba keeps the machine code in its on-disk cache, so a process
pays the compilation once per version of the function and per argument types). Each caller keeps
a numpy path for when ``compiled_available()`` is false: numba not installed (on a Spark
executor, which gets nbstream's pure-Python sources), or ``NBSTREAM_COMPILED=0`` in the
environment, which benchmarks and tests use to compare the two.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from typing import Any

SWITCH = "NBSTREAM_COMPILED"  # "0": take the numpy paths even where numba is installed


@functools.cache
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def compiled_available() -> bool:
    """Whether compiled kernels are to be used: numba installed, and not switched off."""
    return os.environ.get(SWITCH, "1") != "0" and _numba_installed()


class Kernel:
    """A Python function over numpy arrays and numbers, compiled by numba on its first call.

    Call it only where ``compiled_available()`` holds: numba is imported then, not before, so
    that importing nbstream stays quick."""

    def __init__(self, function: Callable[..., Any]):
        self._function = function
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled
        if compiled is None:
            with self._lock:  # threads of the inference API: one compilation
                if self._compiled is None:
                    self._compiled = _compile(self._function)
                compiled = self._compiled
        return compiled(*args)


def _compile(function: Callable[..., Any]) -> Callable[..., Any]:
    import numba

    try:
        compiled: Callable[..., Any] = numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # no writable place for the cache (a read-only install and home): compile each process
        compiled = numba.njit(cache=False, nogil=True)(function)
    return compiled
