"""Input checks that speak to the user: each error names what was expected and what came.

Inputs stay in their own dtype here (uint8 pixels are not copied to float64); the
conversion to a floating type happens later, block by block, inside the arithmetic.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import numpy.typing as npt

from .ndarrays import AnyArray, Features, FloatArray
from .sklearn_protocol import data_conversion_warning

try:  # scipy is optional: sparse input is accepted only when it is installed
    import scipy.sparse as _sparse
except ImportError:  # pragma: no cover - exercised only without scipy
    _sparse = None


class NotFittedError(ValueError, AttributeError):
    """Raised when a model is asked to predict before it has seen any data.

    Once scikit-learn is loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError`` (see ``sklearn_compat.not_fitted``).
    """


def is_sparse(X: object) -> bool:
    """True when X is a scipy.sparse matrix or array."""
    return _sparse is not None and _sparse.issparse(X)


LARGEST_VALUE = 1e150  # beyond it, a stream's sums or squares could overflow float64


def check_X(X: Features, *, n_features: int | None, accept_sparse: bool, model: str) -> Features:
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
    Object arrays of numbers (a DataFrame of nullable integers, say) become float64.
    """
    if is_sparse(X):
        if not accept_sparse:
            raise TypeError(f"{model} needs dense input; got a sparse {type(X).__name__}. "
                            "Convert it with .toarray() if it fits in memory.")
        X = X.tocsr()
        values = X.data
    else:
        X = _numeric(np.asarray(X), model)
        if X.ndim != 2:
            raise ValueError(f"Reshape your data: {model} expects a 2-D array of shape (n_samples, "
                             f"n_features); got an array with shape {X.shape}. Reshape a single example "
                             "with x.reshape(1, -1), a single feature with x.reshape(-1, 1).")
        values = X
    if X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is "
                         f"required by {model}.")
    if X.shape[1] == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is "
                         f"required by {model}.")
    _check_values(X, values, model)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but {model} is expecting {n_features} "
                         "features as input (the number it was fitted with).")
    return X


def _check_values(X: Features, values: AnyArray, model: str) -> None:
    """The values of X (its data, when sparse) are real numbers, finite and not beyond LARGEST_VALUE."""
    if values.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {model} expects real numbers; got dtype {values.dtype}.")
    if values.dtype.kind not in "biuf":
        raise TypeError(f"{model} expects numeric features (bool, int, uint or float); "
                        f"got dtype {values.dtype}.")
    if values.dtype.kind == "f" and values.size:
        largest = max(-values.min(), values.max())  # NaN if any value is NaN: one pass each, no copy
        if not np.isfinite(largest):
            where = ""
            if not is_sparse(X):
                row, col = np.argwhere(~np.isfinite(X))[0]
                where = f" (first at row {row}, feature {col})"
            raise ValueError(f"{model} input contains NaN or infinity{where}; all features must be finite.")
        if float(largest) > LARGEST_VALUE:  # a float32 max compared with 1e150 would overflow in the cast
            raise ValueError(f"{model} input holds a value beyond ±{LARGEST_VALUE:g}: sums and squares of such "
                             f"values overflow the statistics to infinity.")


def _numeric(X: AnyArray, model: str) -> AnyArray:
    """An object array of numbers as float64 (missing values become NaN, refused later)."""
    if X.dtype.kind != "O":
        return X
    try:
        return X.astype(np.float64)
    except TypeError as error:  # a dict or list among the values: not a number at all
        raise TypeError(f"{model} expects numeric features: {error}") from None
    except ValueError as error:  # a string that is not a number
        raise ValueError(f"{model} expects numeric features: {error}") from None


def feature_names_of(X: object) -> AnyArray | None:
    """The column names of a data frame (pandas, polars, ...) when they are all strings,
    as an object array of shape (n_features,); None for arrays and unnamed columns."""
    columns = getattr(X, "columns", None)
    if columns is None or is_sparse(X) or isinstance(X, np.ndarray):
        return None
    names = np.asarray(list(columns), dtype=object)
    are_strings = [isinstance(name, str) for name in names.tolist()]
    if any(are_strings) and not all(are_strings):
        raise TypeError("Feature names are only supported if all input features have string names; "
                        f"got names of types {sorted({type(n).__name__ for n in names.tolist()})}. "
                        "Convert them all to strings, for example with X.columns = X.columns.astype(str).")
    return names if names.size and all(are_strings) else None


def check_feature_names(names: AnyArray | None, fitted: AnyArray | None, model: str) -> None:
    """Columns must come in the order the model was fitted with (scikit-learn's rules)."""
    if names is None and fitted is None:
        return
    if fitted is None:
        warnings.warn(f"X has feature names, but {model} was fitted without feature names", UserWarning,
                      stacklevel=4)
    elif names is None:
        warnings.warn(f"X does not have valid feature names, but {model} was fitted with feature names",
                      UserWarning, stacklevel=4)
    elif len(names) != len(fitted) or (names != fitted).any():
        raise ValueError(f"The feature names should match those that were passed during fit: fitted with "
                         f"{fitted.tolist()[:10]}, got {names.tolist()[:10]} (first ten).")


def check_non_negative(X: Features, model: str) -> None:
    """Multinomial, complement and categorical counts cannot be negative."""
    values = X.data if is_sparse(X) else X
    if values.dtype.kind in "bu" or values.size == 0:
        return
    if values.min() < 0:
        raise ValueError(f"Negative values in data passed to {model} (input X): features are counts; "
                         f"got a minimum of {values.min()}.")


def check_labels(y: npt.ArrayLike, n_samples: int | None) -> AnyArray:
    """y as a 1-D array of length n_samples, if given.

    Labels are strings or integers (integral floats included); a column vector of shape
    (n_samples, 1) is flattened with a DataConversionWarning, as scikit-learn does. Missing,
    infinite and fractional labels are refused: a classifier's target is a set of classes.
    """
    if y is None:
        raise ValueError("this model requires y to be passed, but the target y is None.")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change "
                      "the shape of y to (n_samples,), for example using ravel().",
                      data_conversion_warning(), stacklevel=3)
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array with one label per row; got shape {y.shape}.")
    if n_samples is not None and y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} rows but y has {y.shape[0]} labels.")
    if y.dtype.kind == "O":
        y = _typed_labels(y)
    if y.dtype.kind == "f":
        if np.isnan(y).any():
            raise ValueError("Input y contains NaN; every row needs a label.")
        if np.isinf(y).any():
            raise ValueError("Input y contains infinity; a label must be a finite number or a string.")
        if (y != np.round(y)).any():
            raise ValueError(f"Unknown label type: continuous (e.g. {y[y != np.round(y)][0]!r}). A classifier "
                             "needs class labels: integers or strings.")
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported as labels (Unknown label type: complex); labels are integers "
                         "or strings.")
    return y


def _typed_labels(y: AnyArray) -> AnyArray:
    """An object array of labels as strings, or as numbers, when all are of that kind."""
    values = y.tolist()
    if any(v is None for v in values):
        raise ValueError("y contains None; every row needs a label.")
    if all(isinstance(v, str) for v in values):
        return y.astype(str)
    if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
        return y.astype(np.float64) if any(isinstance(v, float) for v in values) else y.astype(np.int64)
    return y


def check_sample_weight(sample_weight: npt.ArrayLike | None, n_samples: int) -> FloatArray | None:
    """None, or a non-negative finite float64 vector of shape (n_samples,)."""
    if sample_weight is None:
        return None
    given = np.asarray(sample_weight)
    if given.dtype.kind == "c":  # converting would drop the imaginary part
        raise ValueError(f"Complex data not supported: sample_weight must be real numbers; got dtype {given.dtype}.")
    w = np.full(n_samples, float(given)) if given.ndim == 0 else np.asarray(given, dtype=np.float64)
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},); got {w.shape}.")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative.")
    if not w.any():
        raise ValueError("Sample weights must contain at least one non-zero number: with every weight "
                         "zero there is nothing to learn.")
    return w

