"""The class set of a model: fixed up front, or open and growing as labels arrive."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .ndarrays import AnyArray, BoolArray, IndexArray


class LabelError(ValueError):
    """A label the class set refuses: outside a fixed set of classes."""


class LabelTypeError(LabelError, TypeError):
    """Labels that mix numbers and strings."""


def distinct_classes(classes: npt.ArrayLike) -> AnyArray:
    """The classes a ``classes`` argument names, sorted, shape (n_classes,).

    ValueError when it names none, or one twice (scikit-learn's discrete models refuse
    that too):

    >>> distinct_classes(["b", "a"]).tolist()
    ['a', 'b']
    >>> distinct_classes([0, 1, 1])
    Traceback (most recent call last):
    ...
    ValueError: classes must list each class once; got [0, 1, 1].
    """
    listed = np.asarray(classes)
    unique = np.unique(listed)
    if unique.size == 0:
        raise ValueError("classes must name at least one class.")
    if unique.size != listed.size:
        raise ValueError(f"classes must list each class once; got {listed.tolist()}.")
    return unique


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

    def __init__(self, labels: AnyArray, fixed: bool):
        self.labels = labels
        self.fixed = fixed
        self._position = {label: i for i, label in enumerate(labels.tolist())}

    @classmethod
    def open(cls) -> ClassSet:
        return cls(np.array([]), fixed=False)

    @classmethod
    def fixed_from(cls, classes: npt.ArrayLike) -> ClassSet:
        """The fixed, sorted set of the distinct labels in ``classes``."""
        labels = np.unique(np.asarray(classes))
        if labels.size == 0:
            raise ValueError("classes must name at least one class.")
        return cls(labels, fixed=True)

    @classmethod
    def restored(cls, labels: object, fixed: bool) -> ClassSet:
        """The class set a model's exported state lists, in its order: ValueError unless the
        labels are at least one, distinct, and strings or integers (as training accepts them)."""
        if not isinstance(labels, np.ndarray) or labels.ndim != 1 or labels.size == 0:
            raise ValueError("classes must be a non-empty list of distinct labels")
        kind = labels.dtype.kind
        integral = kind != "f" or bool(np.isfinite(labels).all() and (labels == np.round(labels)).all())
        if kind not in "USbiuf" or not integral:
            raise ValueError(f"classes must be strings or integers; got {labels.tolist()[:10]} (first ten)")
        if len(np.unique(labels)) != len(labels):
            raise ValueError("classes must be a list of distinct labels")
        return cls(labels, fixed)

    def __len__(self) -> int:
        return len(self._position)

    def known(self, y: AnyArray) -> BoolArray:
        """Whether each label is already a class, shape (n_samples,) of bool.

        >>> ClassSet.fixed_from(["a", "b"]).known(np.array(["b", "z", "a"])).tolist()
        [True, False, True]
        """
        unique, inverse = np.unique(y, return_inverse=True)
        return np.array([label in self._position for label in unique.tolist()], dtype=bool)[inverse.reshape(-1)]

    def index(self, y: AnyArray) -> IndexArray:
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

    def require_same(self, classes: AnyArray) -> None:
        """ValueError unless ``classes`` (sorted and distinct) are this set's, in any order."""
        if not np.array_equal(classes, np.unique(self.labels)):
            raise ValueError(f"classes={classes.tolist()} differs from the classes "
                             f"{self.labels.tolist()} of the first partial_fit.")

    def extend(self, new_labels: npt.ArrayLike) -> None:
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

    def rows_for(self, labels: AnyArray) -> IndexArray:
        """Where each of these labels (another model's classes) sits in this set, shape
        (n_labels,); an open set appends those it does not know."""
        self.extend(labels)
        return np.array([self._position[label] for label in labels.tolist()], dtype=np.intp)
