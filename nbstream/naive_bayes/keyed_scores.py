"""Scores of a batch under each row's key's model, without building any key's tables.

A key's counts are the pseudo-counts P every key shares (``nbstream.naive_bayes.backoff``) plus the
few pairs the key saw. So each family's score is a product with tables of P alone, computed once
for all keys (``BackoffTables``), plus corrections at the rows' cells where the key saw the feature
and per-(key, class) terms:

- MultinomialNB: x . log(P + alpha) + sum over the key's cells of x (log(n + P + alpha) - log(P +
  alpha)) - sum(x) log(the key's class total), + the key's prior.
- BernoulliNB: as above with the Bernoulli terms; log(1 - p) of a feature the key never saw depends
  on the key's class count, so the tables of a class are kept by that count (``_unseen_bernoulli``).
- ComplementNB: the complement counts of a feature the key saw change in every class.

Everything equals the scores of the key's model (``backoff.key_model``) to rounding.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..stats.keyed_counts import KeyCells
from ..stats.sparse_counts import PairCounts
from ..utils.blocked import linear_scores
from ..utils.ndarrays import Features, FloatArray, IndexArray, IntArray
from ..utils.validation import is_sparse
from .backoff import PseudoCounts, feature_totals, pseudo_counts, pseudo_examples
from .complement import ComplementNB
from .discrete import FeatureCountsNB, row_sums, weights_for_rows

_BERNOULLI_TABLES_KEPT = 256  # (class, class count) tables of features never seen, most recently used


class Backoff:
    """What every key's scores share, of the pseudo-counts P: class_count (n_classes,) the
    pseudo-examples of each class, totals (n_classes,) P summed over the features, alpha."""

    class_count: FloatArray
    totals: FloatArray
    alpha: float | FloatArray

    def base_products(self, X: Features) -> FloatArray:
        """X @ log(P + alpha).T, (n_samples, n_classes)."""
        raise NotImplementedError

    def pseudo_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """P at each (class, feature), (n,)."""
        raise NotImplementedError

    def base_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """log(P + alpha) at each (class, feature), (n,)."""
        raise NotImplementedError


class DenseBackoff(Backoff):
    """P held dense, (n_classes, n_features); base log(P + alpha), or for ComplementNB the log of
    P's complement counts; totals P's (ComplementNB: the complement counts') sums per class.
    ``unseen`` keeps BernoulliNB's tables of the features a key never saw, by (class, class count)."""

    def __init__(self, group: FeatureCountsNB[Any], pseudo: PseudoCounts):
        self.alpha = alpha = group._smoothing_alpha()
        self.class_count, self.pseudo = pseudo.class_count, pseudo.feature_count
        P = pseudo.feature_count
        smoothed = P.sum(axis=0) + alpha - P if group.kind == "complement" else P + alpha
        self.base = np.log(smoothed)
        self._base_by_row = weights_for_rows(self.base)
        self.totals = smoothed.sum(axis=1) if group.kind == "complement" else P.sum(axis=1)
        self.unseen: OrderedDict[tuple[int, float], tuple[FloatArray, float]] = OrderedDict()

    def base_products(self, X: Features) -> FloatArray:
        return linear_scores(X, self._base_by_row, np.zeros(self.base.shape[0]))

    def pseudo_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        values: FloatArray = self.pseudo[classes, features]
        return values

    def base_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        values: FloatArray = self.base[classes, features]
        return values


class PairBackoff(Backoff):
    """P of a MultinomialNB group holding sparse counts, at the group's pairs: a pair the group
    never saw has P = s_c alpha / (N_c. + n_features alpha) in every feature of class c, so P is a
    value per class plus the group's pairs' own (s_c = m pi_c L_c the pseudo-examples' units)."""

    def __init__(self, group: FeatureCountsNB[Any], examples: FloatArray, units: FloatArray):
        alpha = float(group._smoothing_alpha())
        counts = group._stats
        assert isinstance(counts, PairCounts)
        self.alpha, self.class_count, self._counts = alpha, examples, counts
        n_features = group.n_features_in_
        denominator = feature_totals(group) + n_features * alpha
        self._unseen = units * alpha / denominator  # (n_classes,)
        classes, _, pair_counts = counts.cells()
        pseudo = units[classes] * (pair_counts + alpha) / denominator[classes]
        self._pair_extra = pseudo - self._unseen[classes]  # P beyond a pair never seen's
        self._unseen_base = np.log(self._unseen + alpha)
        self._pair_base = np.log(pseudo + alpha) - self._unseen_base[classes]
        self.totals = n_features * self._unseen + np.bincount(classes, weights=self._pair_extra,
                                                              minlength=len(examples))
        self._shape = (len(examples), n_features)

    def base_products(self, X: Features) -> FloatArray:
        products = self._counts.index().pair_sums(X, self._pair_base, self._shape[0])
        products += row_sums(X)[:, None] * self._unseen_base
        return products

    def pseudo_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        return self._unseen[classes] + self._counts.index().values_at(self._pair_extra, classes, features, self._shape)

    def base_at(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        return self._unseen_base[classes] + self._counts.index().values_at(self._pair_base, classes, features,
                                                                           self._shape)


def backoff_of(group: FeatureCountsNB[Any], prior_weight: float) -> Backoff:
    """The shared tables of a fitted group model: at its pairs for a MultinomialNB of sparse counts
    (the cost of a refresh grows with the pairs the group saw), else dense (n_classes x n_features)."""
    if group.kind == "multinomial" and isinstance(group._stats, PairCounts):
        return PairBackoff(group, *pseudo_examples(group, prior_weight))
    return DenseBackoff(group, pseudo_counts(group, prior_weight))


def keyed_joint_log_likelihood(group: FeatureCountsNB[Any], tables: Backoff, X: Features,
                               row_slot: IndexArray, cells: KeyCells) -> FloatArray:
    """log P(x, c) of each row of X (n_samples, n_features), prepared, under the model of its key
    (row_slot (n_samples,) the key's slot in ``cells``), shape (n_samples, n_classes)."""
    if group.kind == "multinomial":
        return _multinomial(group, tables, X, row_slot, cells)
    assert isinstance(tables, DenseBackoff)  # backoff_of gives the other families dense tables
    if isinstance(group, ComplementNB):
        return _complement(group, tables, X, row_slot, cells)
    return _bernoulli(group, tables, X, row_slot, cells)


def _priors(group: FeatureCountsNB[Any], tables: Backoff, cells: KeyCells) -> FloatArray:
    """Each key's class log priors, (n_slots, n_classes), from its class counts plus the pseudo-examples'."""
    counts = cells.class_count + tables.class_count
    n_classes = counts.shape[1]
    return group._class_log_priors(counts, np.full(len(counts), n_classes))


def row_nonzeros(X: Features) -> tuple[IntArray, IntArray, FloatArray]:
    """(rows, columns, values as float64) of X's nonzero cells, rows rising."""
    if is_sparse(X):
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        values = X.data.astype(np.float64)
        keep = values != 0
        return rows[keep], X.indices.astype(np.int64)[keep], values[keep]
    rows, columns = np.nonzero(X)
    return rows, columns.astype(np.int64), np.asarray(X[rows, columns], dtype=np.float64)


def _row_cells(X: Features, row_slot: IndexArray, cells: KeyCells, n_features: int,
               cell_ids: IndexArray) -> tuple[IndexArray, IndexArray, FloatArray]:
    """The (row, key cell) pairs where the row has the cell's feature: (rows, cells (indices into
    ``cell_ids``' order), x values), each (n_matches,). cell_ids (n_cells,): slot * n_features + feature
    of each cell, sorted."""
    rows, columns, values = row_nonzeros(X)
    wanted = row_slot[rows] * n_features + columns
    begin = np.searchsorted(cell_ids, wanted, side="left")
    end = np.searchsorted(cell_ids, wanted, side="right")
    found = end - begin
    which = np.repeat(np.arange(len(wanted)), found)
    at = np.arange(len(which)) + np.repeat(begin - (np.cumsum(found) - found), found)
    return rows[which], at, values[which]


def _sorted_cells(cells: KeyCells, n_features: int) -> tuple[IndexArray, IndexArray]:
    """The order of the cells by (slot, feature), and their ids slot * n_features + feature in it."""
    ids = cells.slot * n_features + cells.features
    order = np.argsort(ids, kind="stable")
    return order, ids[order]


def _add_at_cells(scores: FloatArray, X: Features, row_slot: IndexArray, cells: KeyCells,
                  correction: FloatArray) -> None:
    """scores[r, c] += x_rf correction[cell] for every key cell (slot, c, f) the row r's key has at a
    feature f of the row."""
    n_rows, n_classes = scores.shape
    order, ids = _sorted_cells(cells, X.shape[1])
    rows, at, values = _row_cells(X, row_slot, cells, X.shape[1], ids)
    cell = order[at]
    scores += np.bincount(rows * n_classes + cells.classes[cell], weights=values * correction[cell],
                          minlength=n_rows * n_classes).reshape(n_rows, n_classes)


def _multinomial(group: FeatureCountsNB[Any], tables: Backoff, X: Features, row_slot: IndexArray,
                 cells: KeyCells) -> FloatArray:
    alpha = tables.alpha
    cell_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[cells.features]
    correction = np.log(cells.counts + tables.pseudo_at(cells.classes, cells.features) + cell_alpha) \
        - tables.base_at(cells.classes, cells.features)
    scores = tables.base_products(X)
    _add_at_cells(scores, X, row_slot, cells, correction)
    log_totals = np.log(cells.class_totals + tables.totals + np.sum(np.broadcast_to(alpha, (X.shape[1],))))
    scores -= row_sums(X)[:, None] * log_totals[row_slot]
    scores += _priors(group, tables, cells)[row_slot]
    return scores


def _complement(group: ComplementNB, tables: DenseBackoff, X: Features, row_slot: IndexArray,
                cells: KeyCells) -> FloatArray:
    n_classes, n_features = tables.base.shape
    # A feature a key saw in any class changes its complement counts in every class: the key's
    # cells become every (class, feature) of the features it saw.
    seen = np.unique(cells.slot * n_features + cells.features)
    slot, features = seen // n_features, seen % n_features
    key_counts = np.zeros((len(seen), n_classes))
    key_counts[np.searchsorted(seen, cells.slot * n_features + cells.features), cells.classes] = cells.counts
    complement_added = key_counts.sum(axis=1, keepdims=True) - key_counts  # (n_seen, n_classes)
    P = tables.pseudo
    alpha = tables.alpha
    feature_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[features][:, None]
    log_complement = np.log((P[:, features].sum(axis=0)[:, None] + feature_alpha - P[:, features].T)
                            + complement_added)
    correction = (log_complement - tables.base[:, features].T).reshape(-1)
    expanded = KeyCells(np.repeat(slot, n_classes), np.tile(np.arange(n_classes), len(seen)),
                        np.repeat(features, n_classes), np.zeros(len(seen) * n_classes), cells.class_count,
                        cells.class_totals)
    scores = tables.base_products(X)
    _add_at_cells(scores, X, row_slot, expanded, correction)
    key_totals = cells.class_totals.sum(axis=1, keepdims=True) - cells.class_totals  # (n_slots, n_classes)
    log_totals = np.log(tables.totals + key_totals)
    if group.norm:
        log_sums = tables.base.sum(axis=1) + np.bincount(
            expanded.slot * n_classes + expanded.classes, weights=correction,
            minlength=len(cells.class_count) * n_classes).reshape(-1, n_classes)
        scores -= row_sums(X)[:, None] * log_totals[row_slot]
        scores /= (log_sums - n_features * log_totals)[row_slot]
    else:
        scores = row_sums(X)[:, None] * log_totals[row_slot] - scores
    if n_classes == 1:
        scores += _priors(group, tables, cells)[row_slot]
    return scores


def _unseen_bernoulli(tables: DenseBackoff, c: int, class_count: float) -> tuple[FloatArray, float]:
    """For class c of a key of this class count: the weights log p - log(1 - p) of the features the
    key never saw in c (n_features,), and their sum of log(1 - p) over all features."""
    kept = tables.unseen.get((c, class_count))
    if kept is not None:
        tables.unseen.move_to_end((c, class_count))
        return kept
    alpha = tables.alpha
    log_p = tables.base[c] - np.log(class_count + tables.class_count[c] + np.multiply(alpha, 2))
    log_not_p = np.log(1 - np.exp(log_p))
    made = tables.unseen[(c, class_count)] = (log_p - log_not_p, float(log_not_p.sum()))
    if len(tables.unseen) > _BERNOULLI_TABLES_KEPT:
        tables.unseen.popitem(last=False)
    return made


def _bernoulli(group: FeatureCountsNB[Any], tables: DenseBackoff, X: Features, row_slot: IndexArray,
               cells: KeyCells) -> FloatArray:
    n_classes = tables.base.shape[0]
    scores = np.empty((X.shape[0], n_classes))
    bias = np.empty((len(cells.class_count), n_classes))
    for c in range(n_classes):
        counts_of_c = cells.class_count[:, c]
        for count in np.unique(counts_of_c[row_slot]):
            weights, log_not_p_sum = _unseen_bernoulli(tables, c, float(count))
            rows = np.flatnonzero(counts_of_c[row_slot] == count)
            scores[rows, c] = linear_scores(X[rows], weights[:, None], np.zeros(1))[:, 0]
            bias[counts_of_c == count, c] = log_not_p_sum
    alpha = tables.alpha
    cell_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[cells.features]
    log_class_total = np.log(cells.class_count[cells.slot, cells.classes] + tables.class_count[cells.classes]
                             + cell_alpha * 2)
    P = tables.pseudo[cells.classes, cells.features]
    log_p = np.log(cells.counts + P + cell_alpha) - log_class_total
    log_not_p = np.log(1 - np.exp(log_p))
    unseen_log_p = tables.base[cells.classes, cells.features] - log_class_total
    unseen_log_not_p = np.log(1 - np.exp(unseen_log_p))
    _add_at_cells(scores, X, row_slot, cells, (log_p - log_not_p) - (unseen_log_p - unseen_log_not_p))
    bias += np.bincount(cells.slot * n_classes + cells.classes, weights=log_not_p - unseen_log_not_p,
                        minlength=bias.size).reshape(bias.shape)
    scores += (bias + _priors(group, tables, cells))[row_slot]
    return scores
