"""Test-then-train in bulk equals test-then-train one row at a time, for every model."""

import copy

import numpy as np
import pytest

import nbstream
from tests.helpers.prequential import one_row_at_a_time

RTOL, ATOL = 1e-9, 1e-12


def _counts(rng, n_rows, n_features=12):
    return rng.poisson(0.6, size=(n_rows, n_features)).astype(np.float64)


def _data(kind, rng, n_rows):
    if kind == "gaussian":
        return rng.normal(size=(n_rows, 6)) + rng.integers(0, 3, size=(n_rows, 1))
    if kind == "categorical":
        return rng.integers(0, 4, size=(n_rows, 5))
    return _counts(rng, n_rows)


MODELS = {
    "bernoulli": lambda: nbstream.BernoulliNB(binarize=0.5),
    "multinomial": lambda: nbstream.MultinomialNB(),
    "complement": lambda: nbstream.ComplementNB(),
    "gaussian": lambda: nbstream.GaussianNB(),
    "categorical": lambda: nbstream.CategoricalNB(),
}


def _assert_same(bulk, reference):
    classes, proba = bulk
    expected_classes, expected = reference
    assert classes.tolist() == expected_classes.tolist()
    np.testing.assert_allclose(proba, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("fitted_first", [False, True])
def test_bulk_scores_equal_one_row_at_a_time(kind, fitted_first):
    rng = np.random.default_rng(7)
    model = MODELS[kind]()
    if fitted_first:
        model.partial_fit(_data(kind, rng, 30), rng.integers(0, 2, size=30))
    X, y = _data(kind, rng, 80), rng.integers(0, 4, size=80)  # classes 2 and 3 appear mid-batch
    before = copy.deepcopy(model)
    _assert_same(model.predict_proba_prequential(X, y), one_row_at_a_time(model, X, y))
    assert model.is_fitted == before.is_fitted
    if fitted_first:  # nothing learned
        assert model.n_examples_seen_ == before.n_examples_seen_
        np.testing.assert_array_equal(model.predict_proba(X), before.predict_proba(X))


@pytest.mark.parametrize("kind", MODELS)
def test_rows_not_learned_are_scored_but_teach_nothing(kind):
    rng = np.random.default_rng(3)
    model = MODELS[kind]().partial_fit(_data(kind, rng, 20), rng.integers(0, 3, size=20))
    X, y = _data(kind, rng, 60), rng.integers(0, 3, size=60)
    learn = rng.random(60) < 0.5
    _assert_same(model.predict_proba_prequential(X, y, learn=learn), one_row_at_a_time(model, X, y, learn=learn))


@pytest.mark.parametrize("kind", MODELS)
def test_sample_weights_and_a_fixed_class_set(kind):
    rng = np.random.default_rng(11)
    model = MODELS[kind]()
    X, y = _data(kind, rng, 50), rng.integers(0, 3, size=50)
    weights = rng.uniform(0.1, 3.0, size=50)
    _assert_same(model.predict_proba_prequential(X, y, classes=[0, 1, 2, 5], sample_weight=weights),
                 one_row_at_a_time(model, X, y, classes=[0, 1, 2, 5], sample_weight=weights))


@pytest.mark.parametrize("kind", MODELS)
def test_predict_then_learn_predicts_as_the_definition_and_learns_as_partial_fit(kind):
    rng = np.random.default_rng(5)
    X, y = _data(kind, rng, 90), rng.integers(0, 3, size=90)
    _, reference = one_row_at_a_time(MODELS[kind](), X, y)
    model = MODELS[kind]()
    predicted = model.predict_then_learn(X, y)
    assert predicted.mask.tolist() == np.isnan(reference[:, 0]).tolist()
    learned = MODELS[kind]().partial_fit(X, y)
    np.testing.assert_allclose(model.predict_proba(X), learned.predict_proba(X), rtol=1e-12)
    expected = learned.classes_[np.argmax(np.nan_to_num(reference, nan=0.0), axis=1)]
    assert predicted.compressed().tolist() == expected[~predicted.mask].tolist()


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("forgetting", [{"window": 25, "window_buckets": 5}, {"half_life": 30.0}])
def test_predict_then_learn_follows_windows_and_forgetting(kind, forgetting):
    rng = np.random.default_rng(9)
    X, y = _data(kind, rng, 120), rng.integers(0, 3, size=120)
    model = MODELS[kind]().set_params(**forgetting)
    expected = []
    reference = MODELS[kind]().set_params(**forgetting)
    for i in range(len(y)):
        expected.append(reference.predict(X[i:i + 1])[0] if reference.is_fitted else None)
        reference.partial_fit(X[i:i + 1], y[i:i + 1])
    predicted = model.predict_then_learn(X, y)
    assert [None if masked else value for value, masked in zip(predicted.data.tolist(), predicted.mask.tolist(),
                                                                strict=True)] == expected
    np.testing.assert_allclose(model.predict_proba(X), reference.predict_proba(X), rtol=1e-12)
