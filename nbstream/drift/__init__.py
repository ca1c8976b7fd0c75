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


from .adwin import ADWIN
from .base import LARGEST_DRIFT_VALUE, DriftDetector
from .detectors import DETECTORS, detections, drift_detector
from .page_hinkley import PageHinkley

__all__ = ["ADWIN", "DETECTORS", "LARGEST_DRIFT_VALUE", "DriftDetector", "PageHinkley", "detections", "drift_detector"]
