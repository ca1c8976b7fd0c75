"""BLAS threads: the library's matrix products run on one thread, and every call leaves the
process's own setting as it found it.

The products the models make are small (a block of rows times a few classes): waking a thread
costs more than it saves, and on a busy machine (other processes, a container's CPU quota,
several replicas on one host) a product waits for a thread that has no core, and takes tens of
times longer. So the calls that multiply matrices (scoring, test-then-train) run inside
``one_blas_thread``: the first such call, on any thread, lowers the BLAS libraries numpy loaded
to one thread through threadpoolctl; the last to return sets back what the first found. Calls
nest, and may run on several threads at once. The setting is the process's: while such a call
runs, BLAS products of the process's other threads run on one thread too. Learning makes no
matrix products (see ``kernels``), so it needs none of this.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from threadpoolctl import ThreadpoolController

P = ParamSpec("P")
R = TypeVar("R")


class _OneThread:
    """How many calls are inside ``one_blas_thread``, and what the first found."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.blas: ThreadpoolController | None = None  # the BLAS libraries loaded, found at the first call
        self.found: Any = None  # threadpoolctl's limiter of the outermost call: it restores what it found

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                if self.blas is None:
                    self.blas = ThreadpoolController().select(user_api="blas")
                self.found = self.blas.limit(limits=1)
            self.depth += 1

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self.found.restore_original_limits()
                self.found = None


_state = _OneThread()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with the BLAS libraries on one thread; the setting before is restored."""
    _state.enter()
    try:
        yield
    finally:
        _state.leave()


def blas_on_one_thread(method: Callable[P, R]) -> Callable[P, R]:
    """A function (a model's method) that runs inside ``one_blas_thread``."""
    @functools.wraps(method)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with one_blas_thread():
            return method(*args, **kwargs)
    return limited
