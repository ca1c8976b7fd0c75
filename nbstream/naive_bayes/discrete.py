"""Shared smoothing for the count-based models: alpha, fitted or given class priors."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray
from ..utils.parameters import Interval, ParameterRule, ParameterRules, Spell, as_named
from .base import NaiveBayes
from .core import StatsT
from .explanations import CellTerms, LinearContributions, linear_cell_contributions
from .tables import Tables

_ALPHA_FLOOR = 1e-10

Alpha: TypeAlias = "float | FloatArray"  # a scalar, or one value per feature


@dataclass
class DiscreteTables(Tables):
    """class_log_prior_ : (n_classes,) log P(c), first of every discrete model's tables."""

    _may_be_infinite = frozenset({"class_log_prior_", "bias"})
    class_log_prior_: FloatArray


DiscreteTablesT = TypeVar("DiscreteTablesT", bound=DiscreteTables)


class DiscreteNB(NaiveBayes[StatsT, DiscreteTablesT]):
    """Base of Bernoulli, multinomial, complement and categorical models.

    Subclasses supply ``_smooth(alpha, class_log_prior)`` returning their tables.
    """

    _poor_score = True  # scikit-learn's generic accuracy checks use Gaussian blobs
    _parameter_rules = ParameterRules((
        ParameterRule("alpha", "float", "Additive smoothing.", bounds=Interval(0, None), per_feature=True),
        ParameterRule("force_alpha", "bool", "Keep alpha as given below 1e-10 (else it is raised to 1e-10)."),
        ParameterRule("fit_prior", "bool", "Learn the class priors from the data (else they are uniform)."),
        ParameterRule("class_prior", "probabilities", "Fixed class priors (None: see fit_prior).", optional=True),
    ))
    alpha: float | npt.ArrayLike
    force_alpha: bool
    fit_prior: bool
    class_prior: npt.ArrayLike | None

    @property
    def class_log_prior_(self) -> FloatArray:
        """log P(class), shape (n_classes,): fitted, uniform, or ``class_prior``."""
        return self._fresh_tables().class_log_prior_

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        if not isinstance(self.alpha, numbers.Real):
            alpha = np.asarray(self.alpha, dtype=np.float64)
            if alpha.shape != (n_features,):
                raise ValueError(f"alpha as an array needs one value per feature ({n_features}); "
                                 f"got shape {alpha.shape}.")
            if not np.isfinite(alpha).all() or (alpha < 0).any():
                raise ValueError("All values in alpha must be finite and >= 0.")
        if self.class_prior is not None and n_classes is not None:
            n_priors = len(np.asarray(self.class_prior))
            if n_priors != n_classes:
                raise ValueError(f"Number of priors must match number of classes: class_prior has "
                                 f"{n_priors} entries for {n_classes} classes.")

    def _warn_before_learning(self) -> None:
        """scikit-learn's warning, from fit and partial_fit, pointing at the caller's line."""
        if not self.force_alpha and np.min(self._given_alpha()) < _ALPHA_FLOOR:
            warnings.warn(f"alpha too small will result in numeric errors, setting alpha = {_ALPHA_FLOOR:.1e}. "
                          "Use `force_alpha=True` to keep alpha unchanged.", UserWarning, stacklevel=4)

    def _smooths(self) -> bool:
        return bool(np.min(self._checked_alpha()) > 0)

    def _given_alpha(self) -> Alpha:
        return float(self.alpha) if isinstance(self.alpha, numbers.Real) else np.asarray(self.alpha, dtype=np.float64)

    def _checked_alpha(self) -> Alpha:
        """alpha as scikit-learn applies it: per-feature arrays checked, tiny values floored
        unless force_alpha (the warning came from fit or partial_fit)."""
        self._check_shapes(self.n_features_in_, None)  # set_params may have changed alpha since fit
        return self._smoothing_alpha()

    def _smoothing_alpha(self) -> Alpha:
        """alpha as applied, once its shape is known to fit: tiny values floored unless force_alpha."""
        alpha = self._given_alpha()
        if not self.force_alpha and np.min(alpha) < _ALPHA_FLOOR:
            return np.maximum(alpha, _ALPHA_FLOOR)
        return alpha

    def _class_log_prior(self) -> FloatArray:
        class_count = self._stats.class_count
        log_prior: FloatArray = self._class_log_priors(class_count[None, :], np.array([len(class_count)]))[0]
        return log_prior

    def _class_log_priors(self, class_count: FloatArray, n_known: IndexArray) -> FloatArray:
        """log P(c) of several models at once, shape (n_models, n_classes): class_count (n_models,
        n_classes) their class weights, n_known (n_models,) how many classes each knows (the first
        ones; the others have weight 0)."""
        n_classes = class_count.shape[1]
        if self.class_prior is not None:
            prior = np.asarray(self.class_prior, dtype=np.float64)
            if len(prior) != n_classes:
                labels = self.classes_.tolist() if self.is_fitted else []
                named = f" {labels}" if len(labels) == n_classes else ""
                raise ValueError(f"class_prior has {len(prior)} entries but the model has {n_classes} classes{named}.")
            with np.errstate(divide="ignore"):
                return np.broadcast_to(np.log(prior), class_count.shape).copy()
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                fitted: FloatArray = np.log(class_count) - np.log(class_count.sum(axis=1, keepdims=True))
            return fitted
        with np.errstate(divide="ignore"):
            uniform: FloatArray = np.broadcast_to(-np.log(n_known.astype(np.float64))[:, None], class_count.shape)
        return uniform.copy()

    def _refresh(self) -> DiscreteTablesT:
        return self._smooth(self._checked_alpha(), self._class_log_prior())

    def _prior_terms(self) -> FloatArray:
        return self._fresh_tables().class_log_prior_

    def _smooth(self, alpha: Alpha, class_log_prior: FloatArray) -> DiscreteTablesT:
        raise NotImplementedError


COUNTS_LAYOUTS = ("auto", "dense", "sparse")
SPARSE_FROM_FEATURES = 1 << 16  # counts="auto" keeps sparse counts from this many features on (hashed text)


def one_alpha_for_pairs(alpha: object, force_alpha: object) -> bool:
    """Whether sparse counts can hold a model of this alpha: they give every pair never seen one
    smoothed value per class, so one alpha for all features, and not 0 (unless floored)."""
    return isinstance(alpha, numbers.Real) and (float(alpha) > 0 or not force_alpha)


class SparseCountsNeedOneAlpha:
    """The relation of counts="sparse" to alpha and force_alpha (``one_alpha_for_pairs``)."""

    names = ("counts", "alpha", "force_alpha")

    def problem(self, values: Mapping[str, object], given: Collection[str] | None,
                spell: Spell = as_named) -> str | None:
        alpha, force_alpha = values.get("alpha", 1.0), values.get("force_alpha", True)
        if values.get("counts") != "sparse" or one_alpha_for_pairs(alpha, force_alpha):
            return None
        return (f"{spell('counts')}='sparse' needs one {spell('alpha')} > 0 for all features; got "
                f"{spell('alpha')}={alpha!r} ({spell('force_alpha')}={force_alpha}). Use {spell('counts')}='dense'.")


class FeatureCountsNB(DiscreteNB[DiscreteCounts | PairCounts, DiscreteTablesT]):
    """Base of the models that learn per-class sums of each feature: Bernoulli, multinomial, complement.

    Their counts are held dense, a (n_classes, n_features) table, or sparse, the (class, feature)
    pairs seen (``nbstream.stats.sparse_counts``): the ``counts`` parameter, "auto" choosing sparse from
    ``SPARSE_FROM_FEATURES`` features on. The layout is chosen when the model starts learning
    and changes no number. Subclasses supply ``_smooth_dense(counts, alpha, class_log_prior)``
    and ``_smooth_pairs(counts, alpha, class_log_prior)``.
    """

    _statistics_type = DiscreteCounts
    layout_params = frozenset({"counts"})
    _parameter_rules = ParameterRules((
        ParameterRule("counts", "choice", "How the counts are held: a dense table of classes x features, or only "
                      "the (class, feature) pairs seen; auto: sparse from 2**16 features on. Predictions are the "
                      "same.", choices=COUNTS_LAYOUTS),
    ), (SparseCountsNeedOneAlpha(),))
    counts: str

    def check_params(self) -> None:
        super().check_params()
        if self._statistics_layout() is PairCounts and not one_alpha_for_pairs(self.alpha, self.force_alpha):
            raise ValueError(f"this model holds sparse counts, which need one alpha > 0 for all features; got "
                             f"alpha={self.alpha!r} (force_alpha={self.force_alpha}). Fit a model with "
                             "counts='dense' for this alpha.")

    def _new_statistics(self, n_features: int) -> DiscreteCounts | PairCounts:
        sparse = self.counts == "sparse" or (self.counts == "auto" and n_features >= SPARSE_FROM_FEATURES
                                            and one_alpha_for_pairs(self.alpha, self.force_alpha))
        return PairCounts.empty(n_features) if sparse else DiscreteCounts.empty(n_features)

    def _statistics_from(self, arrays: dict[str, AnyArray]) -> DiscreteCounts | PairCounts:
        layout = PairCounts if set(arrays) == set(PairCounts.names) else DiscreteCounts
        return layout.from_arrays(arrays)

    def _merge_statistics(self, other: DiscreteCounts | PairCounts, rows: IndexArray) -> None:
        """Add another's counts, in this model's layout whatever theirs."""
        if isinstance(self._stats, PairCounts):
            pairs = other if isinstance(other, PairCounts) else PairCounts.from_dense(other.class_count,
                                                                                     other.feature_count)
            self._stats.merge(pairs, rows)
        else:
            self._stats.merge(self._as_dense(other), rows)

    def _pairs(self) -> PairCounts:
        """The counts of a model whose tables say they are sparse."""
        assert isinstance(self._stats, PairCounts)
        return self._stats

    def _pair_scores(self, X: Features, pair_weight: FloatArray, unseen: FloatArray, bias: FloatArray) -> FloatArray:
        """Scores of sparse counts whose pairs never seen weigh ``unseen`` per class: X's product with
        pair_weight (n_pairs,) over the pairs it has + sum(x) unseen (n_classes,) + bias (n_classes,)."""
        scores = self._pairs().index().pair_sums(X, pair_weight, len(bias))
        scores += row_sums(X)[:, None] * unseen
        scores += bias
        return scores

    # ---- explanations: the score of class c is sum_f x_f w_cf + o_cf + its prior term --------------
    def _feature_weights(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """w of each (class, feature) cell, shape (n_cells,): what a unit of the feature adds to
        the class's score."""
        raise NotImplementedError

    def _offset_terms(self) -> CellTerms | None:
        """The offsets o of (class, feature) cells, shape (n_cells,): what the feature adds to the
        class's score whatever its value; None when there are none."""
        return None

    def _pair_contributions(self, first: int, second: int) -> LinearContributions:
        return LinearContributions(self._feature_weights, self._offset_terms(), first, second, self.n_features_in_)

    def _cell_contributions(self, X: Features, first: IndexArray, second: IndexArray) -> FloatArray:
        return linear_cell_contributions(self._feature_weights, self._offset_terms(), X, first, second)

    def _at_pairs(self, pair_values: FloatArray, classes: IndexArray, features: IndexArray) -> FloatArray:
        """pair_values (n_pairs,) at each (class, feature) cell (n_cells,): 0 where the pair was never seen."""
        pairs = self._pairs()
        return pairs.index().values_at(pair_values, classes, features, (len(pairs.class_count), self.n_features_in_))

    def _as_dense(self, counts: DiscreteCounts | PairCounts) -> DiscreteCounts:
        if isinstance(counts, DiscreteCounts):
            return counts
        return DiscreteCounts(counts.class_count.copy(), counts.to_dense(self.n_features_in_))

    @property
    def sparse_counts_(self) -> bool:
        """Whether the counts are held sparse (see ``counts``)."""
        self._require_fitted()
        return isinstance(self._stats, PairCounts)

    @property
    def feature_count_(self) -> Any:
        """Weighted sum of each feature in each class, shape (n_classes, n_features): an ndarray, or
        for sparse counts a ``scipy.sparse.csr_array`` of the pairs seen."""
        self._require_fitted()
        counts = self._stats
        if isinstance(counts, DiscreteCounts):
            return counts.feature_count
        import scipy.sparse  # sparse counts come from text, which comes as CSR: scipy is there

        classes, features, values = counts.cells()
        table = scipy.sparse.coo_array((values, (classes, features)), shape=(len(counts.class_count),
                                                                            self.n_features_in_))
        return table.tocsr()

    def _smooth(self, alpha: Alpha, class_log_prior: FloatArray) -> DiscreteTablesT:
        if isinstance(self._stats, PairCounts):
            return self._smooth_pairs(self._stats, float(alpha), class_log_prior)
        return self._smooth_dense(self._stats, alpha, class_log_prior)

    def _smooth_dense(self, counts: DiscreteCounts, alpha: Alpha, class_log_prior: FloatArray) -> DiscreteTablesT:
        """The dense tables of dense counts."""
        raise NotImplementedError

    def _smooth_pairs(self, counts: PairCounts, alpha: float, class_log_prior: FloatArray) -> DiscreteTablesT:
        """The tables of sparse counts."""
        raise NotImplementedError

    def _dense_tables(self) -> Any:
        """The dense tables: the model's own, or for sparse counts computed now, as large as
        n_classes x n_features (for the fitted attributes that are such tables)."""
        tables = self._fresh_tables()
        if isinstance(self._stats, DiscreteCounts):
            return tables
        return self._smooth_dense(self._as_dense(self._stats), self._checked_alpha(), tables.class_log_prior_)


def row_sums(X: Features) -> FloatArray:
    """The sum of each row, shape (n_samples,), float64."""
    return np.asarray(X.sum(axis=1, dtype=np.float64)).reshape(-1)


def weights_for_rows(log_weights: FloatArray) -> FloatArray:
    """Per-class log-weights of shape (n_classes, n_features) in the layout scoring wants,
    (n_features, n_classes) row-major: a sparse product with a transposed view is far slower."""
    return np.ascontiguousarray(log_weights.T)

