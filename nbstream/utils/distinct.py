"""The distinct values of an integer array and where each value is among them: what np.unique
with ``return_inverse`` gives, by a hash table where numba is installed (np.unique sorts every
value, several times slower when most values repeat: the cells of a batch of text, say)."""

from __future__ import annotations

import numpy as np

from .compiled import Kernel, worth_compiling
from .ndarrays import IndexArray, IntArray

MOST_HASHED = 1 << 22  # values hashed at once at most (a table of 8 M slots, 64 MB); more are sorted


def distinct_and_places(values: IntArray) -> tuple[IntArray, IndexArray]:
    """(the distinct values, increasing, (n_distinct,); the place of each value among them (n,),
    intp) of integer values (n,).

    >>> distinct, places = distinct_and_places(np.array([7, 3, 7, 5]))
    >>> distinct.tolist(), places.tolist()
    ([3, 5, 7], [2, 0, 2, 1])
    """
    if hashed(values):
        distinct, places = _places(np.ascontiguousarray(values, dtype=np.int64))
        return distinct.astype(values.dtype, copy=False), places
    distinct, places = np.unique(values, return_inverse=True)
    return distinct, places.astype(np.intp, copy=False)


def hashed(values: IntArray) -> bool:
    """Whether ``distinct_and_places`` finds these values' places by its hash table (signed
    integers, not too many, numba there) rather than by np.unique's sort."""
    return values.dtype.kind == "i" and len(values) <= MOST_HASHED and worth_compiling(len(values))


def _places_loop(values: IntArray) -> tuple[IntArray, IndexArray]:
    """``distinct_and_places`` by a hash table: one probe a value, then a sort of the distinct ones."""
    size, bits = 2, 1
    while size < 2 * len(values):
        size, bits = size * 2, bits + 1
    shift = np.uint64(64 - bits)
    slots = np.full(size, -1, np.intp)  # a value's slot holds its place in order of first appearance
    firsts = np.empty(len(values), np.intp)
    places = np.empty(len(values), np.intp)
    n_distinct = 0
    for k in range(len(values)):
        value = values[k]
        slot = np.intp((np.uint64(value) * np.uint64(0x9E3779B97F4A7C15)) >> shift)  # Fibonacci hashing: high bits
        while slots[slot] >= 0 and firsts[slots[slot]] != value:
            slot = (slot + 1) & (size - 1)
        if slots[slot] < 0:
            slots[slot] = n_distinct
            firsts[n_distinct] = value
            n_distinct += 1
        places[k] = slots[slot]
    order = np.argsort(firsts[:n_distinct])
    rank = np.empty(n_distinct, np.intp)
    rank[order] = np.arange(n_distinct)
    for k in range(len(values)):
        places[k] = rank[places[k]]
    return firsts[:n_distinct][order], places


_places = Kernel(_places_loop)
