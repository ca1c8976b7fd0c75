"""Blocked arithmetic shared by the models: per-class sums, linear scores, normalisation.

Dense inputs are scored in row blocks small enough (about 512 KiB as float64) for the
converted block to stay in the CPU cache between the conversion and the matrix product.
That is what makes uint8 input fast without ever copying a whole chunk to float64.

Per-class sums are no matrix products (``grouped_sums``): each class's rows of a block are
gathered and summed along the features, one-byte features (pixels, binarized input) in exact
integers. That is less arithmetic than a product with a one-hot matrix, and waits on no BLAS
threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from .ndarrays import Features, FloatArray, IndexArray
from .validation import is_sparse

_BLOCK_ELEMENTS = 2**16
# Per-class sums gather a class's rows of a block: blocks of about 2**22 cells (32 MiB as float64)
# keep that copy bounded, and an int32 sum of at most 2**15 squares of one-byte values exact.
_CLASS_BLOCK_ELEMENTS = 2**22
CLASS_BLOCK_ROWS = 2**15
_ROW_BY_ROW = 32  # up to this many rows, adding each to its class's sum costs less than gathering classes


def row_blocks(n_rows: int, n_features: int) -> Iterator[slice]:
    """Consecutive row slices covering range(n_rows), each about 2**16 cells."""
    step = max(1, _BLOCK_ELEMENTS // max(n_features, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def class_blocks(n_rows: int, n_features: int) -> Iterator[slice]:
    """Consecutive row slices covering range(n_rows) for per-class sums: about 2**22 cells and
    at most ``CLASS_BLOCK_ROWS`` rows each."""
    step = max(1, min(CLASS_BLOCK_ROWS, _CLASS_BLOCK_ELEMENTS // max(n_features, 1)))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def grouped_sums(X: npt.NDArray[Any], rows: IndexArray, n_classes: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """The sum of the rows of each class, accumulated in ``dtype``, shape (n_classes, n_features).

    X : ndarray (n_samples, n_features) of one block (``class_blocks``); rows : (n_samples,) the
    class row of each sample. A few rows are added one at a time; more are gathered class by
    class, stably ordered, and summed along the features.

    >>> grouped_sums(np.array([[1, 2], [3, 4], [5, 6]]), np.array([1, 0, 1]), 2, np.int64).tolist()
    [[3, 4], [6, 8]]
    """
    sums = np.zeros((n_classes, X.shape[1]), dtype=dtype)
    if len(rows) <= _ROW_BY_ROW:
        for row, c in enumerate(rows.tolist()):
            sums[c] += X[row]
        return sums
    counts = np.bincount(rows, minlength=n_classes)
    order = np.argsort(rows, kind="stable")
    ends = np.cumsum(counts)
    for c in np.flatnonzero(counts).tolist():
        X[order[ends[c] - counts[c]:ends[c]]].sum(axis=0, dtype=dtype, out=sums[c])
    return sums


def is_one_byte_integer(X: Features) -> bool:
    """Bool or one-byte integer features: their sums (and sums of squares) are exact in integers."""
    return not is_sparse(X) and X.dtype.itemsize == 1 and X.dtype.kind in "biu"


def one_hot(rows: IndexArray, weights: FloatArray | None, n_classes: int,
            dtype: npt.DTypeLike = np.float64) -> npt.NDArray[np.floating[Any]]:
    """Class-membership matrix of shape (n_samples, n_classes) holding each row's weight.

    >>> one_hot(np.array([1, 0, 1]), None, 2).tolist()
    [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    """
    Y = np.zeros((len(rows), n_classes), dtype=dtype)
    Y[np.arange(len(rows)), rows] = 1 if weights is None else weights
    return Y


def class_sums(X: Features, rows: IndexArray, weights: FloatArray | None, n_classes: int) -> FloatArray:
    """Weighted sum of the rows of each class.

    Parameters
    ----------
    X : ndarray or CSR of shape (n_samples, n_features), any numeric dtype
    rows : int array of shape (n_samples,), the class row of each sample
    weights : float array of shape (n_samples,) or None for unit weights

    Returns
    -------
    ndarray of shape (n_classes, n_features), float64; exact for one-byte features with unit
    weights

    >>> class_sums(np.array([[1, 2], [3, 4], [5, 6]], dtype=np.uint8), np.array([1, 0, 1]), None, 2).tolist()
    [[3.0, 4.0], [6.0, 8.0]]
    """
    if is_sparse(X):
        Y = one_hot(rows, weights, n_classes)
        return np.asarray((X.T @ Y).T, dtype=np.float64)
    exact = weights is None and is_one_byte_integer(X)
    sums = np.zeros((n_classes, X.shape[1]))
    for block in class_blocks(X.shape[0], X.shape[1]):
        X_block = X[block] if weights is None else X[block] * weights[block, None]
        sums += grouped_sums(X_block, rows[block], n_classes, np.int32 if exact else np.float64)
    return sums


def add_class_sums(target: FloatArray, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
    """target += class_sums(X, rows, weights, n_classes), in place; CSR input touches only its nonzeros
    (no dense (n_classes, n_features) temporary).

    >>> import scipy.sparse as sp
    >>> target = np.zeros((2, 3))
    >>> add_class_sums(target, sp.csr_matrix([[1.0, 0, 2], [0, 5, 0]]), np.array([1, 0]), None)
    >>> target.tolist()
    [[0.0, 5.0, 0.0], [1.0, 0.0, 2.0]]
    """
    if not is_sparse(X):
        target += class_sums(X, rows, weights, target.shape[0])
        return
    per_row = np.diff(X.indptr)
    values = X.data if weights is None else X.data * np.repeat(weights, per_row)
    if target.flags.c_contiguous:  # numpy's add.at is far faster on one flat index than on a pair
        flat = np.repeat(rows.astype(np.int64) * target.shape[1], per_row) + X.indices
        np.add.at(target.reshape(-1), flat, values)
    else:
        np.add.at(target, (np.repeat(rows, per_row), X.indices), values)


def class_totals(rows: IndexArray, weights: FloatArray | None, n_classes: int) -> FloatArray:
    """Total weight of each class, shape (n_classes,)."""
    return np.bincount(rows, weights=weights, minlength=n_classes).astype(np.float64)


def linear_scores(X: Features, weights: FloatArray, bias: FloatArray) -> FloatArray:
    """X @ weights + bias in float64, shape (n_samples, n_classes).

    weights has shape (n_features, n_classes), bias shape (n_classes,).
    """
    if is_sparse(X):
        return np.asarray(X @ weights) + bias
    scores = np.empty((X.shape[0], weights.shape[1]))
    for block in row_blocks(X.shape[0], X.shape[1]):
        np.matmul(X[block].astype(np.float64), weights, out=scores[block])
    scores += bias
    return scores


def log_normalize(jll: FloatArray) -> FloatArray:
    """Subtract log(sum(exp(row))) from each row: joint log-likelihoods to log-posteriors.

    >>> np.exp(log_normalize(np.log(np.array([[1.0, 3.0]])))).round(2).tolist()
    [[0.25, 0.75]]
    """
    top = jll.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        normalized: FloatArray = jll - (np.log(np.exp(jll - top).sum(axis=1, keepdims=True)) + top)
    return normalized


def normalized_exp(jll: FloatArray) -> FloatArray:
    """exp(log_normalize(jll)) with one exponential and no logarithm: joint log-likelihoods of
    shape (n_samples, n_classes) to probabilities (a row of -inf only to NaN).

    >>> normalized_exp(np.log(np.array([[1.0, 3.0]]))).round(2).tolist()
    [[0.25, 0.75]]
    """
    top = jll.max(axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    proba: FloatArray = jll - top
    np.exp(proba, out=proba)
    with np.errstate(invalid="ignore"):  # 0 / 0: a row with no class possible
        proba /= proba.sum(axis=1, keepdims=True)
    return proba
