"""Input checks that speak to the user: each error names what was expected and what came.

Inputs stay in their own dtype here (uint8 pixels are not copied to float64); the
conversion to a floating type happens later, block by block, inside the arithmetic.
"""

from __future__ import annotations

import numbers

import numpy as np

try:  # scipy is optional: sparse input is accepted only when it is installed
    import scipy.sparse as _sparse
except ImportError:  # pragma: no cover - exercised only without scipy
    _sparse = None


class NotFittedError(ValueError, AttributeError):
    """Raised when a model is asked to predict before it has seen any data."""


def is_sparse(X) -> bool:
    """True when X is a scipy.sparse matrix or array."""
    return _sparse is not None and _sparse.issparse(X)


LARGEST_VALUE = 1e150  # beyond it, a stream's sums or squares could overflow float64


def check_X(X, *, n_features: int | None, accept_sparse: bool, model: str):
    """Validate a feature matrix.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), or scipy.sparse CSR
    n_features : the count the model was fitted with, or None on the first call
    accept_sparse : whether CSR input is allowed (discrete models only)
    model : the model's name, for messages

    Returns
    -------
    ndarray of shape (n_samples, n_features) in its own numeric dtype, or a CSR matrix.
    """
    if is_sparse(X):
        if not accept_sparse:
            raise TypeError(f"{model} needs dense input; got a sparse {type(X).__name__}. "
                            "Convert it with .toarray() if it fits in memory.")
        X = X.tocsr()
        values = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{model} expects a 2-D array of shape (n_samples, n_features); "
                             f"got an array with shape {X.shape}. Reshape a single example "
                             "with x.reshape(1, -1).")
        values = X
    if values.dtype.kind not in "biuf":
        raise TypeError(f"{model} expects numeric features (bool, int, uint or float); "
                        f"got dtype {values.dtype}.")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        where = ""
        if not is_sparse(X):
            row, col = np.argwhere(~np.isfinite(X))[0]
            where = f" (first at row {row}, feature {col})"
        raise ValueError(f"{model} input contains NaN or infinity{where}; all features must be finite.")
    if values.dtype.kind == "f" and values.size and np.abs(values).max() > LARGEST_VALUE:
        raise ValueError(f"{model} input holds a value beyond ±{LARGEST_VALUE:g}: sums and squares of such "
                         f"values overflow the statistics to infinity.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{model} was fitted with {n_features} features; "
                         f"got {X.shape[1]} features.")
    return X


def check_non_negative(X, model: str) -> None:
    """Multinomial, complement and categorical counts cannot be negative."""
    values = X.data if is_sparse(X) else X
    if values.dtype.kind in "bu" or values.size == 0:
        return
    if values.min() < 0:
        raise ValueError(f"{model} expects non-negative features (counts); "
                         f"got a minimum of {values.min()}.")


def check_labels(y, n_samples: int | None):
    """y as a 1-D array of length n_samples, if given (numbers or strings, no missing values)."""
    y = np.asarray(y)
    if y.ndim != 1:
        y = np.ravel(y) if y.ndim == 2 and 1 in y.shape else y
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D with one label per row; got shape {y.shape}.")
    if n_samples is not None and y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} rows but y has {y.shape[0]} labels.")
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError("y contains NaN; every row needs a label.")
    if y.dtype.kind == "O":
        if any(v is None for v in y):
            raise ValueError("y contains None; every row needs a label.")
        y = y.astype(str) if all(isinstance(v, str) for v in y) else y
    return y


def check_sample_weight(sample_weight, n_samples: int):
    """None, or a non-negative finite float64 vector of shape (n_samples,)."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number):
        return np.full(n_samples, float(sample_weight))
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},); got {w.shape}.")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative.")
    return w


def check_positive(value, name: str, *, allow_none: bool = False) -> None:
    """A parameter that must be a positive number."""
    if value is None and allow_none:
        return
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a finite positive number; got {value!r}.")
