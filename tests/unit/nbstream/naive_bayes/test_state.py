"""The learned state as plain values: exported, checked, and made into a model again."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import nbstream
from nbstream import ModelState

FAMILIES = [
    (nbstream.BernoulliNB, {"alpha": np.linspace(0.5, 1.5, 4), "binarize": 1.5}),
    (nbstream.MultinomialNB, {"class_prior": [0.2, 0.3, 0.5], "half_life": 500.0}),
    (nbstream.ComplementNB, {"norm": True}),
    (nbstream.GaussianNB, {"var_smoothing": 1e-6}),
    (nbstream.CategoricalNB, {"min_categories": 6, "alpha": 0.5}),
]
IDS = [family.__name__ for family, _ in FAMILIES]


def data(rng, n=120):
    return rng.integers(0, 5, size=(n, 4)), rng.choice(["x", "yy", "zzz"], size=n)


@pytest.fixture(params=FAMILIES, ids=IDS)
def fitted(request, rng):
    family, params = request.param
    X, y = data(rng)
    return family(**params).partial_fit(X[:80], y[:80]), X, y


def test_a_model_made_from_the_exported_state_predicts_bit_identically_and_keeps_learning(fitted):
    model, X, y = fitted
    state = model.export_state()
    again = type(model).from_state(state)
    assert state.kind == model.kind and state.n_features == 4 and state.examples_seen == 80
    assert state.classes.tolist() == model.classes_.tolist() and state.open_classes
    assert list(state.statistics) == list(type(model)._statistics_type.names)
    np.testing.assert_array_equal(again.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    again.partial_fit(X[80:], y[80:])
    model.partial_fit(X[80:], y[80:])
    np.testing.assert_array_equal(again.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    assert again.n_examples_seen_ == model.n_examples_seen_ == 120


def test_the_model_class_of_a_kind_rebuilds_any_state(fitted):
    model, X, _ = fitted
    state = model.export_state(tables=False)
    assert state.tables == {}
    again = nbstream.model_class(state.kind).from_state(state)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


def test_exported_copies_are_the_caller_s_and_shared_arrays_are_read_only(fitted):
    model, X, y = fitted
    copied = model.export_state()
    shared = model.export_state(copy=False)
    name = next(iter(copied.statistics))
    copied.statistics[name][...] = 0  # the caller's own copy: the model is untouched
    np.testing.assert_array_equal(shared.statistics[name], model.export_state().statistics[name])
    assert not copied.statistics[name].any()
    with pytest.raises(ValueError, match="read-only"):
        shared.statistics[name][...] = 0


def test_from_state_copies_the_arrays_unless_told_to_take_them_over(fitted):
    model, X, y = fitted
    state = model.export_state()
    before = {name: array.copy() for name, array in state.statistics.items()}
    type(model).from_state(state).partial_fit(X[80:], y[80:])
    for name, array in state.statistics.items():
        np.testing.assert_array_equal(array, before[name])
    type(model).from_state(state, copy=False).partial_fit(X[80:], y[80:])
    assert not np.array_equal(state.statistics["class_count"], before["class_count"])


def test_the_fixed_or_open_class_set_and_feature_names_survive(rng):
    pandas = pytest.importorskip("pandas")
    X, y = data(rng)
    frame = pandas.DataFrame(X, columns=["a", "b", "c", "d"])
    model = nbstream.MultinomialNB().fit(frame, y)
    state = model.export_state()
    assert not state.open_classes and state.feature_names.tolist() == ["a", "b", "c", "d"]
    again = nbstream.MultinomialNB.from_state(state)
    assert again.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    with pytest.raises(nbstream.LabelError):
        again.partial_fit(X[:1], ["new"])


def test_merge_reads_the_other_model_through_its_exported_state(rng):
    X, y = data(rng)
    halves = [nbstream.CategoricalNB().partial_fit(X[rows], y[rows]) for rows in (slice(0, 60), slice(60, None))]
    merged = nbstream.CategoricalNB().merge(halves[0]).merge(halves[1])
    whole = nbstream.CategoricalNB().partial_fit(X, y)
    np.testing.assert_allclose(merged.predict_proba(X), whole.predict_proba(X), rtol=1e-12)
    assert merged.export_state().float_dtype == "float64"


def _changed(state: ModelState, **changes) -> ModelState:
    return dataclasses.replace(state, **changes)


def _statistics(state: ModelState, **changes) -> dict:
    return {**state.statistics, **changes}


REFUSALS = {
    "another kind": (lambda s: _changed(s, kind="quantum"), "cannot make"),
    "an unknown parameter": (lambda s: _changed(s, params={**s.params, "bogus": 1}), "unknown parameter"),
    "no classes": (lambda s: _changed(s, classes=s.classes[:0]), "non-empty list of distinct labels"),
    "a class twice": (lambda s: _changed(s, classes=np.array(["x", "x", "zzz"])), "distinct labels"),
    "a fractional class": (lambda s: _changed(s, classes=np.array([0.5, 1.0, 2.0])), "strings or integers"),
    "a NaN class": (lambda s: _changed(s, classes=np.array([np.nan, 1.0, 2.0])), "strings or integers"),
    "classes as a number": (lambda s: _changed(s, classes=7), "non-empty list"),
    "no features": (lambda s: _changed(s, n_features=0), "positive integer"),
    "a fractional feature count": (lambda s: _changed(s, n_features=4.0), "positive integer"),
    "a fractional example count": (lambda s: _changed(s, examples_seen=2.5), "non-negative integer"),
    "a negative example count": (lambda s: _changed(s, examples_seen=-1), "non-negative integer"),
    "an unknown statistic": (lambda s: _changed(s, statistics=_statistics(s, bogus=np.zeros(3))), "the statistics are"),
    "a missing statistic": (lambda s: _changed(s, statistics={"class_count": s.statistics["class_count"]}),
                            "the statistics are"),
    "class counts for more classes": (lambda s: _changed(s, statistics=_statistics(s, class_count=np.ones(4))),
                                      "class_count has shape"),
    "negative class counts": (lambda s: _changed(s, statistics=_statistics(
        s, class_count=-s.statistics["class_count"])), "negative"),
    "float32 class counts": (lambda s: _changed(s, statistics=_statistics(
        s, class_count=s.statistics["class_count"].astype(np.float32))), "expected float64"),
    "feature names of another length": (lambda s: _changed(s, feature_names=np.array(["a"], dtype=object)),
                                        "feature_names must be 4 strings"),
    "an unknown float dtype": (lambda s: _changed(s, float_dtype="complex128"), "float_dtype must be one of"),
    "a stored table that does not match": (lambda s: _changed(s, tables={
        name: (value + 1 if isinstance(value, np.ndarray) else value) for name, value in s.tables.items()}),
        "does not match the statistics"),
}


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_state_no_training_gives_is_refused_naming_what_does_not_fit(fitted, refusal):
    model, _, _ = fitted
    change, message = REFUSALS[refusal]
    with pytest.raises(ValueError, match=message):
        type(model).from_state(change(model.export_state()))


def test_only_a_gaussian_keeps_a_float_dtype_other_than_float64(rng):
    X, y = data(rng)
    state = nbstream.MultinomialNB().fit(X.astype(np.float32), y).export_state()
    assert state.float_dtype == "float64"
    with pytest.raises(ValueError, match=r"float_dtype must be one of \['float64'\]"):
        nbstream.MultinomialNB.from_state(_changed(state, float_dtype="float32"))
    gaussian = nbstream.GaussianNB().fit(X.astype(np.float32), y)
    again = nbstream.GaussianNB.from_state(gaussian.export_state())
    assert again.theta_.dtype == np.float32 and again.export_state().float_dtype == "float32"


def test_an_unfitted_model_has_no_state():
    with pytest.raises(nbstream.NotFittedError):
        nbstream.GaussianNB().export_state()


@pytest.mark.parametrize("make, message", [
    (lambda: nbstream.MultinomialNB(alpha=1e308), r"\['log_total'\] of this MultinomialNB overflow float64"),
    (lambda: nbstream.BernoulliNB(alpha=1e308), "overflow float64"),
    (lambda: nbstream.ComplementNB(alpha=1e308), "overflow float64"),
    (lambda: nbstream.CategoricalNB(alpha=1e308), "overflow float64"),
    (lambda: nbstream.GaussianNB(var_smoothing=1e308), "overflow float64"),
])
def test_smoothing_that_overflows_float64_is_refused_instead_of_predicting_nan(rng, make, message):
    X, y = data(rng)
    model = make().fit(X, y)
    with pytest.raises(ValueError, match=message):
        model.predict_proba(X)
    with pytest.raises(ValueError, match=message):  # refused when made into a model, not when first read
        type(model).from_state(_state_with_params(model, X, y))


def _state_with_params(model, X, y) -> ModelState:
    """A sound state, then the overflowing parameters written into it (as a forged snapshot would)."""
    sound = type(model)().fit(X, y).export_state(tables=False)
    return _changed(sound, params=model.get_params())
