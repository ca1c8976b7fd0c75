"""The class set of a model: fixed up front, or open and growing as labels arrive."""

from __future__ import annotations

import numpy as np


class LabelError(ValueError):
    """A label the class set refuses: outside a fixed set of classes."""


class LabelTypeError(LabelError, TypeError):
    """Labels that mix numbers and strings."""


class ClassSet:
    """Maps labels to row indices of the statistics.

    A fixed set is sorted, as scikit-learn orders ``classes_``; a label outside it is an
    error. An open set appends each new label in order of first appearance in the stream,
    so existing columns never move and the order does not depend on how the stream was
    chunked.

    >>> classes = ClassSet.open()
    >>> classes.index(np.array(["spam", "ham", "spam"])).tolist()
    [0, 1, 0]
    >>> classes.labels.tolist()
    ['spam', 'ham']
    """

    def __init__(self, labels: np.ndarray, fixed: bool):
        self.labels = labels
        self.fixed = fixed
        self._position = {label: i for i, label in enumerate(labels.tolist())}

    @classmethod
    def open(cls) -> "ClassSet":
        return cls(np.array([]), fixed=False)

    @classmethod
    def fixed_from(cls, classes) -> "ClassSet":
        labels = np.unique(np.asarray(classes))
        if labels.size == 0:
            raise ValueError("classes must name at least one class.")
        return cls(labels, fixed=True)

    def __len__(self) -> int:
        return len(self._position)

    def known(self, y: np.ndarray) -> np.ndarray:
        """Whether each label is already a class, shape (n_samples,) of bool.

        >>> ClassSet.fixed_from(["a", "b"]).known(np.array(["b", "z", "a"])).tolist()
        [True, False, True]
        """
        unique, inverse = np.unique(y, return_inverse=True)
        return np.array([label in self._position for label in unique.tolist()], dtype=bool)[inverse.reshape(-1)]

    def index(self, y: np.ndarray) -> np.ndarray:
        """Row index of each label, shape (n_samples,); an open set learns new labels."""
        unique, first_seen, inverse = np.unique(y, return_index=True, return_inverse=True)
        unknown = [i for i, label in enumerate(unique.tolist()) if label not in self._position]
        if unknown:
            new_labels = unique[sorted(unknown, key=lambda i: first_seen[i])]
            if self.fixed:
                raise LabelError(f"label(s) {new_labels.tolist()} not among the classes "
                                 f"{self.labels.tolist()} given on the first partial_fit.")
            self.extend(new_labels)
        rows = np.array([self._position[label] for label in unique.tolist()], dtype=np.intp)
        return rows[inverse.reshape(-1)]

    def extend(self, new_labels: np.ndarray) -> None:
        """Append labels not yet known, keeping their order and dtype (open sets only)."""
        new_labels = np.asarray(new_labels)
        added = new_labels[[label not in self._position for label in new_labels.tolist()]]
        if not len(added):
            return
        if self.fixed:
            raise LabelError(f"label(s) {added.tolist()} not among the fixed classes {self.labels.tolist()}.")
        if len(self.labels) and (self.labels.dtype.kind in "US") != (added.dtype.kind in "US"):
            raise LabelTypeError(f"labels mix numbers and strings: known {self.labels.tolist()}, "
                            f"new {added.tolist()}.")
        self.labels = np.concatenate([self.labels, added]) if len(self.labels) else added
        for label in added.tolist():
            self._position[label] = len(self._position)

    def rows_for(self, other: "ClassSet") -> np.ndarray:
        """Where each of another set's classes sits in this one (extending an open set)."""
        self.extend(other.labels)
        return np.array([self._position[label] for label in other.labels.tolist()], dtype=np.intp)
