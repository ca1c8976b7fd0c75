"""to_sklearn and from_sklearn: scikit-learn's estimators of the same family, both ways."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import naive_bayes

import nbstream
from nbstream.utils.optional import MissingDependency

TOLERANCE = 1e-12


def _data(kind: str, rng: np.random.Generator, n_rows: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Rows of three classes that the families tell apart without certainty (probabilities not all 0 or 1)."""
    y = rng.choice(np.array(["ham", "spam", "eggs"]), size=n_rows)
    shift = (y == "spam")[:, None] * 0.6 + (y == "eggs")[:, None] * 0.3
    if kind == "gaussian":
        return rng.normal(size=(n_rows, 12)) + shift, y
    if kind == "categorical":
        return np.minimum(rng.poisson(1.0 + 2 * shift, size=(n_rows, 8)), 4), y
    return rng.poisson(1.0 + 2 * shift, size=(n_rows, 20)).astype(np.float64), y


FAMILIES = {
    "bernoulli": lambda: nbstream.BernoulliNB(alpha=0.5, binarize=1.0),
    "multinomial": lambda: nbstream.MultinomialNB(alpha=0.3),
    "complement": lambda: nbstream.ComplementNB(norm=True),
    "gaussian": lambda: nbstream.GaussianNB(var_smoothing=1e-6),
    "categorical": lambda: nbstream.CategoricalNB(alpha=0.7, min_categories=5),
}


@pytest.mark.parametrize("kind", FAMILIES)
def test_to_sklearn_predicts_as_the_model(kind, rng):
    X, y = _data(kind, rng)
    model = FAMILIES[kind]().partial_fit(X[:200], y[:200]).partial_fit(X[200:], y[200:])

    estimator = nbstream.to_sklearn(model)

    assert type(estimator) is getattr(naive_bayes, type(model).__name__)
    assert estimator.classes_.tolist() == model.classes_.tolist()
    proba = model.predict_proba(X)
    assert 0.01 < proba.max(axis=1).min() and proba.min() < 0.99  # not a test of certainties only
    np.testing.assert_allclose(estimator.predict_proba(X), proba, rtol=0, atol=TOLERANCE)
    assert estimator.predict(X).tolist() == model.predict(X).tolist()


@pytest.mark.parametrize("kind", FAMILIES)
def test_to_sklearn_equals_the_estimator_scikit_learn_fits(kind, rng):
    X, y = _data(kind, rng)
    model = FAMILIES[kind]().fit(X, y)
    params = {name: value for name, value in model.get_params().items()
              if name in naive_bayes_params(kind)}
    fitted = getattr(naive_bayes, type(model).__name__)(**params).fit(X, y)

    estimator = nbstream.to_sklearn(model)

    assert estimator.get_params() == fitted.get_params()
    np.testing.assert_allclose(estimator.class_count_, fitted.class_count_)
    np.testing.assert_allclose(estimator.predict_proba(X), fitted.predict_proba(X), rtol=0, atol=TOLERANCE)


def naive_bayes_params(kind: str) -> set[str]:
    return set(getattr(naive_bayes, type(FAMILIES[kind]()).__name__)().get_params())


def test_to_sklearn_keeps_the_column_order_of_an_open_class_set(rng):
    X, y = _data("multinomial", rng)
    model = nbstream.MultinomialNB().partial_fit(X[:1], ["zebra"]).partial_fit(X, y)  # classes in order of arrival

    estimator = nbstream.to_sklearn(model)

    assert estimator.classes_.tolist() == ["zebra", *dict.fromkeys(y.tolist())]
    np.testing.assert_allclose(estimator.predict_proba(X), model.predict_proba(X), rtol=0, atol=TOLERANCE)


def test_to_sklearn_makes_sparse_counts_dense(rng):
    X, y = _data("multinomial", rng)
    model = nbstream.MultinomialNB(counts="sparse").fit(sp.csr_matrix(X), y)

    estimator = nbstream.to_sklearn(model)

    assert isinstance(estimator.feature_count_, np.ndarray)
    np.testing.assert_array_equal(estimator.feature_count_, model.feature_count_.toarray())
    np.testing.assert_allclose(estimator.predict_proba(sp.csr_matrix(X)), model.predict_proba(X), rtol=0,
                               atol=TOLERANCE)


def test_to_sklearn_refuses_sparse_counts_too_large_to_make_dense():
    n_classes, n_features = 65, 1 << 20  # 68 million values: more than DENSE_MAX_VALUES (2**26)
    X = sp.csr_matrix((np.ones(n_classes), (np.arange(n_classes), np.arange(n_classes))), shape=(n_classes, n_features))
    model = nbstream.MultinomialNB().fit(X, np.arange(n_classes))
    assert model.sparse_counts_

    with pytest.raises(ValueError, match=r"^scikit-learn needs .* 65 classes x 1,048,576 features "
                                         r"\(68,157,440 values.*max_dense_values=67,108,864") as caught:
        nbstream.to_sklearn(model)
    assert "\n" not in str(caught.value)
    assert nbstream.to_sklearn(model, max_dense_values=n_classes * n_features).feature_count_.shape == (65, 1 << 20)


def test_to_sklearn_of_a_model_that_learned_nothing_is_refused():
    with pytest.raises(nbstream.NotFittedError):
        nbstream.to_sklearn(nbstream.GaussianNB())


@pytest.mark.parametrize("kind", FAMILIES)
def test_from_sklearn_keeps_learning_and_equals_nbstream_trained_on_the_same_rows(kind, rng):
    X, y = _data(kind, rng)
    first, rest = slice(0, 180), slice(180, None)
    estimator = getattr(naive_bayes, type(FAMILIES[kind]()).__name__)(
        **{name: value for name, value in FAMILIES[kind]().get_params().items() if name in naive_bayes_params(kind)})
    estimator.fit(X[first], y[first])

    model = nbstream.from_sklearn(estimator)

    assert type(model) is type(FAMILIES[kind]())
    np.testing.assert_allclose(model.predict_proba(X), estimator.predict_proba(X), rtol=0, atol=TOLERANCE)
    model.partial_fit(X[rest], y[rest])
    everything = FAMILIES[kind]().fit(X, y)
    np.testing.assert_allclose(model.class_count_, everything.class_count_)
    np.testing.assert_allclose(model.predict_proba(X), everything.predict_proba(X), rtol=0, atol=TOLERANCE)
    assert model.n_examples_seen_ == len(X)


def test_from_sklearn_keeps_a_gaussian_float32_dtype_and_feature_names(rng):
    pandas = pytest.importorskip("pandas")
    X, y = _data("gaussian", rng)
    frame = pandas.DataFrame(X.astype(np.float32), columns=[f"f{i}" for i in range(X.shape[1])])
    estimator = naive_bayes.GaussianNB().fit(frame, y)

    model = nbstream.from_sklearn(estimator)

    assert model.theta_.dtype == np.float32
    assert model.feature_names_in_.tolist() == frame.columns.tolist()
    # scikit-learn scores float32 input in float32, nbstream in float64
    np.testing.assert_allclose(model.predict_proba(frame), estimator.predict_proba(frame), rtol=0, atol=1e-5)


def test_from_sklearn_refuses_another_estimator():
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(TypeError, match="^from_sklearn takes a fitted estimator of sklearn.naive_bayes .*"
                                        "got a LogisticRegression"):
        nbstream.from_sklearn(LogisticRegression())


def test_from_sklearn_refuses_an_estimator_that_learned_nothing():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="MultinomialNB is not fitted yet"):
        nbstream.from_sklearn(naive_bayes.MultinomialNB())


def test_without_scikit_learn_the_error_names_the_extra(monkeypatch, rng):
    monkeypatch.setitem(__import__("sys").modules, "sklearn.naive_bayes", None)  # as if not installed
    model = nbstream.MultinomialNB().fit(*_data("multinomial", rng))

    with pytest.raises(MissingDependency, match=r"^this needs 'sklearn.naive_bayes', which is not installed: "
                                                r"pip install 'nbstream\[sklearn\]'$"):
        nbstream.to_sklearn(model)
