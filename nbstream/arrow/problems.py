"""What can be wrong with input data: a schema that does not fit, or rows that cannot be used."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from ..utils.ndarrays import AnyArray, BoolArray, Features
from ..utils.validation import LARGEST_VALUE


class FeatureError(ValueError):
    """The data does not have the columns or types the feature spec needs."""


class RowProblems:
    """The first problem found in each row of a batch, if any.

    bad : (n_rows,) bool    column, message : (n_rows,) object (None where the row is good)
    """

    def __init__(self, n_rows: int):
        self.bad = np.zeros(n_rows, dtype=bool)
        self.column = np.empty(n_rows, dtype=object)
        self.message = np.empty(n_rows, dtype=object)

    def flag(self, rows: BoolArray, column: str, message: str | npt.ArrayLike) -> None:
        """Record ``message`` (a string, or an array of one string per row of the batch)
        for the flagged rows that have no problem yet."""
        new = rows & ~self.bad
        if new.any():
            self.column[new] = column
            self.message[new] = message if isinstance(message, str) else np.asarray(message, dtype=object)[new]
            self.bad |= new

    def any(self) -> bool:
        return bool(self.bad.any())

    @property
    def good(self) -> BoolArray:
        """(n_rows,) bool: the rows without a problem."""
        return ~self.bad

    def select_good(self, values: Features) -> Features:
        """The good rows of ``values`` (an array or CSR matrix with one row per batch row),
        without a copy when every row is good.

        >>> problems = RowProblems(3)
        >>> problems.flag(np.array([False, True, False]), "x", "null value")
        >>> problems.select_good(np.array([10, 11, 12])).tolist()
        [10, 12]
        """
        return values[~self.bad] if self.bad.any() else values

    def first(self) -> tuple[int, str, str]:
        """(row, column, message) of the first bad row."""
        row = int(np.argmax(self.bad))
        return row, self.column[row], self.message[row]

    def __iter__(self) -> Iterator[tuple[int, str, str]]:
        """(row, column, message) of every bad row, in row order."""
        for row in np.flatnonzero(self.bad):
            yield int(row), str(self.column[row]), str(self.message[row])


def flag_values(X: AnyArray, column: str, counts_only: bool, problems: RowProblems) -> None:
    """Flag rows with a NaN or infinite value, a value beyond LARGEST_VALUE, or (for count
    models) a negative value; each row is judged by its largest and smallest value only (a NaN
    makes both NaN), two fast reductions where an elementwise test of each rule took four passes."""
    if X.dtype.kind not in "if" or X.shape[1] == 0 or (X.dtype.kind == "i" and not counts_only):
        return
    high, low = X.max(axis=1), X.min(axis=1)
    if X.dtype.kind == "f":
        problems.flag(~(np.isfinite(high) & np.isfinite(low)), column, "NaN or infinite value")
        if float(np.finfo(X.dtype).max) > LARGEST_VALUE:  # (a narrower float cannot hold such a value)
            problems.flag((high > LARGEST_VALUE) | (low < -LARGEST_VALUE), column, f"value beyond ±{LARGEST_VALUE:g}")
    if counts_only:
        problems.flag(low < 0, column, "negative value (this model needs counts)")
