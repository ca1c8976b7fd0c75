"""Gaussian Naive Bayes: continuous features, one normal distribution per class and feature."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..prequential.moments_and_categories import moments_before_each_row
from ..stats.counts import GaussianMoments
from ..stats.moments import Moments, pooled_variance
from ..utils.blocked import row_blocks
from ..utils.ndarrays import AnyArray, Features, FloatArray, FloatingArray, IndexArray
from ..utils.parameters import Interval, ParameterRule, ParameterRules
from .base import NaiveBayes
from .explanations import PairContributions
from .tables import Tables


@dataclass
class GaussianTables(Tables):
    """The fitted attributes, in float64, and what scoring needs (see ``_refresh``).

    theta_, var_ : (n_classes, n_features); class_prior_ : (n_classes,); epsilon_ : the smoothing;
    center : (n_features,); inv_var : (n_classes, n_features); linear, half_inv_var :
    (n_features, n_classes); offset_term, normalizer : (n_classes,)

    A variance of 0 (only with ``var_smoothing=0``) is a point mass: its inverse is 0 in
    ``inv_var`` and its log is left out of ``normalizer``, so these score the other features
    alone, and scoring then keeps the classes whose point masses the row is nearest
    (``_nearest_point_masses``).
    """

    _may_be_infinite = frozenset({"normalizer"})  # -inf for a prior of 0
    theta_: FloatArray
    var_: FloatArray
    class_prior_: FloatArray
    epsilon_: np.float64
    center: FloatArray
    inv_var: FloatArray
    linear: FloatArray
    half_inv_var: FloatArray
    offset_term: FloatArray
    normalizer: FloatArray

    @functools.cached_property
    def points(self) -> npt.NDArray[np.bool_]:
        """Where the variance is 0 (point masses), shape (n_classes, n_features)."""
        points: npt.NDArray[np.bool_] = self.var_ == 0
        return points


class GaussianNB(NaiveBayes[GaussianMoments, GaussianTables]):
    """Gaussian Naive Bayes, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    priors : array of shape (n_classes,) or None   fixed class priors (else learned)
    var_smoothing : float, default 1e-9
        Added to every variance: this fraction of the largest feature variance over all
        data seen so far (weighted by sample_weight; scikit-learn's ``fit`` ignores the
        weights here).
    half_life : float or None, default None   forgetting, in examples
    window : int or None, default None   learn only the most recent examples: the model is exactly
        that of the last window - ceil(window / window_buckets) + 1 to window examples, kept in
        window_buckets buckets (memory: window_buckets + 1 times the statistics). Not with half_life.
    window_buckets : int, default 10   how many buckets the window is kept in (1 to window)

    Fitted attributes: classes_, class_count_ (n_classes,), theta_ and var_
    (n_classes, n_features), class_prior_ (n_classes,), epsilon_, n_features_in_. As in
    scikit-learn, the float attributes have the dtype of the first batch when it is float16
    or float32 (the statistics and the scores stay float64).

    While no feature has varied yet, the smoothing is ``var_smoothing`` itself.

    With ``var_smoothing=0`` a feature that has not varied in a class (a constant feature, a
    class of one example) has a variance of 0 there, where scikit-learn predicts NaN. Here such
    a feature is what the normal distribution tends to as var_smoothing tends to 0: a point
    mass at the class's mean. A row's probabilities go to the classes whose point masses it is
    nearest (least sum of squared distances to them, then most of them), as the other features
    and the priors score those classes; every other class gets 0. A feature constant at one
    value in every class thus leaves every prediction as it would be without that feature.
    Where no variance is 0 the model is scikit-learn's.

    >>> point = GaussianNB(var_smoothing=0).partial_fit([[1.0, 5.0], [3.0, 5.0], [10.0, 5.0], [12.0, 5.0]],
    ...                                                 [0, 0, 1, 1])
    >>> point.var_[:, 1].tolist(), point.predict_proba([[2.0, 5.0], [11.0, 7.0]]).round(6).tolist()
    ([0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])

    Unlike scikit-learn's ``partial_fit``, which adds ``var_smoothing`` times the largest
    variance *of the latest batch*, the smoothing here is computed from the pooled
    moments of everything seen, when the tables are refreshed. So partial_fit on any
    chunking gives the same model as one ``fit`` on all rows.

    >>> model = GaussianNB().partial_fit([[1.0], [3.0], [10.0], [12.0]], [0, 0, 1, 1])
    >>> model.theta_.tolist(), model.var_.round(6).tolist()
    ([[2.0], [11.0]], [[1.0], [1.0]])
    """

    kind = "gaussian"
    _accept_sparse = False
    _keeps_float_dtype = True
    _statistics_type = GaussianMoments
    _parameter_rules = ParameterRules((
        ParameterRule("priors", "probabilities", "Fixed class priors (None: learned from the data).", optional=True),
        ParameterRule("var_smoothing", "float", "Added to every variance: this fraction of the largest variance of "
                      "a feature.", bounds=Interval(0, None)),
    ))
    priors: npt.ArrayLike | None
    var_smoothing: float

    def __init__(self, *, priors: npt.ArrayLike | None = None, var_smoothing: float = 1e-9,
                 half_life: float | None = None, window: int | None = None, window_buckets: int = 10):
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets

    @property
    def class_count_(self) -> FloatingArray:
        """Weight of each class learned so far, shape (n_classes,)."""
        return self._as_fitted_dtype(super().class_count_)

    @property
    def theta_(self) -> FloatingArray:
        """Mean of each feature in each class, shape (n_classes, n_features)."""
        return self._as_fitted_dtype(self._fresh_tables().theta_)

    @property
    def var_(self) -> FloatingArray:
        """Variance of each feature in each class plus ``epsilon_``, shape (n_classes, n_features)."""
        return self._as_fitted_dtype(self._fresh_tables().var_)

    @property
    def class_prior_(self) -> FloatingArray:
        """P(class), shape (n_classes,): learned, or ``priors``."""
        return self._as_fitted_dtype(self._fresh_tables().class_prior_)

    @property
    def epsilon_(self) -> np.floating[Any]:
        """What was added to every variance."""
        epsilon: np.floating[Any] = self._fresh_tables().epsilon_.astype(self._float_dtype)
        return epsilon

    def _as_fitted_dtype(self, array: FloatingArray) -> FloatingArray:
        """The array in the dtype of the float fitted attributes (itself when that is float64)."""
        return array.astype(self._float_dtype, copy=False)

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        if self.priors is not None and n_classes is not None:
            n_priors = len(np.asarray(self.priors))
            if n_priors != n_classes:
                raise ValueError(f"Number of priors must match number of classes: priors has "
                                 f"{n_priors} entries for {n_classes} classes.")

    def _class_prior(self, count: FloatArray) -> FloatArray:
        """P(class) of a model whose class weights are count, shape (..., n_classes)."""
        if self.priors is None:
            prior: FloatArray = count / count.sum(axis=-1, keepdims=True)
            return prior
        priors = np.asarray(self.priors, dtype=np.float64)
        if len(priors) != count.shape[-1]:
            raise ValueError(f"priors has {len(priors)} entries but the model has {count.shape[-1]} classes.")
        return priors

    def _variance(self, moments: Moments) -> tuple[FloatArray, FloatArray]:
        """var_ (..., n_classes, n_features) and epsilon_ (...) of each set of moments: the
        variance of each class plus ``var_smoothing`` times the largest variance over all
        classes, or times 1 while no feature has varied (scikit-learn would divide by zero)."""
        largest = pooled_variance(moments).max(axis=-1, initial=0.0)
        epsilon: FloatArray = self.var_smoothing * np.where(largest > 0, largest, 1.0)
        count = moments.weight[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.where(count > 0, moments.m2 / count, 0.0)
        var += epsilon[..., None, None]
        return var, epsilon

    def _refresh(self) -> GaussianTables:
        moments = self._stats
        var, epsilon = self._variance(moments.moments)
        point = var == 0  # point masses (var_smoothing=0): scored apart, see _nearest_point_masses
        prior = self._class_prior(moments.class_count)
        # Scores expand sum((x - theta)^2 / var) into two matrix products around a centre
        # per feature: the mean of the class where the feature varies least, whose tiny
        # variance would otherwise magnify the expansion's rounding most (a pixel that is
        # always 0 in one class, say). _joint_log_likelihood rescores directly wherever the
        # expansion could still lose digits.
        learned = moments.class_count > 0
        stiffest = np.argmin(np.where(learned[:, None], var, np.inf), axis=0)
        center = moments.mean[stiffest, np.arange(var.shape[1])] if learned.any() else np.zeros(var.shape[1])
        spread = np.where(point, 1.0, var)  # a point mass adds nothing to these tables
        inv_var = np.where(point, 0.0, 1.0 / spread)
        offset = moments.mean - center
        with np.errstate(divide="ignore"):
            normalizer = np.log(prior) - 0.5 * np.log(2.0 * np.pi * spread).sum(axis=1)
        return GaussianTables(theta_=moments.mean.copy(), var_=var, class_prior_=prior, epsilon_=np.float64(epsilon),
                              center=center, inv_var=inv_var, linear=(offset * inv_var).T,
                              half_inv_var=0.5 * inv_var.T, offset_term=0.5 * (offset**2 * inv_var).sum(axis=1),
                              normalizer=normalizer)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        """log N(x | theta_c, var_c) + log prior_c, shape (n_samples, n_classes).

        The fast path is exact up to rounding of its terms: the products of x - center with
        the tables and the per-class constant, each of size up to ``magnitude``. Where that
        rounding could reach 1e-10 (features of tiny variance far from the grand mean, say)
        and the class could matter to the row (within 745 of its best score, beyond which
        exp underflows), the score is computed again from direct differences.
        """
        tables = self._fresh_tables()
        scores = np.empty((X.shape[0], len(tables.normalizer)))
        # Rounding of a sum of F products: a few ulps of the largest term, growing as sqrt(F).
        rounding = 8 * np.finfo(np.float64).eps * np.sqrt(X.shape[1])
        for block in row_blocks(X.shape[0], X.shape[1]):
            centred = X[block].astype(np.float64)
            centred -= tables.center
            out = scores[block]
            np.matmul(centred, tables.linear, out=out)
            centred *= centred
            squares = centred @ tables.half_inv_var  # >= 0
            out -= squares
            out += tables.normalizer - tables.offset_term
            error = squares  # reused: the terms' magnitude, then the bound on their rounding
            error += tables.offset_term
            error *= rounding
            _rescore(tables, X[block], out, error)
            if tables.points.any():
                distance = _point_distance(X[block], tables.theta_, tables.points)
                _nearest_point_masses(out, distance, tables.points.sum(axis=1))
        return scores

    def _prior_terms(self) -> FloatArray:
        with np.errstate(divide="ignore"):
            log_prior: FloatArray = np.log(self._fresh_tables().class_prior_)
        return log_prior

    def _pair_contributions(self, first: int, second: int) -> GaussianContributions:
        return GaussianContributions(self._fresh_tables(), first, second)

    def _prequential_joint_log_likelihood(self, X: Features, statistics: GaussianMoments, rows: IndexArray,
                                          weights: FloatArray | None, n_classes: int) -> FloatArray:
        """Each row's scores from its own moments, by direct differences (no expansion to
        rescore): (n_samples, n_classes)."""
        scores = np.empty((X.shape[0], n_classes))
        for block, moments in moments_before_each_row(statistics, X, rows, weights, n_classes):
            var, _ = self._variance(moments)
            point = var == 0  # point masses, as in _refresh (only with var_smoothing=0: skipped when none)
            points = bool(point.any())
            spread = np.where(point, 1.0, var) if points else var
            with np.errstate(divide="ignore"):
                log_prior = np.log(self._class_prior(moments.weight))
            deviation = X[block, None, :] - moments.mean  # (n_block, n_classes, n_features)
            deviation *= deviation
            distance = np.where(point, deviation, 0.0).sum(axis=-1) if points else None
            deviation /= spread
            if points:
                deviation[point] = 0.0
            scores[block] = log_prior - 0.5 * (np.log(2.0 * np.pi * spread).sum(axis=-1) + deviation.sum(axis=-1))
            if distance is not None:
                _nearest_point_masses(scores[block], distance, point.sum(axis=-1))
        return scores


class GaussianContributions(PairContributions):
    """log N(x_f; mu1_f, var1_f) - log N(x_f; mu2_f, var2_f) of each feature, as the scores compute
    each: a point mass (a variance of 0) scored as a variance of 1 that the distance leaves out."""

    def __init__(self, tables: GaussianTables, first: int, second: int):
        pair = [first, second]
        self.means, self.half_inv_var = tables.theta_[pair], 0.5 * tables.inv_var[pair]
        log_spread = np.log(2.0 * np.pi * np.where(tables.points[pair], 1.0, tables.var_[pair]))
        self.constant = -0.5 * (log_spread[0] - log_spread[1])  # (n_features,)

    def dense(self, X: AnyArray, out: FloatArray) -> None:
        np.copyto(out, X)  # converted once: faster than in each difference
        first = out - self.means[0]
        first *= first
        first *= self.half_inv_var[0]
        out -= self.means[1]
        out *= out
        out *= self.half_inv_var[1]
        out -= first
        out += self.constant


def _point_distance(X: AnyArray, theta: FloatArray, points: npt.NDArray[np.bool_]) -> FloatArray:
    """Each row's sum of squared distances to each class's point masses (means where ``points``),
    computed directly: shape (n_samples, n_classes), 0 for a class without point masses."""
    distance = np.zeros((X.shape[0], len(theta)))
    for c in np.flatnonzero(points.any(axis=1)):
        features = np.flatnonzero(points[c])
        diff = X[:, features].astype(np.float64) - theta[c, features]
        diff *= diff
        distance[:, c] = diff.sum(axis=1)
    return distance


def _nearest_point_masses(scores: FloatArray, distance: FloatArray, n_points: AnyArray) -> None:
    """The limit of the scores as the point masses' variance tends to 0, in place: each row keeps
    the scores of the classes (of those it could be) whose point masses it is nearest, then of
    those the classes of most point masses; the others become -inf.

    scores : (n_samples, n_classes), of the features of positive variance and the priors;
    distance : (n_samples, n_classes) the sum of squared distances to the class's point masses;
    n_points : (n_classes,) or (n_samples, n_classes) how many point masses the class has.
    A class of n point masses at squared distance d scores -d / (2 var) - n log(var) / 2 + its
    score here: as var tends to 0, least d wins, then most n, then the score.
    """
    possible = scores > -np.inf
    distance = np.where(possible, distance, np.inf)
    nearest = distance == distance.min(axis=1, keepdims=True)
    most = np.where(nearest, n_points, -1)
    scores[most < most.max(axis=1, keepdims=True)] = -np.inf


def _rescore(tables: GaussianTables, X: AnyArray, scores: FloatArray, error: FloatArray) -> None:
    """Recompute, from direct differences, the scores whose error bound is too large."""
    best_lower = (scores - error).max(axis=1, keepdims=True)
    redo = (error > 1e-10) & (scores + error >= best_lower - 745.0)
    if not redo.any():
        return
    for c in np.flatnonzero(redo.any(axis=0)):
        rows = np.flatnonzero(redo[:, c])
        diff = X[rows].astype(np.float64) - tables.theta_[c]
        diff *= diff
        scores[rows, c] = tables.normalizer[c] - 0.5 * (diff @ tables.inv_var[c])
