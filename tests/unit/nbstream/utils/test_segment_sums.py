"""segment_sums_before: the sum of the earlier entries of each entry's segment, exactly for
integers, from 0 at each segment for floats."""

import numpy as np
import pytest

from nbstream.utils.segment_sums import segment_sums_before


def naive(amounts: np.ndarray, opens: np.ndarray) -> np.ndarray:
    """One entry at a time, along axis 0."""
    bounds = np.r_[opens, len(amounts)]
    out = np.zeros_like(amounts)
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        for i in range(begin + 1, end):
            out[i] = out[i - 1] + amounts[i - 1]
    return out


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_sums_of_earlier_entries_within_each_segment(dtype, axis):
    rng = np.random.default_rng(7)
    amounts = (rng.integers(0, 4, (40, 3)) * (rng.random((40, 3)) < 0.5)).astype(dtype)
    if dtype == np.float64:
        amounts *= rng.random((40, 3)) * 1e3
    opens = np.r_[0, np.sort(rng.choice(np.arange(1, 40), 9, replace=False))]
    placed = np.zeros((41, 3), dtype=dtype)
    placed[1:] = amounts
    if axis == 1:
        placed = np.ascontiguousarray(placed.T)
    got = segment_sums_before(placed, opens, axis=axis)
    got = got.T if axis == 1 else got
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, naive(amounts, opens), rtol=1e-12, atol=0)


def test_an_entry_with_nothing_before_it_in_its_segment_is_exactly_zero():
    amounts = np.array([0.1, 0.2, 0.7, 0.0, 0.0, 1e-3])  # 0.1 + 0.2 + 0.7 - 1.0 leaves a residue
    placed = np.r_[0.0, amounts][:, None].copy()
    got = segment_sums_before(placed, np.array([0, 3]), axis=0)[:, 0]
    assert got[3] == 0.0 and got[4] == 0.0 and got[0] == 0.0
    assert got[5] == 0.0


def test_no_entries():
    assert segment_sums_before(np.zeros((1, 2)), np.zeros(0, dtype=np.intp), axis=0).shape == (0, 2)


def test_each_segment_begins_at_its_start():
    placed = np.array([[0, 1, 2, 3, 4]], dtype=np.int64)  # amounts 1, 2, 3, 4 in segments [0, 2), [2, 4)
    got = segment_sums_before(placed, np.array([0, 2]), axis=1, start=np.array([[10.0, 20.0]]))
    assert got.tolist() == [[10.0, 11.0, 20.0, 23.0]]
