"""ADWIN (Bifet and Gavalda 2007), as River's ``river.drift.ADWIN``: an adaptive window of
values kept as an exponential histogram of buckets, cut where its two parts' means differ."""

from __future__ import annotations

import math
from typing import Any

from ..utils.checked import finite, floats, integer, number, required, shown

# The largest magnitude a detector takes: the sums of squared deviations of any stream of such
# values stay far from float64's overflow, and every state stays finite JSON.
from .base import _C_INT_MAX, _COUNT_MAX, DriftDetector, _field

_LARGEST_WIDTH = 1 << 53  # ADWIN's window stays within float64's exact integers, as River's float width does
_MAX_ROWS = 53  # rows of buckets of 1, 2, 4, ... 2**52 values


class ADWIN(DriftDetector):
    """ADaptive WINdowing (Bifet & Gavaldà, 2007, with ADWIN2's exponential histogram).

    The detector keeps a window of the latest values, compressed (``ExponentialHistogram``). Every
    ``clock`` values, once the window holds more than ``grace_period``, it tries each cut of the
    window between buckets into an older part W0 and a newer part W1 (each of ``min_window_length``
    values at least): when their means differ by more than the Hoeffding-style bound ε_cut for
    confidence ``delta`` (Bernstein form, from the window's variance), the oldest bucket is dropped
    and the cuts are tried again, and the update reports a drift.

    delta : the confidence, in (0, 1); smaller detects less often, and later
    clock : the cuts are tried every ``clock`` values
    max_buckets : the most buckets of each size the window keeps (2 or more; River's ADWIN fails
        on 1)
    min_window_length : the fewest values on either side of a cut (1 or more)
    grace_period : no cut is tried while the window holds this many values or fewer
    """

    kind = "adwin"
    parameters = ("delta", "clock", "max_buckets", "min_window_length", "grace_period")

    def __init__(self, delta: float = 0.002, clock: int = 32, max_buckets: int = 5, min_window_length: int = 5,
                 grace_period: int = 10) -> None:
        super().__init__()
        self.delta = number(delta, "ADWIN delta", 0.0, 1.0, open_low=True, open_high=True)
        self.clock = integer(clock, "ADWIN clock", 1, _C_INT_MAX)
        self.max_buckets = integer(max_buckets, "ADWIN max_buckets", 2, _C_INT_MAX)
        self.min_window_length = integer(min_window_length, "ADWIN min_window_length", 1, _C_INT_MAX)
        self.grace_period = integer(grace_period, "ADWIN grace_period", 0, _C_INT_MAX)
        self._restart()

    @property
    def width(self) -> int:
        """The number of values in the window."""
        return self._window.width

    @property
    def estimation(self) -> float:
        """The mean of the window (0.0 when it is empty)."""
        window = self._window
        return window.total / window.width if window.width else 0.0

    @property
    def variance(self) -> float:
        """The variance of the window (population, ddof 0; 0.0 when it is empty). River's ``variance``
        is the window's sum of squared deviations: this times the width."""
        window = self._window
        return window.m2 / window.width if window.width else 0.0

    def _restart(self) -> None:
        self._window = ExponentialHistogram(self.max_buckets)
        self._tick = 0  # values learned since the restart; cuts are tried when it is a multiple of clock

    def _learn(self, value: float) -> bool:
        window = self._window
        window.insert(value)
        self._tick += 1
        if self._tick % self.clock or window.width <= self.grace_period:
            return False
        shrunk = False
        while self._cut_found():
            window.drop_oldest()
            shrunk = True
        return shrunk

    def _cut_found(self) -> bool:
        """Whether some cut of the window between two buckets parts means that differ significantly.

        Every term is computed as River computes it, in the same order, so that the float64
        results, and hence the detections, are the same.
        """
        window = self._window
        width, total = window.width, window.total
        shortest = self.min_window_length
        if width < 2 * shortest:  # no cut leaves shortest values on both sides (and log(log(1)) is no number)
            return False
        delta_prime = math.log(2 * math.log(width) / self.delta)
        two_thirds_delta_prime = 2.0 / 3.0 * delta_prime
        variance = window.m2 / width
        n0, n1 = 0, width  # the number of values in W0 (older) and W1 (newer)
        u0, u1 = 0.0, total  # their sums; u1 is counted down from total, as River does
        for row in reversed(window.rows):
            size = row.size
            for bucket_total in row.totals:
                n0 += size
                n1 -= size
                u0 += bucket_total
                u1 -= bucket_total
                if n1 == 0:  # W1 would be empty: every cut has been tried
                    return False
                if n0 < shortest or n1 < shortest:
                    continue
                m_recip = 1.0 / (n0 - shortest + 1) + 1.0 / (n1 - shortest + 1)
                radicand = 2 * m_recip * variance * delta_prime
                # A variance rounded below zero makes River's C sqrt NaN, and the cut insignificant.
                if radicand >= 0.0 and abs(u0 / n0 - u1 / n1) > math.sqrt(radicand) + two_thirds_delta_prime * m_recip:
                    return True
        return False

    def _stream_state(self) -> dict[str, Any]:
        window = self._window
        return {"tick": self._tick, "total": window.total, "m2": window.m2,
                "rows": [{"totals": list(row.totals), "m2s": list(row.m2s)} for row in window.rows]}

    def _restore_stream_state(self, state: dict[str, object]) -> None:
        self._tick = integer(_field(state, "tick"), "ADWIN tick", 0, _COUNT_MAX)
        self._window = ExponentialHistogram.restored(
            self.max_buckets, _field(state, "rows"), finite(_field(state, "total"), "ADWIN total"),
            finite(required(state, "m2", "drift detector state: "), "ADWIN m2"))


class BucketRow:
    """The buckets of one size in ADWIN's window, oldest first: each stands for ``size``
    consecutive values by their total and their M2 (the sum of their squared deviations from
    their own mean).

    size : the number of values in each bucket, ``2**i`` for row ``i``
    totals, m2s : one entry per bucket, oldest first
    """

    __slots__ = ("size", "totals", "m2s")

    def __init__(self, size: int, totals: list[float], m2s: list[float]) -> None:
        self.size = size
        self.totals = totals
        self.m2s = m2s


class ExponentialHistogram:
    """ADWIN's window of the latest values, kept in O(max_buckets · log width) buckets.

    ``rows[i]`` holds 1 to ``max_buckets`` buckets of ``2**i`` values each, oldest first, and
    every bucket of a row is older than every bucket of the rows before it: read from the last row
    to the first, the buckets are the window from its oldest values to its newest. A new value
    enters row 0 as a bucket of one; when a row reaches ``max_buckets + 1`` buckets, its two oldest
    merge into one bucket of the next row, which may overflow in turn. The window shrinks by its
    oldest bucket, the first of the last row.

    width : the number of values in the window
    total : their sum
    m2 : the sum of their squared deviations from their mean
    ``total`` and ``m2`` are updated value by value and bucket by bucket, never re-added from the
    buckets, so that they round as River's do.
    """

    def __init__(self, max_buckets: int) -> None:
        self.max_buckets = max_buckets
        self.rows: list[BucketRow] = []
        self.width = 0
        self.total = 0.0
        self.m2 = 0.0

    def insert(self, value: float) -> None:
        """Add the newest value: a bucket of one in row 0, then merge the rows that overflow."""
        rows = self.rows
        if not rows:
            rows.append(BucketRow(1, [], []))
        first = rows[0]
        first.totals.append(value)
        first.m2s.append(0.0)
        width = self.width = self.width + 1
        if width > 1:
            deviation = value - self.total / (width - 1)
            self.m2 += (width - 1) * deviation * deviation / width
        self.total += value
        if len(first.totals) > self.max_buckets:
            self._carry()

    def _carry(self) -> None:
        """Merge the two oldest buckets of each overflowing row into one of the next row."""
        rows = self.rows
        i = 0
        while len(rows[i].totals) > self.max_buckets:
            row = rows[i]
            if i + 1 == len(rows):
                rows.append(BucketRow(2 * row.size, [], []))
            size = row.size
            total0, total1 = row.totals[0], row.totals[1]
            between = total0 / size - total1 / size  # the difference of the two buckets' means
            merged_m2 = row.m2s[0] + row.m2s[1] + size * size * between * between / (size + size)
            rows[i + 1].totals.append(total0 + total1)
            rows[i + 1].m2s.append(merged_m2)
            del row.totals[:2], row.m2s[:2]
            i += 1

    def drop_oldest(self) -> None:
        """Remove the oldest bucket (the window keeps at least one value: a cut leaves W1)."""
        last = self.rows[-1]
        size, bucket_total, bucket_m2 = last.size, last.totals[0], last.m2s[0]
        self.width -= size
        self.total -= bucket_total
        between = bucket_total / size - self.total / self.width  # the bucket's mean less the rest's
        self.m2 -= bucket_m2 + size * self.width * between * between / (size + self.width)
        del last.totals[0], last.m2s[0]
        if not last.totals:
            self.rows.pop()

    @classmethod
    def restored(cls, max_buckets: int, rows: object, total: float, m2: float) -> ExponentialHistogram:
        """The window ``rows`` describe (``[{"totals": [...], "m2s": [...]}, ...]``, row 0 first),
        with its running ``total`` and ``m2``; ValueError when the rows break the layout."""
        if not isinstance(rows, list) or len(rows) > _MAX_ROWS:
            raise ValueError(f"ADWIN rows must be a list of at most {_MAX_ROWS} rows; got {shown(rows)}")
        window = cls(max_buckets)
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or set(row) != {"totals", "m2s"}:
                raise ValueError(f"ADWIN rows[{i}] must be an object of totals and m2s; got {shown(row)}")
            totals = floats(row["totals"], f"ADWIN rows[{i}].totals", max_buckets)
            m2s = floats(row["m2s"], f"ADWIN rows[{i}].m2s", max_buckets)
            if not totals or len(m2s) != len(totals):
                raise ValueError(f"ADWIN rows[{i}] must hold 1 to {max_buckets} buckets, as many totals as m2s")
            if min(m2s) < 0.0:
                raise ValueError(f"ADWIN rows[{i}].m2s must be non-negative")
            window.rows.append(BucketRow(1 << i, totals, m2s))
            window.width += len(totals) << i
        if window.width > _LARGEST_WIDTH:
            raise ValueError(f"ADWIN rows hold {window.width:,} values, more than the {_LARGEST_WIDTH:,} a window can")
        if not rows and (total, m2) != (0.0, 0.0):
            raise ValueError("ADWIN total and m2 must be 0 for an empty window")
        window.total, window.m2 = total, m2
        return window


