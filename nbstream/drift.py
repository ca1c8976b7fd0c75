"""Concept-drift detectors for a stream of numbers, such as a model's prequential errors (1 for a
wrong prediction, 0 for a right one): ``ADWIN`` and ``PageHinkley``.

Both behave as River's ``river.drift.ADWIN`` and ``river.drift.PageHinkley`` (River 0.22): the
same parameters and defaults, and the same detections on the same values, River's habit included
of starting afresh (an empty window, new running sums) at the value that follows a detection.
``n_detections`` counts every detection since the detector was made.

A detector's state is plain JSON (``to_state``) and ``DriftDetector.from_state`` makes the
detector again, checking every field, so that a stream split anywhere and restored in between
gives the same detections as the stream unsplit.

ADWIN costs amortised O(log W) per value for a window of W values. On 1e6 Bernoulli(0.1) values
with the default parameters (no drift: the window grows to all 1e6 values, in 18 rows of buckets)
it learns about 800,000 values a second on one core, River's Cython ADWIN about 500,000;
Page-Hinkley about 2,000,000.

>>> from nbstream.drift import ADWIN, PageHinkley, detections
>>> errors = [0.0, 1.0] * 1_000 + [1.0] * 200  # 50% wrong, then every prediction wrong
>>> detections(ADWIN(), errors).tolist()
[2047]
>>> detections(PageHinkley(threshold=20.0), errors).tolist()
[2039]
>>> first = ADWIN()  # the same stream, with a restart after 1,500 values
>>> detections(first, errors[:1_500]).tolist(), first.width, first.estimation
([], 1500, 0.5)
>>> again = ADWIN.from_state(first.to_state())
>>> (1_500 + detections(again, errors[1_500:])).tolist()
[2047]
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable
from typing import Any, ClassVar, Self

import numpy as np

from .checked import as_number, finite, floats, integer, number, required, shown
from .ndarrays import IntArray

# The largest magnitude a detector takes: the sums of squared deviations of any stream of such
# values stay far from float64's overflow, and every state stays finite JSON.
LARGEST_DRIFT_VALUE = 1e100
_C_INT_MAX = (1 << 31) - 1  # River keeps the integer parameters as C ints
_COUNT_MAX = (1 << 63) - 1  # counts of values and of detections: int64
_LARGEST_WIDTH = 1 << 53  # ADWIN's window stays within float64's exact integers, as River's float width does
_MAX_ROWS = 53  # rows of buckets of 1, 2, 4, ... 2**52 values


class DriftDetector(abc.ABC):
    """What every detector offers: ``update`` one value at a time, the flag of the last update,
    the count of detections, and a plain JSON state (``to_state`` / ``from_state``)."""

    kind: ClassVar[str]  # the name in a state and in ``drift_detector``
    parameters: ClassVar[tuple[str, ...]]  # the constructor's, kept as attributes of these names

    def __init__(self) -> None:
        self._drift_detected = False
        self._n_detections = 0

    def update(self, x: float) -> bool:
        """Learn one value (finite, at most ``LARGEST_DRIFT_VALUE`` in magnitude); True when a drift is
        detected at it. The value after a detection starts the detector afresh, as River's do."""
        value = _checked_value(x)
        if self._drift_detected:
            self._restart()
        detected = self._drift_detected = self._learn(value)
        if detected:
            self._n_detections += 1
        return detected

    @property
    def drift_detected(self) -> bool:
        """Whether the last update detected a drift."""
        return self._drift_detected

    @property
    def n_detections(self) -> int:
        """The drifts detected since the detector was made (restored states included)."""
        return self._n_detections

    def params(self) -> dict[str, Any]:
        """The constructor's parameters by name."""
        return {name: getattr(self, name) for name in self.parameters}

    @abc.abstractmethod
    def _restart(self) -> None:
        """Forget the values learned so far (not the parameters, not ``n_detections``)."""

    @abc.abstractmethod
    def _learn(self, value: float) -> bool:
        """Learn a checked value; True when it shows a drift."""

    @abc.abstractmethod
    def _stream_state(self) -> dict[str, Any]:
        """What the detector learned from the values since its last restart, as plain JSON."""

    @abc.abstractmethod
    def _restore_stream_state(self, state: dict[str, object]) -> None:
        """Take back what ``_stream_state`` gave, checking every field (ValueError)."""

    def to_state(self) -> dict[str, Any]:
        """The detector as plain JSON values (str, bool, int, float, lists and objects of them)."""
        return {"kind": self.kind, "params": self.params(), "drift_detected": self._drift_detected,
                "n_detections": self._n_detections, **self._stream_state()}

    @classmethod
    def from_state(cls, state: object) -> Self:
        """The detector a ``to_state`` describes (on ``DriftDetector``: of whichever kind it names).
        A state that is not one a detector can write is refused with one ValueError line."""
        if not isinstance(state, dict):
            raise ValueError(f"a drift detector state must be a JSON object; got {shown(state)}")
        kind = _field(state, "kind")
        if not isinstance(kind, str) or kind not in DETECTORS:
            raise ValueError(f"drift detector state: kind must be one of {', '.join(DETECTORS)}; got {shown(kind)}")
        detector_type = DETECTORS[kind]
        if not issubclass(detector_type, cls):
            raise ValueError(f"drift detector state: a {kind} state is no {cls.kind} state")
        if detector_type is not cls:
            return detector_type.from_state(state)
        detector = cls(**_checked_params(cls, _field(state, "params")))
        drift_detected = _field(state, "drift_detected")
        if not isinstance(drift_detected, bool):
            raise ValueError(f"drift detector state: drift_detected must be true or false; "
                             f"got {shown(drift_detected)}")
        detector._drift_detected = drift_detected
        detector._n_detections = integer(_field(state, "n_detections"), "n_detections", 0, _COUNT_MAX)
        detector._restore_stream_state(state)
        return detector

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={value!r}' for name, value in self.params().items())})"


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


class PageHinkley(DriftDetector):
    """The Page-Hinkley test (Page, 1954): a CUSUM of the values' deviations from their running
    mean, with forgetting; a drift when the sum rises (or falls) more than ``threshold`` above its
    lowest (below its highest).

    min_instances : no drift is reported before this many values
    delta : the deviation tolerated without counting (finite, 0 or more)
    threshold : the change that makes a drift (lambda; finite, above 0)
    alpha : the forgetting factor of the sums, in (0, 1]
    mode : "up" watches increases of the mean, "down" decreases, "both" either
    """

    kind = "page-hinkley"
    parameters = ("min_instances", "delta", "threshold", "alpha", "mode")
    MODES = ("up", "down", "both")

    def __init__(self, min_instances: int = 30, delta: float = 0.005, threshold: float = 50.0,
                 alpha: float = 1 - 0.0001, mode: str = "both") -> None:
        super().__init__()
        self.min_instances = integer(min_instances, "PageHinkley min_instances", 0, _COUNT_MAX)
        self.delta = number(delta, "PageHinkley delta", 0.0, math.inf, open_high=True)
        self.threshold = number(threshold, "PageHinkley threshold", 0.0, math.inf, open_low=True, open_high=True)
        self.alpha = number(alpha, "PageHinkley alpha", 0.0, 1.0, open_low=True)
        if mode not in self.MODES:
            raise ValueError(f"PageHinkley mode must be one of {', '.join(self.MODES)}; got {shown(mode)}")
        self.mode = mode
        self._restart()

    def _restart(self) -> None:
        self._n = 0  # values since the restart
        self._mean = 0.0
        self._sum_increase = 0.0
        self._sum_decrease = 0.0
        self._min_increase = math.inf  # the lowest _sum_increase so far (none before the first value)
        self._max_decrease = -1.0  # the highest _sum_decrease so far, or River's start of -1

    def _learn(self, value: float) -> bool:
        self._n += 1
        self._mean += (1.0 / self._n) * (value - self._mean)
        deviation = value - self._mean
        self._sum_increase = self.alpha * self._sum_increase + deviation - self.delta
        self._sum_decrease = self.alpha * self._sum_decrease + deviation + self.delta
        self._min_increase = min(self._min_increase, self._sum_increase)
        self._max_decrease = max(self._max_decrease, self._sum_decrease)
        if self._n < self.min_instances:
            return False
        rise = self._sum_increase - self._min_increase > self.threshold
        fall = self._max_decrease - self._sum_decrease > self.threshold
        return rise if self.mode == "up" else fall if self.mode == "down" else rise or fall

    def _stream_state(self) -> dict[str, Any]:
        return {"n": self._n, "mean": self._mean, "sum_increase": self._sum_increase,
                "sum_decrease": self._sum_decrease,
                "min_increase": self._min_increase if self._n else None, "max_decrease": self._max_decrease}

    def _restore_stream_state(self, state: dict[str, object]) -> None:
        self._n = integer(_field(state, "n"), "PageHinkley n", 0, _COUNT_MAX)
        self._mean = finite(_field(state, "mean"), "PageHinkley mean")
        self._sum_increase = finite(_field(state, "sum_increase"), "PageHinkley sum_increase")
        self._sum_decrease = finite(_field(state, "sum_decrease"), "PageHinkley sum_decrease")
        self._max_decrease = finite(_field(state, "max_decrease"), "PageHinkley max_decrease")
        min_increase = _field(state, "min_increase")
        if self._n == 0:
            if min_increase is not None:
                raise ValueError("PageHinkley min_increase must be null before the first value")
            self._min_increase = math.inf
        else:
            self._min_increase = finite(min_increase, "PageHinkley min_increase")
            if self._min_increase > self._sum_increase or self._max_decrease < self._sum_decrease:
                raise ValueError("PageHinkley min_increase must be at most sum_increase, and max_decrease at least "
                                 "sum_decrease")


DETECTORS: dict[str, type[DriftDetector]] = {ADWIN.kind: ADWIN, PageHinkley.kind: PageHinkley}


def drift_detector(name: str, **params: Any) -> DriftDetector:
    """A new detector: ``"adwin"`` (``ADWIN``) or ``"page-hinkley"`` (``PageHinkley``), with the
    given constructor parameters. ValueError for another name or an unknown parameter.

    >>> drift_detector("page-hinkley", threshold=25.0)
    PageHinkley(min_instances=30, delta=0.005, threshold=25.0, alpha=0.9999, mode='both')
    """
    if not isinstance(name, str) or name not in DETECTORS:
        raise ValueError(f"unknown drift detector {shown(name)}; the detectors are {', '.join(DETECTORS)}")
    detector_type = DETECTORS[name]
    return detector_type(**_checked_params(detector_type, params))


def detections(detector: DriftDetector, values: Iterable[float] | np.ndarray) -> IntArray:
    """Feed ``values`` (shape (n,)) to ``detector`` in order; the positions where it detected a
    drift, shape (n_detections,), int64. Values that are not all finite numbers of magnitude at
    most ``LARGEST_DRIFT_VALUE`` are refused before the detector learns any of them."""
    array = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if array.ndim != 1 or not (array.dtype.kind in "biuf" or array.size == 0):
        raise ValueError(f"drift detector values must be a flat sequence of numbers; got {array.dtype} "
                         f"of shape {array.shape}")
    as_floats = array.astype(np.float64, copy=False)
    outside = ~(np.abs(as_floats) <= LARGEST_DRIFT_VALUE)
    if outside.any():
        first = int(np.argmax(outside))
        _checked_value(float(as_floats[first]), f"drift detector value at position {first}")
    update = detector.update
    return np.array([i for i, value in enumerate(as_floats.tolist()) if update(value)], dtype=np.int64)


# The checks of parameters and of state fields: each passes a good value on (as a plain int or
# float) and raises a one-line ValueError naming the field for a bad one.

def _checked_params(detector_type: type[DriftDetector], params: object) -> dict[str, Any]:
    """params when it is a dict whose keys are all parameters of detector_type (their values are
    the constructor's to check)."""
    if not isinstance(params, dict):
        raise ValueError(f"{detector_type.kind} parameters must be a JSON object; got {shown(params)}")
    unknown = [shown(name) for name in params if name not in detector_type.parameters]
    if unknown:
        raise ValueError(f"{detector_type.kind} has no parameter {', '.join(unknown[:3])}; its parameters are "
                         f"{', '.join(detector_type.parameters)}")
    return params


def _checked_value(x: object, name: str = "drift detector value") -> float:
    """x as a float when it is a real number of magnitude at most LARGEST_DRIFT_VALUE."""
    value = x if type(x) is float else as_number(x)
    if value is None:
        raise ValueError(f"{name} must be a number; got {shown(x)}")
    if not -LARGEST_DRIFT_VALUE <= value <= LARGEST_DRIFT_VALUE:
        raise ValueError(f"{name} must be finite and at most {LARGEST_DRIFT_VALUE:g} in magnitude; got {shown(x)}")
    return value


def _field(state: dict[str, object], key: str) -> object:
    return required(state, key, "drift detector state: ")
