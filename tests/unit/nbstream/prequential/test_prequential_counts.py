"""Test-then-train scores of the count models (Bernoulli, multinomial, complement) in bulk equal
those of the definition, one row at a time, for every layout of the counts and of the input,
every smoothing and prior, and however the work is cut into chunks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nbstream
from nbstream.prequential import counts as prequential_counts
from nbstream.prequential import dense_weights as prequential_versions
from tests.helpers.prequential import one_row_at_a_time

RTOL, ATOL = 1e-9, 1e-12
FAMILIES = {
    "bernoulli": lambda **params: nbstream.BernoulliNB(binarize=0.5, **params),
    "multinomial": nbstream.MultinomialNB,
    "complement": nbstream.ComplementNB,
}


def counts(rng: np.random.Generator, n_rows: int, n_features: int, density: float = 0.3) -> np.ndarray:
    """Small whole counts, most of them 0; a row of none at all."""
    X = rng.integers(1, 4, size=(n_rows, n_features)) * (rng.random((n_rows, n_features)) < density)
    X[n_rows // 2] = 0
    return X.astype(np.float64)


def assert_same_as_one_row_at_a_time(model, X, y, **kwargs) -> None:
    """The definition is computed on dense rows whatever X's layout: the numbers are the same (and
    a CSR batch of no entry leaves MultinomialNB's tables stale until the next full refresh)."""
    bulk = model.predict_proba_prequential(X, y, **kwargs)
    classes, expected = one_row_at_a_time(model, X.toarray() if scipy.sparse.issparse(X) else X, y, **kwargs)
    assert bulk.classes.tolist() == classes.tolist()
    np.testing.assert_allclose(bulk.proba, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("family", "params"), [("bernoulli", {}), ("multinomial", {}), ("complement", {}),
                                                ("complement", {"norm": True})], ids=["bernoulli", "multinomial",
                                                                                       "complement", "complement-norm"])
def test_sparse_and_dense_counts_of_hashed_text_give_the_definitions_scores(family, params):
    rng = np.random.default_rng(2)
    n_features = 1 << 17
    words = scipy.sparse.random(70, n_features - 5, density=2e-4, format="csr", random_state=3, dtype=np.float64)
    words.data = np.ceil(words.data * 3)
    shared = scipy.sparse.csr_matrix(counts(rng, 70, 5, density=0.5))  # a few features every class has
    X = scipy.sparse.hstack([shared, words], format="csr")
    y = rng.choice(["ham", "spam", "eggs"], size=70)
    scores = {}
    for layout in ("sparse", "dense"):
        model = FAMILIES[family](counts=layout, **params).partial_fit(X[:20], y[:20])
        assert model.sparse_counts_ == (layout == "sparse")
        assert_same_as_one_row_at_a_time(model, X[20:], y[20:])
        scores[layout] = model.predict_proba_prequential(X[20:], y[20:]).proba
    np.testing.assert_allclose(scores["sparse"], scores["dense"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
@pytest.mark.parametrize("params", [
    {"alpha": np.linspace(0.05, 3.0, 9)},
    {"alpha": 1e-12, "force_alpha": False},
    {"fit_prior": False},
    {"class_prior": [0.5, 0.2, 0.3]},
    {"alpha": 0.3, "fit_prior": False, "class_prior": [0.1, 0.1, 0.8]},
], ids=["array alpha", "alpha floored", "uniform prior", "class prior", "class prior over uniform"])
def test_smoothing_and_priors(family, sparse, params):
    rng = np.random.default_rng(5)
    X, y = counts(rng, 60, 9), rng.integers(0, 3, size=60)
    weights = rng.uniform(0.2, 2.0, size=60)
    X = scipy.sparse.csr_matrix(X) if sparse else X
    model = FAMILIES[family](**params).partial_fit(X[:10], y[:10])
    assert_same_as_one_row_at_a_time(model, X[10:], y[10:])
    assert_same_as_one_row_at_a_time(model, X[10:], y[10:], sample_weight=weights[10:])


@pytest.mark.parametrize("layout", ["dense", "sparse"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
@pytest.mark.parametrize("alpha", [1.0, 0.01])
def test_normalised_complement_weights(layout, sparse, alpha):
    rng = np.random.default_rng(8)
    X, y = counts(rng, 70, 11), rng.choice(["a", "b", "c", "d"], size=70)
    X = scipy.sparse.csr_matrix(X) if sparse else X
    model = nbstream.ComplementNB(norm=True, alpha=alpha, counts=layout).partial_fit(X[:15], y[:15])
    assert_same_as_one_row_at_a_time(model, X[15:], y[15:], sample_weight=rng.uniform(0.5, 2.0, size=55))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_bernoulli_without_binarizing_sums_fractional_presences(sparse, layout):
    rng = np.random.default_rng(13)
    X = rng.choice([0.0, 0.25, 1.0], size=(60, 8), p=[0.6, 0.2, 0.2])
    X = scipy.sparse.csr_matrix(X) if sparse else X
    y = rng.integers(0, 3, size=60)
    model = nbstream.BernoulliNB(binarize=None, counts=layout).partial_fit(X[:10], y[:10])
    assert_same_as_one_row_at_a_time(model, X[10:], y[10:])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
@pytest.mark.parametrize("first_learned", [0, 1])
def test_a_batch_that_teaches_a_new_model_its_first_row(family, sparse, first_learned):
    rng = np.random.default_rng(17)
    X, y = counts(rng, 30, 6), np.array(["b"] * 3 + ["a"] * 27)
    X = scipy.sparse.csr_matrix(X) if sparse else X
    learn = np.arange(30) >= first_learned
    model = FAMILIES[family]()
    scores = model.predict_proba_prequential(X, y, learn=learn)
    assert np.isnan(scores.proba[:first_learned + 1]).all()  # nothing learned before these rows
    np.testing.assert_array_equal(scores.proba[first_learned + 1:3], [[1.0, 0.0]] * (2 - first_learned))  # "b" alone
    assert not np.isnan(scores.proba[3:]).any()
    assert_same_as_one_row_at_a_time(model, X, y, learn=learn)
    assert not model.is_fitted


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
def test_rows_none_of_which_is_learned_are_scored_as_predict_proba_does(family, sparse):
    rng = np.random.default_rng(19)
    X, y = counts(rng, 40, 7), rng.integers(0, 4, size=40)
    X = scipy.sparse.csr_matrix(X) if sparse else X
    model = FAMILIES[family]().partial_fit(X[:12], y[:12])
    scores = model.predict_proba_prequential(X[12:], y[12:], learn=np.zeros(28, dtype=bool))
    assert scores.classes.tolist() == model.classes_.tolist()  # the labels of rows not learned are not read
    np.testing.assert_allclose(scores.proba, model.predict_proba(X[12:]), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("family", FAMILIES)
def test_csr_rows_with_explicit_zeros_repeated_features_and_no_features(family):
    rng = np.random.default_rng(23)
    dense = counts(rng, 40, 6)
    rows, columns = np.nonzero(dense)
    values = dense[rows, columns]
    # each cell split in two entries of the same feature, and an explicit zero in every row
    X = scipy.sparse.csr_matrix((np.r_[values / 2, values / 2, np.zeros(40)],
                                 (np.r_[rows, rows, np.arange(40)], np.r_[columns, columns, np.full(40, 5)])),
                                shape=(40, 6))
    X.has_canonical_format = False
    X = scipy.sparse.csr_matrix((X.data, X.indices, X.indptr), shape=X.shape)  # duplicates kept as given
    y = rng.integers(0, 3, size=40)
    model = FAMILIES[family]().partial_fit(dense[:5], y[:5])
    expected = model.predict_proba_prequential(dense, y).proba
    np.testing.assert_allclose(model.predict_proba_prequential(X, y).proba, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense rows", "CSR rows"])
def test_scores_do_not_depend_on_how_classes_and_rows_are_chunked(family, sparse, monkeypatch):
    rng = np.random.default_rng(29)
    n_rows = 3 * prequential_versions.BLOCK * 2 + 5  # chunks of two blocks, the last one short
    X, y = counts(rng, n_rows, 10), rng.integers(0, 12, size=n_rows)
    X = scipy.sparse.csr_matrix(X) if sparse else X
    model = FAMILIES[family]().partial_fit(X[:30], y[:30])
    weights = rng.uniform(0.5, 1.5, size=n_rows)
    whole = model.predict_proba_prequential(X, y, sample_weight=weights)
    monkeypatch.setattr(prequential_counts, "CELLS_PER_CHUNK", 300)  # about one class a chunk
    monkeypatch.setattr(prequential_versions, "BLOCKS_PER_CHUNK", 2)
    cut = model.predict_proba_prequential(X, y, sample_weight=weights)
    np.testing.assert_allclose(cut.proba, whole.proba, rtol=RTOL, atol=ATOL)
    assert_same_as_one_row_at_a_time(model, X, y)
    assert_same_as_one_row_at_a_time(model, X, y, sample_weight=weights)


def test_multinomial_bulk_scores_stay_exact_over_a_long_stream_of_whole_counts():
    """The learned rows' counts are summed exactly (in integers): 5,000 rows of one class leave the
    scores of the definition to its rounding, not to a sum over the batch."""
    rng = np.random.default_rng(31)
    X = scipy.sparse.csr_matrix(counts(rng, 5_000, 4, density=0.6))
    y = np.where(rng.random(5_000) < 0.9, "common", "rare")
    model = nbstream.MultinomialNB(alpha=0.01).partial_fit(X[:100], y[:100])
    bulk = model.predict_proba_prequential(X[100:], y[100:])
    last = model.partial_fit(X[100:-1], y[100:-1]).predict_proba(X[-1:])
    np.testing.assert_allclose(bulk.proba[-1], last[0], rtol=1e-11)


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), family=st.sampled_from(sorted(FAMILIES)), sparse=st.booleans(),
       layout=st.sampled_from(["dense", "sparse"]), weighted=st.booleans(), fitted=st.booleans(),
       learn_some=st.booleans(), alpha=st.sampled_from([1.0, 0.1, 2.5]), fit_prior=st.booleans(),
       norm=st.booleans())
def test_random_batches_give_bernoulli_multinomial_and_complement_the_definitions_scores(
        seed, family, sparse, layout, weighted, fitted, learn_some, alpha, fit_prior, norm):
    rng = np.random.default_rng(seed)
    n_rows, n_features = int(rng.integers(1, 40)), int(rng.integers(1, 9))
    X = counts(rng, n_rows, n_features, density=float(rng.uniform(0.1, 0.9)))
    y = rng.integers(0, int(rng.integers(1, 5)), size=n_rows)
    params = {"alpha": alpha, "fit_prior": fit_prior, "counts": layout}
    if family == "complement":
        params["norm"] = norm
    model = FAMILIES[family](**params)
    if fitted:
        model.partial_fit(counts(rng, 6, n_features), rng.integers(0, 3, size=6))
    kwargs = {"sample_weight": rng.uniform(0.1, 3.0, size=n_rows) if weighted else None,
              "learn": rng.random(n_rows) < 0.7 if learn_some else None}
    X = scipy.sparse.csr_matrix(X) if sparse else X
    try:
        assert_same_as_one_row_at_a_time(model, X, y, **kwargs)
    except ValueError as error:  # norm over a single feature: weights of 0 / 0, which predict refuses
        assume("overflow float64" not in str(error))
        raise


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_bernoulli_on_csr_rows_when_a_class_has_every_feature_with_distinct_counts(layout):
    """A class's counts of all its features are then as many distinct values as features, none 0."""
    X = scipy.sparse.csr_matrix(np.array([[1.0, 1, 1], [0, 1, 1], [0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]))
    y = np.array([0, 0, 0, 1, 1, 0])
    model = nbstream.BernoulliNB(counts=layout).partial_fit(X[:3], y[:3])
    assert_same_as_one_row_at_a_time(model, X[3:], y[3:])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("params", [{}, {"fit_prior": False}, {"class_prior": [0.7, 0.1, 0.2]}],
                         ids=["fitted prior", "uniform prior", "class prior"])
def test_a_fixed_class_set_scores_its_classes_before_any_row_teaches_them(family, params):
    rng = np.random.default_rng(37)
    X, y = counts(rng, 30, 5), np.r_[np.zeros(10, dtype=int), rng.integers(0, 3, size=20)]
    model = FAMILIES[family](**params)
    scores = model.predict_proba_prequential(X, y, classes=[0, 1, 2])
    # classes 1 and 2 are scored before any row teaches them: by a prior of 0 if it is fitted (but
    # ComplementNB's, of a model of several classes)
    unlearned = scores.proba[1:10, 1:]
    assert (unlearned == 0).all() if not params and family != "complement" else (unlearned > 0).all()
    assert_same_as_one_row_at_a_time(model, X, y, classes=[0, 1, 2])
