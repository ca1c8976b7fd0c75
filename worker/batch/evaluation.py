"""Classification metrics accumulated batch by batch (the data need not fit in memory)."""

from __future__ import annotations

import numpy as np

_EPS = 1e-15  # probabilities are clipped here for log-loss, as scikit-learn does


class ConfusionCounts:
    """Confusion matrix over the model's classes plus any true label it never learned."""

    def __init__(self, classes: np.ndarray):
        self.labels = list(classes.tolist())
        self._index = {label: i for i, label in enumerate(self.labels)}
        self._n_model_classes = len(self.labels)
        self.matrix = np.zeros((len(self.labels), len(self.labels)), dtype=np.int64)
        self.log_loss_sum = 0.0
        self.n = 0

    def add(self, y_true: np.ndarray, proba: np.ndarray) -> None:
        """y_true: (n,) labels; proba: (n, n_model_classes) predicted probabilities."""
        for label in dict.fromkeys(y_true.tolist()):
            if label not in self._index:
                self._index[label] = len(self.labels)
                self.labels.append(label)
                self.matrix = np.pad(self.matrix, [(0, 1), (0, 1)])
        true = np.array([self._index[label] for label in y_true.tolist()], dtype=np.int64)
        predicted = np.argmax(proba, axis=1)
        np.add.at(self.matrix, (true, predicted), 1)
        known = true < self._n_model_classes
        p_true = np.zeros(len(true))
        p_true[known] = proba[np.flatnonzero(known), true[known]]
        self.log_loss_sum -= np.log(np.clip(p_true, _EPS, 1.0)).sum()
        self.n += len(true)

    def report(self) -> dict:
        """Metrics as plain numbers and lists (JSON-ready)."""
        tp = np.diag(self.matrix).astype(float)
        predicted = self.matrix.sum(axis=0)
        actual = self.matrix.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted > 0, tp / predicted, 0.0)
            recall = np.where(actual > 0, tp / actual, 0.0)
            f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        present = (predicted + actual) > 0
        return {
            "rows": self.n,
            "accuracy": float(tp.sum() / self.n) if self.n else 0.0,
            "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
            "log_loss": self.log_loss_sum / self.n if self.n else 0.0,
            "classes": [{"label": label, "precision": float(p), "recall": float(r), "f1": float(f),
                         "support": int(s)}
                        for label, p, r, f, s in zip(self.labels, precision, recall, f1, actual)],
            "labels": self.labels,
            "confusion_matrix": self.matrix.tolist(),
        }
