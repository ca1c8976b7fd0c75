"""Per-class sums and moments of a batch: exact for one-byte features, centred otherwise, and the
same whatever the blocks."""

from fractions import Fraction

import numpy as np
import pytest

import nbstream.utils.blocked
from nbstream.stats.moments import batch_moments
from nbstream.utils.blocked import CLASS_BLOCK_ROWS, class_sums


def exact_moments(X, rows, n_classes):
    """Weight, mean and M2 of each class computed in rationals, then rounded once."""
    n_features = X.shape[1]
    weight, mean, m2 = np.zeros(n_classes), np.zeros((n_classes, n_features)), np.zeros((n_classes, n_features))
    for c in range(n_classes):
        members = X[rows == c].astype(int).tolist()
        weight[c] = len(members)
        for f in range(n_features):
            values = [Fraction(row[f]) for row in members]
            if values:
                centre = sum(values) / len(values)
                mean[c, f] = float(centre)
                m2[c, f] = float(sum((value - centre) ** 2 for value in values))
    return weight, mean, m2


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.bool_])
def test_one_byte_features_give_moments_rounded_once_from_exact_sums(dtype, rng):
    X = rng.integers(-128 if dtype == np.int8 else 0, 2 if dtype == np.bool_ else 128, (300, 5)).astype(dtype)
    rows = rng.integers(0, 4, 300)
    rows[rows == 3] = 2  # class 3 has no rows
    weight, mean, m2 = batch_moments(X, rows, None, 4)
    expected = exact_moments(X, rows, 4)
    np.testing.assert_array_equal(weight, expected[0])
    np.testing.assert_array_equal(mean, expected[1])
    np.testing.assert_array_equal(m2, expected[2])


def test_other_features_and_weights_take_two_passes(rng):
    X, rows, weights = rng.normal(1e6, 1.0, (200, 4)), rng.integers(0, 3, 200), rng.random(200)
    weights[rows == 2] = 0.0  # a class of weight 0 has moments 0
    weight, mean, m2 = batch_moments(X, rows, weights, 3)
    for c in range(2):
        w, x = weights[rows == c], X[rows == c]
        centre = np.average(x, axis=0, weights=w)
        np.testing.assert_allclose(mean[c], centre, rtol=1e-15)
        np.testing.assert_allclose(m2[c], (w[:, None] * (x - centre) ** 2).sum(axis=0), rtol=1e-9)
    assert weight[2] == 0 and not mean[2].any() and not m2[2].any()
    unit = batch_moments(X, rows, None, 3)
    np.testing.assert_allclose(unit.m2[0], ((X[rows == 0] - X[rows == 0].mean(axis=0)) ** 2).sum(axis=0), rtol=1e-9)


def test_blocks_pool_into_the_moments_of_the_whole_batch(monkeypatch, rng):
    X, rows = rng.integers(0, 256, (1000, 3)).astype(np.uint8), rng.integers(0, 3, 1000)
    whole = batch_moments(X, rows, None, 3)
    monkeypatch.setattr(nbstream.utils.blocked, "CLASS_BLOCK_ROWS", 64)
    assert len(list(nbstream.utils.blocked.class_blocks(1000, 3))) == 16
    blocked = batch_moments(X, rows, None, 3)
    np.testing.assert_array_equal(blocked.weight, whole.weight)
    np.testing.assert_allclose(blocked.mean, whole.mean, rtol=1e-14)
    np.testing.assert_allclose(blocked.m2, whole.m2, rtol=1e-12)
    np.testing.assert_array_equal(class_sums(X, rows, None, 3), np.array([
        X[rows == c].astype(np.int64).sum(axis=0) for c in range(3)], dtype=np.float64))


def test_a_full_block_of_the_largest_one_byte_values_does_not_overflow():
    X = np.full((CLASS_BLOCK_ROWS, 2), 255, dtype=np.uint8)
    X[0] = 0
    weight, mean, m2 = batch_moments(X, np.zeros(CLASS_BLOCK_ROWS, dtype=np.intp), None, 1)
    n = CLASS_BLOCK_ROWS
    assert weight[0] == n and class_sums(X, np.zeros(n, dtype=np.intp), None, 1)[0, 0] == 255 * (n - 1)
    np.testing.assert_array_equal(mean[0], float(Fraction(255 * (n - 1), n)))
    np.testing.assert_array_equal(m2[0], float(Fraction(255**2 * (n - 1)) - Fraction(255 * (n - 1)) ** 2 / n))


def test_weighted_class_sums(rng):
    X, rows, weights = rng.integers(0, 9, (100, 4)).astype(np.uint8), rng.integers(0, 3, 100), rng.random(100)
    expected = np.array([(weights[rows == c, None] * X[rows == c]).sum(axis=0) for c in range(3)])
    np.testing.assert_allclose(class_sums(X, rows, weights, 3), expected, rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_a_few_rows_added_one_at_a_time_give_what_gathering_gives(dtype, monkeypatch, rng):
    X, rows, weights = (rng.integers(0, 256, (20, 6)).astype(dtype), rng.integers(0, 4, 20), rng.random(20))
    few = [class_sums(X, rows, None, 4), class_sums(X, rows, weights, 4), *batch_moments(X, rows, None, 4),
           *batch_moments(X, rows, weights, 4)]
    monkeypatch.setattr(nbstream.utils.blocked, "_ROW_BY_ROW", 0)
    gathered = [class_sums(X, rows, None, 4), class_sums(X, rows, weights, 4), *batch_moments(X, rows, None, 4),
                *batch_moments(X, rows, weights, 4)]
    for mine, theirs in zip(few, gathered, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-13)
