"""How well a partition's served predictions fare: its prequential quality, cumulative and recent.

Each labeled message is judged against the prediction served for it before it was learned
(``judge``); every prediction served, labeled or not, counts in the predicted-class distribution
(``predicted``): when labels come late, a shift in that distribution is the first sign of drift.

Two windows: ``all``, cumulative, and ``recent``, in which an example weighs half as much
``RECENT_HALF_LIFE`` examples of its stream later (judged examples for what is judged, served
predictions for the distribution), example by example, so the sums do not depend on how the
stream was batched. Sums add up: a group's quality is the merge of its partitions' (``merged``),
the cumulative window exactly that of one quality judging every partition's rows.

What ``report`` gives of each window:

- accuracy: the share of judged predictions whose most probable class was the label;
- log_loss: the mean of -log p(label), p clipped to [eps, 1 - eps] as scikit-learn's ``log_loss``
  clips it;
- brier: the mean Brier score as scikit-learn's ``brier_score_loss`` (>= 1.7) gives it over the
  labels seen: the sum over classes of (p_c - 1[label = c])^2 for three labels or more, half
  that for two (the binary score, (p - y)^2 of either class);
- recall: per label, the share of its judged examples predicted as it;
- predicted_share: per label, the share of the served predictions that were it.

A label the prediction had no class for is judged wrong, with p(label) = 0. A state written
before probabilities were kept brings its accuracy only (``carried_over``): its judged examples
count in the accuracy, and log-loss, Brier score and recall are over the ``scored`` examples.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from nbstream.metrics.classification import brier_score, example_losses
from nbstream.utils.checked import integer, number, shown
from nbstream.utils.ndarrays import AnyArray, FloatArray, IndexArray

RECENT_HALF_LIFE = 1_000  # examples: the recent window forgets at this pace
MOST_LABELS = 1 << 20  # labels a quality holds (it counts per label): --max-classes at most
LOWEST_LABEL, HIGHEST_LABEL = -(1 << 63), (1 << 64) - 1  # integer labels: of int64 or uint64
EXACT_COUNT = 1 << 53  # a float64 counts exactly up to here
JUDGED_TOTALS = ("judged", "correct", "scored", "log_loss", "brier")
JUDGED_PER_LABEL = ("support", "hits")  # judged examples of each label; those predicted right
SERVED_TOTALS = ("served",)
SERVED_PER_LABEL = ("predicted",)  # served predictions of each class
TOTALS = JUDGED_TOTALS + SERVED_TOTALS
PER_LABEL = JUDGED_PER_LABEL + SERVED_PER_LABEL
SUMS = ("log_loss", "brier")  # the others are counts, whole numbers in the cumulative window


class Window:
    """The sums of one window: totals, name -> float (TOTALS), and per_label, name -> (n_labels,)
    float64 (PER_LABEL), over the quality's labels."""

    def __init__(self, n_labels: int):
        self.totals = dict.fromkeys(TOTALS, 0.0)
        self.per_label = {name: np.zeros(n_labels) for name in PER_LABEL}

    def add(self, totals: dict[str, float], per_label: dict[str, FloatArray], keep: float = 1.0) -> None:
        """These sums of one stream added to this window's, which are first multiplied by ``keep``
        (the sums of the other stream are left as they are)."""
        for name, value in totals.items():
            self.totals[name] = float(self.totals[name] * keep + value)
        for name, values in per_label.items():
            self.per_label[name] *= keep
            self.per_label[name] += values

    def add_window(self, other: Window, positions: IndexArray) -> None:
        """Another window's sums added in; positions : (other's n_labels,) where its labels are in this one."""
        for name, value in other.totals.items():
            self.totals[name] += value
        for name, values in other.per_label.items():
            self.per_label[name][positions] += values

    def grow(self, n_labels: int) -> None:
        """Room for labels added to the quality's, their sums 0."""
        for name, values in self.per_label.items():
            self.per_label[name] = np.concatenate([values, np.zeros(n_labels - len(values))])

    def report(self, labels: list[Any]) -> dict[str, Any]:
        """This window's metrics (see the module); labels : the quality's (the Brier score is over them)."""
        totals, per_label = self.totals, self.per_label
        support, hits, predicted = per_label["support"], per_label["hits"], per_label["predicted"]
        scored = totals["scored"]
        return {
            "judged": totals["judged"],
            "accuracy": totals["correct"] / totals["judged"] if totals["judged"] else None,
            "log_loss": totals["log_loss"] / scored if scored else None,
            "brier": brier_score(totals["brier"], scored, len(labels)) if scored else None,
            "recall": {labels[i]: float(hits[i] / support[i]) for i in np.flatnonzero(support > 0)},
            "served": totals["served"],
            "predicted_share": {labels[i]: float(predicted[i] / totals["served"])
                                for i in np.flatnonzero(predicted > 0)},
        }

    def to_json(self, exact: bool) -> dict[str, Any]:
        """exact : the counts as JSON integers (the cumulative window's are whole)."""

        def value(name: str, amount: float) -> float | int:
            return int(amount) if exact and name not in SUMS else amount

        return {**{name: value(name, total) for name, total in self.totals.items()},
                **{name: [value(name, amount) for amount in values.tolist()]
                   for name, values in self.per_label.items()}}


class PredictionQuality:
    """The prequential quality of one partition (or, merged, of a group): its sums in the windows
    ``all`` and ``recent`` over ``labels``, the classes and true labels seen, in order of first
    appearance. Its methods may be called from several threads (the metrics endpoint reports
    while the loop judges)."""

    def __init__(self) -> None:
        self.labels: list[Any] = []
        self._index: dict[Any, int] = {}
        self.all, self.recent = Window(0), Window(0)
        self._lock = threading.Lock()

    # ---- judging ----------------------------------------------------------------------------
    def judge(self, y_true: AnyArray, classes: AnyArray, proba: FloatArray) -> None:
        """Judge labeled rows against the predictions served for them, in the order they came.

        y_true : (n,) labels (one no class stands for counts as wrong, with p = 0);
        classes : (C,) the labels of proba's columns; proba : (n, C) finite probabilities."""
        proba = np.asarray(proba, dtype=np.float64)
        if proba.shape != (len(y_true), len(classes)) or not len(classes):
            raise ValueError(f"probabilities of shape {proba.shape} for {len(y_true)} labels and "
                             f"{len(classes)} classes")
        if not np.isfinite(proba).all():
            raise ValueError("probabilities that are not finite")
        if not len(y_true):
            return
        with self._lock:
            columns = self._positions(classes)  # (C,) the label of each column
            truth = self._positions(y_true)  # (n,) the label of each row
            column_of = np.full(len(self.labels), -1)
            column_of[columns] = np.arange(len(columns))
            right = (columns[np.argmax(proba, axis=1)] == truth).astype(np.float64)
            log_loss, brier = example_losses(proba, column_of[truth])
            for window, weights, keep in self._windows(len(truth)):
                window.add({"judged": weights.sum(), "correct": float(weights @ right), "scored": weights.sum(),
                            "log_loss": float(weights @ log_loss), "brier": float(weights @ brier)},
                           {"support": self._per_label(truth, weights),
                            "hits": self._per_label(truth, weights * right)}, keep)

    def predicted(self, classes: AnyArray, best: IndexArray) -> None:
        """Count served predictions in the predicted-class distribution, in the order they were
        served. classes : (C,) labels; best : (n,) the column of classes each prediction chose."""
        if not len(best):
            return
        with self._lock:
            chosen = self._positions(classes)[np.asarray(best)]
            for window, weights, keep in self._windows(len(chosen)):
                window.add({"served": weights.sum()}, {"predicted": self._per_label(chosen, weights)}, keep)

    def _windows(self, n: int) -> Iterable[tuple[Window, FloatArray, float]]:
        """(window, (n,) weight of each new example, what its old sums keep) of both windows."""
        yield self.all, np.ones(n), 1.0
        ages = np.arange(n - 1, -1, -1)  # the newest example weighs 1
        yield self.recent, 0.5 ** (ages / RECENT_HALF_LIFE), 0.5 ** (n / RECENT_HALF_LIFE)

    def _per_label(self, positions: IndexArray, weights: FloatArray) -> FloatArray:
        return np.asarray(np.bincount(positions, weights=weights, minlength=len(self.labels)), dtype=np.float64)

    def _positions(self, values: AnyArray) -> IndexArray:
        """(n,) the position of each value among the labels; labels not seen before are added, in
        order of first appearance."""
        distinct, first, inverse = np.unique(np.asarray(values), return_index=True, return_inverse=True)
        order = np.argsort(first)
        positions = np.empty(len(distinct), dtype=np.intp)
        positions[order] = self._positions_of(distinct[order].tolist())
        return positions[inverse.reshape(-1)]

    def _positions_of(self, labels: list[Any]) -> IndexArray:
        new = [label for label in dict.fromkeys(labels) if label not in self._index]
        if new:
            if len(self.labels) + len(new) > MOST_LABELS:
                raise ValueError(f"a prediction quality holds {MOST_LABELS:,} labels at most")
            if len({isinstance(label, str) for label in self.labels[:1] + new}) > 1:
                raise ValueError("labels that mix strings and numbers")  # from_json would refuse them
            for label in new:
                self._index[label] = len(self.labels)
                self.labels.append(label)
            self.all.grow(len(self.labels))
            self.recent.grow(len(self.labels))
        return np.array([self._index[label] for label in labels], dtype=np.intp)

    # ---- a group's -----------------------------------------------------------------------------
    @classmethod
    def merged(cls, qualities: Iterable[PredictionQuality]) -> PredictionQuality:
        """One quality of these (a group's, of its partitions'): the sums of all of them."""
        merged = cls()
        for quality in qualities:
            merged._add(quality)
        return merged

    def _add(self, other: PredictionQuality) -> None:
        """Add another quality's sums to this one's (which no other thread sees yet)."""
        with other._lock:
            positions = self._positions_of(other.labels)
            self.all.add_window(other.all, positions)
            self.recent.add_window(other.recent, positions)

    def report(self) -> dict[str, dict[str, Any]]:
        """{"all": metrics, "recent": metrics}, each: "judged" and "served" (float), "accuracy",
        "log_loss", "brier" (float, None before anything was judged), "recall" {label: float} (the
        labels judged) and "predicted_share" {label: float} (the labels predicted)."""
        with self._lock:
            return {"all": self.all.report(self.labels), "recent": self.recent.report(self.labels)}

    # ---- stored ----------------------------------------------------------------------------
    @classmethod
    def carried_over(cls, judged: int, correct: int, recent_judged: float, recent_correct: float) -> PredictionQuality:
        """The quality of a state written before probabilities were kept: its accuracy alone."""
        quality = cls()
        quality.all.add({"judged": judged, "correct": correct}, {})
        quality.recent.add({"judged": recent_judged, "correct": recent_correct}, {})
        return quality

    def accuracy_sums(self) -> dict[str, float | int]:
        """The sums of the accuracy alone, as ``carried_over`` takes them."""
        with self._lock:
            return {"judged": int(self.all.totals["judged"]), "correct": int(self.all.totals["correct"]),
                    "recent_judged": self.recent.totals["judged"], "recent_correct": self.recent.totals["correct"]}

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, for ``from_json``: the labels (strings or numbers) and, aligned with
        them, each window's sums per label."""
        with self._lock:
            return {"labels": list(self.labels), "all": self.all.to_json(exact=True),
                    "recent": self.recent.to_json(exact=False)}

    @classmethod
    def from_json(cls, data: object) -> PredictionQuality:
        """The quality ``to_json`` wrote; ValueError naming the first field that is not as it writes it."""
        if not isinstance(data, dict):
            raise ValueError(f"quality must be a JSON object; got {shown(data)}")
        quality = cls()
        quality._positions_of(_labels(data.get("labels")))
        quality.all = _window(data.get("all"), "all", len(quality.labels), exact=True)
        quality.recent = _window(data.get("recent"), "recent", len(quality.labels), exact=False)
        _check_counts(quality.all)
        return quality


def _labels(value: object) -> list[Any]:
    """Strings, or numbers (integers of int64 or uint64, finite floats), each once."""
    if not isinstance(value, list):
        raise ValueError(f"quality.labels must be a list; got {shown(value)}")
    if len(value) > MOST_LABELS:
        raise ValueError(f"quality.labels holds {len(value):,} labels; at most {MOST_LABELS:,}")
    for label in value:
        if type(label) is int:
            integer(label, "a quality label", LOWEST_LABEL, HIGHEST_LABEL)
        elif not (type(label) is str or (type(label) is float and math.isfinite(label))):
            raise ValueError(f"quality.labels must be strings or finite numbers; got {shown(label)}")
    if len({type(label) is str for label in value}) > 1:
        raise ValueError("quality.labels mixes strings and numbers")
    if len(set(value)) != len(value):
        raise ValueError("quality.labels names a label twice")
    return value


def _window(value: object, window: str, n_labels: int, exact: bool) -> Window:
    """exact : counts are whole numbers (the cumulative window)."""
    if not isinstance(value, dict):
        raise ValueError(f"quality.{window} must be a JSON object; got {shown(value)}")
    missing = [name for name in TOTALS + PER_LABEL if name not in value]
    if missing:
        raise ValueError(f"quality.{window} has no {missing[0]!r} field")
    sums = Window(n_labels)

    def checked(stored: object, name: str, field: str) -> float:
        if exact and name not in SUMS:
            return float(integer(stored, field, 0, EXACT_COUNT))
        return number(stored, field)

    for name in TOTALS:
        sums.totals[name] = checked(value[name], name, f"quality.{window}.{name}")
    for name in PER_LABEL:
        values = value[name]
        if not isinstance(values, list) or len(values) != n_labels:
            raise ValueError(f"quality.{window}.{name} must be a list of {n_labels:,} numbers, one per label; "
                             f"got {shown(values)}")
        sums.per_label[name] = np.array([checked(v, name, f"quality.{window}.{name}[{i}]")
                                         for i, v in enumerate(values)], dtype=np.float64)
    return sums


def _check_counts(window: Window) -> None:
    """The cumulative counts agree with one another."""
    totals, per_label = window.totals, window.per_label
    for part, whole in (("correct", "judged"), ("scored", "judged")):
        if totals[part] > totals[whole]:
            raise ValueError(f"quality.all.{part} is {totals[part]:.0f}, more than its {whole} {totals[whole]:.0f}")
    for labels, total in (("support", "scored"), ("predicted", "served")):
        if per_label[labels].sum() != totals[total]:
            raise ValueError(f"quality.all.{labels} adds up to {per_label[labels].sum():.0f}, not its {total} "
                             f"{totals[total]:.0f}")
    if (per_label["hits"] > per_label["support"]).any() or per_label["hits"].sum() > totals["correct"]:
        raise ValueError("quality.all.hits counts more right predictions than its support or correct")
