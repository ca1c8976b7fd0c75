"""Every family gives scikit-learn's numbers: after fit, and after chunked partial_fit."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.naive_bayes as reference

import nbstream

TOL = 1e-9
CLASSES = ["ham", "eggs", "spam"]

# (family, parameters, kind of data)
CASES = [
    ("BernoulliNB", {}, "binary"),
    ("BernoulliNB", {"alpha": 0.3, "binarize": 2.5, "fit_prior": False}, "counts"),
    ("BernoulliNB", {"alpha": 1e-12, "force_alpha": False, "class_prior": [0.2, 0.3, 0.5]}, "binary"),
    ("MultinomialNB", {}, "counts"),
    ("MultinomialNB", {"alpha": 0.01, "fit_prior": False}, "counts"),
    ("MultinomialNB", {"alpha": np.linspace(0.1, 2.0, 12), "class_prior": [0.5, 0.25, 0.25]}, "counts"),
    ("MultinomialNB", {"alpha": 0.0, "force_alpha": False}, "counts"),
    ("ComplementNB", {}, "counts"),
    ("ComplementNB", {"norm": True, "alpha": 0.5}, "counts"),
    ("GaussianNB", {}, "normal"),
    ("GaussianNB", {"var_smoothing": 1e-3, "priors": [0.6, 0.3, 0.1]}, "normal"),
    ("CategoricalNB", {}, "categories"),
    ("CategoricalNB", {"alpha": 0.5, "min_categories": 7, "fit_prior": False}, "categories"),
    ("CategoricalNB", {"min_categories": np.arange(3, 15)}, "categories"),
]


def make_data(kind: str, rng: np.random.Generator, n: int = 400):
    y = rng.choice(CLASSES, size=n, p=[0.5, 0.3, 0.2])
    shift = np.searchsorted(CLASSES, y)[:, None]
    if kind == "binary":
        X = (rng.random((n, 12)) < 0.2 + 0.2 * shift).astype(np.uint8)
    elif kind == "counts":
        X = rng.poisson(1.0 + shift * np.arange(12) / 6, size=(n, 12))
    elif kind == "normal":
        X = rng.normal(loc=shift * np.linspace(-1, 1, 12), scale=1 + shift, size=(n, 12))
    else:
        X = np.minimum(rng.poisson(1.0 + shift, size=(n, 12)), 5)
    return X, y


def ids(case):
    return f"{case[0]}-{sorted(k for k in case[1])}"


@pytest.mark.parametrize("family, params, kind", CASES, ids=[ids(c) for c in CASES])
def test_fit_matches_scikit_learn(family, params, kind, rng):
    X, y = make_data(kind, rng)
    ours = getattr(nbstream, family)(**params).fit(X, y)
    theirs = getattr(reference, family)(**params).fit(X, y)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    np.testing.assert_allclose(ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(ours.predict_joint_log_proba(X), theirs.predict_joint_log_proba(X),
                               rtol=0, atol=TOL)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    assert ours.score(X, y) == theirs.score(X, y)


@pytest.mark.parametrize("family, params, kind", CASES, ids=[ids(c) for c in CASES])
def test_chunked_partial_fit_matches_scikit_learn_fit(family, params, kind, rng):
    X, y = make_data(kind, rng)
    ours = getattr(nbstream, family)(**params)
    for start in range(0, len(y), 37):
        ours.partial_fit(X[start:start + 37], y[start:start + 37], classes=CLASSES)
    theirs = getattr(reference, family)(**params).fit(X, y)
    np.testing.assert_allclose(ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=0, atol=TOL)


@pytest.mark.parametrize("family, params, kind", CASES[:8], ids=[ids(c) for c in CASES[:8]])
def test_sample_weight_matches_scikit_learn(family, params, kind, rng):
    X, y = make_data(kind, rng)
    weights = rng.uniform(0.1, 3.0, size=len(y))
    ours = getattr(nbstream, family)(**params)
    for start in range(0, len(y), 101):
        ours.partial_fit(X[start:start + 101], y[start:start + 101], classes=CLASSES,
                         sample_weight=weights[start:start + 101])
    theirs = getattr(reference, family)(**params).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=0, atol=TOL)


def test_fitted_attributes_match_scikit_learn(rng):
    X, y = make_data("counts", rng)
    for family in ("BernoulliNB", "MultinomialNB", "ComplementNB"):
        ours = getattr(nbstream, family)().fit(X, y)
        theirs = getattr(reference, family)().fit(X, y)
        for name in ("class_count_", "feature_count_", "feature_log_prob_", "class_log_prior_"):
            np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-12, err_msg=name)
    ours, theirs = nbstream.ComplementNB().fit(X, y), reference.ComplementNB().fit(X, y)
    np.testing.assert_allclose(ours.feature_all_, theirs.feature_all_)
    Xg, y = make_data("normal", rng)
    ours, theirs = nbstream.GaussianNB().fit(Xg, y), reference.GaussianNB().fit(Xg, y)
    for name in ("theta_", "var_", "class_prior_", "class_count_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-12, err_msg=name)
    assert ours.epsilon_ == pytest.approx(theirs.epsilon_, rel=1e-12)
    Xc, y = make_data("categories", rng)
    ours, theirs = nbstream.CategoricalNB().fit(Xc, y), reference.CategoricalNB().fit(Xc, y)
    np.testing.assert_array_equal(ours.n_categories_, theirs.n_categories_)
    for mine, reference_table in zip(ours.category_count_, theirs.category_count_, strict=True):
        np.testing.assert_array_equal(mine, reference_table)


def test_gaussian_partial_fit_is_independent_of_chunking_unlike_scikit_learn(rng):
    X, y = make_data("normal", rng)
    X[:200] *= 10  # the first half varies much more than the second
    whole = nbstream.GaussianNB().fit(X, y)
    chunked = nbstream.GaussianNB()
    theirs = reference.GaussianNB()
    for start in range(0, len(y), 50):
        chunked.partial_fit(X[start:start + 50], y[start:start + 50], classes=CLASSES)
        theirs.partial_fit(X[start:start + 50], y[start:start + 50], classes=CLASSES)
    np.testing.assert_allclose(chunked.var_, whole.var_, rtol=1e-12)
    # scikit-learn's partial_fit keeps only the last batch's epsilon_: it drifts.
    assert not np.allclose(theirs.var_, whole.var_, rtol=1e-12)


def test_bernoulli_per_feature_alpha_smooths_each_feature_with_its_own_alpha(rng):
    X, y = make_data("binary", rng)
    alpha = np.linspace(0.1, 2.0, 12)
    model = nbstream.BernoulliNB(alpha=alpha).fit(X, y)
    for row, label in enumerate(model.classes_):
        rows = X[y == label]
        expected = (rows.sum(axis=0) + alpha) / (len(rows) + 2 * alpha)
        np.testing.assert_allclose(np.exp(model.feature_log_prob_[row]), expected, rtol=1e-12)
