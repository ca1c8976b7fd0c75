"""Names for the arrays the library passes around, so signatures say what they hold."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]  # category codes, counts, flat indices
IndexArray: TypeAlias = npt.NDArray[np.intp]  # row or feature positions
BoolArray: TypeAlias = npt.NDArray[np.bool_]
AnyArray: TypeAlias = npt.NDArray[Any]  # labels, or input in its own dtype
FloatingArray: TypeAlias = npt.NDArray[np.floating[Any]]  # float64, or a GaussianNB's input float dtype
# A feature matrix as the models take it: an array of any numeric dtype, or a scipy.sparse CSR
# matrix (scipy is optional and ships no type information, hence Any).
Features: TypeAlias = Any
