"""Confusion counts: scikit-learn's numbers (Brier score and log-loss too), labels sorted, labels the model
never learned included."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, confusion_matrix, f1_score, log_loss

from nbstream.metrics.classification import ConfusionCounts


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


def _sklearn_columns(counts: ConfusionCounts, proba: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """proba over every label of the counts (0 for labels the model never learned), columns sorted
    as scikit-learn expects them; and those labels."""
    padded = np.zeros((len(proba), len(counts.labels)))
    padded[:, :proba.shape[1]] = proba
    order = np.argsort(counts.labels)
    return padded[:, order], np.asarray(counts.labels)[order]


@pytest.mark.parametrize("classes, drawn", [
    (np.array(["spam", "ham"]), ["spam", "ham"]),  # binary: scikit-learn halves the sum over classes
    (np.array([5, 0, 4]), [5, 0, 4]),  # multiclass: it does not
    (np.array([1, 0]), [1, 0, 7]),  # a label never learned makes three
])
def test_brier_score_and_log_loss_are_scikit_learns_through_json_shards(classes, drawn):
    rng = np.random.default_rng(3)
    y_true = rng.choice(drawn, size=400)
    proba = rng.dirichlet(np.full(len(classes), 0.3), size=400)  # many near 0 or 1
    shards = [ConfusionCounts(classes) for _ in range(3)]
    for shard, rows in zip(shards, np.array_split(np.arange(400), 3), strict=True):
        for start in range(rows[0], rows[-1] + 1, 50):
            stop = min(start + 50, rows[-1] + 1)
            shard.add(y_true[start:stop], proba[start:stop])
    total = ConfusionCounts(classes)
    for shard in shards:
        total.merge(ConfusionCounts.from_json(shard.to_json()))
    report = total.report()
    padded, labels = _sklearn_columns(total, proba)
    assert report["brier"] == pytest.approx(brier_score_loss(y_true, padded, labels=labels), rel=1e-12)
    assert report["log_loss"] == pytest.approx(log_loss(y_true, padded, labels=labels), rel=1e-12)


def test_counts_grown_to_new_model_classes_keep_their_brier_sum():
    counts = ConfusionCounts(np.array(["a", "b"]))
    counts.add(np.array(["a", "c"]), np.array([[0.75, 0.25], [0.5, 0.5]]))  # "c": p = 0, a term of 1
    grown = counts.with_model_classes(np.array(["a", "b", "c"]))
    assert grown.brier_sum == counts.brier_sum == pytest.approx(0.25 ** 2 * 2 + 0.5 ** 2 * 2 + 1)
    assert grown.report()["brier"] == pytest.approx(counts.brier_sum / 2)  # three labels either way
