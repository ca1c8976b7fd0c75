"""A model's learned state as plain values and arrays (``ModelState``): what the estimators
export and are rebuilt from (``NaiveBayes.export_state``, ``NaiveBayes.from_state``), and the
checks of its plain fields."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from ..utils.ndarrays import AnyArray
from .tables import TableValue

# The dtypes a GaussianNB's float attributes keep from its input, as scikit-learn's do.
KEPT_FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True)
class ModelState:
    """A fitted model's learned state as plain values and arrays: what
    ``NaiveBayes.export_state`` gives, ``NaiveBayes.from_state`` takes and a snapshot stores.

    kind : the model kind; ``nbstream.model_class(kind)`` is its class
    params : the constructor parameters, as ``get_params()`` gives them
    classes : the labels, shape (n_classes,), in the order of the statistics' rows
    open_classes : whether a new label becomes a new class (else the class set is fixed)
    n_features : the number of features
    examples_seen : rows learned so far
    statistics : the sufficient statistics by name, one row per class (``nbstream.stats.counts``)
    tables : the smoothed tables by name, derived from the statistics (empty: not exported)
    feature_names : the column names the model was fitted with, shape (n_features,), or None
    float_dtype : the dtype of the float fitted attributes: "float64", or for a GaussianNB
        the float dtype of its first batch, as scikit-learn keeps it
    """

    kind: str
    params: dict[str, object]
    classes: AnyArray
    open_classes: bool
    n_features: int
    examples_seen: int
    statistics: dict[str, AnyArray]
    tables: dict[str, TableValue] = field(default_factory=dict)
    feature_names: AnyArray | None = None
    float_dtype: str = "float64"


# How an array passes between a model and a state: copied, as a read-only view of the model's
# own (a snapshot writer's way), or taken over as it is (a snapshot reader's).
def copied(array: AnyArray) -> AnyArray:
    return array.copy()


def read_only(array: AnyArray) -> AnyArray:
    view = array.view()
    view.flags.writeable = False
    return view


def taken_over(array: AnyArray) -> AnyArray:
    return array


def each_array(value: TableValue, share: Callable[[AnyArray], AnyArray]) -> TableValue:
    """A table with ``share`` applied to its array, or to each array of a list of them."""
    if isinstance(value, list):
        return [share(array) for array in value]
    if isinstance(value, np.ndarray):
        return share(value)
    return value


def is_int(value: object) -> TypeGuard[int]:
    """An int, and not a bool (a JSON true is no number); a float is none however integral."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_natural(value: object) -> bool:
    """An int >= 0 (see is_int)."""
    return is_int(value) and value >= 0


def checked_feature_names(names: object, n_features: int) -> AnyArray | None:
    """The column names a model was fitted with: None, or one string per feature."""
    if names is None:
        return None
    if not isinstance(names, np.ndarray) or names.shape != (n_features,) \
            or not all(isinstance(name, str) for name in names.tolist()):
        raise ValueError(f"feature_names must be {n_features} strings")
    return names
