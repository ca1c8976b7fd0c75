"""Each family's joint log-likelihood log P(x, c) as ONNX nodes: from the input X, shape (N,
n_features), to scores of shape (N, n_classes), with the model's smoothed tables as constants.

The tables are computed here in float64 and cast once to the graph's dtype; the arithmetic is the
model's, term for term, so a float64 graph scores as the model does to rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..naive_bayes.base import NaiveBayes
from ..naive_bayes.bernoulli import BernoulliNB
from ..naive_bayes.categorical import CategoricalNB
from ..naive_bayes.complement import ComplementNB
from ..naive_bayes.gaussian import GaussianNB
from ..naive_bayes.multinomial import MultinomialNB
from ..utils.ndarrays import AnyArray, FloatArray
from .builder import GraphBuilder


def joint_log_likelihood(graph: GraphBuilder, X: str, model: NaiveBayes[Any, Any]) -> str:
    """The name of the (N, n_classes) scores of ``model`` on the graph's input ``X``."""
    if isinstance(model, (BernoulliNB, MultinomialNB, ComplementNB)):
        return _linear(graph, X, model)
    if isinstance(model, GaussianNB):
        return _gaussian(graph, X, model)
    if isinstance(model, CategoricalNB):
        return _categorical(graph, X, model)
    raise TypeError(f"to_onnx takes one of nbstream's five models or a pipeline; got a {type(model).__name__}.")


def _linear(graph: GraphBuilder, X: str, model: BernoulliNB | MultinomialNB | ComplementNB) -> str:
    """Bernoulli, multinomial and complement score a row as x . weights + bias: weights (n_features,
    n_classes), bias (n_classes,); Bernoulli binarizes x first (x > binarize). Dense counts' weights
    are written from the model's own tables, a block of rows at a time: no table is copied."""
    if model.sparse_counts_:
        weights, bias = _dense_weights(model)
        weights_name = graph.floats(weights.T, "weights")
    else:
        tables = model.export_state(tables=True, copy=False).tables

        def table(name: str) -> FloatArray:
            value = tables[name]
            assert isinstance(value, np.ndarray) and value.dtype == np.float64
            return value.astype(np.float64, copy=False)  # itself

        prior = table("class_log_prior_")
        if isinstance(model, MultinomialNB):  # log P(f | c) = log(count + alpha) - log(the class's total)
            log_smoothed, log_total = table("log_smoothed"), table("log_total")
            weights_name = graph.rows(log_smoothed.shape, lambda rows: log_smoothed[rows] - log_total, "weights")
            bias = prior
        else:  # (n_features, n_classes): log p - log(1 - p), or the complement weights
            weights_name = graph.floats(table("weights"), "weights")
            bias = table("bias") if isinstance(model, BernoulliNB) else _complement_bias(prior)
    if isinstance(model, BernoulliNB) and model.binarize is not None:
        present = graph.add("Greater", X, graph.floats(model.binarize, "binarize"))
        X = graph.add("Cast", present, to=graph.float_type)
    scores = graph.add("MatMul", X, weights_name)
    return graph.add("Add", scores, graph.floats(bias, "bias"))


def _dense_weights(model: BernoulliNB | MultinomialNB | ComplementNB) -> tuple[FloatArray, FloatArray]:
    """(weights (n_classes, n_features), bias (n_classes,)) of a model of sparse counts, made dense."""
    log_prob: FloatArray = model.feature_log_prob_  # (n_classes, n_features)
    prior: FloatArray = model.class_log_prior_
    if isinstance(model, BernoulliNB):
        log_not_p = np.log(1 - np.exp(log_prob))  # as BernoulliNB computes it
        return log_prob - log_not_p, prior + log_not_p.sum(axis=1)
    if isinstance(model, ComplementNB):
        return log_prob, _complement_bias(prior)
    return log_prob, prior


def _complement_bias(prior: FloatArray) -> FloatArray:
    """A single class has no complement: its prior is its score; with more, the prior takes no part."""
    return prior if len(prior) == 1 else np.zeros_like(prior)


def _gaussian(graph: GraphBuilder, X: str, model: GaussianNB) -> str:
    """log prior - 0.5 sum log(2 pi var) - 0.5 sum (x - theta)^2 / var, from direct differences
    (N, n_classes, n_features): no expansion into products, whose rounding a feature of tiny
    variance would magnify. Memory: N x n_classes x n_features values per call.

    A variance of 0 (var_smoothing=0) is a point mass, as in the model: left out of these sums,
    then each row keeps the classes whose point masses it is nearest (``_nearest_point_masses``)."""
    state = model.export_state(tables=True, copy=False)
    theta, var, prior = (np.asarray(state.tables[name], dtype=np.float64)
                         for name in ("theta_", "var_", "class_prior_"))
    points = var == 0
    spread = np.where(points, 1.0, var)
    with np.errstate(divide="ignore"):  # a prior of 0 scores -inf, as in the model
        normalizer = np.log(prior) - 0.5 * np.log(2.0 * np.pi * spread).sum(axis=1)
    rows = graph.add("Unsqueeze", X, graph.integers([1], "class_axis"))  # (N, 1, n_features)
    deviation = graph.add("Sub", rows, graph.floats(theta, "theta"))
    squared = graph.add("Mul", deviation, deviation)
    scaled = graph.add("Mul", squared, graph.floats(np.where(points, 0.0, 1.0 / spread), "inverse_variance"))
    distance = graph.add("ReduceSum", scaled, graph.integers([2], "feature_axis"), keepdims=0)
    half = graph.add("Mul", distance, graph.floats(0.5, "half"))
    scores = graph.add("Sub", graph.floats(normalizer, "normalizer"), half)
    if not points.any():
        return scores
    return _nearest_point_masses(graph, scores, squared, points, np.isfinite(normalizer))


def _nearest_point_masses(graph: GraphBuilder, scores: str, squared: str, points: AnyArray,
                          possible: AnyArray) -> str:
    """The model's ``gaussian._nearest_point_masses`` on the (N, n_classes) scores: squared, the
    (N, n_classes, n_features) squared deviations; points, where the variance is 0; possible,
    the classes of a prior above 0."""
    on_points = graph.add("Mul", squared, graph.floats(points, "point_masses"))
    distance = graph.add("ReduceSum", on_points, graph.integers([2], "feature_axis"), keepdims=0)
    distance = graph.add("Add", distance, graph.floats(np.where(possible, 0.0, np.inf), "impossible"))
    nearest = graph.add("Equal", distance, graph.add("ReduceMin", distance, axes=[1], keepdims=1))
    most = graph.add("Where", nearest, graph.floats(points.sum(axis=1), "n_point_masses"),
                     graph.floats(-1.0, "not_nearest"))
    kept = graph.add("Equal", most, graph.add("ReduceMax", most, axes=[1], keepdims=1))
    return graph.add("Where", kept, scores, graph.floats(-np.inf, "minus_infinity"))


def _categorical(graph: GraphBuilder, X: str, model: CategoricalNB) -> str:
    """The sum over features of log P(code | c), each looked up in one table of every feature's rows
    stacked (feature i's codes 0..n_i - 1, then a row of zeros that codes never learned, negative
    ones included, point to: such a feature says nothing about any class, as in the model)."""
    tables = [np.vstack([log_prob.T, np.zeros((1, log_prob.shape[0]))]) for log_prob in model.feature_log_prob_]
    widths = np.array([len(table) for table in tables], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(widths)[:-1]])
    unseen = graph.integers(widths - 1, "unseen_codes")  # (n_features,)
    codes = graph.add("Min", graph.add("Cast", X, to=graph.onnx.TensorProto.INT64), unseen)
    codes = graph.add("Where", graph.add("Less", codes, graph.integers(0, "zero")), unseen, codes)
    rows = graph.add("Add", codes, graph.integers(offsets, "table_offsets"))
    terms = graph.add("Gather", graph.floats(np.vstack(tables), "log_prob_by_code"), rows, axis=0)  # (N, F, C)
    scores = graph.add("ReduceSum", terms, graph.integers([1], "feature_axis"), keepdims=0)
    return graph.add("Add", scores, graph.floats(model.class_log_prior_, "class_log_prior"))
