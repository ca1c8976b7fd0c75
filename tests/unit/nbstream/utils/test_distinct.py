"""distinct_and_places: np.unique's distinct values and inverse, by a hash table where numba is installed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.utils import compiled, distinct
from nbstream.utils.compiled import SWITCH

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def every_batch_compiled(monkeypatch):
    """The compiled loops take batches of any size here (by default small ones take numpy)."""
    monkeypatch.setattr(compiled, "SMALLEST_BATCH", 0)


def _assert_as_numpy(values):
    found, places = distinct.distinct_and_places(values)
    expected, inverse = np.unique(values, return_inverse=True)
    np.testing.assert_array_equal(found, expected)
    np.testing.assert_array_equal(places, inverse)
    assert found.dtype == values.dtype and places.dtype == np.intp


@pytest.mark.parametrize("values", [
    np.array([], dtype=np.int64), np.array([5]), np.array([7, 3, 7, 5, 3, 3]),
    np.array([-(2**62), 2**62, 0, -1, 2**62]),  # far apart, negative
    (np.arange(5000, dtype=np.int64) << 32) | (np.arange(5000) % 2),  # keys that differ only in high bits
    np.random.default_rng(0).integers(0, 1 << 20, size=100_000).astype(np.int32),
])
def test_the_distinct_values_and_places_of_np_unique(values):
    _assert_as_numpy(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300))
def test_any_int64_values(values):
    _assert_as_numpy(np.array(values, dtype=np.int64))


def test_more_values_than_are_hashed_at_once_are_sorted(monkeypatch):
    monkeypatch.setattr(distinct, "MOST_HASHED", 3)
    monkeypatch.setattr(distinct, "_places", None)  # not called: np.unique answers
    _assert_as_numpy(np.array([4, 1, 4, 9]))


def test_without_numba_np_unique_answers(monkeypatch):
    monkeypatch.setenv(SWITCH, "0")
    monkeypatch.setattr(distinct, "_places", None)
    _assert_as_numpy(np.array([4, 1, 4, 9]))


def test_unsigned_and_float_values_are_left_to_np_unique(monkeypatch):
    monkeypatch.setattr(distinct, "_places", None)
    _assert_as_numpy(np.array([2**63 + 5, 3, 2**63 + 5], dtype=np.uint64))
    _assert_as_numpy(np.array([1.5, 0.5, 1.5]))
