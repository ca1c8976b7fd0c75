"""Loops compiled to machine code by numba, where it is installed (the ``fast`` extra, which the
``worker`` extra brings): work that numpy can only do in many passes over the data.

A kernel is written as a plain Python function over arrays and wrapped in ``Kernel``, which
compiles it on its first call (numba keeps the machine code in its on-disk cache, so a process
pays the compilation once per version of the function and per argument types). Each caller keeps
a numpy path for when ``worth_compiling(size)`` is false: numba not installed (on a Spark
executor, which gets nbstream's pure-Python sources), ``NBSTREAM_COMPILED=0`` in the environment
(which benchmarks and tests use to compare the two), or work too small to pay for numba's import.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

SWITCH = "NBSTREAM_COMPILED"  # "0": take the numpy paths even where numba is installed
SMALLEST_BATCH = 1 << 15  # values of work below which the numpy paths run (``worth_compiling``)


@functools.cache
def _numba_usable() -> bool:
    """Whether numba is installed and imports: one that does not (built for another numpy, say) is
    named in a warning, once, and the numpy paths are taken."""
    if importlib.util.find_spec("numba") is None:
        return False
    try:
        import numba  # noqa: F401
    except (ImportError, OSError) as error:
        warnings.warn(f"numba is installed but does not import ({error}): nbstream takes its numpy paths",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def compiled_available() -> bool:
    """Whether compiled kernels are to be used: numba installed and importable, and not switched off."""
    return os.environ.get(SWITCH, "1") != "0" and _numba_usable()


def worth_compiling(size: int) -> bool:
    """Whether to take the compiled loops for work of ``size`` values (a batch's bytes of text, its
    nonzero cells, the keys to count): ``compiled_available()``, and at least SMALLEST_BATCH of
    them. Smaller work takes the numpy paths without importing numba, which costs a process about
    half a second (its import and the loops' loading): more than a small batch's loops save."""
    return size >= SMALLEST_BATCH and compiled_available()


class Kernel:
    """A Python function over numpy arrays and numbers, compiled by numba on its first call.

    Call it only where ``compiled_available()`` holds: numba is imported then, not before, so
    that importing nbstream stays quick."""

    def __init__(self, function: Callable[..., Any], uses: tuple[Callable[..., Any], ...] = ()):
        """uses : the module's plain functions that ``function`` (or another of them) calls, compiled
        with it."""
        self._function = function
        self._uses = uses
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled
        if compiled is None:
            with self._lock:  # threads of the inference API: one compilation
                if self._compiled is None:
                    self._compiled = _compile(self._function, self._uses)
                compiled = self._compiled
        return compiled(*args)


def _compile(function: Callable[..., Any], uses: tuple[Callable[..., Any], ...]) -> Callable[..., Any]:
    """``function`` compiled, seeing the functions it ``uses`` compiled under their names."""
    import numba

    def jit(python_function: Callable[..., Any]) -> Callable[..., Any]:
        try:
            compiled: Callable[..., Any] = numba.njit(cache=True, nogil=True)(python_function)
        except RuntimeError:  # no writable place for the cache (a read-only install and home): each process compiles
            compiled = numba.njit(cache=False, nogil=True)(python_function)
        return compiled

    if uses:  # the same code, its globals (and those of what it uses) seeing the compiled functions
        names = dict(function.__globals__)
        for used in uses:  # numba reads the globals when it compiles, at the first call: all are in by then
            names[used.__name__] = jit(_with_globals(used, names))
        function = _with_globals(function, names)
    return jit(function)


def _with_globals(function: Callable[..., Any], names: dict[str, Any]) -> Callable[..., Any]:
    """The same code as ``function`` with ``names`` for its globals."""
    seeing = types.FunctionType(function.__code__, names, function.__name__, function.__defaults__,
                                function.__closure__)
    seeing.__qualname__, seeing.__module__ = function.__qualname__, function.__module__
    return seeing
