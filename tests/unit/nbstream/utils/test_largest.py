"""The largest entries of each row: those a full sort gives, in its order, zeros left out and padded."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nbstream.utils.largest import largest_of_cells, largest_of_rows, merged_largest

# Few distinct values, so that rows are full of ties (and of zeros).
VALUES = st.sampled_from([0.0, 0.0, 1.0, -1.0, 2.5, -2.5, 1e-300, 7.0])


def sorted_rows(values: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The reference: each row's nonzero entries sorted by decreasing |value|, then column."""
    chosen = [sorted(np.flatnonzero(row).tolist(), key=lambda j, row=row: (-abs(row[j]), j))[:k] for row in values]
    width = k if k is not None else max(map(len, chosen), default=0)
    columns = np.full((len(values), width), -1)
    top = np.zeros((len(values), width))
    for i, picked in enumerate(chosen):
        columns[i, :len(picked)] = picked
        top[i, :len(picked)] = values[i, picked]
    return columns, top


@settings(max_examples=300, deadline=None)
@given(values=hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 200)), elements=VALUES),
       k=st.integers(1, 20))
def test_a_rows_largest_entries_are_those_of_a_full_sort(values, k):
    columns, top = largest_of_rows(values, k)
    expected_columns, expected_top = sorted_rows(values, k)
    np.testing.assert_array_equal(columns, expected_columns)
    np.testing.assert_array_equal(top, expected_top)
    assert columns.dtype == np.int64 and top.shape == (len(values), k)


@settings(max_examples=200, deadline=None)
@given(values=hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 60)), elements=VALUES),
       k=st.one_of(st.none(), st.integers(1, 8)))
def test_cells_give_what_their_dense_rows_give_and_none_keeps_every_nonzero_entry(values, k):
    rows, columns = np.nonzero(values)
    found = largest_of_cells(rows, columns, values[rows, columns], len(values), k)
    np.testing.assert_array_equal(found[0], sorted_rows(values, k)[0])
    np.testing.assert_array_equal(found[1], sorted_rows(values, k)[1])
    if k is None:
        assert found[0].shape[1] == np.count_nonzero(values, axis=1).max(initial=0)


def test_rows_of_very_unlike_lengths_are_sorted_apart_with_the_same_result(rng):
    values = np.zeros((40, 5000))
    values[0] = rng.normal(size=5000)
    values[1:, :3] = rng.normal(size=(39, 3))
    rows, columns = np.nonzero(values)
    for k in (2, None):
        found = largest_of_cells(rows, columns, values[rows, columns], len(values), k)
        np.testing.assert_array_equal(found[0], sorted_rows(values, k)[0])


def test_a_merge_of_two_ordered_results_is_ordered_and_cut_to_k():
    first = (np.array([[4, 1, -1]]), np.array([[-3.0, 1.0, 0.0]]))
    second = (np.array([[0, 2]]), np.array([[3.0, -1.0]]))
    columns, values = merged_largest(first, second, 3)
    assert columns.tolist() == [[0, 4, 1]] and values.tolist() == [[3.0, -3.0, 1.0]]
    columns, values = merged_largest(first, second, None)
    assert columns.tolist() == [[0, 4, 1, 2]] and values.tolist() == [[3.0, -3.0, 1.0, -1.0]]
    columns, _ = merged_largest(first, second, 6)
    assert columns.tolist() == [[0, 4, 1, 2, -1, -1]]
