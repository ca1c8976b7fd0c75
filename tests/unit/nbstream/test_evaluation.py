"""Confusion counts: scikit-learn's numbers, labels sorted, labels the model never learned included."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import confusion_matrix, f1_score

from nbstream.evaluation import ConfusionCounts


def test_counts_match_scikit_learn_with_sorted_labels_and_unlearned_ones():
    rng = np.random.default_rng(0)
    classes = np.array([5, 0, 4, 1])  # first-appearance order, as a model may hold them
    y_true = rng.choice([5, 0, 4, 1, 9, 7], size=500)  # 9 and 7 were never learned
    proba = rng.dirichlet(np.ones(4), size=500)
    counts = ConfusionCounts(classes)
    for start in range(0, 500, 64):
        counts.add(y_true[start:start + 64], proba[start:start + 64])
    report = counts.report()
    y_pred = classes[np.argmax(proba, axis=1)]
    assert report["labels"] == [0, 1, 4, 5, 7, 9] and report["predicted_labels"] == [0, 1, 4, 5]
    full = confusion_matrix(y_true, y_pred, labels=[0, 1, 4, 5, 7, 9])
    np.testing.assert_array_equal(report["confusion_matrix"], full[:, :4])  # columns: what can be predicted
    assert full[:, 4:].sum() == 0
    assert np.isclose(report["macro_f1"], f1_score(y_true, y_pred, average="macro"), rtol=1e-12)
    assert report["accuracy"] == np.mean(y_true == y_pred)


def test_thousands_of_unlearned_labels_grow_rows_only():
    counts = ConfusionCounts(np.array(["a", "b"]))
    labels = np.array([f"u{i}" for i in range(5_000)])
    counts.add(labels, np.tile([0.9, 0.1], (5_000, 1)))
    assert counts.counts.shape == (5_002, 2)  # not 5,002 x 5,002 while counting
    report = counts.report()
    assert report["classes"][0]["label"] == "a"
    assert np.shape(report["confusion_matrix"]) == (5_002, 2)  # nor when reporting
