"""The detectors by name (``drift_detector``), and a stream of values fed to one (``detections``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..utils.checked import shown
from ..utils.ndarrays import IntArray
from .adwin import ADWIN

# The largest magnitude a detector takes: the sums of squared deviations of any stream of such
# values stay far from float64's overflow, and every state stays finite JSON.
from .base import LARGEST_DRIFT_VALUE, DriftDetector, _checked_params, _checked_value
from .page_hinkley import PageHinkley

DETECTORS: dict[str, type[DriftDetector]] = {ADWIN.kind: ADWIN, PageHinkley.kind: PageHinkley}  # in this order


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
