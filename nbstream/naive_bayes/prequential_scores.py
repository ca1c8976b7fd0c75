"""Test-then-train (prequential) scores: each row of a batch predicted by the model that has
learned every earlier row, computed in bulk and exactly (``predict_proba_prequential``), and
with the learning (``predict_then_learn``, ``predict_proba_then_learn``).

Each model supplies ``_prequential_joint_log_likelihood``, built on the modules that say what
each row is scored with: ``prequential_counts``, ``prequential_versions``, ``prequential_stats``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..stats import held as held_statistics
from ..utils.blocked import normalized_exp
from ..utils.class_set import ClassSet, distinct_classes
from ..utils.ndarrays import AnyArray, BoolArray, Features, FloatArray, IndexArray
from ..utils.threads import blas_on_one_thread
from ..utils.validation import check_labels, check_sample_weight
from .core import NaiveBayesCore, StatsT
from .tables import TablesT


class TestThenTrain(NaiveBayesCore[StatsT, TablesT]):
    """The core with test-then-train scores."""


    def predict_then_learn(self, X: Features, y: npt.ArrayLike, classes: npt.ArrayLike | None = None,
                           sample_weight: npt.ArrayLike | None = None) -> np.ma.MaskedArray:
        """Test-then-train (prequential) over a batch: predict each row with the model that has
        learned every earlier row, then learn them all, as ``partial_fit`` does.

        The predictions are those of ``predict`` called before ``partial_fit`` of each row in
        turn, computed in bulk and exactly (not row by row), windows included; with
        ``half_life`` no two rows share a model, so the rows are taken one by one.

        Parameters are those of ``partial_fit``. Returns a masked array of shape (n_samples,):
        the predicted labels; a row before which the model knew no class is masked.
        """
        return self.predict_proba_then_learn(X, y, classes, sample_weight).labels

    def predict_proba_then_learn(self, X: Features, y: npt.ArrayLike, classes: npt.ArrayLike | None = None,
                                 sample_weight: npt.ArrayLike | None = None) -> PrequentialScores:
        """``predict_then_learn`` with the probabilities: the column classes (those the model has
        after learning the batch) and each row's probabilities (see ``predict_proba_prequential``)."""
        labels = check_labels(y, _n_rows(X))
        all_weights = check_sample_weight(sample_weight, len(labels))
        pieces = []
        runs = [slice(i, i + 1) for i in range(len(labels))] if self.half_life is not None \
            else self._unchanging_runs(len(labels))
        for rows in runs:  # with half_life, one row each: every row changes every statistic
            weights = None if all_weights is None else all_weights[rows]
            pieces.append(self.predict_proba_prequential(X[rows], labels[rows], classes=classes,
                                                         sample_weight=weights))
            self.partial_fit(X[rows], labels[rows], classes=classes if not self.is_fitted else None,
                             sample_weight=weights)
        if not pieces:
            return PrequentialScores(self.classes_ if self.is_fitted else labels[:0], np.zeros((0, 0)))
        columns = pieces[-1].classes  # every earlier piece's classes come first, in order
        proba = np.zeros((len(labels), len(columns)))
        start = 0
        for piece in pieces:
            proba[start:start + len(piece.proba), :piece.proba.shape[1]] = piece.proba
            start += len(piece.proba)
        scores = PrequentialScores(columns, proba)
        proba[~scores.scored] = np.nan
        return scores

    @blas_on_one_thread
    def predict_proba_prequential(self, X: Features, y: npt.ArrayLike, *, classes: npt.ArrayLike | None = None,
                                  sample_weight: npt.ArrayLike | None = None,
                                  learn: npt.ArrayLike | None = None) -> PrequentialScores:
        """The probabilities test-then-train gives each row, without learning any row.

        Row i is scored by this model plus the rows before it that ``learn`` selects (a boolean
        mask of shape (n_samples,); all rows by default), added to its statistics: exactly what
        ``predict_proba`` gives after ``partial_fit`` of those rows (a window's buckets and
        ``half_life``'s forgetting move only when rows are learned: ``predict_then_learn``
        follows them). The labels of rows not learned are not read.

        classes : the fixed class set, when this model has learned nothing yet (as partial_fit)

        Returns the column classes, shape (n_classes,): those the model has after learning the
        rows (new labels appended in order of first appearance), and the probabilities, shape
        (n_samples, n_classes): 0 for a class no earlier row taught, a row of NaN where the model
        knew no class at all.
        """
        self.check_params()
        fitted = self.is_fitted
        X, labels, weights, _ = self._checked_batch(X, y, sample_weight, new_model=not fitted)
        n_rows = X.shape[0]
        learned = np.ones(n_rows, dtype=bool) if learn is None else np.asarray(learn, dtype=bool)
        if learned.shape != (n_rows,):
            raise ValueError(f"learn must be a boolean mask of shape ({n_rows},); got shape {learned.shape}")
        if fitted:
            self._checked_held()
            known = self._class_set()
            class_set, declared = ClassSet(known.labels.copy(), known.fixed), len(known)
        else:
            class_set = ClassSet.open() if classes is None else ClassSet.fixed_from(distinct_classes(classes))
            declared = len(class_set)
        rows = np.full(n_rows, -1, dtype=np.intp)
        rows[learned] = class_set.index(labels[learned])  # an unknown label of a fixed set fails here
        n_classes = len(class_set)
        self._check_shapes(X.shape[1], n_classes if class_set.fixed else None)
        X = self._prepare(X)
        if not n_classes:  # nothing learned before the batch, nor in it
            return PrequentialScores(class_set.labels, np.full((n_rows, 0), np.nan))
        statistics = self._stats if fitted else self._new_statistics(X.shape[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            jll = self._prequential_joint_log_likelihood(X, statistics, rows, weights, n_classes)
        return PrequentialScores(class_set.labels, _prequential_proba(jll, rows, declared, fitted))

    def _prequential_joint_log_likelihood(self, X: Features, statistics: StatsT, rows: IndexArray,
                                          weights: FloatArray | None, n_classes: int) -> FloatArray:
        """log P(x_i, c) of each row i under ``statistics`` plus the learned rows before i.

        X : (n_samples, n_features), prepared; statistics : what the model holds (not changed);
        rows : (n_samples,) the class row of each row to learn, -1 for rows only scored; rows
        at or beyond the statistics' classes are new classes; weights : (n_samples,) or None;
        returns (n_samples, n_classes). Entries of a class no earlier row taught, and rows with
        no class taught at all, are masked by the caller: any value will do.
        """
        raise NotImplementedError(f"{type(self).__name__} has no test-then-train scores yet")

    def _unchanging_runs(self, n_rows: int) -> list[slice]:
        """Consecutive runs of a batch within which learning only adds to the statistics: the
        whole batch, or with ``window`` runs ending at each row that begins a new bucket."""
        return held_statistics.unchanging_runs(self._held if self.is_fitted else None, self.window, self.window_buckets,
                                       self._new_statistics(1), n_rows)


class PrequentialScores(NamedTuple):
    """What ``predict_proba_prequential`` gives: the column classes, shape (n_classes,), and
    each row's probabilities, shape (n_samples, n_classes) (NaN rows: no class known yet)."""

    classes: AnyArray
    proba: FloatArray

    @property
    def scored(self) -> BoolArray:
        """(n_samples,) whether each row was scored (the model knew a class before it)."""
        return ~np.isnan(self.proba[:, 0]) if self.proba.shape[1] else np.zeros(len(self.proba), dtype=bool)

    @property
    def labels(self) -> np.ma.MaskedArray:
        """(n_samples,) the most probable class of each row, masked where none was scored."""
        scored = self.scored
        best = np.argmax(np.where(scored[:, None], self.proba, 0.0), axis=1) if self.proba.shape[1] \
            else np.zeros(len(self.proba), dtype=np.intp)
        values = self.classes[best] if len(self.classes) else np.zeros(len(best))
        return np.ma.masked_array(values, mask=~scored)


def _prequential_proba(jll: FloatArray, rows: IndexArray, declared: int, fitted: bool) -> FloatArray:
    """Probabilities from test-then-train joint log-likelihoods of shape (n_samples, n_classes):
    a class counts for row i once declared (one of the first ``declared``: the model's own, or
    a fixed set) or taught by a learned row before i; a row before which the model had learned
    nothing is NaN.

    rows : (n_samples,) class row of each learned row, -1 for rows only scored"""
    n_rows, n_classes = jll.shape
    learned = np.flatnonzero(rows >= 0)
    first = np.full(n_classes, n_rows, dtype=np.intp)  # the first learned row of each class
    np.minimum.at(first, rows[learned], learned)
    taught = np.arange(n_rows)[:, None] > first[None, :]
    known = taught | (np.arange(n_classes) < declared)[None, :]
    jll = np.where(known, jll, -np.inf)
    began = learned[0] if len(learned) else n_rows
    before_anything = np.arange(n_rows) <= began if not fitted else np.zeros(n_rows, dtype=bool)
    proba = normalized_exp(jll)  # a row with no class known yet is all -inf: NaN, as it should be
    proba[before_anything] = np.nan
    return proba


def _n_rows(X: Features) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)
