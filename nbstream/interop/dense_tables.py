"""How large a model's smoothed tables are once dense, for the routes out of nbstream that need them
dense (scikit-learn's estimators, ONNX graphs): a model of sparse counts (hashed text) holds only the
(class, feature) pairs it saw, and its dense tables could be far larger than the model."""

from __future__ import annotations

from typing import Any

from ..naive_bayes.base import NaiveBayes
from ..naive_bayes.discrete import FeatureCountsNB

# Values of one dense (n_classes, n_features) table, 512 MiB of float64: a scikit-learn estimator holds
# two such tables, an ONNX graph one.
DENSE_MAX_VALUES = 1 << 26


def check_dense_size(model: NaiveBayes[Any, Any], max_values: int, purpose: str) -> None:
    """Raise ValueError, in one line, when ``model`` holds sparse counts whose dense tables of
    n_classes x n_features would hold more than ``max_values`` values.

    purpose : what needs the dense tables, for the message ("scikit-learn", "ONNX")
    """
    if not isinstance(model, FeatureCountsNB) or not model.sparse_counts_:
        return
    n_classes, n_features = len(model.classes_), model.n_features_in_
    values = n_classes * n_features
    if values > max_values:
        raise ValueError(f"{purpose} needs this model's sparse counts as dense tables of {n_classes:,} classes x "
                         f"{n_features:,} features ({values:,} values, {values * 8 / 2**20:,.0f} MiB each), more "
                         f"than max_dense_values={max_values:,}: pass a larger max_dense_values if memory allows.")
