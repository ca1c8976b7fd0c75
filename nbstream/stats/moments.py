"""Moments of rows by class: weight, mean and M2 (the sum of squared deviations from the mean) of
each class and feature, as a batch gives them and as two sets of rows pool (GaussianNB's
statistics, its test-then-train scores and its smoothing).

A batch's moments never subtract large sums: one-byte integer features (pixels) are summed in
exact integers, so M2 = (n S2 - S1^2) / n is computed exactly and rounded once; other features
take two passes, the second centred on the class means. Nor does a batch take a matrix
product: its sums by class are ``kernels.grouped_sums``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..utils.blocked import class_blocks, class_totals, grouped_sums, is_one_byte_integer
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray


class Moments(NamedTuple):
    """Weight, mean and M2 (sum of squared deviations from the mean) of some rows, per class and
    feature: weight (..., n_classes), mean and m2 (..., n_classes, n_features)."""

    weight: FloatArray
    mean: FloatArray
    m2: FloatArray


def pool(earlier: Moments, later: Moments) -> Moments:
    """The moments of two sets of rows together, by the pairwise update of Chan, Golub and LeVeque
    (no sum of squares, so no cancellation): weight (k,), mean and m2 (k, n_features) each."""
    total = earlier.weight + later.weight
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, later.weight / total, 0.0)[:, None]
    delta = later.mean - earlier.mean
    mean = delta * share
    mean += earlier.mean
    m2 = delta  # reused: m2_a + (m2_b + delta^2 * n_a * share), in place
    m2 *= delta
    m2 *= earlier.weight[:, None] * share
    m2 += later.m2
    m2 += earlier.m2
    return Moments(total, mean, m2)


def pooled_variance(moments: Moments) -> FloatArray:
    """Variance of each feature over all classes together, shape (..., n_features) (0 where
    nothing was learned)."""
    weight, mean, m2 = moments
    total = weight.sum(axis=-1)[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        grand_mean = (weight[..., None, :] @ mean) / total[..., None]
        between = (weight[..., None, :] @ (mean - grand_mean) ** 2)[..., 0, :]
        variance: FloatArray = (m2.sum(axis=-2) + between) / total
    return np.where(total > 0, variance, 0.0)


def batch_moments(X: Features, rows: IndexArray, weights: FloatArray | None, n_classes: int) -> Moments:
    """The moments of a batch's rows by class: X (n_samples, n_features) dense, rows (n_samples,)
    the class row of each sample, weights (n_samples,) or None; weight (n_classes,), mean and m2
    (n_classes, n_features), all 0 for a class without rows (or of weight 0).

    >>> moments = batch_moments(np.array([[1], [3], [10]], dtype=np.uint8), np.array([0, 0, 1]), None, 2)
    >>> moments.weight.tolist(), moments.mean.tolist(), moments.m2.tolist()
    ([2.0, 1.0], [[2.0], [10.0]], [[2.0], [0.0]])
    """
    n_features = X.shape[1]
    of_block = _exact_moments if weights is None and is_one_byte_integer(X) else _centred_moments
    total = Moments(np.zeros(n_classes), np.zeros((n_classes, n_features)), np.zeros((n_classes, n_features)))
    for i, block in enumerate(class_blocks(X.shape[0], n_features)):
        moments = of_block(X[block], rows[block], None if weights is None else weights[block], n_classes)
        total = moments if i == 0 else pool(total, moments)
    return total


def _exact_moments(X: AnyArray, rows: IndexArray, weights: FloatArray | None, n_classes: int) -> Moments:
    """The moments of one-byte integer rows (n_samples <= ``kernels.CLASS_BLOCK_ROWS``,
    n_features) with unit weights, each rounded once from exact integer sums: S1 and S2 fit
    int32, n S2 - S1^2 int64."""
    count = np.bincount(rows, minlength=n_classes)
    first = grouped_sums(X, rows, n_classes, np.int32).astype(np.int64)
    squares = X.astype(np.int16 if X.dtype.kind == "i" else np.uint16)
    np.multiply(squares, squares, out=squares)  # at most 255^2 or 128^2: no overflow
    second = grouped_sums(squares, rows, n_classes, np.int32).astype(np.int64)
    numerator = second * count[:, None] - first * first  # n^2 times the variance, exactly
    n = np.maximum(count, 1)[:, None]  # a class without rows has sums 0: moments 0
    return Moments(count.astype(np.float64), first / n, numerator / n)


def _centred_moments(X: AnyArray, rows: IndexArray, weights: FloatArray | None, n_classes: int) -> Moments:
    """The moments of rows (n_samples, n_features), weighted (n_samples,) or not: the means
    first, then the sums of the squared deviations from them."""
    weight = class_totals(rows, weights, n_classes)
    values = X.astype(np.float64) if weights is None else X * weights[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = grouped_sums(values, rows, n_classes, np.float64) / weight[:, None]
    mean[weight == 0] = 0.0
    deviations = np.subtract(X, mean[rows], dtype=np.float64)
    deviations *= deviations
    if weights is not None:
        deviations *= weights[:, None]
    return Moments(weight, mean, grouped_sums(deviations, rows, n_classes, np.float64))
