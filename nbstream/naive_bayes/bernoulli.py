"""Bernoulli Naive Bayes: binary features, presence and absence both count."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from ..prequential.counts import (
    BatchCells,
    CountsAt,
    LearnedRows,
    by_class,
    class_weights_before,
    dense_counts,
    padded,
    version_sums,
)
from ..prequential.dense_weights import version_scores
from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.blocked import linear_scores
from ..utils.ndarrays import Features, FloatArray, IndexArray, IntArray
from ..utils.parameters import Interval, ParameterRule, ParameterRules
from ..utils.validation import is_sparse
from .discrete import Alpha, DiscreteTables, FeatureCountsNB, weights_for_rows
from .explanations import CellTerms


@dataclass
class BernoulliTables(DiscreteTables):
    """feature_log_prob_ : (n_classes, n_features) log P(x_f = 1 | c); a row's score is
    x . weights + bias, weights : (n_features, n_classes), bias : (n_classes,)."""

    feature_log_prob_: FloatArray
    weights: FloatArray
    bias: FloatArray


@dataclass
class BernoulliPairTables(DiscreteTables):
    """The tables of sparse counts. A pair never seen has the weight ``unseen`` of its class, so a
    row's score is its product with pair_weight over the pairs it has + sum(x) unseen + bias:
    pair_weight : (n_pairs,) log p - log(1 - p) of each pair seen, less its class's unseen weight;
    unseen : (n_classes,) log p - log(1 - p) of a pair never seen;
    bias : (n_classes,) the log prior + the sum of log(1 - p) over all features."""

    pair_weight: FloatArray
    unseen: FloatArray
    bias: FloatArray


class BernoulliNB(FeatureCountsNB[BernoulliTables | BernoulliPairTables]):
    """Naive Bayes for binary features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0   additive smoothing
    force_alpha : bool, default True     keep alpha below 1e-10 as given
    binarize : float or None, default 0.0   threshold: features > binarize become 1
    fit_prior : bool, default True       learn class priors (else uniform)
    class_prior : array of shape (n_classes,) or None   fixed priors
    half_life : float or None, default None   forget: an example's weight halves every
        half_life newer examples
    window : int or None, default None   learn only the most recent examples: the model is exactly
        that of the last window - ceil(window / window_buckets) + 1 to window examples, kept in
        window_buckets buckets (memory: window_buckets + 1 times the statistics). Not with half_life.
    window_buckets : int, default 10   how many buckets the window is kept in (1 to window)
    counts : "auto", "dense" or "sparse", default "auto"   how the counts are held: a dense
        (n_classes, n_features) table, or only the (class, feature) pairs seen; "auto" is sparse
        from 2**16 features on. Predictions are the same either way.

    Fitted attributes: classes_ (n_classes,), class_count_ (n_classes,),
    feature_count_ (n_classes, n_features): an ndarray, or a scipy.sparse.csr_array for sparse counts;
    feature_log_prob_ (n_classes, n_features) an ndarray (for sparse counts computed when read:
    n_classes x n_features x 8 bytes); sparse_counts_,
    class_log_prior_ (n_classes,), n_features_in_, n_examples_seen_ (all examples learned),
    n_examples_in_window_ (those the statistics hold).

    >>> model = BernoulliNB().partial_fit([[1, 0], [1, 1], [0, 1]], ["a", "a", "b"])
    >>> model.class_count_.tolist(), model.feature_count_.tolist()
    ([2.0, 1.0], [[2.0, 1.0], [0.0, 1.0]])
    >>> np.exp(model.feature_log_prob_).round(3).tolist()  # (count + 1) / (class count + 2)
    [[0.75, 0.5], [0.333, 0.667]]
    >>> model.predict([[1, 0]]).tolist()
    ['a']
    """

    kind = "bernoulli"
    _parameter_rules = ParameterRules((
        ParameterRule("binarize", "float", "Threshold: features above it become 1 (None: the features are binary "
                      "already).", bounds=Interval(0, None), optional=True,
                      why="a negative threshold would turn the implicit zeros of sparse input into ones"),))
    binarize: float | None

    def __init__(self, *, alpha: float | npt.ArrayLike = 1.0, force_alpha: bool = True,  # noqa: PLR0913
                 binarize: float | None = 0.0, fit_prior: bool = True, class_prior: npt.ArrayLike | None = None,
                 half_life: float | None = None, window: int | None = None, window_buckets: int = 10,
                 counts: str = "auto"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.binarize = binarize
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets
        self.counts = counts

    @property
    def feature_log_prob_(self) -> FloatArray:
        """log P(feature = 1 | class), shape (n_classes, n_features) (computed now for sparse counts)."""
        tables: BernoulliTables = self._dense_tables()
        return tables.feature_log_prob_

    def _prepare(self, X: Features) -> Features:
        """Binarize: dense input becomes a bool array; CSR keeps its sparsity."""
        if self.binarize is None:
            return X
        if is_sparse(X):
            X = X.copy()
            X.data = (X.data > self.binarize).astype(np.float64)
            X.eliminate_zeros()
            return X
        if X.dtype.kind in "iu":  # x > 127.5 is x > 127 for integers: no float conversion
            threshold = np.floor(self.binarize)
            limits = np.iinfo(X.dtype)
            if not limits.min <= threshold < limits.max:
                return np.full(X.shape, threshold < limits.min)
            return X > X.dtype.type(threshold)
        return X > self.binarize

    def _smooth_dense(self, counts: DiscreteCounts, alpha: Alpha, class_log_prior: FloatArray) -> BernoulliTables:
        # A per-feature alpha smooths each feature's Bernoulli towards 1/2 with its own weight
        # (scikit-learn's own BernoulliNB fails on array alpha).
        log_p = np.log(counts.feature_count + alpha) - np.log(counts.class_count[:, None] + alpha * 2)
        log_not_p = np.log(1 - np.exp(log_p))
        # sum_f [x log p + (1 - x) log(1 - p)] = x . (log p - log(1 - p)) + sum_f log(1 - p)
        return BernoulliTables(class_log_prior_=class_log_prior, feature_log_prob_=log_p,
                               weights=weights_for_rows(log_p - log_not_p),
                               bias=class_log_prior + log_not_p.sum(axis=1))

    def _smooth_pairs(self, counts: PairCounts, alpha: float, class_log_prior: FloatArray) -> BernoulliPairTables:
        classes, _, _ = counts.cells()
        log_p, log_not_p, unseen_log_p, unseen_log_not_p = _pair_log_probabilities(counts, alpha)
        unseen = unseen_log_p - unseen_log_not_p
        # sum_f log(1 - p) = n_features log(1 - p_unseen) + the difference at the pairs seen
        seen_not_p = np.bincount(classes, weights=log_not_p - unseen_log_not_p[classes], minlength=len(unseen))
        return BernoulliPairTables(class_log_prior_=class_log_prior, pair_weight=log_p - log_not_p - unseen[classes],
                                   unseen=unseen,
                                   bias=class_log_prior + self.n_features_in_ * unseen_log_not_p + seen_not_p)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        if isinstance(tables, BernoulliPairTables):
            return self._pair_scores(X, tables.pair_weight, tables.unseen, tables.bias)
        return linear_scores(X, tables.weights, tables.bias)

    def _feature_weights(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """log p - log(1 - p) of each (class, feature) cell, shape (n_cells,)."""
        tables = self._fresh_tables()
        if isinstance(tables, BernoulliPairTables):
            return tables.unseen[classes] + self._at_pairs(tables.pair_weight, classes, features)
        weights: FloatArray = tables.weights[features, classes]
        return weights

    def _offset_terms(self) -> CellTerms:
        """log(1 - p) of (class, feature) cells, as the tables' bias sums it."""
        tables = self._fresh_tables()
        if isinstance(tables, BernoulliTables):
            return lambda classes, features: np.log(1 - np.exp(tables.feature_log_prob_[classes, features]))
        _, log_not_p, _, unseen_log_not_p = _pair_log_probabilities(self._pairs(), float(self._checked_alpha()))
        seen_classes, _, _ = self._pairs().cells()
        seen_log_not_p = log_not_p - unseen_log_not_p[seen_classes]  # the pairs' own, beyond a pair never seen's
        return lambda classes, features: unseen_log_not_p[classes] + self._at_pairs(seen_log_not_p, classes, features)

    def _prequential_joint_log_likelihood(self, X: Features, statistics: DiscreteCounts | PairCounts,
                                          rows: IndexArray, weights: FloatArray | None, n_classes: int) -> FloatArray:
        """x . (log p - log(1 - p)) + sum_f log(1 - p) + log prior of each row under the counts after
        the rows before it. A learned row changes log(1 - p) of its class at every feature, as the
        class's weight grows: dense rows get a weight vector per learned row (``version_scores``);
        sparse rows are scored at their own cells, and sum_f log(1 - p) of each version of a class
        is summed over the features grouped by count (``version_sums``)."""
        learned = LearnedRows(rows, weights, n_classes)
        alpha = self._smoothing_alpha()
        class_weights = class_weights_before(statistics, learned)
        if is_sparse(X):
            scores = self._prequential_cells(X, statistics, learned, alpha, class_weights)
        else:
            scores = version_scores(X, learned, dense_counts(statistics, n_classes, X.shape[1]),
                                    padded(statistics.class_count, n_classes), partial(_weigh, alpha=alpha))
        scores += self._class_log_priors(class_weights, learned.classes_known(len(statistics.class_count)))
        return scores

    def _prequential_cells(self, X: Features, statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                           alpha: Alpha, class_weights: FloatArray) -> FloatArray:
        """The scores of CSR rows but their priors, shape (n_samples, n_classes): their cells' terms,
        and sum_f log(1 - p) of the version of each class before each row."""
        cells = BatchCells(X, learned)
        scores, counts_before = _cell_scores(cells, CountsAt(statistics, cells.distinct), alpha, class_weights)
        versions = learned.versions()
        taught_classes = cells.classes[cells.taught]
        moves = by_class(taught_classes, learned.n_classes, versions[cells.rows[cells.taught], taught_classes] + 1,
                         counts_before, counts_before + cells.amounts[cells.taught],
                         np.broadcast_to(alpha, (X.shape[1],))[cells.features[cells.taught]])
        for c, (values, alphas, multiplicity) in enumerate(_counts_by_class(statistics, learned.n_classes,
                                                                             X.shape[1], alpha)):
            at, from_counts, to_counts, move_alphas = moves[c]
            weights_of_versions = np.r_[0.0, np.cumsum(learned.weights[learned.rows == c])]
            weights_of_versions += statistics.class_count[c] if c < len(statistics.class_count) else 0.0
            log_not_p_sums = _log_not_p_sums(values, alphas, multiplicity, at, from_counts, to_counts, move_alphas,
                                             weights_of_versions)
            scores[:, c] += log_not_p_sums[versions[:, c]]
        return scores


def _pair_log_probabilities(counts: PairCounts, alpha: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """log p and log(1 - p) of the pairs seen (n_pairs,), in their order, and of a pair never seen of
    each class (n_classes,): (log_p, log_not_p, unseen_log_p, unseen_log_not_p)."""
    classes, _, pair_counts = counts.cells()
    log_class_total = np.log(counts.class_count + alpha * 2)
    log_p = np.log(pair_counts + alpha) - log_class_total[classes]
    log_not_p = np.log(1 - np.exp(log_p))  # as _smooth_dense computes it, for the same numbers
    unseen_log_p = np.log(alpha) - log_class_total
    return log_p, log_not_p, unseen_log_p, np.log(1 - np.exp(unseen_log_p))


def _cell_scores(cells: BatchCells, held: CountsAt, alpha: Alpha, class_weights: FloatArray
                 ) -> tuple[FloatArray, FloatArray]:
    """sum over each row's cells of x (log p - log(1 - p)), shape (n_samples, n_classes), and each
    learned cell's count in its class before its row, shape (n_taught,). class_weights :
    (n_samples, n_classes) the weights of the classes that score each row."""
    cell_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[cells.features]
    taught_classes = cells.classes[cells.taught]
    counts_before = np.empty(len(cells.taught))
    scores = np.empty(class_weights.shape)
    for chunk in cells.class_chunks(class_weights.shape[1]):
        counts = cells.counts_before(chunk, held.of_classes(chunk))
        mine = (taught_classes >= chunk.start) & (taught_classes < chunk.stop)
        counts_before[mine] = counts[taught_classes[mine] - chunk.start, cells.taught[mine]]
        log_not_p = class_weights[:, chunk][cells.rows].T - counts  # + log(class weight + 2 alpha)
        log_not_p += cell_alpha
        np.log(log_not_p, out=log_not_p)
        counts += cell_alpha
        np.log(counts, out=counts)
        counts -= log_not_p
        counts *= cells.values
        scores[:, chunk] = cells.row_sums(counts)
    return scores, counts_before


def _weigh(counts: FloatArray, class_weights: FloatArray, scratch: FloatArray, alpha: Alpha) -> FloatArray:
    """Versions' weights log p - log(1 - p), in place in their counts (n_versions, n_features), and
    biases sum_f log(1 - p) (n_versions,), of class weights (n_versions,): ``Weigh``."""
    n_features = counts.shape[1]
    log_not_p = np.subtract((class_weights + alpha)[:, None] if np.ndim(alpha) == 0
                            else class_weights[:, None] + alpha, counts, out=scratch)
    np.log(log_not_p, out=log_not_p)  # log(1 - p) + log(class weight + 2 alpha)
    if np.ndim(alpha):
        totals = np.log(class_weights[:, None] + 2 * np.asarray(alpha)).sum(axis=1)
    else:
        totals = n_features * np.log(class_weights + 2 * alpha)
    biases: FloatArray = log_not_p.sum(axis=1) - totals
    counts += alpha
    np.log(counts, out=counts)
    counts -= log_not_p
    return biases


def _counts_by_class(statistics: DiscreteCounts | PairCounts, n_classes: int, n_features: int,
                     alpha: Alpha) -> Iterator[tuple[FloatArray, FloatArray, IntArray]]:
    """For each class, the counts of all its features as (values, alphas, how many features have
    them), each (n_values,): the distinct counts for one alpha, else each feature's."""
    if isinstance(statistics, DiscreteCounts):
        for c in range(n_classes):
            counts = statistics.feature_count[c] if c < len(statistics.feature_count) else np.zeros(n_features)
            if np.ndim(alpha):
                yield counts, np.asarray(alpha), np.ones(n_features, dtype=np.int64)
            else:
                values, multiplicity = np.unique(counts, return_counts=True)
                yield values, np.full(len(values), alpha), multiplicity
        return
    classes, _, counts = statistics.cells()
    for (seen,) in by_class(classes, n_classes, counts):
        values, multiplicity = np.unique(np.r_[seen, 0.0], return_counts=True)
        multiplicity[np.searchsorted(values, 0.0)] += n_features - len(seen) - 1  # the pairs never seen
        yield values, np.full(len(values), alpha), multiplicity


def _log_not_p_sums(held_values: FloatArray, held_alphas: FloatArray, held_multiplicity: IntArray,
                    versions: IndexArray, from_counts: FloatArray, to_counts: FloatArray, move_alphas: FloatArray,
                    class_weights: FloatArray) -> FloatArray:
    """sum_f log(1 - p_f) at each version of a class, shape (n_versions,).

    held_* : (n_held,) the counts of its features at version 0, their alphas and how many features
    have them; versions, from_counts, to_counts, move_alphas : (n_moves,) a learned row moving a
    feature from one count to another at a version; class_weights : (n_versions,)."""
    n_held, n_moves = len(held_values), len(versions)
    groups, group_alphas, where = _distinct_pairs(np.r_[held_values, from_counts, to_counts],
                                                  np.r_[held_alphas, move_alphas, move_alphas])
    start = np.bincount(where[:n_held], weights=held_multiplicity, minlength=len(groups)).astype(np.int64)

    one_alpha = bool((group_alphas == group_alphas[0]).all()) if len(groups) else True

    def log_not_p(weights: FloatArray) -> FloatArray:
        if one_alpha:  # an outer product: each element once, no (groups x versions) division
            ratios = np.multiply.outer(groups + group_alphas[0], -1 / (weights + 2 * group_alphas[0]))
        else:
            ratios = -(groups + group_alphas)[:, None] / (weights[None, :] + 2 * group_alphas[:, None])
        terms: FloatArray = np.log1p(ratios, out=ratios)
        return terms

    return version_sums(start, versions, where[n_held:n_held + n_moves], where[n_held + n_moves:],
                        class_weights, log_not_p)


def _distinct_pairs(values: FloatArray, alphas: FloatArray) -> tuple[FloatArray, FloatArray, IndexArray]:
    """The distinct (value, alpha) pairs, as values and alphas (n_distinct,), and where each of the
    given pairs is among them (n,)."""
    order = np.lexsort((alphas, values))
    values, alphas = values[order], alphas[order]
    new = np.r_[True, (values[1:] != values[:-1]) | (alphas[1:] != alphas[:-1])]
    where = np.empty(len(order), dtype=np.intp)
    where[order] = np.cumsum(new) - 1
    return values[new], alphas[new], where
