"""GaussianNB's and CategoricalNB's test-then-train scores in bulk equal those of one row at a
time: across blocks of rows, at magnitudes where scoring must rescore, with smoothing that
changes at every row, with categories and classes that first appear mid-batch, and equal
scikit-learn's model of the rows before each row."""

import contextlib
import tracemalloc

import numpy as np
import pytest
from sklearn import naive_bayes as reference

import nbstream
from nbstream.prequential.moments_and_categories import moments_before_each_row
from nbstream.stats.counts import GaussianMoments
from nbstream.utils.blocked import row_blocks
from tests.helpers.prequential import one_row_at_a_time

RTOL, ATOL = 1e-9, 1e-12


def assert_as_one_row_at_a_time(model, X, y, **options):
    classes, proba = model.predict_proba_prequential(X, y, **options)
    expected_classes, expected = one_row_at_a_time(model, X, y, **options)
    assert classes.tolist() == expected_classes.tolist()
    np.testing.assert_allclose(proba, expected, rtol=RTOL, atol=ATOL)
    return proba


def gaussian_rows(rng, n_rows, n_features, n_classes, offset=0.0, scale=1.0):
    y = rng.integers(0, n_classes, size=n_rows)
    X = offset + scale * (rng.normal(size=(n_rows, n_features)) + 0.7 * y[:, None])
    return X, y


# ---- GaussianNB -------------------------------------------------------------------------
def test_gaussian_rows_in_several_blocks_with_classes_that_appear_late():
    rng = np.random.default_rng(1)
    X, y = gaussian_rows(rng, 700, 50, 5)  # 50 features and 5 classes: blocks of 262 rows
    y[:300] = np.minimum(y[:300], 2)  # classes 3 and 4 first appear in the second block
    model = nbstream.GaussianNB().partial_fit(*gaussian_rows(rng, 40, 50, 2))
    assert len(list(row_blocks(700, 5 * 50))) == 3
    assert_as_one_row_at_a_time(model, X, y)


def test_gaussian_moments_are_those_learned_one_row_at_a_time():
    rng = np.random.default_rng(2)
    X, y = gaussian_rows(rng, 600, 40, 3, offset=5.0)
    weights = rng.uniform(0.0, 4.0, size=600)
    seen = np.concatenate([moments.mean[np.arange(block.stop - block.start), y[block]]
                           for block, moments in moments_before_each_row(GaussianMoments.empty(40), X, y, weights, 3)])
    for i in (1, 150, 599):  # the mean of its own class that each row sees
        learned = nbstream.GaussianNB().partial_fit(X[:i], y[:i], classes=[0, 1, 2], sample_weight=weights[:i])
        np.testing.assert_allclose(seen[i], learned.theta_[y[i]], rtol=1e-12, atol=1e-12)


def test_gaussian_far_from_a_stiff_class_rescores_as_one_row_at_a_time():
    """Classes 1 and 2 sit 1e8 from class 0, whose tiny variance makes it the centre of the fast
    scores' expansion: their scores are computed again from direct differences, and so must the
    bulk's be."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, size=200)
    X = np.where(y[:, None] == 0, 1e-4 * rng.normal(size=(200, 6)),
                 1e8 + 1e3 * (rng.normal(size=(200, 6)) + 0.8 * (y[:, None] == 2)))
    model = nbstream.GaussianNB().partial_fit(X[:30], y[:30], classes=[0, 1, 2])
    proba = assert_as_one_row_at_a_time(model, X[30:], y[30:])
    undecided = (proba[:, 1:] > 0.01).all(axis=1)  # rows between classes 1 and 2: the scores matter
    assert undecided.sum() > 20


def test_gaussian_smoothing_follows_every_row():
    """A feature whose variance grows row after row drives epsilon_: a class that saw one value
    only has variance epsilon_, at every row a different one."""
    rng = np.random.default_rng(4)
    X = np.column_stack([np.r_[[0.0, 0.0], np.geomspace(1e-3, 1e3, 58)], rng.normal(size=60)])
    y = np.r_[[0, 1], rng.integers(1, 3, size=58)]
    X[y == 0, 0] = 0.0
    model = nbstream.GaussianNB(var_smoothing=1e-2)
    assert_as_one_row_at_a_time(model, X, y)


@pytest.mark.parametrize("params", [{"priors": [0.2, 0.3, 0.5]}, {"var_smoothing": 0.1}])
def test_gaussian_with_weights_priors_and_a_fixed_class_set(params):
    rng = np.random.default_rng(5)
    X, y = gaussian_rows(rng, 150, 4, 3)
    weights = rng.uniform(0.01, 3.0, size=150)
    model = nbstream.GaussianNB(**params)
    assert_as_one_row_at_a_time(model, X, y, classes=[0, 1, 2], sample_weight=weights)


def test_gaussian_float32_input_and_rows_only_scored():
    rng = np.random.default_rng(6)
    X, y = gaussian_rows(rng, 120, 5, 3)
    model = nbstream.GaussianNB().partial_fit(X[:20].astype(np.float32), y[:20])
    assert_as_one_row_at_a_time(model, X[20:].astype(np.float32), y[20:], learn=rng.random(100) < 0.3)


def test_gaussian_windowed_model_scores_from_the_merge_of_its_buckets():
    rng = np.random.default_rng(7)
    model = nbstream.GaussianNB(window=40, window_buckets=4).partial_fit(*gaussian_rows(rng, 85, 3, 3))
    X, y = gaussian_rows(rng, 5, 3, 3)  # the rest of the newest bucket: learning only adds
    assert_as_one_row_at_a_time(model, X, y)


def test_gaussian_equals_scikit_learn_fitted_on_the_rows_before():
    rng = np.random.default_rng(8)
    X, y = gaussian_rows(rng, 80, 4, 3)
    classes, proba = nbstream.GaussianNB().predict_proba_prequential(X, y)
    for i in (10, 45, 79):
        fitted = reference.GaussianNB().fit(X[:i], y[:i])
        columns = [classes.tolist().index(label) for label in fitted.classes_]
        np.testing.assert_allclose(proba[i, columns], fitted.predict_proba(X[i:i + 1])[0], rtol=1e-9)


# ---- CategoricalNB ----------------------------------------------------------------------
def categorical_rows(rng, n_rows, n_features, n_categories, n_classes):
    y = rng.integers(0, n_classes, size=n_rows)
    X = (rng.integers(0, n_categories, size=(n_rows, n_features)) + y[:, None]) % n_categories
    return X, y


def test_categorical_rows_in_several_blocks():
    rng = np.random.default_rng(11)
    X, y = categorical_rows(rng, 2000, 20, 10, 4)  # 20 features and 4 classes: blocks of 819 rows
    assert len(list(row_blocks(2000, 4 * 20))) == 3
    model = nbstream.CategoricalNB().partial_fit(*categorical_rows(rng, 30, 20, 10, 4))
    assert_as_one_row_at_a_time(model, X, y)


def test_categorical_categories_first_seen_mid_batch_widen_every_class():
    """Codes 5 to 9 appear only after row 60 (some in rows only scored, which widen nothing):
    each widens its feature's table, and the smoothing denominator of every class with it."""
    rng = np.random.default_rng(12)
    X, y = categorical_rows(rng, 150, 6, 5, 3)
    X[60:] += 5 * (rng.random((90, 6)) < 0.3)
    learn = rng.random(150) < 0.8
    model = nbstream.CategoricalNB(alpha=0.5).partial_fit(X[:20], y[:20])
    assert_as_one_row_at_a_time(model, X[20:], y[20:], learn=learn[20:])


def test_categorical_unknown_codes_say_nothing():
    rng = np.random.default_rng(13)
    X, y = categorical_rows(rng, 70, 4, 3, 2)
    X[40::3, 1] = 1000  # never learned: left out of those rows' scores
    model = nbstream.CategoricalNB().partial_fit(X[:40], y[:40])
    proba = assert_as_one_row_at_a_time(model, X[40:], y[40:], learn=np.arange(30) % 3 != 0)
    others = [0, 2, 3]
    without_feature = nbstream.CategoricalNB().partial_fit(X[:40, others], y[:40])
    np.testing.assert_allclose(proba[0], without_feature.predict_proba(X[40:41, others])[0], rtol=1e-12)


@pytest.mark.parametrize("params", [
    {"min_categories": 7},
    {"min_categories": [2, 8, 3, 12, 1]},
    {"alpha": 1e-12, "force_alpha": False},
    {"alpha": 0.3, "fit_prior": False},
    {"class_prior": [0.5, 0.25, 0.25]},
])
def test_categorical_parameters_with_weights_and_a_fixed_class_set(params):
    rng = np.random.default_rng(14)
    X, y = categorical_rows(rng, 120, 5, 6, 3)
    weights = rng.uniform(0.1, 2.5, size=120)
    model = nbstream.CategoricalNB(**params)
    with pytest.warns(UserWarning, match="alpha too small") if "force_alpha" in params else contextlib.nullcontext():
        assert_as_one_row_at_a_time(model, X, y, classes=[0, 1, 2], sample_weight=weights)


def test_categorical_uint8_codes_and_a_windowed_model():
    rng = np.random.default_rng(16)
    model = nbstream.CategoricalNB(window=50, window_buckets=5).partial_fit(*categorical_rows(rng, 73, 4, 5, 3))
    X, y = categorical_rows(rng, 7, 4, 7, 3)  # within the newest bucket; codes 5 and 6 are new
    assert_as_one_row_at_a_time(model, X.astype(np.uint8), y)


def test_categorical_equals_scikit_learn_fitted_on_the_rows_before():
    rng = np.random.default_rng(17)
    X, y = categorical_rows(rng, 80, 4, 5, 3)
    classes, proba = nbstream.CategoricalNB(alpha=0.7).predict_proba_prequential(X, y)
    for i in (20, 50, 79):
        fitted = reference.CategoricalNB(alpha=0.7, min_categories=5).fit(X[:i], y[:i])
        columns = [classes.tolist().index(label) for label in fitted.classes_]
        np.testing.assert_allclose(proba[i, columns], fitted.predict_proba(X[i:i + 1])[0], rtol=1e-9)



@pytest.mark.parametrize("family", [nbstream.GaussianNB, nbstream.CategoricalNB])
def test_memory_does_not_grow_with_rows_times_classes_times_features(family):
    rng = np.random.default_rng(18)
    gaussian = family is nbstream.GaussianNB
    X, y = gaussian_rows(rng, 20_000, 30, 8) if gaussian else categorical_rows(rng, 20_000, 30, 10, 8)
    model = family().partial_fit(X[:100], y[:100])
    tracemalloc.start()
    try:
        model.predict_proba_prequential(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X.shape[0] * 30 * 8 * 8 / 4  # a quarter of one (row, class, feature) float64 table
