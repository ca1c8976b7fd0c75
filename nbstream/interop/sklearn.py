"""A model as scikit-learn's estimator of the same family, and back (needs scikit-learn:
``pip install 'nbstream[sklearn]'``).

``to_sklearn`` gives a fitted ``sklearn.naive_bayes`` estimator holding the model's parameters,
statistics and smoothed tables: its ``predict_proba`` is the model's, columns in the order of the
model's ``classes_``. ``from_sklearn`` takes such an estimator's statistics: the model predicts as it
does, keeps learning with ``partial_fit``, and equals the nbstream model trained on the same rows.

What scikit-learn has no word for stays behind: forgetting (``half_life``), a sliding window (the
estimator gets the statistics the window holds), an open class set (the estimator's classes are
fixed, as after ``fit``), and the rows learned (scikit-learn records class weights only, so
``from_sklearn`` counts the weights as ``n_examples_seen_``).

>>> import nbstream
>>> model = nbstream.MultinomialNB().fit([[2, 0], [0, 3]], ["a", "b"])
>>> estimator = to_sklearn(model)
>>> type(estimator).__module__, bool((estimator.predict_proba([[1, 1]]) == model.predict_proba([[1, 1]])).all())
('sklearn.naive_bayes', True)
>>> from_sklearn(estimator).partial_fit([[1, 0]], ["a"]).class_count_.tolist()
[2.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..naive_bayes.base import NaiveBayes
from ..naive_bayes.bernoulli import BernoulliNB
from ..naive_bayes.categorical import CategoricalNB
from ..naive_bayes.complement import ComplementNB
from ..naive_bayes.gaussian import GaussianNB
from ..naive_bayes.kinds import model_class
from ..naive_bayes.multinomial import MultinomialNB
from ..naive_bayes.state import KEPT_FLOAT_DTYPES, ModelState
from ..utils.ndarrays import AnyArray
from ..utils.optional import optional_module
from ..utils.sklearn_protocol import not_fitted
from ..utils.validation import NotFittedError
from .dense_tables import DENSE_MAX_VALUES, check_dense_size

# The estimator of each kind in sklearn.naive_bayes, and the constructor parameters both share
# (the others, such as half_life, window or counts, are nbstream's own).
_ESTIMATORS = {"bernoulli": "BernoulliNB", "multinomial": "MultinomialNB", "complement": "ComplementNB",
               "gaussian": "GaussianNB", "categorical": "CategoricalNB"}
_SHARED_PARAMS = {
    "bernoulli": ("alpha", "force_alpha", "binarize", "fit_prior", "class_prior"),
    "multinomial": ("alpha", "force_alpha", "fit_prior", "class_prior"),
    "complement": ("alpha", "force_alpha", "fit_prior", "class_prior", "norm"),
    "gaussian": ("priors", "var_smoothing"),
    "categorical": ("alpha", "force_alpha", "fit_prior", "class_prior", "min_categories"),
}


def _naive_bayes() -> Any:
    return optional_module("sklearn.naive_bayes", "sklearn")


def to_sklearn(model: NaiveBayes[Any, Any], *, max_dense_values: int = DENSE_MAX_VALUES) -> Any:
    """The fitted scikit-learn estimator of the model's family (``sklearn.naive_bayes``): the same
    parameters (those scikit-learn has), classes, statistics and smoothed tables, so its
    ``predict_proba`` equals the model's to rounding (1e-12).

    Sparse counts (hashed text) become dense tables of n_classes x n_features; above
    ``max_dense_values`` values (``DENSE_MAX_VALUES``, 2**26: 512 MiB of float64 per table) they are
    refused with a ValueError. NotFittedError before the model has learned.
    """
    naive_bayes = _naive_bayes()
    check_dense_size(model, max_values=max_dense_values, purpose="scikit-learn")
    state = model.export_state(tables=True)
    params = {name: state.params[name] for name in _SHARED_PARAMS[state.kind]}
    estimator = getattr(naive_bayes, _ESTIMATORS[state.kind])(**params)
    fitted: dict[str, Any] = {"classes_": state.classes, "n_features_in_": state.n_features,
                              "class_count_": state.statistics["class_count"]}
    if state.feature_names is not None:
        fitted["feature_names_in_"] = state.feature_names
    fitted.update(_fitted_tables(model, state))
    for name, value in fitted.items():
        setattr(estimator, name, value)
    return estimator


def _fitted_tables(model: NaiveBayes[Any, Any], state: ModelState) -> dict[str, Any]:
    """The family's fitted attributes beyond the classes, in float64 (a GaussianNB's tables are
    float64 whatever the dtype of its attributes: the estimator then scores as precisely)."""
    if isinstance(model, (BernoulliNB, MultinomialNB, ComplementNB)):
        counts = model.feature_count_
        tables = {"feature_count_": counts if isinstance(counts, np.ndarray) else counts.toarray(),
                  "feature_log_prob_": model.feature_log_prob_, "class_log_prior_": model.class_log_prior_}
        if isinstance(model, ComplementNB):
            tables["feature_all_"] = model.feature_all_
        return tables
    if isinstance(model, GaussianNB):
        if not np.all(state.tables["var_"]):
            raise ValueError("this GaussianNB (var_smoothing=0) has features of variance 0, which it scores as "
                             "point masses; scikit-learn's GaussianNB would predict NaN with them. Give "
                             "var_smoothing > 0 to export it.")
        return {name: state.tables[name] for name in ("theta_", "var_", "class_prior_", "epsilon_")}
    if isinstance(model, CategoricalNB):
        return {"category_count_": [table.copy() for table in model.category_count_],
                "feature_log_prob_": model.feature_log_prob_, "n_categories_": model.n_categories_,
                "class_log_prior_": model.class_log_prior_}
    raise TypeError(f"to_sklearn takes one of nbstream's five models; got a {type(model).__name__}.")


def from_sklearn(estimator: Any) -> NaiveBayes[Any, Any]:
    """The nbstream model of a fitted ``sklearn.naive_bayes`` estimator (Bernoulli, multinomial,
    complement, Gaussian or categorical): its parameters and statistics, a fixed class set.

    The model predicts as the estimator does and keeps learning with ``partial_fit``; trained on
    more rows it equals the nbstream model trained on all of them. TypeError for another object,
    NotFittedError for an estimator that has not learned.
    """
    naive_bayes = _naive_bayes()
    kind = next((kind for kind, name in _ESTIMATORS.items() if isinstance(estimator, getattr(naive_bayes, name))),
                None)
    if kind is None:
        raise TypeError(f"from_sklearn takes a fitted estimator of sklearn.naive_bayes "
                        f"({', '.join(_ESTIMATORS.values())}); got a {type(estimator).__name__}.")
    if not hasattr(estimator, "classes_"):
        raise not_fitted(NotFittedError, f"This {type(estimator).__name__} is not fitted yet: fit it before "
                                         "from_sklearn.")
    given = estimator.get_params()
    statistics = _statistics_of(kind, estimator)
    names = getattr(estimator, "feature_names_in_", None)
    state = ModelState(kind=kind, params={name: given[name] for name in _SHARED_PARAMS[kind]},
                       classes=np.asarray(estimator.classes_).copy(), open_classes=False,
                       n_features=int(estimator.n_features_in_),
                       examples_seen=int(round(float(statistics["class_count"].sum()))), statistics=statistics,
                       feature_names=None if names is None else np.asarray(names, dtype=object),
                       float_dtype=_float_dtype(kind, estimator))
    return model_class(kind).from_state(state)


def _statistics_of(kind: str, estimator: Any) -> dict[str, AnyArray]:
    """The sufficient statistics (``nbstream.stats.counts``) an estimator's fitted attributes hold, float64."""
    class_count = np.asarray(estimator.class_count_, dtype=np.float64).copy()
    if kind == "gaussian":
        # var_ is each class's variance plus epsilon_; M2 is the variance times the class weight
        # (clipped: the subtraction may round a variance of 0 below it).
        variance = np.asarray(estimator.var_, dtype=np.float64) - float(estimator.epsilon_)
        return {"class_count": class_count, "mean": np.asarray(estimator.theta_, dtype=np.float64).copy(),
                "m2": np.maximum(variance, 0.0) * class_count[:, None]}
    if kind == "categorical":
        tables = [np.asarray(table, dtype=np.float64) for table in estimator.category_count_]
        return {"class_count": class_count,
                "category_widths": np.array([table.shape[1] for table in tables], dtype=np.int64),
                "category_count": np.concatenate(tables, axis=1)}
    return {"class_count": class_count, "feature_count": np.asarray(estimator.feature_count_, dtype=np.float64).copy()}


def _float_dtype(kind: str, estimator: Any) -> str:
    """The dtype of the float fitted attributes: a GaussianNB's keeps its input's, as scikit-learn's does."""
    name = str(np.asarray(estimator.theta_).dtype) if kind == "gaussian" else "float64"
    return name if name in KEPT_FLOAT_DTYPES else "float64"


__all__ = ["DENSE_MAX_VALUES", "from_sklearn", "to_sklearn"]
