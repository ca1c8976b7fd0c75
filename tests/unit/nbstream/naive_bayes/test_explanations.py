"""explain: each row's log-odds of its predicted class over the runner-up, split exactly into the
priors' share and each feature's contribution, as each family defines it, for every layout of
input and counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import norm

import nbstream
from nbstream.naive_bayes import Explanations

TOL = 1e-9
CLASSES = np.array(["eggs", "ham", "spam"])
N_FEATURES = 40

# (family, parameters, kind of data); CSR input for the discrete ones
CASES = [
    ("BernoulliNB", {}, "binary"),
    ("BernoulliNB", {"binarize": 1.5, "alpha": 0.3}, "counts"),
    ("BernoulliNB", {"binarize": None}, "binary"),
    ("BernoulliNB", {"counts": "sparse", "class_prior": [0.2, 0.3, 0.5]}, "counts"),
    ("MultinomialNB", {}, "counts"),
    ("MultinomialNB", {"alpha": np.linspace(0.1, 2.0, N_FEATURES), "fit_prior": False}, "counts"),
    ("MultinomialNB", {"counts": "sparse"}, "counts"),
    ("ComplementNB", {}, "counts"),
    ("ComplementNB", {"norm": True}, "counts"),
    ("ComplementNB", {"counts": "sparse"}, "counts"),
    ("ComplementNB", {"counts": "sparse", "norm": True, "alpha": 0.5}, "counts"),
    ("GaussianNB", {}, "normal"),
    ("GaussianNB", {"var_smoothing": 1e-3, "priors": [0.6, 0.3, 0.1]}, "normal"),
    ("CategoricalNB", {}, "categories"),
    ("CategoricalNB", {"alpha": 0.5, "min_categories": 9}, "categories"),
    ("MultinomialNB", {"window": 150, "window_buckets": 3}, "counts"),
    ("BernoulliNB", {"window": 150, "counts": "sparse"}, "counts"),
    ("ComplementNB", {"half_life": 80.0}, "counts"),
    ("GaussianNB", {"half_life": 80.0}, "normal"),
    ("CategoricalNB", {"window": 150, "window_buckets": 5}, "categories"),
]
DEFAULTS = [case for case in CASES if not case[1]]  # each family with its default parameters
DISCRETE = ("BernoulliNB", "MultinomialNB", "ComplementNB")


def make_data(kind: str, rng: np.random.Generator, n: int = 300):
    """Rows of N_FEATURES features whose distribution depends on the class, many of them zeros."""
    y = rng.choice(CLASSES, size=n, p=[0.5, 0.3, 0.2])
    shift = np.searchsorted(CLASSES, y)[:, None]
    slope = np.arange(N_FEATURES) / N_FEATURES
    if kind == "binary":
        return (rng.random((n, N_FEATURES)) < 0.05 + 0.3 * shift * slope).astype(np.uint8), y
    if kind == "counts":
        return rng.poisson(0.2 + shift * slope, size=(n, N_FEATURES)), y
    if kind == "normal":
        return rng.normal(loc=shift * (slope - 0.5), scale=1 + shift * slope, size=(n, N_FEATURES)), y
    return np.minimum(rng.poisson(0.5 + shift * slope * 3, size=(n, N_FEATURES)), 7), y


def fitted(family: str, params: dict, kind: str, rng: np.random.Generator):
    """A model that learned 200 rows in chunks, and 100 rows to explain."""
    X, y = make_data(kind, rng)
    model = getattr(nbstream, family)(**params)
    for chunk in range(0, 200, 50):
        model.partial_fit(X[chunk:chunk + 50], y[chunk:chunk + 50])
    return model, X[200:]


def inputs(family: str, X: np.ndarray) -> list:
    return [X, sp.csr_matrix(X)] if family in DISCRETE else [X]


def ids(case):
    return f"{case[0]}-{'-'.join(sorted(case[1]))}"


def dense_contributions(explained: Explanations, n_features: int) -> np.ndarray:
    """The contributions of top=None as a (n_rows, n_features) matrix, 0 where a feature is not listed."""
    table = np.zeros((len(explained), n_features))
    rows, places = np.nonzero(explained.features >= 0)
    table[rows, explained.features[rows, places]] = explained.contributions[rows, places]
    return table


def expected_contributions(model, X: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each family's definition, from its public fitted attributes, shape (n_rows, n_features)."""
    if isinstance(model, nbstream.BernoulliNB):
        present = X > model.binarize if model.binarize is not None else X
        log_p = model.feature_log_prob_
        log_not_p = np.log(1 - np.exp(log_p))
        return present * (log_p[first] - log_p[second]) + (1 - present) * (log_not_p[first] - log_not_p[second])
    if isinstance(model, (nbstream.MultinomialNB, nbstream.ComplementNB)):
        return X * (model.feature_log_prob_[first] - model.feature_log_prob_[second])
    if isinstance(model, nbstream.GaussianNB):
        spread = np.sqrt(model.var_)
        return norm.logpdf(X, model.theta_[first], spread[first]) - norm.logpdf(X, model.theta_[second], spread[second])
    contributions = np.zeros(X.shape)  # a category never seen: 0
    for f, table in enumerate(model.feature_log_prob_):
        seen = X[:, f] < table.shape[1]
        codes = X[seen, f]
        contributions[seen, f] = table[first[seen], codes] - table[second[seen], codes]
    return contributions


def expected_prior(model) -> np.ndarray:
    if isinstance(model, nbstream.GaussianNB):
        return np.log(model.class_prior_)
    if isinstance(model, nbstream.ComplementNB):
        return np.zeros(len(model.classes_))
    return model.class_log_prior_


def assert_adds_up(explained: Explanations, jll: np.ndarray) -> None:
    """prior + sum of the contributions = log_odds = the scores' difference, relative to the terms."""
    rows = np.arange(len(jll))
    difference = jll[rows, explained.predicted] - jll[rows, explained.runner_up]
    terms = np.abs(explained.prior) + np.abs(explained.contributions).sum(axis=1) + np.abs(difference)
    scale = np.maximum(terms, np.finfo(float).tiny)
    assert (np.abs(explained.prior + explained.contributions.sum(axis=1) - explained.log_odds) <= TOL * scale).all()
    assert (np.abs(explained.log_odds - difference) <= TOL * scale).all()


def first_other_best(jll: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """The reference runner-up: the first class of the highest score but the predicted one's."""
    runner_up = []
    for scores, best in zip(jll, predicted, strict=True):
        others = [c for c in range(len(scores)) if c != best]
        runner_up.append(max(others, key=lambda c, scores=scores: (scores[c], -c)))
    return np.array(runner_up)


# ---- the split ----------------------------------------------------------------------------------
@pytest.mark.parametrize("family, params, kind", CASES, ids=[ids(c) for c in CASES])
def test_the_prior_and_every_contribution_add_up_to_the_log_odds_of_the_prediction(family, params, kind, rng):
    model, X = fitted(family, params, kind, rng)
    for rows in inputs(family, X):
        explained = model.explain(rows, top=None)
        jll = model.predict_joint_log_proba(rows)
        assert_adds_up(explained, jll)
        np.testing.assert_array_equal(explained.classes[explained.predicted], model.predict(rows))
        np.testing.assert_array_equal(explained.runner_up, first_other_best(jll, explained.predicted))
        assert (explained.contributions[explained.features < 0] == 0).all()
        assert (explained.contributions[explained.features >= 0] != 0).all()


@pytest.mark.parametrize("family, params, kind", CASES, ids=[ids(c) for c in CASES])
def test_each_contribution_is_its_familys_definition_and_the_prior_the_log_priors_difference(family, params, kind,
                                                                                              rng):
    model, X = fitted(family, params, kind, rng)
    for rows in inputs(family, X):
        explained = model.explain(rows, top=None)
        first, second = explained.predicted, explained.runner_up
        expected = expected_contributions(model, X, first, second)
        np.testing.assert_allclose(dense_contributions(explained, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
        prior = expected_prior(model)
        np.testing.assert_allclose(explained.prior, prior[first] - prior[second], rtol=1e-12, atol=1e-12)


def test_dense_and_csr_rows_and_dense_and_sparse_counts_explain_alike(rng):
    X, y = make_data("counts", rng)
    for family in DISCRETE:
        explained = []
        for counts in ("dense", "sparse"):
            model = getattr(nbstream, family)(counts=counts).fit(X[:200], y[:200])
            explained += [model.explain(X[200:], top=7), model.explain(sp.csr_matrix(X[200:]), top=7)]
        for other in explained[1:]:
            np.testing.assert_array_equal(other.features, explained[0].features)
            np.testing.assert_allclose(other.contributions, explained[0].contributions, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(other.log_odds, explained[0].log_odds, rtol=1e-9)


def test_a_bernoulli_csr_row_lists_the_features_it_lacks_merged_with_its_own_as_its_dense_row_does(rng):
    """Of 4096 features most are never seen: the ones a row lacks tie, and those of the smaller
    index come first, among the row's own and those seen."""
    n_features = 4096
    X = sp.random(300, n_features, density=0.004, format="csr", random_state=3, data_rvs=lambda n: np.ones(n))
    y = rng.choice(["a", "b", "c"], size=300)
    X = X.tolil()
    X[np.flatnonzero(y == "a"), 7] = 1.0  # a feature that tells "a" apart
    X = X.tocsr()
    for counts in ("dense", "sparse"):
        model = nbstream.BernoulliNB(counts=counts).fit(X[:200], y[:200])
        rows = X[200:]
        for top in (1, 5, 40):
            from_csr, from_dense = model.explain(rows, top=top), model.explain(rows.toarray(), top=top)
            np.testing.assert_array_equal(from_csr.features, from_dense.features)
            np.testing.assert_allclose(from_csr.contributions, from_dense.contributions, rtol=1e-12, atol=1e-15)
        everything = model.explain(rows, top=None)
        assert_adds_up(everything, model.predict_joint_log_proba(rows))
        assert everything.features.shape[1] > 4000  # the features a row lacks count too


def test_a_csr_matrix_with_unsorted_or_repeated_cells_is_the_matrix_it_sums_to(rng):
    model, X = fitted("MultinomialNB", {}, "counts", rng)
    data, indices, indptr = [], [], [0]
    for row in X:
        columns = np.flatnonzero(row)[::-1]  # decreasing, and each cell twice, in halves
        indices += [*columns, *columns]
        data += [*(row[columns] / 2), *(row[columns] / 2)]
        indptr.append(len(indices))
    messy = sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=X.shape)
    assert not messy.has_canonical_format
    np.testing.assert_array_equal(model.explain(messy, top=5).features, model.explain(X, top=5).features)
    assert not messy.has_canonical_format  # the caller's matrix is left as it was


def test_the_runner_up_is_the_first_of_the_best_other_classes():
    model = nbstream.MultinomialNB(fit_prior=False).fit(np.eye(3), ["a", "b", "c"])
    explained = model.explain([[0, 0, 0], [0, 0, 1], [0, 1, 0]])  # all equal; c best, a = b; b best, a = c
    assert explained.predicted.tolist() == [0, 2, 1] and explained.runner_up.tolist() == [1, 0, 0]
    assert explained.log_odds[0] == 0 and explained.rows()[0]["features"] == []


# ---- top ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("family, params, kind", CASES[::3], ids=[ids(c) for c in CASES[::3]])
def test_top_k_is_the_head_of_every_feature_by_decreasing_magnitude_then_index(family, params, kind, rng):
    model, X = fitted(family, params, kind, rng)
    for rows in inputs(family, X):
        everything = model.explain(rows, top=None)
        listed = everything.features >= 0
        magnitudes = np.where(listed, np.abs(everything.contributions), -1.0)
        assert (np.diff(magnitudes, axis=1) <= 0).all()
        tied = (np.diff(magnitudes, axis=1) == 0) & listed[:, 1:]
        assert (np.diff(everything.features, axis=1)[tied] > 0).all()
        for k in (1, 3, N_FEATURES + 5):
            top = model.explain(rows, top=k)
            assert top.features.shape == top.contributions.shape == (len(X), k)
            shown = min(k, everything.features.shape[1])
            np.testing.assert_array_equal(top.features[:, :shown], everything.features[:, :shown])
            np.testing.assert_array_equal(top.contributions[:, :shown], everything.contributions[:, :shown])
            assert (top.features[:, shown:] == -1).all() and (top.contributions[:, shown:] == 0).all()
            np.testing.assert_array_equal(top.log_odds, everything.log_odds)


def test_a_row_of_fewer_contributing_features_than_top_is_padded():
    model = nbstream.MultinomialNB().fit([[3, 0, 0, 1], [0, 2, 1, 0]], ["a", "b"])
    explained = model.explain([[0, 0, 0, 2], [0, 0, 0, 0]], top=3)
    assert explained.features.tolist() == [[3, -1, -1], [-1, -1, -1]]
    assert explained.contributions[0, 0] != 0 and explained.contributions[:, 1:].tolist() == [[0, 0], [0, 0]]
    assert explained.rows()[1]["features"] == []
    assert model.explain([[0, 0, 0, 0]], top=None).features.shape == (1, 0)


@pytest.mark.parametrize("top", [0, -3, 2.5, "3", True, False, np.float64(4.0)])
def test_a_top_that_is_not_a_positive_integer_is_refused_naming_it(top):
    model = nbstream.MultinomialNB().fit([[1, 0], [0, 1]], ["a", "b"])
    with pytest.raises(ValueError, match="top must be an integer >= 1"):
        model.explain([[1, 1]], top=top)


def test_top_may_be_a_numpy_integer():
    model = nbstream.MultinomialNB().fit([[1, 0], [0, 1]], ["a", "b"])
    assert model.explain([[1, 1]], top=np.int64(1)).features.shape == (1, 1)


# ---- input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family, params, kind", CASES[:15:2], ids=[ids(c) for c in CASES[:15:2]])
def test_the_input_is_checked_as_predict_checks_it(family, params, kind, rng):
    model, X = fitted(family, params, kind, rng)
    bad_inputs = [X[:, :-1], X[0], np.full_like(X[:2], np.nan, dtype=float), X[:0]]
    if family not in DISCRETE:
        bad_inputs.append(sp.csr_matrix(X))
    for bad in bad_inputs:
        with pytest.raises((ValueError, TypeError)) as by_predict:
            model.predict(bad)
        with pytest.raises(type(by_predict.value)) as by_explain:
            model.explain(bad)
        assert str(by_explain.value) == str(by_predict.value)
    with pytest.raises(nbstream.NotFittedError):
        getattr(nbstream, family)(**params).explain(X)


def test_feature_names_are_checked_as_predict_checks_them():
    import pandas as pd

    model = nbstream.GaussianNB().fit(pd.DataFrame({"a": [0.0, 1.0, 2.0], "b": [1.0, 0.0, 1.0]}), [0, 1, 0])
    with pytest.raises(ValueError, match="feature names"):
        model.explain(pd.DataFrame({"b": [0.0], "a": [1.0]}))


# ---- one class, infinite odds, the rows as JSON -------------------------------------------------
@pytest.mark.parametrize("family, params, kind", DEFAULTS, ids=[ids(c) for c in DEFAULTS])
def test_a_model_of_one_class_has_no_runner_up_and_nothing_to_split(family, params, kind, rng):
    X, _ = make_data(kind, rng, n=20)
    model = getattr(nbstream, family)().fit(X, ["only"] * 20)
    explained = model.explain(X[:3], top=4)
    assert explained.runner_up.tolist() == [-1] * 3 and explained.predicted.tolist() == [0] * 3
    assert np.isnan(explained.log_odds).all() and np.isnan(explained.prior).all()
    assert explained.features.tolist() == [[-1] * 4] * 3
    row = explained.rows()[0]
    assert row == {"class": "only", "runner_up": None, "log_odds": None, "prior": None, "features": []}
    assert model.explain(X[:3], top=None).features.shape == (3, 0)


def test_infinite_log_odds_are_none_in_the_rows():
    model = nbstream.GaussianNB(priors=[1.0, 0.0]).fit([[0.0], [1.0], [5.0], [6.0]], ["a", "a", "b", "b"])
    explained = model.explain([[5.5]])
    assert explained.classes[explained.predicted].tolist() == ["a"] and np.isinf(explained.log_odds[0])
    row = explained.rows()[0]
    assert row["log_odds"] is None and row["prior"] is None and row["runner_up"] == "b"
    json.dumps(explained.rows(), allow_nan=False)


def test_the_rows_are_json_of_plain_values_with_the_features_named(rng):
    X, y = make_data("counts", rng)
    numbers = np.searchsorted(CLASSES, y).astype(np.int64)
    model = nbstream.MultinomialNB().fit(X, numbers)
    explained = model.explain(X[:5], top=3)
    names = np.array([f"f{i}" for i in range(N_FEATURES)])
    by_array, by_function = explained.rows(names), explained.rows(lambda i: f"f{i}")
    assert by_array == by_function == explained.rows({i: f"f{i}" for i in range(N_FEATURES)})
    for row, features, contributions, log_odds in zip(by_array, explained.features, explained.contributions,
                                                       explained.log_odds, strict=True):
        assert type(row["class"]) is int and type(row["runner_up"]) is int
        assert [entry["feature"] for entry in row["features"]] == [f"f{i}" for i in features if i >= 0]
        assert [entry["contribution"] for entry in row["features"]] == contributions[features >= 0].tolist()
        assert row["log_odds"] == log_odds
        assert all(type(entry["feature"]) is str for entry in row["features"])
    assert [entry["feature"] for entry in explained.rows()[0]["features"]] == explained.features[0].tolist()
    json.dumps(by_array, allow_nan=False)


def test_explanations_are_read_only_and_public():
    assert nbstream.Explanations is Explanations
    explained = nbstream.BernoulliNB().fit([[1, 0], [0, 1]], ["a", "b"]).explain([[1, 1]])
    with pytest.raises(ValueError, match="read-only"):
        explained.contributions[0, 0] = 1.0
    assert len(explained) == 1
