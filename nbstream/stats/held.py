"""What a model holds, as one protocol (``Held``): all the statistics it learned
(``AllStatistics``), or with ``window`` the buckets of the most recent ones
(``StatisticsWindow``). Both answer the same methods, so a model asks which it holds
(``window_shape``) only where the two behave differently: learning with forgetting, merging.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from ..utils.ndarrays import AnyArray
from .counts import Statistics
from .sliding_window import StatisticsWindow

S = TypeVar("S", bound=Statistics)


class Held(Protocol[S]):
    """What a model holds: the statistics of the examples it keeps, and the sets they are kept in."""

    @property
    def window_shape(self) -> tuple[int, int] | None:
        """(window, n_buckets) of a sliding window; None when every example learned is held."""

    @property
    def examples_in_window(self) -> int | None:
        """The examples a window holds; None when every example learned is held."""

    @property
    def layout(self) -> type[S]:
        """The type of the statistics held, without merging a window's buckets."""

    def statistics(self) -> S:
        """The statistics of what is held (a window's buckets merged when read after a change)."""

    def each(self) -> list[S]:
        """Each set of statistics held, unmerged (a window's buckets, and the blank a new one starts as)."""

    def arrays(self) -> dict[str, AnyArray]:
        """What is held as named arrays (a model's exported state)."""

    def grow(self, n_classes: int) -> None:
        """Make room for classes up to ``n_classes``."""

    def change(self, change: Callable[[S], None]) -> None:
        """Apply ``change`` in place to the statistics of all first (a change that raises there
        changes nothing), then to each set held."""

    def openings(self, n_rows: int) -> list[int]:
        """The rows of a batch of n_rows that each begin a new set of statistics (a window's bucket)."""

    def sliding_window(self) -> StatisticsWindow[S] | None:
        """The sliding window held, for what only a window does (None when every example is held)."""


class AllStatistics(Generic[S]):
    """Every example learned, in one set of statistics (a model without ``window``)."""

    window_shape = None
    examples_in_window = None

    def __init__(self, statistics: S):
        self.all = statistics

    @property
    def layout(self) -> type[S]:
        return type(self.all)

    def statistics(self) -> S:
        return self.all

    def each(self) -> list[S]:
        return [self.all]

    def arrays(self) -> dict[str, AnyArray]:
        return self.all.arrays()

    def grow(self, n_classes: int) -> None:
        self.all.grow(n_classes)

    def change(self, change: Callable[[S], None]) -> None:
        change(self.all)

    def openings(self, n_rows: int) -> list[int]:
        return []

    def sliding_window(self) -> None:
        return None


def nothing_held(blank: S, window: int | None, n_buckets: int) -> AllStatistics[S] | StatisticsWindow[S]:
    """Statistics of nothing learned: ``blank`` itself, or a window of it when ``window`` is set."""
    return AllStatistics(blank) if window is None else StatisticsWindow(window, n_buckets, blank)


def check_window_unchanged(held: Held[S], window: int | None, n_buckets: int) -> None:
    """Raise ValueError unless ``held`` is what the parameters ``window`` and ``window_buckets``
    say: they cannot change once a model has learned."""
    now = None if window is None else (window, n_buckets)
    began = held.window_shape
    if now != began:
        kept = "no window" if began is None else f"a window of {began[0]} examples in {began[1]} buckets"
        raise ValueError(f"window and window_buckets cannot change once a model has learned (this one keeps "
                         f"{kept}); fit starts afresh with new ones.")


def held_from_arrays(arrays: dict[str, AnyArray], *, window: int | None, n_buckets: int,
                     empty: Callable[[int], S], parse: Callable[[dict[str, AnyArray]], S], n_classes: int,
                     n_features: int, examples_seen: int) -> AllStatistics[S] | StatisticsWindow[S]:
    """What a model of these classes and features holds, made of exported arrays, once checked
    (ValueError when they are not what such a model could have learned).

    empty : empty statistics of the model's layout for a number of features (made only for a
    window: a state's feature count is not trusted before its arrays are checked); parse : statistics made of arrays
    (``Statistics.from_arrays``)."""
    if window is None:
        statistics = parse(arrays)
        statistics.check(n_classes, n_features)
        return AllStatistics(statistics)
    return StatisticsWindow.from_arrays(arrays, window=window, n_buckets=n_buckets, blank=empty(n_features),
                                        parse=parse, n_classes=n_classes, n_features=n_features,
                                        examples_seen=examples_seen)


def unchanging_runs(held: Held[S] | None, window: int | None, n_buckets: int, blank: S,
                    n_rows: int) -> list[slice]:
    """Consecutive runs of a batch of n_rows within which learning only adds to the statistics:
    the whole batch, or with a window runs ending at each row that begins a new bucket.

    held : what the model holds, None before it learned (then ``window``, ``n_buckets`` and an
    empty ``blank`` say what it would hold)."""
    if held is None or held.window_shape is None:
        if window is None or n_rows == 0:
            return [slice(0, n_rows)]
        held = StatisticsWindow(window, n_buckets, blank)
    ends = [start + 1 for start in held.openings(n_rows)]  # (type: a window's)
    edges = [0] + [end for end in ends if 0 < end < n_rows] + [n_rows]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
