"""Drift detectors: River's detections on the same values, states that survive a restart
anywhere in a stream, and one-line refusals of bad parameters, values and forged states."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.drift import ADWIN, LARGEST_DRIFT_VALUE, DriftDetector, PageHinkley, detections, drift_detector

try:
    from river import drift as river_drift
except ImportError:  # River is the reference; the test extra installs it
    river_drift = None

needs_river = pytest.mark.skipif(river_drift is None, reason="river is not installed (pip install river): "
                                                             "the detections are compared with River's")


def bernoulli(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    """0/1 errors, shape p.shape, 1 with probability p."""
    return (rng.random(p.shape) < p).astype(np.float64)


def stream(name: str) -> np.ndarray:
    """Seeded streams of prequential errors (or of values in [0, 1]), shape (n,)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "no change":
        return bernoulli(rng, np.full(20_000, 0.1))
    if name == "abrupt":  # 0.1 -> 0.5 at 5,000
        return bernoulli(rng, np.where(np.arange(12_000) < 5_000, 0.1, 0.5))
    if name == "gradual":  # 0.1 -> 0.5 over 5,000 .. 10,000
        return bernoulli(rng, np.interp(np.arange(15_000), [5_000, 10_000], [0.1, 0.5]))
    if name == "recurring":  # 0.1 and 0.4 in turns of 3,000
        return bernoulli(rng, np.tile(np.repeat([0.1, 0.4], 3_000), 5))
    if name == "unit interval":  # values in [0, 1]: Beta(3, 7) of mean 0.3, then Beta(6, 4) of mean 0.6 from 6,000
        before = np.arange(12_000) < 6_000
        return rng.beta(np.where(before, 3.0, 6.0), np.where(before, 7.0, 4.0))
    raise AssertionError(name)


STREAMS = ["no change", "abrupt", "gradual", "recurring", "unit interval"]
CHANGING = set(STREAMS) - {"no change"}

ADWIN_PARAMS = [
    {},
    {"clock": 1},
    {"delta": 0.05, "clock": 1, "max_buckets": 2, "min_window_length": 1, "grace_period": 0},
    {"delta": 1e-5, "clock": 7, "max_buckets": 3, "min_window_length": 20, "grace_period": 100},
]
PAGE_HINKLEY_PARAMS = [
    {},
    {"mode": "up", "threshold": 10.0},
    {"mode": "down", "threshold": 5.0, "alpha": 0.99},
    {"min_instances": 0, "delta": 0.0, "threshold": 20.0, "alpha": 1.0},
]
KINDS = [(ADWIN, "ADWIN", params) for params in ADWIN_PARAMS] \
    + [(PageHinkley, "PageHinkley", params) for params in PAGE_HINKLEY_PARAMS]
KIND_IDS = [f"{name}{params}" for _, name, params in KINDS]


def rivers_detections(name: str, params: dict, values: np.ndarray) -> list[int]:
    detector = getattr(river_drift, name)(**params)
    found = []
    for i, value in enumerate(values.tolist()):
        detector.update(value)
        if detector.drift_detected:
            found.append(i)
    return found


def plain_json(state: dict) -> dict:
    """The state through a strict JSON text and back (no NaN, no infinity, no numpy scalars)."""
    return json.loads(json.dumps(state, allow_nan=False))


# --- the same detections as River ---------------------------------------------------------------

@needs_river
@pytest.mark.parametrize("name", STREAMS)
@pytest.mark.parametrize(("detector_type", "river_name", "params"), KINDS, ids=KIND_IDS)
def test_detections_are_rivers(detector_type, river_name, params, name):
    values = stream(name)
    expected = rivers_detections(river_name, params, values)
    assert detections(detector_type(**params), values).tolist() == expected
    if name in CHANGING and params == {}:  # the streams are worth comparing on
        assert expected


def test_the_default_detectors_find_the_abrupt_change_soon_after_it_and_nothing_before():
    values = stream("abrupt")
    for detector in (ADWIN(), PageHinkley()):
        found = detections(detector, values)
        assert found.dtype == np.int64 and 5_000 <= found[0] < 5_300, (detector, found)


@needs_river
@pytest.mark.parametrize("params", ADWIN_PARAMS[:3], ids=str)
def test_adwins_window_is_rivers_value_by_value(params):
    ours, theirs = ADWIN(**params), river_drift.ADWIN(**params)
    n_detections = 0
    for value in stream("recurring")[:9_000].tolist():
        detected = ours.update(value)
        theirs.update(value)
        assert detected == ours.drift_detected == theirs.drift_detected
        n_detections += theirs.drift_detected
        # River's variance is the window's sum of squared deviations; ours is divided by the width
        assert (ours.width, ours.estimation, ours.variance, ours.n_detections) \
            == (theirs.width, theirs.estimation, theirs.variance / theirs.width, n_detections)
    assert n_detections >= 2


@pytest.mark.parametrize(("grace_period", "clock", "expected"), [(19, 1, 19), (20, 1, 20), (20, 4, 23), (24, 4, 27)])
def test_adwin_tries_cuts_on_the_clock_once_the_window_is_longer_than_the_grace_period(grace_period, clock, expected):
    values = [0.0] * 10 + [1.0] * 20  # so plain a change that the first cuts tried find it
    adwin = ADWIN(delta=0.5, clock=clock, grace_period=grace_period, min_window_length=1)
    assert detections(adwin, values).tolist() == [expected]


@needs_river
@settings(max_examples=150, deadline=None)
@given(delta=st.floats(1e-4, 0.9), clock=st.integers(1, 6), max_buckets=st.integers(2, 4),
       min_window_length=st.integers(1, 8), grace_period=st.integers(0, 40),
       before=st.floats(0, 1), after=st.floats(0, 1), lengths=st.tuples(st.integers(0, 400), st.integers(0, 400)),
       seed=st.integers(0, 2**32 - 1))
def test_adwin_with_any_parameters_on_any_change_detects_as_river_does(
        delta, clock, max_buckets, min_window_length, grace_period, before, after, lengths, seed):
    params = {"delta": delta, "clock": clock, "max_buckets": max_buckets, "min_window_length": min_window_length,
              "grace_period": grace_period}
    values = bernoulli(np.random.default_rng(seed), np.repeat([before, after], lengths))
    assert detections(ADWIN(**params), values).tolist() == rivers_detections("ADWIN", params, values)


# --- states --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["recurring", "unit interval"])
@pytest.mark.parametrize(("detector_type", "river_name", "params"), KINDS, ids=KIND_IDS)
def test_a_stream_split_anywhere_and_restored_in_between_detects_as_the_stream_unsplit(
        detector_type, river_name, params, name):
    values = stream(name)[:9_000]
    unsplit = detector_type(**params)
    expected = detections(unsplit, values)
    rng = np.random.default_rng(len(params))
    # random places, and the values right after detections (a state whose drift_detected is true)
    splits = np.unique(np.concatenate([rng.integers(0, values.size, 12), expected + 1, [0, values.size]]))
    detector: DriftDetector = detector_type(**params)
    found = []
    for start, stop in zip(splits[:-1], splits[1:], strict=True):
        detector = DriftDetector.from_state(plain_json(detector.to_state()))
        found.extend(start + detections(detector, values[start:stop]))
    assert found == expected.tolist()
    assert type(detector) is detector_type and detector.n_detections == expected.size == unsplit.n_detections
    assert detector.to_state() == unsplit.to_state()


@pytest.mark.parametrize("detector_type", [ADWIN, PageHinkley])
def test_a_state_is_plain_json_and_a_class_restores_its_own_kind_only(detector_type):
    detector = detector_type()
    detections(detector, stream("abrupt")[:5_100])
    state = detector.to_state()
    assert plain_json(state) == state and state["kind"] == detector.kind and state["params"] == detector.params()
    assert type(detector_type.from_state(state)) is detector_type
    other = PageHinkley if detector_type is ADWIN else ADWIN
    with pytest.raises(ValueError, match=f"a {detector.kind} state is no {other.kind} state"):
        other.from_state(state)


def test_numpy_parameters_become_plain_numbers_in_the_state():
    state = ADWIN(delta=np.float32(0.25), clock=np.int64(8)).to_state()
    assert plain_json(state) == state
    assert type(state["params"]["clock"]) is int and type(state["params"]["delta"]) is float


def test_a_fresh_adwins_state_and_an_empty_window():
    state = ADWIN().to_state()
    assert (state["rows"], state["tick"], state["total"], state["n_detections"]) == ([], 0, 0.0, 0)
    restored = ADWIN.from_state(state)
    assert (restored.width, restored.estimation, restored.variance, restored.drift_detected) == (0, 0.0, 0.0, False)


def test_adwins_rows_hold_buckets_of_doubling_sizes_oldest_last():
    detector = ADWIN(max_buckets=2, grace_period=10**6)
    for value in range(1, 12):  # 11 values: buckets of 1 + 2 + 4 + 4 values
        detector.update(float(value))
    rows = detector.to_state()["rows"]
    assert rows == [{"totals": [11.0], "m2s": [0.0]},
                    {"totals": [9.0 + 10], "m2s": [0.5]},
                    {"totals": [1.0 + 2 + 3 + 4, 5.0 + 6 + 7 + 8], "m2s": [5.0, 5.0]}]
    assert detector.width == 11 and detector.estimation == 6.0 and detector.variance == pytest.approx(10.0)


# --- forged states --------------------------------------------------------------------------------

def adwin_state() -> dict:
    detector = ADWIN(clock=1)
    detections(detector, stream("abrupt")[:3_000])
    state = detector.to_state()
    assert len(state["rows"]) >= 5 and state["rows"][2]["totals"]
    return state


def page_hinkley_state() -> dict:
    detector = PageHinkley()
    detections(detector, stream("abrupt")[:3_000])
    return detector.to_state()


def forged(base, change):
    def forge():
        state = copy.deepcopy(base())
        change(state)
        return state
    return forge


def setting(*path_and_value):
    *path, key, value = path_and_value

    def change(state):
        for step in path:
            state = state[step]
        state[key] = value
    return change


def removing(key):
    return lambda state: state.pop(key)


FORGERIES = {
    "not an object": (lambda: [1, 2], "must be a JSON object; got a list of 2 entries"),
    "unknown kind": (forged(adwin_state, setting("kind", "kswin")), "kind must be one of adwin, page-hinkley"),
    "kind as a list": (forged(adwin_state, setting("kind", ["adwin"])), "kind must be one of .*; got a list"),
    "no kind": (forged(adwin_state, removing("kind")), "no 'kind' field"),
    "params not an object": (forged(adwin_state, setting("params", 5)), "adwin parameters must be a JSON object"),
    "unknown parameter": (forged(adwin_state, setting("params", "warm", 1)), "adwin has no parameter 'warm'"),
    "delta of 2": (forged(adwin_state, setting("params", "delta", 2.0)), r"ADWIN delta must be a number in \(0, 1\)"),
    "clock as a float": (forged(adwin_state, setting("params", "clock", 32.0)), "ADWIN clock must be an integer"),
    "drift_detected as text": (forged(adwin_state, setting("drift_detected", "no")), "must be true or false"),
    "negative detections": (forged(adwin_state, setting("n_detections", -1)), "n_detections must be an integer from 0"),
    "detections as true": (forged(adwin_state, setting("n_detections", True)), "n_detections must be an integer"),
    "huge tick": (forged(adwin_state, setting("tick", 10**40)), "ADWIN tick must be an integer from 0"),
    "no total": (forged(adwin_state, removing("total")), "no 'total' field"),
    "NaN total": (forged(adwin_state, setting("total", float("nan"))), "ADWIN total must be a number"),
    "infinite m2": (forged(adwin_state, setting("m2", float("inf"))), "ADWIN m2 must be a number"),
    "400-digit total": (forged(adwin_state, setting("total", 10**400)), "ADWIN total must be a number"),
    "m2 as text": (forged(adwin_state, setting("m2", "1.5")), "ADWIN m2 must be a number"),
    "rows not a list": (forged(adwin_state, setting("rows", {"totals": []})), "ADWIN rows must be a list"),
    "54 rows": (forged(adwin_state, setting("rows", [{"totals": [1.0], "m2s": [0.0]}] * 54)), "at most 53 rows"),
    "a row too long": (forged(adwin_state, setting("rows", 0, "totals", [0.0] * 6)),
                       r"ADWIN rows\[0\].totals must be a list of at most 5 numbers"),
    "a row of a million": (forged(adwin_state, setting("rows", 1, "m2s", [0.0] * 10**6)),
                           r"ADWIN rows\[1\].m2s must be a list of at most 5 numbers; got a list of 1,000,000"),
    "an empty row": (forged(adwin_state, setting("rows", 2, {"totals": [], "m2s": []})), "must hold 1 to 5 buckets"),
    "fewer m2s than totals": (forged(adwin_state, setting("rows", 2, "m2s", [])), "as many totals as m2s"),
    "a row with another key": (forged(adwin_state, setting("rows", 1, "sizes", [2])), "an object of totals and m2s"),
    "a row that is a list": (forged(adwin_state, setting("rows", 1, [[1.0], [0.0]])), "an object of totals and m2s"),
    "a NaN bucket total": (forged(adwin_state, setting("rows", 2, "totals", 0, float("nan"))),
                           r"ADWIN rows\[2\].totals\[0\] must be a number"),
    "a negative bucket m2": (forged(adwin_state, setting("rows", 2, "m2s", 0, -1.0)), "m2s must be non-negative"),
    "more values than 2**53": (
        forged(adwin_state, lambda state: state.update(params={**state["params"], "max_buckets": 100},
                                                       rows=[{"totals": [0.0] * 4, "m2s": [0.0] * 4}] * 53)),
        "more than the 9,007,199,254,740,992 a window can"),
    "an empty window with a total": (forged(adwin_state, lambda state: state.update(rows=[], total=3.0)),
                                     "ADWIN total and m2 must be 0 for an empty window"),
    "page-hinkley state in adwin's kind": (forged(page_hinkley_state, setting("kind", "adwin")),
                                           "adwin has no parameter 'min_instances', 'threshold', 'alpha'; "
                                           "its parameters are delta, clock"),
    "page-hinkley mode": (forged(page_hinkley_state, setting("params", "mode", "sideways")),
                          "PageHinkley mode must be one of up, down, both; got 'sideways'"),
    "page-hinkley negative n": (forged(page_hinkley_state, setting("n", -5)), "PageHinkley n must be an integer"),
    "page-hinkley NaN mean": (forged(page_hinkley_state, setting("mean", float("nan"))), "PageHinkley mean must be"),
    "page-hinkley no minimum": (forged(page_hinkley_state, setting("min_increase", None)),
                                "PageHinkley min_increase must be a number"),
    "page-hinkley minimum before any value": (forged(page_hinkley_state, setting("n", 0)),
                                              "min_increase must be null before the first value"),
    "page-hinkley minimum above the sum": (forged(page_hinkley_state, setting("min_increase", 1e9)),
                                           "min_increase must be at most sum_increase"),
    "page-hinkley maximum below the sum": (forged(page_hinkley_state, setting("max_decrease", -1e9)),
                                           "max_decrease at least sum_decrease"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_state_is_refused_with_one_line(forgery):
    make, message = FORGERIES[forgery]
    with pytest.raises(ValueError, match=message) as caught:
        DriftDetector.from_state(make())
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_the_unforged_states_are_taken():
    assert DriftDetector.from_state(adwin_state()).width > 0
    assert DriftDetector.from_state(page_hinkley_state()).n_detections == 0


# --- parameters, values and the factory ------------------------------------------------------------

@pytest.mark.parametrize(("detector_type", "params", "message"), [
    (ADWIN, {"delta": 0.0}, r"ADWIN delta must be a number in \(0, 1\); got 0.0"),
    (ADWIN, {"delta": 1.0}, r"ADWIN delta must be a number in \(0, 1\)"),
    (ADWIN, {"delta": -0.1}, "ADWIN delta"),
    (ADWIN, {"delta": float("nan")}, "ADWIN delta"),
    (ADWIN, {"delta": True}, "ADWIN delta"),
    (ADWIN, {"delta": "0.1"}, "ADWIN delta must be a number in .*; got '0.1'"),
    (ADWIN, {"clock": 0}, "ADWIN clock must be an integer from 1 to 2,147,483,647; got 0"),
    (ADWIN, {"clock": 2.0}, "ADWIN clock"),
    (ADWIN, {"clock": True}, "ADWIN clock"),
    (ADWIN, {"max_buckets": 1}, "ADWIN max_buckets must be an integer from 2"),
    (ADWIN, {"min_window_length": 0}, "ADWIN min_window_length must be an integer from 1"),
    (ADWIN, {"grace_period": -1}, "ADWIN grace_period must be an integer from 0"),
    (ADWIN, {"grace_period": 2**31}, "ADWIN grace_period"),
    (PageHinkley, {"min_instances": -1}, "PageHinkley min_instances must be an integer from 0"),
    (PageHinkley, {"delta": -0.5}, "PageHinkley delta must be a finite non-negative number"),
    (PageHinkley, {"threshold": 0.0}, r"PageHinkley threshold must be a number in \(0, inf\)"),
    (PageHinkley, {"threshold": float("inf")}, "PageHinkley threshold"),
    (PageHinkley, {"alpha": 0.0}, r"PageHinkley alpha must be a number in \(0, 1\]"),
    (PageHinkley, {"alpha": 1.5}, "PageHinkley alpha"),
    (PageHinkley, {"mode": "UP"}, "PageHinkley mode must be one of up, down, both; got 'UP'"),
])
def test_parameters_out_of_range_are_refused(detector_type, params, message):
    with pytest.raises(ValueError, match=message):
        detector_type(**params)


def test_the_defaults_are_rivers():
    assert ADWIN().params() == {"delta": 0.002, "clock": 32, "max_buckets": 5, "min_window_length": 5,
                                "grace_period": 10}
    assert PageHinkley().params() == {"min_instances": 30, "delta": 0.005, "threshold": 50.0, "alpha": 1 - 0.0001,
                                      "mode": "both"}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1.01 * LARGEST_DRIFT_VALUE, 10**400,
                                   "1", None, True])
@pytest.mark.parametrize("detector_type", [ADWIN, PageHinkley])
def test_a_value_that_is_no_finite_number_is_refused_and_changes_nothing(detector_type, value):
    detector = detector_type()
    detections(detector, stream("abrupt")[:200])
    before = detector.to_state()
    with pytest.raises(ValueError, match="drift detector value must be") as caught:
        detector.update(value)
    assert "\n" not in str(caught.value)
    assert detector.to_state() == before


def test_numbers_of_any_kind_are_values():
    values = [0, 1.0, np.float32(0.5), np.int8(1), np.float64(0.0)]
    by_update = ADWIN(clock=1, grace_period=0, min_window_length=1)
    for value in values:
        by_update.update(value)
    assert by_update.width == 5 and by_update.estimation == 0.5
    assert detections(ADWIN(), np.array([True, False])).size == 0


def test_detections_refuses_a_batch_with_a_bad_value_before_learning_any():
    detector = PageHinkley(min_instances=1, threshold=1.0)
    values = np.concatenate([np.zeros(50), np.ones(50), [np.nan]])
    with pytest.raises(ValueError, match="drift detector value at position 100 must be finite"):
        detections(detector, values)
    assert detector.to_state() == PageHinkley(min_instances=1, threshold=1.0).to_state()
    with pytest.raises(ValueError, match=r"a flat sequence of numbers; got float64 of shape \(2, 2\)"):
        detections(detector, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="a flat sequence of numbers; got <U1"):
        detections(detector, ["a"])
    assert detections(detector, []).tolist() == [] and detections(detector, values[:100]).tolist() == [51]


def test_drift_detector_makes_either_kind_by_name():
    adwin = drift_detector("adwin", delta=0.01, clock=4)
    assert type(adwin) is ADWIN and adwin.params()["delta"] == 0.01 and adwin.params()["clock"] == 4
    assert drift_detector("page-hinkley").params() == PageHinkley().params()
    with pytest.raises(ValueError, match="unknown drift detector 'ddm'; the detectors are adwin, page-hinkley"):
        drift_detector("ddm")
    with pytest.raises(ValueError, match="page-hinkley has no parameter 'clock'; its parameters are min_instances, "):
        drift_detector("page-hinkley", clock=3)


def test_a_detection_restarts_the_detector_at_the_next_value_and_keeps_counting():
    detector = ADWIN()
    found = detections(detector, stream("recurring"))
    assert found.size >= 3 and detector.n_detections == found.size
    detector = ADWIN()
    detections(detector, stream("recurring")[:found[0] + 1])
    assert detector.drift_detected and detector.width > 32
    assert detector.update(0.0) is False and detector.width == 1 and detector.n_detections == 1
    assert repr(detector) == "ADWIN(delta=0.002, clock=32, max_buckets=5, min_window_length=5, grace_period=10)"
