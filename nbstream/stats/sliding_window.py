"""Exact sliding windows: the statistics of the most recent examples, kept as a ring of buckets.

A model with ``window=N`` and ``window_buckets=K`` learns each example into the newest of at
most K buckets. Bucket sizes follow a cycle of K sizes that add up to N: ``N // K`` examples
each, one more for the first ``N % K`` buckets of the cycle. A new bucket begins when the
newest one is full, and the oldest is dropped when there would be more than K. So the model
holds K - 1 whole buckets and the filling one: the last ``N - size + 1`` to ``N`` examples
(``size`` that of the filling bucket, at most ``ceil(N / K)``), or all of them until that many
were learned.

Statistics are never subtracted (Gaussian moments cannot be taken apart stably): each bucket
keeps its own, and the model's statistics are the merge of the buckets, computed when read
after a change. Memory is K + 1 statistics: the K buckets and their merge.

Merging two windows unites them bucket by bucket, newest with newest: the result holds the
examples of both windows. A bucket may then hold more examples than its size; the next
example begins a new bucket.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple, Self, TypeVar

import numpy as np

from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray
from .counts import Statistics

S = TypeVar("S", bound=Statistics)

# The names of the window's own arrays beside the buckets' statistics (``bucket<i>.<name>``).
EXAMPLES, CYCLE, STREAMS = "window.examples", "window.cycle", "window.streams"


class _Piece(NamedTuple):
    """Rows start:stop of a batch, for the bucket at ``cycle``; ``opens``: a new bucket."""

    start: int
    stop: int
    cycle: int
    opens: bool


class StatisticsWindow(Generic[S]):
    """The statistics of the most recent examples, bucket by bucket (see the module).

    window : N, in examples; n_buckets : K; blank : empty statistics of the layout the buckets
    have (copied for each new bucket).

    streams : how many windows this one unites (1 until ``merge``): a bucket holds at most
    ``streams`` times its size.
    """

    def __init__(self, window: int, n_buckets: int, blank: S):
        self.window, self.n_buckets = window, n_buckets
        self.streams = 1
        self._blank = blank
        self._buckets: list[S] = []  # oldest first; the last one is filling
        self._examples: list[int] = []  # examples in each bucket (not their weight)
        self._cycle = n_buckets - 1  # the newest bucket's place in the cycle of sizes (the first is 0)
        self._n_classes = 0
        self._merged: S | None = None  # the merge of the buckets, until they change

    @property
    def layout(self) -> type[S]:
        """The type of the buckets' statistics."""
        return type(self._blank)

    def size(self, cycle: int) -> int:
        """Examples a bucket at this place of the cycle holds (0 <= cycle < n_buckets)."""
        size, remainder = divmod(self.window, self.n_buckets)
        return size + (cycle < remainder)

    @property
    def n_examples(self) -> int:
        """Examples in the window: in all its buckets."""
        return sum(self._examples)

    @property
    def window_shape(self) -> tuple[int, int]:
        """(window, n_buckets)."""
        return self.window, self.n_buckets

    @property
    def examples_in_window(self) -> int:
        return self.n_examples

    def sliding_window(self) -> StatisticsWindow[S]:
        return self

    # ---- learning ----------------------------------------------------------------------------
    def grow(self, n_classes: int) -> None:
        """Add zero rows for new classes up to n_classes, in every bucket."""
        if n_classes > self._n_classes:
            for bucket in self._buckets:
                bucket.grow(n_classes)
            self._n_classes = n_classes
            self._merged = None

    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        """Add a batch (as ``Statistics.update`` takes it), split where buckets begin; rows that
        leave the window before the batch ends are not learned at all."""
        pieces = self._pieces(X.shape[0])
        if len(pieces) > self.n_buckets:  # the batch alone fills the window: no bucket before it stays
            self._buckets.clear()
            self._examples.clear()
            self._cycle = pieces[-self.n_buckets - 1].cycle
            pieces = pieces[-self.n_buckets:]
        for start, stop, _, opens in pieces:
            if opens:
                self._open_bucket()
            if stop - start == X.shape[0]:
                self._buckets[-1].update(X, rows, weights)
            else:
                self._buckets[-1].update(X[start:stop], rows[start:stop],
                                         None if weights is None else weights[start:stop])
            self._examples[-1] += stop - start
        self._merged = None

    def openings(self, n_rows: int) -> list[int]:
        """The rows of a batch of n_rows that would begin a new bucket (and may drop the oldest)."""
        return [piece.start for piece in self._pieces(n_rows) if piece.opens]

    def _pieces(self, n_rows: int) -> list[_Piece]:
        """Where a batch of n_rows goes: what room the filling bucket has, then new buckets."""
        pieces = []
        start, cycle = 0, self._cycle
        room = self.size(cycle) - self._examples[-1] if self._buckets else 0
        if room > 0:
            start = min(n_rows, room)
            pieces.append(_Piece(0, start, cycle, opens=False))
        while start < n_rows:
            cycle = (cycle + 1) % self.n_buckets
            stop = min(n_rows, start + self.size(cycle))
            pieces.append(_Piece(start, stop, cycle, opens=True))
            start = stop
        return pieces

    def _open_bucket(self) -> None:
        """Begin a new bucket, dropping the oldest when there would be more than n_buckets."""
        if len(self._buckets) == self.n_buckets:
            del self._buckets[0], self._examples[0]
        self._buckets.append(self._new_bucket())
        self._examples.append(0)
        self._cycle = (self._cycle + 1) % self.n_buckets

    def _new_bucket(self) -> S:
        bucket = copy.deepcopy(self._blank)
        bucket.grow(self._n_classes)
        return bucket

    def merge(self, other: StatisticsWindow[S], rows: IndexArray) -> None:
        """Unite another window with this one, bucket by bucket from the newest; rows, shape
        (n_other_classes,): where its classes sit here (``grow`` made room for them).

        A window that holds nothing takes the other's buckets, layout and place in the cycle;
        windows whose buckets are held in different layouts are refused (``check_merge``)."""
        self.check_merge(other)
        if not self._buckets:
            self._blank = copy.deepcopy(other._blank)
            self._cycle, self.streams = other._cycle, other.streams
        else:
            self.streams += other.streams
        for _ in range(len(other._buckets) - len(self._buckets)):
            self._buckets.insert(0, self._new_bucket())
            self._examples.insert(0, 0)
        for age, theirs in enumerate(reversed(other._buckets), start=1):
            self._buckets[-age].merge(theirs, rows)
            self._examples[-age] += other._examples[-age]
        self._merged = None

    def check_merge(self, other: StatisticsWindow[S]) -> None:
        """Raise ValueError unless ``merge`` can unite the other window with this one."""
        if self._buckets and type(other._blank) is not type(self._blank):
            raise ValueError(f"cannot merge windows whose statistics are held differently "
                             f"({type(self._blank).__name__} and {type(other._blank).__name__}): give both "
                             f"models the same counts.")

    def each(self) -> list[S]:
        """The buckets, oldest first, then the blank statistics a new bucket starts as (no copies)."""
        return [*self._buckets, self._blank]

    def change(self, change: Callable[[S], None]) -> None:
        """Apply ``change`` to the merge of the buckets first (a change that raises there changes
        no bucket), then to every bucket."""
        change(self.statistics())
        for bucket in self._buckets:
            change(bucket)
        self._merged = None

    def keep_newest(self, n_examples: int) -> None:
        """Drop every bucket older than the newest ``n_examples`` examples (those holding none of
        them). The newest bucket always stays: the window keeps n_examples to n_examples plus one
        bucket's examples, or all it holds when that is fewer."""
        kept, newer = 0, 0  # buckets kept, from the newest, and the examples in them
        for count in reversed(self._examples):
            if kept and newer >= n_examples:
                break
            kept, newer = kept + 1, newer + count
        dropped = len(self._buckets) - kept
        if dropped:
            del self._buckets[:dropped], self._examples[:dropped]
            self._merged = None

    # ---- reading -----------------------------------------------------------------------------
    def statistics(self) -> S:
        """The merge of the buckets: the statistics of the examples in the window (computed once
        per change; valid until the window changes)."""
        if self._merged is None:
            merged = self._new_bucket()
            every_class = np.arange(self._n_classes)
            for bucket in self._buckets:
                merged.merge(bucket, every_class)
            self._merged = merged
        return self._merged

    # ---- as named arrays -------------------------------------------------------------------------
    def arrays(self) -> dict[str, AnyArray]:
        """Each bucket's statistics as ``bucket<i>.<name>`` (bucket0 the oldest), and the window's
        own: ``window.examples`` (n_buckets,) the examples in each bucket, ``window.cycle`` (1,)
        the newest bucket's place in the cycle of sizes, ``window.streams`` (1,)."""
        arrays = {f"bucket{i}.{name}": array for i, bucket in enumerate(self._buckets)
                  for name, array in bucket.arrays().items()}
        arrays[EXAMPLES] = np.array(self._examples, dtype=np.int64)
        arrays[CYCLE] = np.array([self._cycle], dtype=np.int64)
        arrays[STREAMS] = np.array([self.streams], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, AnyArray], *, window: int, n_buckets: int, blank: S,
                    parse: Callable[[dict[str, AnyArray]], S], n_classes: int, n_features: int,
                    examples_seen: int) -> Self:
        """The window ``arrays`` gave, once checked to be one a model of these classes, features and
        examples seen could hold (ValueError otherwise: too many buckets, a bucket of more
        examples than its size allows, buckets of other shapes or layouts).

        blank : the model's empty statistics (its layout, unless the buckets are held in another);
        parse : statistics made of one bucket's arrays (ValueError when they do not fit)."""
        examples, cycle, streams = (_integers(arrays, name) for name in (EXAMPLES, CYCLE, STREAMS))
        if not 1 <= len(examples) <= n_buckets:
            raise ValueError(f"a window of {n_buckets} buckets holds 1 to {n_buckets}; got {len(examples)}")
        if len(cycle) != 1 or not 0 <= cycle[0] < n_buckets or len(streams) != 1 or not 1 <= streams[0]:
            raise ValueError(f"window.cycle must be one of 0..{n_buckets - 1} and window.streams at least 1; "
                             f"got {cycle} and {streams}")
        held = cls(window, n_buckets, blank)
        held._cycle, held.streams, held._n_classes = cycle[0], streams[0], n_classes
        held._examples = examples
        oldest = cycle[0] - len(examples) + 1
        for age, count in enumerate(examples):
            largest = streams[0] * held.size((oldest + age) % n_buckets)
            if not 1 <= count <= largest:
                raise ValueError(f"bucket {age} of the window holds {count} examples; a bucket of it holds "
                                 f"1 to {largest}")
        if sum(examples) > examples_seen:
            raise ValueError(f"the window holds {sum(examples)} examples, more than the {examples_seen} seen")
        by_bucket: dict[str, dict[str, AnyArray]] = {f"bucket{i}": {} for i in range(len(examples))}
        for name, array in arrays.items():
            prefix, _, statistic = name.partition(".")
            if name not in (EXAMPLES, CYCLE, STREAMS):
                if prefix not in by_bucket:
                    raise ValueError(f"the statistics {name!r} belong to no bucket of the window's {len(examples)}")
                by_bucket[prefix][statistic] = array
        held._buckets = [parse(bucket_arrays) for bucket_arrays in by_bucket.values()]
        layout = type(held._buckets[0])
        if any(type(bucket) is not layout for bucket in held._buckets):
            raise ValueError("the buckets of a window must all hold their statistics in one layout")
        if type(blank) is not layout:
            held._blank = layout.empty(n_features)
        for bucket in held._buckets:
            bucket.check(n_classes, n_features)
        return held


def _integers(arrays: Mapping[str, AnyArray], name: str) -> list[int]:
    """One axis of integers, as Python ints (no overflow whatever they claim)."""
    if name not in arrays:
        raise ValueError(f"the statistics of a window need {name}")
    array = arrays[name]
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a list of integers; got dtype {array.dtype} and shape {array.shape}")
    return [int(value) for value in array.tolist()]
