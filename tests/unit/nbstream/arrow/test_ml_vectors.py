"""Spark ML vectors as Arrow structs (dense and sparse) read by the vector encoder."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nbstream.arrow import FeatureSpec
from nbstream.arrow.ml_vectors import DENSE_UP_TO, is_ml_vector_type
from nbstream.utils.validation import LARGEST_VALUE

VECTOR = pa.struct([("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())),
                    ("values", pa.list_(pa.float64()))])


def dense(values):
    return {"type": 1, "size": None, "indices": None, "values": list(values)}


def sparse(size, entries):
    return {"type": 0, "size": size, "indices": list(entries), "values": list(entries.values())}


def encode(rows, counts_only=True):
    batch = pa.record_batch({"v": pa.array(rows, VECTOR)})
    encoder = FeatureSpec.vector("v").encoder()
    X, problems = encoder.encode(batch, learn=True, counts_only=counts_only)
    return X, problems, encoder


def test_dense_and_sparse_vectors_give_the_same_rows():
    X, problems, encoder = encode([dense([1, 0, 2]), sparse(3, {0: 1.0, 2: 2.0}), sparse(3, {})])
    assert is_ml_vector_type(VECTOR) and not problems.any() and encoder.width == 3
    np.testing.assert_array_equal(X, [[1, 0, 2], [1, 0, 2], [0, 0, 0]])


def test_wide_sparse_vectors_stay_sparse():
    width = DENSE_UP_TO + 1
    X, problems, _ = encode([sparse(width, {5: 1.0, width - 1: 3.0}), dense(np.arange(width) % 2)])
    assert not problems.any() and X.format == "csr" and X.shape == (2, width)
    expected = np.zeros((2, width))
    expected[0, [5, width - 1]] = [1, 3]
    expected[1] = np.arange(width) % 2
    np.testing.assert_array_equal(X.toarray(), expected)


def test_bad_vectors_are_flagged_by_row():
    rows = [dense([1, 2]), dense([1, 2, 3]), sparse(2, {1: -1.0}), sparse(2, {5: 1.0}), None, dense([np.nan, 1])]
    X, problems, _ = encode(rows)
    assert list(problems) == [(1, "v", "vector has 3 values; expected 2"),
                              (2, "v", "negative value (this model needs counts)"),
                              (3, "v", "vector index out of range"), (4, "v", "null value"),
                              (5, "v", "NaN or infinite value")]
    np.testing.assert_array_equal(X[0], [1, 2])


@pytest.mark.parametrize("offset", [1, 2])
def test_a_sliced_column_reads_its_own_rows(offset):
    rows = [dense([9, 9]), sparse(2, {0: 4.0}), dense([1, 2]), sparse(2, {1: 5.0})]
    batch = pa.record_batch({"v": pa.array(rows, VECTOR)}).slice(offset)
    X, problems = FeatureSpec.vector("v").encoder().encode(batch, learn=True)
    expected = np.array([[9, 9], [4, 0], [1, 2], [0, 5]])[offset:]
    assert not problems.any()
    np.testing.assert_array_equal(X, expected)


def test_dense_vectors_of_the_width_are_judged_by_the_rules_of_list_columns():
    rows = [dense([1, 2]), dense([np.inf, 1]), dense([3, -1]), dense([1e308, 0])]
    X, problems, _ = encode(rows)
    assert list(problems) == [(1, "v", "NaN or infinite value"), (2, "v", "negative value (this model needs counts)"),
                              (3, "v", f"value beyond ±{LARGEST_VALUE:g}")]
    np.testing.assert_array_equal(X[0], [1, 2])
