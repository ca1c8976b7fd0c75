"""Classification metrics accumulated batch by batch (the data need not fit in memory), and
summed across shards: ``worker evaluate`` and ``nbstream.spark.evaluate`` report the same numbers.

The log-loss and Brier score are scikit-learn's: ``log_loss`` clips probabilities to
[eps, 1 - eps] (eps of float64); ``brier_score_loss`` (>= 1.7, ``scale_by_half="auto"``) is the
mean over rows of the sum over classes of (p_c - 1[y = c])^2 with three classes or more, and
half that, the binary score, with two. A true label the model never learned is a class whose
probability is 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..utils.ndarrays import AnyArray, FloatArray, IndexArray, IntArray

_EPS = float(np.finfo(np.float64).eps)  # probabilities are clipped here for log-loss, as scikit-learn does


def example_losses(proba: FloatArray, true_column: IndexArray) -> tuple[FloatArray, FloatArray]:
    """Each row's log-loss and Brier sum (over classes, unscaled), shapes (n,) and (n,).

    proba : (n, n_classes) predicted probabilities; true_column : (n,) the column of each row's
    true class, -1 for a label no column stands for (its probability is 0, its term of the Brier
    sum 1)."""
    known = np.flatnonzero(true_column >= 0)
    p_true = np.zeros(len(true_column))
    p_true[known] = proba[known, true_column[known]]
    errors = np.array(proba, dtype=np.float64)  # p_c - 1[c true], squared and summed as scikit-learn does
    errors[known, true_column[known]] -= 1
    brier = np.einsum("ij,ij->i", errors, errors)
    brier[true_column < 0] += 1
    return -np.log(np.clip(p_true, _EPS, 1 - _EPS)), brier


def brier_score(brier_sum: float, n: float, n_labels: int) -> float:
    """The mean Brier score of n rows whose Brier sums add to brier_sum, over n_labels labels:
    halved for two labels or fewer, as scikit-learn halves it for binary problems (see the module)."""
    return brier_sum / n * (0.5 if n_labels < 3 else 1.0)


class ConfusionCounts:
    """Confusion counts over the model's classes plus any true label it never learned.

    A label the model never learned can be a true label but never a prediction, so it adds a
    row and no column: the counts are (n_labels, n_model_classes), grown by doubling, and the
    cost of a new label does not depend on how many came before.
    """

    def __init__(self, classes: AnyArray):
        self.labels = list(classes.tolist())
        self._index = {label: i for i, label in enumerate(self.labels)}
        self._n_model_classes = len(self.labels)
        self._rows = np.zeros((max(1, len(self.labels)), len(self.labels)), dtype=np.int64)
        self.log_loss_sum = 0.0
        self.brier_sum = 0.0  # of each row's sum over the labels, unscaled (see brier_score)
        self.n = 0

    @property
    def counts(self) -> IntArray:
        """(n_labels, n_model_classes): rows true labels, columns predicted classes."""
        return self._rows[:len(self.labels)]

    def add(self, y_true: AnyArray, proba: FloatArray) -> None:
        """y_true: (n,) labels; proba: (n, n_model_classes) predicted probabilities."""
        true = self._rows_of_array(np.asarray(y_true))
        predicted = np.argmax(proba, axis=1)
        n_columns = self._n_model_classes
        cells = np.bincount(true * n_columns + predicted, minlength=len(self._rows) * n_columns)
        self._rows += cells.reshape(len(self._rows), n_columns)
        log_loss, brier = example_losses(proba, np.where(true < n_columns, true, -1))
        self.log_loss_sum += float(log_loss.sum())
        self.brier_sum += float(brier.sum())
        self.n += len(true)

    @property
    def model_classes(self) -> list[Any]:
        """The model's classes: the columns of the counts."""
        return self.labels[:self._n_model_classes]

    def with_model_classes(self, classes: AnyArray) -> ConfusionCounts:
        """These counts for a model that has since learned more classes: ``classes`` begin with
        this one's model classes, in order; the new ones add columns of zeros."""
        if list(classes.tolist()[:self._n_model_classes]) != self.model_classes:
            raise ValueError("the new classes must begin with the model's own, in order")
        grown = ConfusionCounts(classes)
        rows = grown._rows_of(self.labels)
        grown._rows[rows[:, None], np.arange(self._n_model_classes)[None, :]] += self.counts
        grown.log_loss_sum, grown.brier_sum, grown.n = self.log_loss_sum, self.brier_sum, self.n
        return grown

    def _rows_of_array(self, labels: AnyArray) -> IntArray:
        """_rows_of for an array of labels, looking up its distinct labels only."""
        distinct, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
        order = np.argsort(first)  # new labels get rows in order of first appearance, as in _rows_of
        rows = np.empty(len(distinct), dtype=np.int64)
        rows[order] = self._rows_of(distinct[order].tolist())
        return rows[inverse.reshape(-1)]

    def _rows_of(self, labels: list[Any]) -> IntArray:
        """The row of each label, shape (len(labels),); labels not seen before get new rows."""
        for label in dict.fromkeys(labels):
            if label not in self._index:
                self._index[label] = len(self.labels)
                self.labels.append(label)
        if len(self.labels) > len(self._rows):
            grown = np.zeros((2 * len(self.labels), self._n_model_classes), dtype=np.int64)
            grown[:len(self._rows)] = self._rows
            self._rows = grown
        return np.array([self._index[label] for label in labels], dtype=np.int64)

    def merge(self, other: ConfusionCounts) -> ConfusionCounts:
        """Add the counts of another shard scored by the same model; returns self."""
        if other.labels[:other._n_model_classes] != self.labels[:self._n_model_classes]:
            raise ValueError("cannot add the counts of a model with other classes")
        rows = self._rows_of(other.labels)
        np.add.at(self._rows, rows, other.counts)
        self.log_loss_sum += other.log_loss_sum
        self.brier_sum += other.brier_sum
        self.n += other.n
        return self

    def to_json(self) -> dict[str, Any]:
        """The counts as plain values (labels as Python numbers or strings), for ``from_json``."""
        return {"labels": self.labels, "model_classes": self._n_model_classes, "counts": self.counts.tolist(),
                "log_loss_sum": self.log_loss_sum, "brier_sum": self.brier_sum, "n": self.n}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfusionCounts:
        labels = list(data["labels"])
        counts = cls(np.asarray(labels[:data["model_classes"]]))
        counts._rows_of(labels)
        counts._rows[:len(labels)] = np.asarray(data["counts"], dtype=np.int64).reshape(len(labels), -1)
        counts.log_loss_sum, counts.brier_sum = float(data["log_loss_sum"]), float(data["brier_sum"])
        counts.n = int(data["n"])
        return counts

    def report(self) -> dict[str, Any]:
        """Metrics as plain numbers and lists (JSON-ready), labels in sorted order."""
        counts = self.counts
        n_labels, n_model = counts.shape
        tp = np.zeros(n_labels)
        tp[:n_model] = np.diag(counts[:n_model])
        predicted = np.zeros(n_labels, dtype=np.int64)
        predicted[:n_model] = counts.sum(axis=0)
        actual = counts.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted > 0, tp / predicted, 0.0)
            recall = np.where(actual > 0, tp / actual, 0.0)
            f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        present = (predicted + actual) > 0
        def by_label(i: int) -> tuple[bool, Any]:
            return isinstance(self.labels[i], str), self.labels[i]
        order = sorted(range(n_labels), key=by_label)
        columns = sorted(range(n_model), key=by_label)  # a prediction is always one of the model's classes
        return {
            "rows": self.n,
            "accuracy": float(tp.sum() / self.n) if self.n else 0.0,
            "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
            "log_loss": self.log_loss_sum / self.n if self.n else 0.0,
            "brier": brier_score(self.brier_sum, self.n, n_labels) if self.n else 0.0,
            "classes": [{"label": self.labels[i], "precision": float(precision[i]), "recall": float(recall[i]),
                         "f1": float(f1[i]), "support": int(actual[i])} for i in order],
            "labels": [self.labels[i] for i in order],
            "predicted_labels": [self.labels[i] for i in columns],
            "confusion_matrix": counts[np.ix_(order, columns)].tolist(),
        }
