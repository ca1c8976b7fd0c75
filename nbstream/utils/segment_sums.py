"""Sums of the earlier entries of each segment of an array: what the rows of a batch before a row
added to a count it shares with them (the count of the row's feature, or of its category, in a
class)."""

from __future__ import annotations

import numpy as np

from .ndarrays import AnyArray, FloatArray, IndexArray


def segment_sums_before(placed: AnyArray, opens: IndexArray, axis: int, start: FloatArray | None = None
                        ) -> FloatArray:
    """For each entry along ``axis``, its segment's ``start`` plus the sum of the entries before it
    in its segment.

    placed : n + 1 entries along ``axis``, the first 0 and entry i + 1 holding amount i, int64 or
    float64 (summed in place: it is scratch); opens : (n_segments,) sorted, from 0, the entries
    where segments begin; start : n_segments entries along ``axis`` (default 0). Returns float64,
    n entries along ``axis``. int64 amounts are summed exactly, by one cumulative sum less its
    value where the segment begins; float64 ones from 0 at each segment, so that the rounding is
    that of the segment's own amounts, and (without ``start``) an entry of which no earlier entry of
    its segment had an amount is exactly 0.
    """
    def along(index: IndexArray | slice) -> tuple[slice | IndexArray, ...]:  # placed[index] along the axis
        return (slice(None),) * axis + (index,)

    n = placed.shape[axis] - 1
    if placed.dtype.kind == "f" and len(opens) > 1:  # each segment's total taken off where the next begins
        placed[along(opens[1:])] -= np.add.reduceat(placed[along(slice(1, None))], opens, axis=axis)[along(slice(-1))]
    np.cumsum(placed, axis=axis, out=placed)  # along the axis, in memory order
    # What the cumulative sum holds where a segment begins: all before it (ints), a residue (floats).
    at_opens = np.take(placed, opens, axis=axis)
    base = -at_opens if start is None else start - at_opens
    segment_of = np.repeat(np.arange(len(opens)), np.diff(np.r_[opens, n]))
    before: FloatArray = np.add(placed[along(slice(-1))], np.take(base, segment_of, axis=axis), dtype=np.float64)
    return before
