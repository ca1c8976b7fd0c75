"""Timing for the benchmarks: the best of several runs, which a busy machine disturbs least."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(action: Callable[[], object], rounds: int) -> float:
    """The shortest of ``rounds`` runs of ``action``, in seconds."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best
