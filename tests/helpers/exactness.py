"""What "exact" means for `--engine spark` against the local engine (docs/spark.md, "What is
exact"), as assertions: the tests check the statement the docs make, with its numbers.

- The model: the discrete families' statistics (class, feature and category counts) are equal
  bit for bit, class by class; Gaussian's counts are, its means and variances within a relative
  MOMENTS_RTOL (sums of floats in another order).
- Predictions made by Spark's tasks: every probability within PROBA_RTOL (relative) or
  PROBA_ATOL (absolute) of the local engine's, as the executors' numpy may sum a dot product in
  another order (another BLAS, or another number of threads); the predicted labels are the same
  wherever the two best classes are further apart than that.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from nbstream.arrow import load_pipeline
from tests.helpers.arrays import dense

MOMENTS_RTOL = 1e-9
PROBA_RTOL, PROBA_ATOL = 1e-9, 1e-12


def assert_exact_pipeline(spark_snapshot, local_snapshot):
    """The statement's model half, for two snapshots: the same classes, features and statistics,
    class by class (Spark's classes come in partition order)."""
    mine, theirs = load_pipeline(spark_snapshot), load_pipeline(local_snapshot)
    assert sorted(mine.classes_.tolist()) == sorted(theirs.classes_.tolist())
    assert mine.features.to_json() == theirs.features.to_json()
    order = [mine.classes_.tolist().index(label) for label in theirs.classes_.tolist()]
    model, reference = mine.model, theirs.model
    np.testing.assert_array_equal(model.class_count_[order], reference.class_count_)
    if model.kind == "gaussian":
        for name in ("theta_", "var_"):
            np.testing.assert_allclose(getattr(model, name)[order], getattr(reference, name), rtol=MOMENTS_RTOL,
                                       err_msg=name)
    elif model.kind == "categorical":
        for feature, (counts, expected) in enumerate(zip(model.category_count_, reference.category_count_,
                                                         strict=True)):
            np.testing.assert_array_equal(counts[order], expected, err_msg=f"feature {feature}")
    else:
        np.testing.assert_array_equal(dense(model.feature_count_)[order], dense(reference.feature_count_))


def assert_exact_predictions(spark_table: pa.Table, local_table: pa.Table) -> float:
    """The statement's prediction half, for two prediction tables in the same row order; returns
    the largest difference of a probability seen."""
    assert sorted(spark_table.column_names) == sorted(local_table.column_names)
    probabilities = [name for name in local_table.column_names if name.startswith("proba_")]
    largest = 0.0
    for name in probabilities:
        mine, theirs = (np.asarray(table.column(name), dtype=float) for table in (spark_table, local_table))
        np.testing.assert_allclose(mine, theirs, rtol=PROBA_RTOL, atol=PROBA_ATOL, err_msg=name)
        largest = max(largest, float(np.max(np.abs(mine - theirs), initial=0.0)))
    assert spark_table.column("prediction").to_pylist() == local_table.column("prediction").to_pylist()
    return largest
