"""A partition's drift watch: the detections of nbstream.drift on the same errors, what each says
of the change, its log line and counter, a restart from its JSON that detects on unchanged, and
forged JSON refused in one line."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from nbstream.drift import detections, drift_detector
from worker.service.partition.drift_watch import KEPT_DETECTIONS, Detection, DriftWatch
from worker.service.telemetry.metrics import DRIFT_DETECTED

DETECTORS = ["adwin", "page-hinkley"]


def drifting_errors(seed: int = 0, n: int = 8_000) -> np.ndarray:
    """0/1 errors at a rate of 0.1, then 0.5, then 0.1 again: shape (n,)."""
    rng = np.random.default_rng(seed)
    rates = np.r_[np.full(3 * n // 8, 0.1), np.full(n // 4, 0.5), np.full(n - 3 * n // 8 - n // 4, 0.1)]
    return (rng.random(n) < rates).astype(np.int8)


def in_batches(watch: DriftWatch, errors: np.ndarray, cuts: list[int]) -> list[Detection]:
    bounds = [0, *cuts, len(errors)]
    return [found for start, stop in zip(bounds, bounds[1:], strict=False)
            for found in watch.observe(errors[start:stop])]


def detected_total(partition: int) -> float:
    registry = CollectorRegistry()
    registry.register(DRIFT_DETECTED)
    return registry.get_sample_value("nbstream_drift_detected_total", {"partition": str(partition)}) or 0.0


@pytest.mark.parametrize("detector", DETECTORS)
@pytest.mark.parametrize("cuts", [[], [1, 2, 3, 500, 3_001, 3_002], list(range(97, 8_000, 97))],
                         ids=["whole", "uneven", "batches of 97"])
def test_the_watch_detects_where_the_detector_does_however_the_errors_are_batched(detector, cuts):
    errors = drifting_errors()
    watch = DriftWatch(detector, partition=0)
    found = in_batches(watch, errors, cuts)
    expected = detections(drift_detector(detector), errors).tolist()
    assert [detection.examples for detection in found] == expected and len(expected) >= 2
    assert watch.judged == len(errors) and list(watch.detections) == found[-KEPT_DETECTIONS:]


def test_an_adwin_detection_gives_the_window_before_and_after_the_cut():
    errors = drifting_errors()
    found = DriftWatch("adwin", partition=0).observe(errors)
    previous = -1
    for detection in found:
        at, after = detection.examples, detection.examples_after
        assert 0 < after < at - previous  # the cut kept the newest values since the previous detection, not all
        assert detection.error_before == errors[previous + 1:at + 1].mean()
        assert detection.error_after == pytest.approx(errors[at - after + 1:at + 1].mean(), abs=1e-12)
        previous = at
    assert found[0].error_before < 0.12 < 0.15 < found[0].error_after  # the rise of the error rate from 0.1 to 0.5


def test_a_page_hinkley_detection_gives_its_running_mean_and_its_newest_values():
    errors = drifting_errors()
    found = DriftWatch("page-hinkley", partition=0).observe(errors)
    previous = -1
    for detection in found:
        at = detection.examples
        assert detection.error_before == errors[previous + 1:at + 1].mean()
        assert detection.error_after == errors[at - 29:at + 1].mean()  # min_instances = 30
        assert detection.examples_after == 0
        previous = at
    assert found[0].error_before < 0.2 < 0.4 < found[0].error_after


@pytest.mark.parametrize("detector", DETECTORS)
def test_examples_since_change_counts_the_new_regime_and_every_example_after_it(detector):
    errors = drifting_errors()
    watch = DriftWatch(detector, partition=0)
    assert watch.observe(errors[:100]) == [] and watch.examples_since_change is None
    watch.observe(errors[100:])
    last = watch.detections[-1]
    assert watch.examples_since_change == last.examples_after + len(errors) - 1 - last.examples


@pytest.mark.parametrize("detector", DETECTORS)
def test_each_detection_is_one_warning_line_and_counted_by_partition(detector, caplog):
    errors = drifting_errors()
    before, other = detected_total(7), detected_total(8)
    with caplog.at_level(logging.WARNING, logger="worker.service.partition.drift_watch"):
        found = DriftWatch(detector, partition=7).observe(errors)
    assert len(caplog.records) == len(found)
    for record, detection in zip(caplog.records, found, strict=True):
        assert record.levelname == "WARNING" and "\n" not in record.getMessage()
        assert f"drift detected by {detector}" in record.getMessage()
        assert (record.partition, record.examples) == (7, detection.examples)
        assert record.error_before == pytest.approx(detection.error_before, abs=1e-6)
        assert record.error_after == pytest.approx(detection.error_after, abs=1e-6)
    assert detected_total(7) == before + len(found) and detected_total(8) == other
    assert REGISTRY.get_sample_value("nbstream_drift_detected_total", {"partition": "7"}) is None  # the service's own


def test_a_partition_s_detections_are_reported_from_zero_before_the_first():
    registry = CollectorRegistry()
    registry.register(DRIFT_DETECTED)
    assert registry.get_sample_value("nbstream_drift_detected_total", {"partition": "4321"}) is None
    DriftWatch("adwin", partition=4_321)
    assert registry.get_sample_value("nbstream_drift_detected_total", {"partition": "4321"}) == 0  # a first
    # detection is then an increase


@pytest.mark.parametrize("detector", DETECTORS)
def test_a_watch_restored_from_its_json_detects_on_as_the_watch_unbroken(detector):
    errors = drifting_errors(seed=3)
    whole = DriftWatch(detector, partition=2)
    expected = whole.observe(errors)
    fired_at = expected[0].examples
    for split in (0, 1, 31, fired_at, fired_at + 1, fired_at + 2, len(errors) - 1, len(errors)):
        first = DriftWatch(detector, partition=2)
        found = first.observe(errors[:split])
        text = json.dumps(first.to_json(), allow_nan=False)
        restored = DriftWatch.from_json(json.loads(text), detector, partition=2)
        assert restored.to_json() == first.to_json()
        found += restored.observe(errors[split:])
        assert found == expected, split
        assert restored.to_json() == whole.to_json()


def test_the_json_keeps_the_last_detections_only():
    errors = np.tile(drifting_errors(n=800), 30)
    watch = DriftWatch("page-hinkley", partition=0)
    found = watch.observe(errors)
    assert len(found) > KEPT_DETECTIONS
    kept = watch.to_json()["detections"]
    assert kept == [detection.to_json() for detection in found[-KEPT_DETECTIONS:]]
    assert DriftWatch.from_json(watch.to_json(), "page-hinkley", 0).detections == watch.detections


def forge(detector: str, change) -> dict:
    """The JSON of a watch that has detected, changed by ``change`` (in place)."""
    watch = DriftWatch(detector, partition=3)
    watch.observe(drifting_errors()[:5_000])
    data = json.loads(json.dumps(watch.to_json()))
    change(data)
    return data


def setter(*path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


FORGERIES = {
    "not an object": (lambda data: data.clear(), "no 'detector' field"),
    "another detector": (setter("detector", value=DriftWatch("page-hinkley", 0).detector.to_state()),
                         "the state is of the 'page-hinkley' detector; this service watches with adwin"),
    "detector no object": (setter("detector", value=[1]), "detector must be a JSON object"),
    "other parameters": (setter("detector", "params", "delta", value=0.5), "parameters .* are not the service's"),
    "non-finite detector total": (setter("detector", "total", value=math.inf), "ADWIN total must be a number"),
    "judged a string": (setter("judged", value="5000"), "judged must be an integer"),
    "judged a bool": (setter("judged", value=True), "judged must be an integer"),
    "judged huge": (setter("judged", value=10**30), "judged must be an integer from 0 to"),
    "judged a float": (setter("judged", value=5000.0), "judged must be an integer"),
    "negative since": (setter("since_detection", value=-1), "since_detection must be an integer from 0"),
    "since above judged": (setter("since_detection", value=5_001),
                           "since_detection must be an integer from 0 to 5,000"),
    "errors above since": (setter("errors_since_detection", value=10**6), "errors_since_detection must be"),
    "detections no list": (setter("detections", value={}), "detections must be a list"),
    "detection NaN": (setter("detections", 0, "error_before", value=math.nan),
                      r"detections\[0\].error_before must be a finite non-negative number"),
    "detection rate above 1": (setter("detections", 0, "error_after", value=1.5),
                               r"detections\[0\].error_after must be an error rate from 0 to 1"),
    "detection negative position": (setter("detections", 0, "examples", value=-3),
                                    r"detections\[0\].examples must be an integer"),
    "detection extra field": (setter("detections", 0, "note", value="x"), r"detections\[0\] must be an object of"),
    "detection moved": (setter("detections", -1, "examples", value=4_000), "the last detection must be at position"),
    "detections repeated": (lambda data: data["detections"].append(data["detections"][-1]),
                            "detections must be a list of at most 1;"),
    "detections forgotten": (setter("detections", value=[]), "the last detection must be at position"),
    "examples after too many": (setter("detections", 0, "examples_after", value=10**9),
                                r"detections\[0\].examples_after must be an integer from 0"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_watch_is_refused_in_one_line(name):
    change, match = FORGERIES[name]
    with pytest.raises(ValueError, match=match) as caught:
        DriftWatch.from_json(forge("adwin", change), "adwin", partition=3)
    message = str(caught.value)
    assert message.startswith("drift watch of partition 3: ") and "\n" not in message and len(message) < 400


@pytest.mark.parametrize("newest, match", [
    ([0] * 29, "newest_errors must be a list of 30"), ([2] * 30, "newest_errors must be a list of 30"),
    ([True] * 30, "newest_errors must be a list of 30"), ("0" * 30, "newest_errors must be a list of 30")])
def test_page_hinkley_s_newest_errors_are_checked(newest, match):
    data = forge("page-hinkley", setter("newest_errors", value=newest))
    with pytest.raises(ValueError, match=match):
        DriftWatch.from_json(data, "page-hinkley", partition=3)


def test_a_watch_that_just_fired_is_restored_only_with_its_flag():
    watch = DriftWatch("adwin", partition=0)
    errors = drifting_errors()
    first = watch.observe(errors)[0].examples
    watch = DriftWatch("adwin", partition=0)
    watch.observe(errors[:first + 1])
    data = watch.to_json()
    data["detector"]["drift_detected"] = False
    with pytest.raises(ValueError, match="drift_detected disagrees"):
        DriftWatch.from_json(data, "adwin", partition=0)


@pytest.mark.parametrize("errors", [np.array([0, 1, 2]), np.array([0.5]), np.array([[0, 1]]), np.array(["1"])])
def test_errors_other_than_0_and_1_are_refused_before_any_is_learned(errors):
    watch = DriftWatch("adwin", partition=0)
    with pytest.raises(ValueError, match="prequential errors must"):
        watch.observe(errors)
    assert watch.judged == 0 and watch.detector.width == 0


def test_bool_errors_are_taken_and_none_is_no_detector():
    errors = drifting_errors()
    assert DriftWatch("adwin", 0).observe(errors.astype(bool)) == DriftWatch("adwin", 0).observe(errors)
    with pytest.raises(ValueError, match="a drift watch takes one of adwin, page-hinkley; got 'none'"):
        DriftWatch("none", 0)
