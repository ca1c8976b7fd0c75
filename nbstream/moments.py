"""Moments of rows by class: weight, mean and M2 (the sum of squared deviations from the mean) of
each class and feature, as a batch gives them and as two sets of rows pool (GaussianNB's
statistics, its test-then-train scores and its smoothing).

A batch's moments never subtract large sums: one-byte integer features (pixels) are summed in
exact integers, so M2 = (n S2 - S1^2) / n is computed exactly and rounded once; other features
take two passes, the second centred on the class means. No matrix products either: each
class's rows of a block are gathered and summed (``kernels.rows_by_class``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kernels import class_blocks, class_totals, is_one_byte_integer, rows_by_class
from .ndarrays import AnyArray, Features, FloatArray, IndexArray


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
    exact = weights is None and is_one_byte_integer(X)
    total = Moments(np.zeros(n_classes), np.zeros((n_classes, n_features)), np.zeros((n_classes, n_features)))
    for block in class_blocks(X.shape[0], n_features):
        block_weights = None if weights is None else weights[block]
        moments = Moments(class_totals(rows[block], block_weights, n_classes), np.zeros_like(total.mean),
                          np.zeros_like(total.m2))
        X_block = X[block]
        for c, members in rows_by_class(rows[block], n_classes):
            if exact:
                moments.mean[c], moments.m2[c] = _exact_moments(X_block[members])
            elif moments.weight[c] > 0:
                member_weights = None if block_weights is None else block_weights[members]
                moments.mean[c], moments.m2[c] = _centred_moments(X_block[members], member_weights,
                                                                  moments.weight[c])
        total = pool(total, moments)
    return total


def _exact_moments(members: AnyArray) -> tuple[FloatArray, FloatArray]:
    """Mean and M2 of one-byte integer rows (n_members <= ``kernels.CLASS_BLOCK_ROWS``, n_features),
    each rounded once from exact integer sums: S1 and S2 fit int32, n S2 - S1^2 int64."""
    n = len(members)
    first = members.sum(axis=0, dtype=np.int32).astype(np.int64)
    squares = members.astype(np.int16 if members.dtype.kind == "i" else np.uint16)
    np.multiply(squares, squares, out=squares)  # at most 255^2 or 128^2: no overflow
    second = squares.sum(axis=0, dtype=np.int32).astype(np.int64)
    numerator = second * n - first * first  # n^2 times the variance, exactly
    return first / n, numerator / n


def _centred_moments(members: AnyArray, weights: FloatArray | None, weight: float) -> tuple[FloatArray, FloatArray]:
    """Mean and M2 of rows (n_members, n_features) of total ``weight``, weighted by weights
    (n_members,) or not: the mean first, then the squares of the deviations from it."""
    deviations = members.astype(np.float64)
    if weights is None:
        mean: FloatArray = deviations.sum(axis=0) / weight
        deviations -= mean
        deviations *= deviations
        return mean, deviations.sum(axis=0)
    mean = np.einsum("i,ij->j", weights, deviations) / weight
    deviations -= mean
    return mean, np.einsum("i,ij,ij->j", weights, deviations, deviations)
