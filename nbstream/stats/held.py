"""What a model holds: all the statistics it learned, or with ``window`` the buckets of the
most recent ones (``StatisticsWindow``). The functions here make, check, read and change
either the same way, so the estimator asks which only where the two behave differently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

from ..utils.ndarrays import AnyArray
from .counts import Statistics
from .sliding_window import StatisticsWindow

S = TypeVar("S", bound=Statistics)
Held: TypeAlias = "S | StatisticsWindow[S]"


def nothing_held(blank: S, window: int | None, n_buckets: int) -> Held[S]:
    """Statistics of nothing learned: ``blank`` itself, or a window of it when ``window`` is set."""
    return blank if window is None else StatisticsWindow(window, n_buckets, blank)


def statistics_of(held: Held[S]) -> S:
    """The statistics of what is held: all of them, or the merge of a window's buckets (computed
    when read after a change)."""
    return held.statistics() if isinstance(held, StatisticsWindow) else held


def each_statistics(held: Held[S]) -> list[S]:
    """Each set of statistics held, without merging a window's buckets: the statistics, or the
    window's buckets and the blank ones a new bucket starts as."""
    return held.each() if isinstance(held, StatisticsWindow) else [held]


def layout_of(held: Held[S]) -> type[Statistics]:
    """The type of the statistics held, without merging a window's buckets."""
    return held.layout if isinstance(held, StatisticsWindow) else type(held)


def window_of(held: Held[S]) -> tuple[int, int] | None:
    """(window, n_buckets) of a window held, None for all statistics."""
    return (held.window, held.n_buckets) if isinstance(held, StatisticsWindow) else None


def check_window_unchanged(held: Held[S], window: int | None, n_buckets: int) -> None:
    """Raise ValueError unless ``held`` is what the parameters ``window`` and ``window_buckets``
    say: they cannot change once a model has learned."""
    now = None if window is None else (window, n_buckets)
    began = window_of(held)
    if now != began:
        kept = "no window" if began is None else f"a window of {began[0]} examples in {began[1]} buckets"
        raise ValueError(f"window and window_buckets cannot change once a model has learned (this one keeps "
                         f"{kept}); fit starts afresh with new ones.")


def held_from_arrays(arrays: dict[str, AnyArray], *, window: int | None, n_buckets: int,
                     empty: Callable[[int], S], parse: Callable[[dict[str, AnyArray]], S], n_classes: int,
                     n_features: int, examples_seen: int) -> Held[S]:
    """What a model of these classes and features holds, made of exported arrays, once checked
    (ValueError when they are not what such a model could have learned).

    empty : empty statistics of the model's layout for a number of features (made only for a
    window: a state's feature count is not trusted before its arrays are checked); parse : statistics made of arrays
    (``Statistics.from_arrays``)."""
    if window is None:
        held = parse(arrays)
        held.check(n_classes, n_features)
        return held
    return StatisticsWindow.from_arrays(arrays, window=window, n_buckets=n_buckets, blank=empty(n_features),
                                        parse=parse, n_classes=n_classes, n_features=n_features,
                                        examples_seen=examples_seen)


def change_everywhere(held: Held[S], change: Callable[[S], None]) -> None:
    """Apply ``change`` in place to what is held: to the statistics, and to every bucket of a
    window. It is applied to the statistics of all (a window's merge) first, so a change that
    raises for any bucket raises there, before anything has changed."""
    change(statistics_of(held))
    if isinstance(held, StatisticsWindow):
        held.change_each(change)


def examples_in_window(held: Held[S]) -> int | None:
    """The examples a window holds; None when all statistics are held (every example learned)."""
    return held.n_examples if isinstance(held, StatisticsWindow) else None


def unchanging_runs(held: Held[S] | None, window: int | None, n_buckets: int, blank: S,
                    n_rows: int) -> list[slice]:
    """Consecutive runs of a batch of n_rows within which learning only adds to the statistics:
    the whole batch, or with a window runs ending at each row that begins a new bucket.

    held : what the model holds, None before it learned (then ``window``, ``n_buckets`` and an
    empty ``blank`` say what it would hold)."""
    if not isinstance(held, StatisticsWindow):
        if window is None or n_rows == 0:
            return [slice(0, n_rows)]
        held = StatisticsWindow(window, n_buckets, blank)
    ends = [start + 1 for start in held.openings(n_rows)]
    edges = [0] + [end for end in ends if 0 < end < n_rows] + [n_rows]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
