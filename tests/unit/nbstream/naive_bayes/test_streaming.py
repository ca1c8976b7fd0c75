"""What streaming needs beyond scikit-learn: lazy tables, sparse input, memory, pipelines."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.naive_bayes as reference

import nbstream


def test_tables_are_refreshed_only_when_read_after_a_change(monkeypatch, rng):
    calls = []
    original = nbstream.MultinomialNB._refresh
    monkeypatch.setattr(nbstream.MultinomialNB, "_refresh", lambda self: calls.append(1) or original(self))
    model = nbstream.MultinomialNB()
    X = rng.integers(0, 4, size=(50, 5))
    for start in range(0, 50, 10):
        model.partial_fit(X[start:start + 10], np.arange(10) % 3)
    assert calls == []
    model.predict(X)
    model.predict_proba(X)
    assert model.feature_log_prob_.shape == (3, 5)
    assert len(calls) == 1
    model.partial_fit(X[:5], [0, 1, 2, 0, 1])
    model.predict(X)
    assert len(calls) == 2


@pytest.mark.parametrize("alpha", [1.0, "per feature"])
def test_a_sparse_batch_refreshes_only_the_features_it_touched_bit_for_bit(monkeypatch, rng, alpha):
    n_features = 4_096
    alpha = rng.uniform(0.1, 2.0, n_features) if alpha == "per feature" else alpha
    X = sp.random(600, n_features, density=0.005, format="csr", random_state=1, data_rvs=lambda n: np.ones(n))
    y = rng.integers(0, 3, 600)
    probe = X[:50]
    model = nbstream.MultinomialNB(alpha=alpha).partial_fit(X[:100], y[:100])
    model.predict(probe)
    full_refreshes = []
    original = nbstream.MultinomialNB._refresh
    monkeypatch.setattr(nbstream.MultinomialNB, "_refresh", lambda self: full_refreshes.append(1) or original(self))
    for start in range(100, 600, 20):
        model.partial_fit(X[start:start + 20], y[start:start + 20])
        model.predict(probe)
    assert full_refreshes == []
    rebuilt = nbstream.MultinomialNB(alpha=alpha).partial_fit(X, y)  # tables computed once, in full
    np.testing.assert_array_equal(model.predict_joint_log_proba(probe), rebuilt.predict_joint_log_proba(probe))
    np.testing.assert_array_equal(model.feature_log_prob_, rebuilt.feature_log_prob_)
    theirs = reference.MultinomialNB(alpha=alpha).fit(X, y)
    in_our_order = np.searchsorted(theirs.classes_, model.classes_)  # ours: order of first appearance
    np.testing.assert_allclose(model.predict_log_proba(probe), theirs.predict_log_proba(probe)[:, in_our_order],
                               rtol=1e-10)
    # batches learned with no prediction in between are not remembered without bound
    before = len(full_refreshes)
    for _ in range(3):
        model.partial_fit(X[:300], y[:300])
    model.predict(probe)
    assert len(full_refreshes) == before + 1
    np.testing.assert_array_equal(model.predict_joint_log_proba(probe), nbstream.MultinomialNB(alpha=alpha).partial_fit(
        X, y).partial_fit(X[:300], y[:300]).partial_fit(X[:300], y[:300]).partial_fit(X[:300], y[:300])
        .predict_joint_log_proba(probe))
    # a new class refreshes in full (so do forgetting and dense input)
    before = len(full_refreshes)
    model.partial_fit(X[:5], [7, 7, 7, 7, 7])
    model.predict(probe)
    assert len(full_refreshes) == before + 1


@pytest.mark.parametrize("family, params", [
    (nbstream.BernoulliNB, {"binarize": 1.0}),
    (nbstream.MultinomialNB, {}),
    (nbstream.ComplementNB, {}),
])
def test_sparse_input_matches_dense_and_scikit_learn(family, params, rng):
    dense = rng.poisson(0.3, size=(300, 40))
    y = rng.choice(["a", "b", "c"], size=300)
    sparse = sp.csr_matrix(dense)
    ours = family(**params)
    for start in range(0, 300, 64):
        ours.partial_fit(sparse[start:start + 64], y[start:start + 64], classes=["a", "b", "c"])
    theirs = getattr(reference, family.__name__)(**params).fit(dense, y)
    np.testing.assert_allclose(ours.predict_log_proba(sparse), theirs.predict_log_proba(dense), atol=1e-9)
    np.testing.assert_allclose(ours.feature_count_, theirs.feature_count_)


def test_sparse_input_is_never_densified(monkeypatch, rng):
    def refuse(*args, **kwargs):
        raise AssertionError("densified")

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    # 2**20 hashed features: a dense float64 copy of 2,000 rows would take 16 GiB.
    rows = np.repeat(np.arange(2_000), 10)
    X = sp.csr_matrix((rng.integers(1, 4, size=rows.size).astype(np.float64),
                       (rows, rng.integers(0, 2**20, size=rows.size))), shape=(2_000, 2**20))
    y = rng.choice(["ham", "spam"], size=2_000)
    for family in (nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.BernoulliNB):
        model = family().partial_fit(X, y)
        assert model.predict_proba(X[:10]).shape == (10, 2)


@pytest.mark.parametrize("family, params", [
    (nbstream.BernoulliNB, {"binarize": 127.5}),
    (nbstream.MultinomialNB, {}),
    (nbstream.GaussianNB, {}),
])
def test_uint8_input_is_not_copied_to_float64_wholesale(family, params, rng):
    X = rng.integers(0, 256, size=(20_000, 784), dtype=np.uint8)
    y = rng.integers(0, 10, size=20_000)
    model = family(**params).partial_fit(X[:100], y[:100])
    tracemalloc.start()
    model.partial_fit(X, y)
    model.predict_proba(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    float64_copy = X.size * 8
    assert peak < float64_copy / 4, f"peak {peak / 2**20:.1f} MiB"


def test_works_inside_a_scikit_learn_pipeline(rng):
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X = rng.poisson(1.0, size=(200, 8))
    y = (X[:, 0] > X[:, 1]).astype(int)
    pipeline = make_pipeline(FunctionTransformer(lambda A: A * 2), nbstream.MultinomialNB(alpha=0.5))
    scores = cross_val_score(pipeline, X, y, cv=3)
    assert scores.mean() > 0.6
    copy = clone(nbstream.BernoulliNB(alpha=0.25, half_life=100.0))
    assert copy.get_params()["alpha"] == 0.25 and copy.get_params()["half_life"] == 100.0


def test_a_single_example_is_a_batch_of_one():
    model = nbstream.GaussianNB()
    model.partial_fit([[1.0, 2.0]], ["a"])
    model.partial_fit([[3.0, 1.0]], ["b"])
    model.partial_fit([[1.2, 2.1]], ["a"])
    assert model.predict([[1.1, 2.0]]).tolist() == ["a"]
    assert model.n_examples_seen_ == 3


@pytest.mark.parametrize("layout", ["contiguous", "a strided view"])
def test_sparse_class_sums_add_every_value_into_its_class_row(layout, rng):
    from nbstream.utils.blocked import add_class_sums

    X = sp.random(300, 50, density=0.1, format="csr", random_state=2)
    rows, weights = rng.integers(0, 3, 300), rng.uniform(0.5, 2.0, 300)
    expected = np.zeros((3, 50))
    for i in range(300):
        expected[rows[i]] += X[i].toarray().ravel() * weights[i]
    storage = np.zeros((3, 100))
    target = storage[:, ::2] if layout == "a strided view" else storage[:, :50].copy()
    add_class_sums(target, X, rows, weights)
    np.testing.assert_allclose(target, expected, rtol=1e-12)


def test_a_text_batch_of_empty_rows_still_refreshes_the_priors():
    import scipy.sparse as sp

    model = nbstream.MultinomialNB().partial_fit(sp.csr_matrix([[1, 0], [0, 2]]), [0, 1])
    model.predict_proba(sp.csr_matrix([[1, 1]]))  # the tables are computed
    model.partial_fit(sp.csr_matrix((1, 2)), [0])
    fresh = nbstream.MultinomialNB().partial_fit(np.array([[1, 0], [0, 2], [0, 0]]), [0, 1, 0])
    np.testing.assert_allclose(model.class_log_prior_, fresh.class_log_prior_)
    np.testing.assert_allclose(model.predict_proba(np.array([[1, 1]])), fresh.predict_proba(np.array([[1, 1]])))
