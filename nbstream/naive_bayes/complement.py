"""Complement Naive Bayes (Rennie et al. 2003): robust to imbalanced text classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..prequential.count_cells import compiled_log_count_sums
from ..prequential.counts import (
    BatchCells,
    CountsAt,
    LearnedRows,
    class_weights_before,
    feature_totals_before,
    sums_before,
)
from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.blocked import linear_scores
from ..utils.ndarrays import Features, FloatArray, IndexArray
from ..utils.parameters import ParameterRule, ParameterRules
from .discrete import Alpha, DiscreteTables, FeatureCountsNB, row_sums, weights_for_rows


@dataclass
class ComplementTables(DiscreteTables):
    """feature_all_ : (n_features,) counts over all classes; feature_log_prob_ : (n_classes,
    n_features) the complement weights; a row's score is x . weights + bias, weights :
    (n_features, n_classes), bias : (n_classes,)."""

    feature_all_: FloatArray
    feature_log_prob_: FloatArray
    weights: FloatArray
    bias: FloatArray


@dataclass
class ComplementPairTables(DiscreteTables):
    """The tables of sparse counts (see ``ComplementNB._smooth_pairs``). A row's score is
    scale * (its product with seen_weight - its product with pair_weight + sum(x) unseen) + bias:
    seen_weight : (n_seen,) log(feature_all + alpha) - log(alpha) of each feature with pairs;
    pair_weight : (n_pairs,) log(feature_all + alpha) - log(complement count) of each pair seen;
    unseen : (n_classes,) log(alpha) - log(each class's complement total);
    scale : (n_classes,) -1, or with norm 1 / (the sum of the class's log weights);
    bias : (n_classes,)."""

    seen_weight: FloatArray
    pair_weight: FloatArray
    unseen: FloatArray
    scale: FloatArray
    bias: FloatArray


class ComplementNB(FeatureCountsNB[ComplementTables | ComplementPairTables]):
    """Complement Naive Bayes, streaming; scikit-learn's parameters and numbers.

    Each class is scored by how unlike the *other* classes' counts a row is.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0
    force_alpha : bool, default True
    fit_prior : bool, default True   used only when a single class has been seen
    class_prior : array of shape (n_classes,) or None
    norm : bool, default False        second normalisation of the weights
    half_life : float or None, default None
    window : int or None, default None   learn only the most recent examples: the model is exactly
        that of the last window - ceil(window / window_buckets) + 1 to window examples, kept in
        window_buckets buckets (memory: window_buckets + 1 times the statistics). Not with half_life.
    window_buckets : int, default 10   how many buckets the window is kept in (1 to window)
    counts : "auto", "dense" or "sparse", default "auto"   as MultinomialNB's

    Fitted attributes as MultinomialNB plus feature_all_ (n_features,).

    >>> model = ComplementNB().partial_fit([[3, 0], [0, 4]], ["x", "y"])
    >>> model.predict([[2, 0], [0, 1]]).tolist()
    ['x', 'y']
    """

    kind = "complement"
    requires_non_negative = True
    _parameter_rules = ParameterRules((
        ParameterRule("norm", "bool", "Normalise the complement weights a second time."),))
    norm: bool

    def __init__(self, *, alpha: float | npt.ArrayLike = 1.0, force_alpha: bool = True,  # noqa: PLR0913
                 fit_prior: bool = True, class_prior: npt.ArrayLike | None = None, norm: bool = False,
                 half_life: float | None = None, window: int | None = None, window_buckets: int = 10,
                 counts: str = "auto"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.norm = norm
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets
        self.counts = counts

    @property
    def feature_all_(self) -> FloatArray:
        """Weighted sum of each feature over all classes, shape (n_features,)."""
        tables: ComplementTables = self._dense_tables()
        return tables.feature_all_

    @property
    def feature_log_prob_(self) -> FloatArray:
        """The complement weights of each class and feature, shape (n_classes, n_features)
        (computed now for sparse counts)."""
        tables: ComplementTables = self._dense_tables()
        return tables.feature_log_prob_

    def _smooth_dense(self, counts: DiscreteCounts, alpha: Alpha, class_log_prior: FloatArray) -> ComplementTables:
        feature_count = counts.feature_count
        feature_all = feature_count.sum(axis=0)
        complement = feature_all + alpha - feature_count
        logged = np.log(complement / complement.sum(axis=1, keepdims=True))
        log_weights = logged / logged.sum(axis=1, keepdims=True) if self.norm else -logged
        return ComplementTables(class_log_prior_=class_log_prior, feature_all_=feature_all,
                                feature_log_prob_=log_weights, weights=weights_for_rows(log_weights),
                                bias=self._bias(class_log_prior))

    def _smooth_pairs(self, counts: PairCounts, alpha: float, class_log_prior: FloatArray) -> ComplementPairTables:
        """With A_f the count of feature f over all classes and N_cf the pair's, the complement count
        is A_f + alpha - N_cf: A_f + alpha for a pair never seen, alpha for a feature never seen. So
        sum_f x_f log(complement_cf) = sum(x) log(alpha) + x . seen_weight - x . pair_weight, and the
        weights are log(complement_cf) - log(the class's complement total), negated or normalised."""
        seen_weight, pair_weight = _pair_log_complements(counts, alpha)
        n_features, n_classes = self.n_features_in_, len(class_log_prior)
        log_complement_total = np.log(_others_totals(counts.class_feature_totals()) + n_features * alpha)
        unseen = np.log(alpha) - log_complement_total
        if self.norm:  # sum_f log weight_cf = sum_f log(complement_cf) - n_features log(complement total)
            log_sums = _pair_log_complement_sums(counts, (seen_weight, pair_weight), alpha, n_features, n_classes)
            scale = 1 / (log_sums - n_features * log_complement_total)
        else:
            scale = np.full(n_classes, -1.0)
        return ComplementPairTables(class_log_prior_=class_log_prior, seen_weight=seen_weight, pair_weight=pair_weight,
                                    unseen=unseen, scale=scale, bias=self._bias(class_log_prior))

    @staticmethod
    def _bias(class_log_prior: FloatArray) -> FloatArray:
        """A single class has no complement: its prior is the only information."""
        return class_log_prior if len(class_log_prior) == 1 else np.zeros_like(class_log_prior)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        if isinstance(tables, ComplementPairTables):
            index = self._pairs().index()
            scores = -index.pair_sums(X, tables.pair_weight, len(tables.bias))
            scores += (index.feature_sums(X, tables.seen_weight))[:, None]
            scores += row_sums(X)[:, None] * tables.unseen
            scores *= tables.scale
            scores += tables.bias
            return scores
        return linear_scores(X, tables.weights, tables.bias)

    def _prior_terms(self) -> FloatArray:
        return self._bias(self._fresh_tables().class_log_prior_)

    def _feature_weights(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """The complement weight of each (class, feature) cell, shape (n_cells,)."""
        tables = self._fresh_tables()
        if not isinstance(tables, ComplementPairTables):
            weights: FloatArray = tables.weights[features, classes]
            return weights
        log_complements = self._pairs().index().feature_values_at(tables.seen_weight, features, self.n_features_in_)
        log_complements -= self._at_pairs(tables.pair_weight, classes, features)
        log_complements += tables.unseen[classes]
        return tables.scale[classes] * log_complements

    def _prequential_joint_log_likelihood(self, X: Features, statistics: DiscreteCounts | PairCounts,
                                          rows: IndexArray, weights: FloatArray | None, n_classes: int) -> FloatArray:
        """-sum_f x_f log(complement_cf / complement total_c) (with norm: divided by sum_f log of the
        same over all features) under the counts after the rows before each row. A learned row
        adds to the complement of every class but its own, so each cell needs every class's count
        of its feature and the count over all classes, both as the rows before left them."""
        learned = LearnedRows(rows, weights, n_classes)
        alpha = self._smoothing_alpha()
        n_features = X.shape[1]
        sizes = row_sums(X)
        smoothing = np.sum(alpha) if np.ndim(alpha) else alpha * n_features
        log_totals = np.log(_others_totals(feature_totals_before(statistics, learned, sizes)) + smoothing)
        compiled = None if self.norm else compiled_log_count_sums(X, statistics, learned, alpha,
                                                                  complement_of=_others_of_each_class)
        sums, gains = (compiled, None) if compiled is not None \
            else _cell_log_complement_sums(X, statistics, learned, alpha, self.norm)
        sums -= sizes[:, None] * log_totals  # sum_f x_f log(complement_cf / complement total_c)
        if gains is None:
            jll = -sums
        else:  # sum_f log(complement_cf / complement total_c) of the counts before each row
            log_sums = _log_complement_sums(statistics, alpha, n_features, n_classes) + sums_before(gains)
            jll = sums / (log_sums - n_features * log_totals)
        if n_classes == 1:  # a single class has no complement: its prior is its score (``_bias``)
            jll += self._class_log_priors(class_weights_before(statistics, learned),
                                          learned.classes_known(len(statistics.class_count)))
        # Rows scored while the model knew one class of several have one class to choose, and
        # its prior, log 1, is the 0 of the others.
        return jll


def _cell_log_complement_sums(X: Features, statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                              alpha: Alpha, norm: bool) -> tuple[FloatArray, FloatArray | None]:
    """sum_f x_if log(complement_cf) of each row i and class c under the counts the rows before it
    left, in numpy over the batch's cells ordered by feature (``BatchCells``), shape (n_samples,
    n_classes); and with ``norm`` what each learned row adds to sum_f log(complement_cf) of the
    other classes (n_samples, n_classes), else None."""
    n_classes = learned.n_classes
    cells = BatchCells(X, learned)
    held = CountsAt(statistics, cells.distinct)
    everything = cells.totals_before(held.all_classes())
    everything += alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[cells.features]
    sums = np.empty((len(learned), n_classes))
    gains = np.empty((len(learned), n_classes)) if norm else None
    for chunk in cells.class_chunks(n_classes):
        complement = everything - cells.counts_before(chunk, held.of_classes(chunk))
        if gains is not None:  # what each learned row adds to sum_f log(complement_cf) of the other classes
            added = np.where(cells.classes == np.arange(chunk.start, chunk.stop)[:, None], 0.0, cells.amounts)
            gains[:, chunk] = cells.row_sums(np.log1p(added / complement))
        np.log(complement, out=complement)
        complement *= cells.values
        sums[:, chunk] = cells.row_sums(complement)
    return sums, gains


def _pair_log_complements(counts: PairCounts, alpha: float) -> tuple[FloatArray, FloatArray]:
    """(seen_weight, pair_weight) of ``ComplementPairTables``: log(feature_all + alpha) - log(alpha)
    of each feature with pairs (n_seen,), log(feature_all + alpha) - log(complement count) of each
    pair (n_pairs,)."""
    index, (_, _, pair_counts) = counts.index(), counts.cells()
    feature_all = np.bincount(index.features_of_pairs, weights=pair_counts, minlength=len(index.seen))
    seen_weight = np.log(feature_all + alpha) - np.log(alpha)
    others = feature_all[index.features_of_pairs] - pair_counts  # the other classes' counts: no alpha lost
    pair_weight = np.log(feature_all + alpha)[index.features_of_pairs] - np.log(others + alpha)
    return seen_weight, pair_weight


def _pair_log_complement_sums(counts: PairCounts, log_complements: tuple[FloatArray, FloatArray], alpha: float,
                              n_features: int, n_classes: int) -> FloatArray:
    """sum_f log(complement_cf) of each class, shape (n_classes,) (classes beyond the counts' have
    none): n_features log(alpha) + the seen features' weights - the class's pairs' weights, of
    log_complements (seen_weight, pair_weight) (``_pair_log_complements``)."""
    seen_weight, pair_weight = log_complements
    pair_sums = np.bincount(counts.index().classes, weights=pair_weight, minlength=n_classes)
    sums: FloatArray = n_features * np.log(alpha) + seen_weight.sum() - pair_sums
    return sums


def _log_complement_sums(counts: DiscreteCounts | PairCounts, alpha: Alpha, n_features: int,
                         n_classes: int) -> FloatArray:
    """sum_f log(complement_cf) of each class, shape (n_classes,) (classes beyond the counts' have
    none), whichever layout holds the counts."""
    if isinstance(counts, PairCounts):
        log_complements = _pair_log_complements(counts, float(alpha))
        return _pair_log_complement_sums(counts, log_complements, float(alpha), n_features, n_classes)
    return _dense_log_complement_sums(counts, alpha, n_classes)


def _dense_log_complement_sums(counts: DiscreteCounts, alpha: Alpha, n_classes: int) -> FloatArray:
    """sum_f log(complement_cf) of each class, shape (n_classes,) (classes beyond the counts' have
    none), one class at a time: no (n_classes, n_features) temporary."""
    everything = counts.feature_count.sum(axis=0) + alpha
    sums = np.full(n_classes, np.log(everything).sum())
    for c, row in enumerate(counts.feature_count):
        sums[c] = np.log(everything - row).sum()
    return sums


def _others_of_each_class(counts: FloatArray) -> FloatArray:
    """For each class and feature, the other classes' counts, shape (n_classes, n_features) of counts
    (n_classes, n_features): the complement counts less the smoothing."""
    return _others_totals(counts.T).T


def _others_totals(totals: FloatArray) -> FloatArray:
    """For each class, the sum of the other classes' totals, shape (..., n_classes) of totals
    (..., n_classes): the sum of its complement counts less the smoothing. Added up from both
    sides rather than subtracted from the whole, so a class holding nearly every count loses no
    digits."""
    none = np.zeros_like(totals[..., :1])
    before = np.concatenate([none, np.cumsum(totals[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumsum(totals[..., :0:-1], axis=-1)[..., ::-1], none], axis=-1)
    others: FloatArray = before + after
    return others
