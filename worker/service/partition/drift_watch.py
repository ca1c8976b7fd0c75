"""One partition's drift watch: a drift detector (``nbstream.drift``) over the partition's
prequential errors, 1 for each wrong prediction and 0 for each right one, in the order they
were judged.

Each detection is one WARNING line (fields partition, examples, error_before, error_after) and
counts in ``nbstream_drift_detected_total{partition}``. The watch's state is plain JSON
(``to_json`` / ``DriftWatch.from_json``): the detector's whole state, where the partition's
judged stream stands, and the last ``KEPT_DETECTIONS`` detections, so that a watch restored
from it detects what the watch it was written by would have.

What a detection says of the change (``Detection``): ``error_before`` is the error rate of the
values since the previous detection (or the start), the one at which it fired included: ADWIN's
window before the cut, Page-Hinkley's running mean. ``error_after`` is ADWIN's window after
the cut; Page-Hinkley does not say where the change began, so it is the rate of the newest
``min_instances`` values (the fewest it detects on). ``examples_after`` is how many of the
newest judged examples belong to the new regime: ADWIN's window after the cut, and 0 for
Page-Hinkley.

The detector learns value by value, and the watch adds nothing measurable to that
(docs/performance.md).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbstream.drift import ADWIN, DETECTORS, DriftDetector, PageHinkley, drift_detector
from nbstream.utils.checked import INT32_MAX, INT64_MAX, integer, number, required, shown

from ...errors import ConfigError
from ...setting import Checked, setting
from ..telemetry.metrics import DRIFT_DETECTED

log = logging.getLogger(__name__)
DRIFT_DETECTORS = (*DETECTORS, "none")  # what watches each partition's prequential errors
ON_DRIFT = ("report", "reset-to-window")  # what a detected drift does beside its log line and counter

KEPT_DETECTIONS = 20  # the detections a watch's JSON keeps, newest last
_DETECTION_FIELDS = ("examples", "error_before", "error_after", "examples_after")


@dataclass(frozen=True)
class DriftConfig(Checked):
    """How each partition's prequential errors are watched (None in ServeConfig: not watched)."""
    detector: str = setting("none", "--drift-detector", choices=DRIFT_DETECTORS,
                            help="Watch each partition's prequential errors for a drift with adwin or page-hinkley "
                                 "(each one a WARNING line and counted), or none.")
    on_drift: str = setting("report", "--on-drift", choices=ON_DRIFT,
                            help="report a drift only, or reset-to-window: drop the partition's window buckets from "
                                 "before the change (needs --window).")

    @property
    def reset_to_window(self) -> bool:
        return self.on_drift == "reset-to-window"

    @classmethod
    def given(cls, **settings: Any) -> DriftConfig | None:
        """The drift settings, None with --drift-detector none."""
        watched = cls(**settings)
        if watched.detector != "none":
            return watched
        if watched.reset_to_window:
            raise ConfigError("--on-drift reset-to-window needs a --drift-detector (adwin or page-hinkley).")
        return None


@dataclass(frozen=True)
class Detection:
    """A drift detected in a partition's prequential errors.

    examples : the position, in the partition's judged stream (0 the first), of the value at
        which the detector fired
    error_before, error_after : the error rates the detector saw before and after the change
        (see the module)
    examples_after : the newest judged examples that belong to the new regime, the one at
        ``examples`` included (0: the detector does not say)
    """

    examples: int
    error_before: float
    error_after: float
    examples_after: int

    def to_json(self) -> dict[str, Any]:
        return {"examples": self.examples, "error_before": self.error_before, "error_after": self.error_after,
                "examples_after": self.examples_after}

    @classmethod
    def from_json(cls, data: object, name: str) -> Detection:
        """The detection ``to_json`` wrote; ValueError (one line, naming ``name``) for anything else."""
        if not isinstance(data, dict) or set(data) != set(_DETECTION_FIELDS):
            raise ValueError(f"{name} must be an object of {', '.join(_DETECTION_FIELDS)}; got {shown(data)}")
        examples = integer(data["examples"], f"{name}.examples", 0, INT64_MAX - 1)
        return cls(examples=examples, error_before=_rate(data["error_before"], f"{name}.error_before"),
                   error_after=_rate(data["error_after"], f"{name}.error_after"),
                   examples_after=integer(data["examples_after"], f"{name}.examples_after", 0, examples + 1))


class DriftWatch:
    """A drift detector with its default parameters over one partition's prequential errors.

    detector : "adwin" or "page-hinkley" (ValueError otherwise)
    partition : the input partition watched (labels the log lines and the counter)
    judged : the values observed since the watch began (restored ones included)
    detections : the last ``KEPT_DETECTIONS`` detections, oldest first
    """

    def __init__(self, detector: str, partition: int):
        if detector not in DETECTORS:
            raise ValueError(f"a drift watch takes one of {', '.join(DETECTORS)}; got {shown(detector)}")
        self.detector_name = detector
        self.partition = integer(partition, "partition", 0, INT32_MAX)
        DRIFT_DETECTED.labels(str(self.partition))  # reported as 0 from now on: a first detection is an increase
        self.detector: DriftDetector = drift_detector(detector)
        self.judged = 0
        self.detections: deque[Detection] = deque(maxlen=KEPT_DETECTIONS)
        # The values since the last detection (or the start): how many, how many were errors, and
        # the newest of them that Page-Hinkley's error_after is measured on (oldest first).
        self._since = 0
        self._errors_since = 0
        self._newest: list[int] = []

    @property
    def examples_since_change(self) -> int | None:
        """The newest judged examples that belong to the regime the last detection found: its
        ``examples_after`` and every example judged since. None before any detection."""
        if not self.detections:
            return None
        last = self.detections[-1]
        return last.examples_after + self.judged - 1 - last.examples

    def observe(self, errors: np.ndarray) -> list[Detection]:
        """Feed the next prequential errors, shape (n,), 1 (wrong) or 0 (right) each, in stream
        order; the detections among them, oldest first (each logged and counted)."""
        values = _checked_errors(errors)
        update = self.detector.update
        found = []
        start = 0  # where the values since the last detection begin in this batch
        for i, value in enumerate(values.tolist()):
            if update(value):  # read the detector now: the next value starts it afresh
                self._take(values[start:i + 1])
                found.append(self._detection(self.judged + i))
                self._since, self._errors_since, self._newest = 0, 0, []
                start = i + 1
        self._take(values[start:])
        self.judged += len(values)
        for detection in found:
            self._report(detection)
        self.detections.extend(found)
        return found

    def _take(self, values: np.ndarray) -> None:
        """Count values, shape (m,), among those since the last detection."""
        self._since += len(values)
        self._errors_since += int(values.sum())
        keep = _newest_kept(self.detector)
        if keep:
            self._newest = (self._newest + values[-keep:].astype(int).tolist())[-keep:]

    def _detection(self, examples: int) -> Detection:
        """What the detector that has just fired at position ``examples`` says of the change."""
        error_before = self._errors_since / self._since
        detector = self.detector
        if isinstance(detector, ADWIN):
            return Detection(examples, error_before, detector.estimation, detector.width)
        return Detection(examples, error_before, sum(self._newest) / len(self._newest), 0)

    def _report(self, detection: Detection) -> None:
        DRIFT_DETECTED.labels(str(self.partition)).inc()
        log.warning(f"drift detected by {self.detector_name} in partition {self.partition}'s prequential errors",
                    extra={"partition": self.partition, "examples": detection.examples,
                           "error_before": round(detection.error_before, 6),
                           "error_after": round(detection.error_after, 6)})

    # ---- as JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The watch as plain JSON: the detector's state, the judged stream's position, the values
        since the last detection, and the last detections."""
        return {"detector": self.detector.to_state(), "judged": self.judged, "since_detection": self._since,
                "errors_since_detection": self._errors_since, "newest_errors": list(self._newest),
                "detections": [detection.to_json() for detection in self.detections]}

    @classmethod
    def from_json(cls, data: object, detector: str, partition: int) -> DriftWatch:
        """The watch ``to_json`` wrote, for a service configured with ``detector``; ValueError, one
        line, when any field is not one such a watch writes."""
        watch = cls(detector, partition)
        try:
            watch._restore(data)
        except (ValueError, RecursionError) as error:
            raise ValueError(f"drift watch of partition {partition}: {error}") from None
        return watch

    @classmethod
    def restored(cls, data: object | None, detector: str, partition: int) -> DriftWatch:
        """The watch a partition's state left (``data``, its JSON), or a new one when it has none,
        or one that does not read: then a warning, and the partition's state goes on."""
        if data is None:
            return cls(detector, partition)
        try:
            return cls.from_json(data, detector, partition)
        except ValueError as error:
            log.warning("a partition's drift watch could not be restored from its state: a new one starts",
                        extra={"partition": partition, "problem": str(error)[:300]})
            return cls(detector, partition)

    def _restore(self, data: object) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"the state must be a JSON object; got {shown(data)}")
        state = required(data, "detector")
        if not isinstance(state, dict):
            raise ValueError(f"detector must be a JSON object; got {shown(state)}")
        kind = state.get("kind")
        if kind != self.detector_name:
            raise ValueError(f"the state is of the {shown(kind)} detector; this service watches with "
                             f"{self.detector_name}")
        restored = DriftDetector.from_state(state)
        if restored.params() != self.detector.params():
            raise ValueError(f"the detector's parameters {restored.params()} are not the service's "
                             f"{self.detector.params()}")
        judged = integer(required(data, "judged"), "judged", 0, INT64_MAX)
        since = integer(required(data, "since_detection"), "since_detection", 0, judged)
        errors_since = integer(required(data, "errors_since_detection"), "errors_since_detection", 0, since)
        newest = _newest_errors(required(data, "newest_errors"), min(since, _newest_kept(restored)), errors_since)
        detections = _detections(required(data, "detections"), judged, since, restored.n_detections)
        if restored.drift_detected != (bool(detections) and since == 0):
            raise ValueError("the detector's drift_detected disagrees with the detections and since_detection")
        self.detector, self.judged = restored, judged
        self._since, self._errors_since, self._newest = since, errors_since, newest
        self.detections.extend(detections)


def _newest_kept(detector: DriftDetector) -> int:
    """How many of the newest values since the last detection a watch keeps: Page-Hinkley's
    min_instances (at least 1), none for ADWIN."""
    return max(1, detector.min_instances) if isinstance(detector, PageHinkley) else 0


def _checked_errors(errors: np.ndarray) -> np.ndarray:
    """errors as float64 0.0 and 1.0, shape (n,); ValueError unless it holds only 0 and 1 (or bools)."""
    values = np.asarray(errors)
    if values.ndim != 1 or values.dtype.kind not in "biuf":
        raise ValueError(f"prequential errors must be a flat array of 0 and 1; got {values.dtype} of shape "
                         f"{values.shape}")
    as_floats = values.astype(np.float64)
    if not ((as_floats == 0.0) | (as_floats == 1.0)).all():
        raise ValueError("prequential errors must each be 0 (right) or 1 (wrong)")
    return as_floats


def _rate(value: object, name: str) -> float:
    rate = number(value, name)
    if rate > 1.0:
        raise ValueError(f"{name} must be an error rate from 0 to 1; got {shown(value)}")
    return rate


def _newest_errors(value: object, count: int, errors_since: int) -> list[int]:
    """The newest errors since the last detection: ``count`` of them, each 0 or 1."""
    if not isinstance(value, list) or len(value) != count or any(type(each) is not int or each not in (0, 1)
                                                                for each in value):
        raise ValueError(f"newest_errors must be a list of {count:,} 0s and 1s; got {shown(value)}")
    if sum(value) > errors_since:
        raise ValueError(f"newest_errors holds more errors than the {errors_since:,} since the last detection")
    return value


def _detections(value: object, judged: int, since: int, n_detections: int) -> list[Detection]:
    """The last detections, oldest first: in the judged stream's order, the newest where the
    values since the last detection begin, no more than the detector made."""
    if not isinstance(value, list) or len(value) > min(KEPT_DETECTIONS, n_detections):
        raise ValueError(f"detections must be a list of at most {min(KEPT_DETECTIONS, n_detections)}; "
                         f"got {shown(value)}")
    detections = [Detection.from_json(each, f"detections[{i}]") for i, each in enumerate(value)]
    positions = [detection.examples for detection in detections]
    if positions != sorted(set(positions)):
        raise ValueError("the detections must be in the order of the judged stream, one per position")
    if n_detections and (not detections or positions[-1] != judged - since - 1):
        raise ValueError(f"the last detection must be at position {judged - since - 1:,}, the value before the "
                         f"{since:,} since it")
    return detections
