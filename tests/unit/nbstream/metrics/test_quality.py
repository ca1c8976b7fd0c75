"""A partition's prequential quality: scikit-learn's numbers, cumulative and decayed, merged, stored."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, recall_score

from nbstream.metrics.quality import MOST_LABELS, RECENT_HALF_LIFE, PredictionQuality

CLASSES = np.array(["b", "a", "c"])  # in first-appearance order, as a model holds them


def stream(n: int, classes=CLASSES, extra=(), seed=0):
    """n labeled rows: labels (some of them ``extra`` labels no class stands for) and probabilities
    over classes, many near 0 or 1."""
    rng = np.random.default_rng(seed)
    y = rng.choice(list(classes) + list(extra), size=n)
    proba = rng.dirichlet(np.full(len(classes), 0.3), size=n)
    return y, proba


def judged_in_chunks(y, proba, classes=CLASSES, chunk=37) -> PredictionQuality:
    quality = PredictionQuality()
    for start in range(0, len(y), chunk):
        quality.judge(y[start:start + chunk], classes, proba[start:start + chunk])
    return quality


def sklearn_metrics(y, proba, classes, weights=None) -> dict:
    """What scikit-learn says of these rows: over every label, columns sorted as it expects them."""
    labels = np.unique(np.concatenate([classes, y]))
    columns = np.zeros((len(y), len(labels)))
    columns[:, np.searchsorted(labels, classes)] = proba
    predicted = classes[np.argmax(proba, axis=1)]
    present = np.unique(y)
    return {"accuracy": accuracy_score(y, predicted, sample_weight=weights),
            "log_loss": log_loss(y, columns, labels=labels, sample_weight=weights),
            "brier": brier_score_loss(y, columns, labels=labels, sample_weight=weights),
            "recall": dict(zip(present.tolist(), recall_score(y, predicted, labels=present, average=None,
                                                               sample_weight=weights).tolist(), strict=True))}


def flat(window: dict) -> dict:
    """A window's report as one level of numbers: recall.a, predicted_share.b..."""
    return {f"{name}.{label}" if isinstance(value, dict) else name: number
            for name, value in window.items()
            for label, number in (value.items() if isinstance(value, dict) else [(None, value)])}


def assert_metrics(window: dict, expected: dict) -> None:
    for name in ("accuracy", "log_loss", "brier"):
        assert window[name] == pytest.approx(expected[name], rel=1e-12), name
    assert window["recall"].keys() == expected["recall"].keys()
    for label, recall in expected["recall"].items():
        assert window["recall"][label] == pytest.approx(recall, rel=1e-12, abs=1e-15), label


@pytest.mark.parametrize("classes, extra", [(CLASSES, ()), (CLASSES, ("z",)), (np.array([1, 0]), ()),
                                            (np.array([1, 0]), (7,))],
                         ids=["multiclass", "a label no class stands for", "binary", "binary and a stranger"])
def test_cumulative_metrics_are_scikit_learns(classes, extra):
    y, proba = stream(1_000, classes, extra)
    report = judged_in_chunks(y, proba, classes).report()["all"]
    assert report["judged"] == 1_000
    assert_metrics(report, sklearn_metrics(y, proba, classes))


def test_recent_metrics_are_scikit_learns_with_weights_halving_every_half_life_whatever_the_chunks():
    y, proba = stream(3 * RECENT_HALF_LIFE, extra=("z",))
    weights = 0.5 ** (np.arange(len(y))[::-1] / RECENT_HALF_LIFE)  # the newest weighs 1
    chunked = judged_in_chunks(y, proba, chunk=211).report()["recent"]
    assert_metrics(chunked, sklearn_metrics(y, proba, CLASSES, weights))
    assert chunked["judged"] == pytest.approx(weights.sum(), rel=1e-12)
    at_once = judged_in_chunks(y, proba, chunk=len(y)).report()["recent"]
    assert flat(at_once) == pytest.approx(flat(chunked), rel=1e-12)


def test_the_recent_window_follows_a_change_the_cumulative_one_averages_away():
    quality = PredictionQuality()
    right = np.tile([[0.9, 0.05, 0.05]], (5 * RECENT_HALF_LIFE, 1))  # "b" predicted, "b" true
    quality.judge(np.full(len(right), "b"), CLASSES, right)
    quality.judge(np.full(RECENT_HALF_LIFE, "a"), CLASSES, right[:RECENT_HALF_LIFE])  # now all wrong
    report = quality.report()
    assert report["all"]["accuracy"] == pytest.approx(5 / 6)
    assert report["recent"]["accuracy"] == pytest.approx(0.5 * (1 - 0.5 ** 5) / (1 - 0.5 ** 6), rel=1e-9)
    assert report["recent"]["recall"]["a"] == 0 and report["recent"]["recall"]["b"] == 1


def test_the_predicted_class_distribution_counts_every_served_prediction():
    rng = np.random.default_rng(1)
    best = rng.choice(3, size=2_500, p=[0.6, 0.3, 0.1])
    quality = PredictionQuality()
    for start in range(0, len(best), 400):
        quality.predicted(CLASSES, best[start:start + 400])
    report = quality.report()
    shares = np.bincount(best, minlength=3) / len(best)
    assert report["all"]["served"] == 2_500 and report["all"]["judged"] == 0
    assert report["all"]["predicted_share"] == pytest.approx(dict(zip(CLASSES.tolist(), shares, strict=True)))
    weights = 0.5 ** (np.arange(len(best))[::-1] / RECENT_HALF_LIFE)
    recent = np.bincount(best, weights=weights, minlength=3) / weights.sum()
    assert report["recent"]["predicted_share"] == pytest.approx(dict(zip(CLASSES.tolist(), recent, strict=True)))
    assert report["all"]["accuracy"] is report["all"]["log_loss"] is report["all"]["brier"] is None


def test_the_merge_of_partitions_is_the_quality_of_all_their_rows():
    y, proba = stream(900, extra=("z", "w"))
    partition = np.random.default_rng(2).integers(0, 3, size=len(y))
    parts = [judged_in_chunks(y[partition == p], proba[partition == p], chunk=50) for p in range(3)]
    for p, part in enumerate(parts):
        part.predicted(CLASSES[::-1], np.full(p + 1, p))  # other class orders, other labels first
    merged = PredictionQuality.merged(parts).report()
    whole = judged_in_chunks(y, proba)
    whole.predicted(CLASSES, np.array([2, 1, 1, 0, 0, 0]))
    expected = whole.report()["all"]
    assert flat(merged["all"]) == pytest.approx(flat(expected), rel=1e-12)
    assert merged["all"]["predicted_share"] == pytest.approx({"c": 1 / 6, "a": 2 / 6, "b": 3 / 6})
    recent = [part.report()["recent"] for part in parts]
    assert merged["recent"]["judged"] == pytest.approx(sum(r["judged"] for r in recent), rel=1e-12)
    assert merged["recent"]["accuracy"] == pytest.approx(
        sum(r["accuracy"] * r["judged"] for r in recent) / merged["recent"]["judged"], rel=1e-12)
    assert PredictionQuality.merged([]).report()["all"]["accuracy"] is None


@pytest.mark.parametrize("classes, stranger", [(CLASSES, "z"), (np.array([2 ** 62 + 1, -3, 7]), 2 ** 62 + 3),
                                               (np.array([0.5, 2.0, -1.25]), 0.1)],
                         ids=["strings", "integers beyond a float's", "floats"])
def test_json_keeps_everything_and_the_labels_exactly(classes, stranger):
    y, proba = stream(300, classes, extra=(stranger,))
    quality = judged_in_chunks(y, proba, classes)
    quality.predicted(classes, np.argmax(proba, axis=1))
    data = json.loads(json.dumps(quality.to_json()))
    restored = PredictionQuality.from_json(data)
    assert restored.to_json() == quality.to_json()
    assert restored.report() == quality.report()
    assert restored.labels == quality.labels and type(restored.labels[0]) is type(classes.tolist()[0])
    restored.judge(y[:5], classes, proba[:5])  # and it goes on
    quality.judge(y[:5], classes, proba[:5])
    assert restored.report() == quality.report()


def test_a_state_written_before_probabilities_were_kept_carries_its_accuracy_over():
    quality = PredictionQuality.carried_over(judged=10, correct=7, recent_judged=9.5, recent_correct=6.5)
    assert quality.report()["all"]["accuracy"] == 0.7 and quality.report()["all"]["log_loss"] is None
    quality.judge(np.array(["a", "b"]), np.array(["a", "b"]), np.array([[0.8, 0.2], [0.6, 0.4]]))
    report = quality.report()["all"]
    assert report["judged"] == 12 and report["accuracy"] == 8 / 12
    assert report["log_loss"] == pytest.approx(-(np.log(0.8) + np.log(0.4)) / 2)  # of the two scored
    assert report["recall"] == {"a": 1.0, "b": 0.0}
    assert PredictionQuality.from_json(json.loads(json.dumps(quality.to_json()))).report() == quality.report()


def test_labels_of_uint64_read_back_and_strings_never_join_numbers():
    quality = PredictionQuality()
    quality.judge(np.array([2 ** 64 - 1], dtype=np.uint64), np.array([2 ** 64 - 1, 0], dtype=np.uint64),
                  np.array([[0.5, 0.5]]))
    assert PredictionQuality.from_json(json.loads(json.dumps(quality.to_json()))).labels == [2 ** 64 - 1, 0]
    with pytest.raises(ValueError, match="labels that mix strings and numbers"):
        quality.predicted(np.array(["a"]), np.array([0]))  # what would not read back is not written
    assert quality.report()["all"]["served"] == 0


def test_probabilities_that_do_not_fit_are_a_defect_not_a_quality():
    quality = PredictionQuality()
    with pytest.raises(ValueError, match=r"probabilities of shape \(2, 2\) for 2 labels and 3 classes"):
        quality.judge(np.array(["a", "b"]), CLASSES, np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="not finite"):
        quality.judge(np.array(["a"]), CLASSES, np.array([[np.nan, 0.5, 0.5]]))
    assert quality.report()["all"]["judged"] == 0 and quality.labels == []


def stored(**changes) -> dict:
    """A quality's JSON (two labels, one judged row and two served), with these changes: "all.judged": 3
    changes a field of a window, a value of None removes the field."""
    quality = PredictionQuality()
    quality.judge(np.array(["a"]), np.array(["a", "b"]), np.array([[0.75, 0.25]]))
    quality.predicted(np.array(["a", "b"]), np.array([0, 1]))
    data = json.loads(json.dumps(quality.to_json()))
    for path, value in changes.items():
        *parents, key = path.split(".")
        owner = data
        for parent in parents:
            owner = owner[parent]
        if value is None:
            del owner[key]
        else:
            owner[key] = value
    return data


FORGED = {
    "not an object": ([1], "quality must be a JSON object; got a list"),
    "labels missing": (stored(labels=None), "quality.labels must be a list; got None"),
    "a label true": (stored(labels=["a", True]), "quality.labels must be strings or finite numbers; got True"),
    "a label NaN": (stored(labels=[float("nan"), 1.0]), "quality.labels must be strings or finite numbers; got nan"),
    "a label of 2**70": (stored(labels=[2 ** 70, 1]), "a quality label must be an integer from -9,223,"),
    "a label below int64": (stored(labels=[-2 ** 63 - 1, 1]), "a quality label must be an integer from -9,223,"),
    "a label a list": (stored(labels=[["a"], "b"]), "quality.labels must be strings or finite numbers; got a list"),
    "strings and numbers": (stored(labels=["a", 1]), "quality.labels mixes strings and numbers"),
    "a label twice": (stored(labels=[1, 1.0]), "quality.labels names a label twice"),
    "too many labels": (stored(labels=[str(i) for i in range(MOST_LABELS + 1)]),
                        f"quality.labels holds {MOST_LABELS + 1:,} labels; at most {MOST_LABELS:,}"),
    "a window missing": (stored(recent=None), "quality.recent must be a JSON object; got None"),
    "a field missing": (stored(**{"all.brier": None}), "quality.all has no 'brier' field"),
    "a count in words": (stored(**{"all.judged": "1"}), "quality.all.judged must be an integer from 0 to"),
    "a count of a half": (stored(**{"all.served": 2.5}), "quality.all.served must be an integer from 0 to"),
    "a count beyond a float's": (stored(**{"all.served": 2 ** 60}), "quality.all.served must be an integer from 0 to"),
    "a negative sum": (stored(**{"all.log_loss": -1.0}), "quality.all.log_loss must be a finite non-negative"),
    "a recent sum infinite": (stored(**{"recent.brier": float("inf")}), "quality.recent.brier must be a finite"),
    "per label of another length": (stored(**{"all.hits": [1]}),
                                    "quality.all.hits must be a list of 2 numbers, one per label; got a list"),
    "per label an object": (stored(**{"recent.support": {"a": 1}}), "quality.recent.support must be a list of 2"),
    "a recent value negative": (stored(**{"recent.predicted": [1.0, -1.0]}),
                                r"quality.recent.predicted\[1\] must be a finite non-negative number; got -1.0"),
    "a per-label count true": (stored(**{"all.support": [True, 0]}),
                               r"quality.all.support\[0\] must be an integer from 0 to"),
    "more correct than judged": (stored(**{"all.correct": 2}), "quality.all.correct is 2, more than its judged 1"),
    "supports that do not add up": (stored(**{"all.support": [1, 1]}),
                                    "quality.all.support adds up to 2, not its scored 1"),
    "predictions that do not add up": (stored(**{"all.predicted": [1, 0]}),
                                       "quality.all.predicted adds up to 1, not its served 2"),
    "more hits than support": (stored(**{"all.hits": [0, 1], "all.correct": 1}),
                               "quality.all.hits counts more right predictions than its support"),
}


@pytest.mark.parametrize("data, message", FORGED.values(), ids=FORGED.keys())
def test_forged_json_is_refused_in_one_line_naming_the_field(data, message):
    with pytest.raises(ValueError, match=message) as refused:
        PredictionQuality.from_json(data)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
