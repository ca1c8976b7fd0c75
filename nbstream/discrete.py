"""Shared smoothing for the count-based models: alpha, fitted or given class priors."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from .base import NaiveBayes, cached_table
from .kernels import linear_scores
from .stats import DiscreteCounts

_ALPHA_FLOOR = 1e-10


class DiscreteNB(NaiveBayes):
    """Base of Bernoulli, multinomial, complement and categorical models.

    Subclasses supply ``_smooth(alpha, class_log_prior)`` returning the fitted tables plus
    ``weights`` (n_features, n_classes) and ``bias`` (n_classes,) for a linear score.
    """

    _alpha_may_be_array = True
    _poor_score = True  # scikit-learn's generic accuracy checks use Gaussian blobs
    class_log_prior_ = cached_table()
    feature_log_prob_ = cached_table()

    def _new_statistics(self, n_features: int):
        return DiscreteCounts.empty(n_features)

    @property
    def feature_count_(self) -> np.ndarray:
        self._require_fitted()
        return self._stats.feature_count

    def check_params(self) -> None:
        super().check_params()
        if isinstance(self.alpha, numbers.Real):
            if not np.isfinite(self.alpha) or self.alpha < 0:
                raise ValueError(f"alpha must be a finite number >= 0; got {self.alpha}.")
        elif not self._alpha_may_be_array:
            raise ValueError(f"{type(self).__name__} needs a scalar alpha; got {self.alpha!r}.")
        if self.class_prior is not None:
            prior = np.asarray(self.class_prior, dtype=np.float64)
            if prior.ndim != 1 or (prior < 0).any() or not np.isclose(prior.sum(), 1.0):
                raise ValueError(f"class_prior must be non-negative and sum to 1; got {self.class_prior!r}.")

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        if not isinstance(self.alpha, numbers.Real):
            alpha = np.asarray(self.alpha, dtype=np.float64)
            if alpha.shape != (n_features,):
                raise ValueError(f"alpha as an array needs one value per feature ({n_features}); "
                                 f"got shape {alpha.shape}.")
            if not np.isfinite(alpha).all() or (alpha < 0).any():
                raise ValueError("All values in alpha must be finite and >= 0.")
        if self.class_prior is not None and n_classes is not None and len(self.class_prior) != n_classes:
            raise ValueError(f"Number of priors must match number of classes: class_prior has "
                             f"{len(self.class_prior)} entries for {n_classes} classes.")

    def _checked_alpha(self):
        """alpha as scikit-learn applies it: per-feature arrays checked, tiny values floored
        unless force_alpha."""
        self._check_shapes(self.n_features_in_, None)  # set_params may have changed alpha since fit
        alpha = self.alpha if isinstance(self.alpha, numbers.Real) else np.asarray(self.alpha, dtype=np.float64)
        if np.min(alpha) < _ALPHA_FLOOR and not self.force_alpha:
            warnings.warn(f"alpha too small will result in numeric errors, setting alpha = "
                          f"{_ALPHA_FLOOR:.1e}. Use `force_alpha=True` to keep alpha unchanged.")
            return np.maximum(alpha, _ALPHA_FLOOR)
        return alpha

    def _class_log_prior(self) -> np.ndarray:
        class_count = self._stats.class_count
        n_classes = len(class_count)
        if self.class_prior is not None:
            prior = np.asarray(self.class_prior, dtype=np.float64)
            if len(prior) != n_classes:
                raise ValueError(f"class_prior has {len(prior)} entries but the model has "
                                 f"{n_classes} classes {self.classes_.tolist()}.")
            with np.errstate(divide="ignore"):
                return np.log(prior)
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                return np.log(class_count) - np.log(class_count.sum())
        return np.full(n_classes, -np.log(n_classes))

    def _refresh(self) -> dict[str, object]:
        prior = self._class_log_prior()
        tables = self._smooth(self._checked_alpha(), prior)
        if "weights" in tables:  # row-major (n_features, n_classes): a sparse product with a transposed view is 20x slower
            tables["weights"] = np.ascontiguousarray(tables["weights"])
        return {"class_log_prior_": prior, **tables}

    def _smooth(self, alpha, class_log_prior: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _joint_log_likelihood(self, X) -> np.ndarray:
        tables = self._fresh_tables()
        return linear_scores(X, tables["weights"], tables["bias"])
