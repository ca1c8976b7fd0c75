"""``to_onnx``: a model, or the model of a pipeline, as an ONNX graph with one input and two outputs."""

from __future__ import annotations

import json
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from ..interop.dense_tables import DENSE_MAX_VALUES, check_dense_size
from ..interop.exportable import is_pipeline
from ..naive_bayes.base import NaiveBayes
from .builder import OPSET, Graph, GraphBuilder
from .scores import joint_log_likelihood

INPUT = "X"
LABEL = "label"
PROBABILITIES = "probabilities"
_DTYPES = ("float64", "float32")


class NotExportable(ValueError):
    """What was given cannot be an ONNX graph (a text pipeline: hashing is no ONNX operator)."""


def to_onnx(model: Any, dtype: npt.DTypeLike = np.float64, *, max_dense_values: int = DENSE_MAX_VALUES) -> Any:
    """The model as an ``onnx.ModelProto`` (see ``write_onnx``, which writes the same bytes to a file
    without holding them: the way for a large model)."""
    return _graph(model, dtype, max_dense_values).to_proto()


def write_onnx(model: Any, out: IO[bytes], dtype: npt.DTypeLike = np.float64, *,
               max_dense_values: int = DENSE_MAX_VALUES) -> None:
    """Write the model as an ONNX model to the binary file ``out``: the bytes of ``to_onnx(model,
    dtype).SerializeToString()`` (a protobuf of the same content), made while holding no copy of
    the model's tables: each large table is written from the model's own, a block of rows at a
    time (``builder.Graph.write``). Same arguments and errors as ``to_onnx``."""
    _graph(model, dtype, max_dense_values).write(out)


def _graph(model: Any, dtype: npt.DTypeLike, max_dense_values: int) -> Graph:
    """The checked graph of the model (operator set ``OPSET``, standard operators only; needs
    ``pip install 'nbstream[onnx]'``).

    model : a fitted model of nbstream's five, or a ``nbstream.arrow.Pipeline`` of numeric or
        categorical features (the graph is its model's; the pipeline's feature encoder is recorded in
        the metadata property ``nbstream.features``). A text pipeline is refused (NotExportable): no
        ONNX operator hashes words, so export its model and hash the text outside.
    dtype : float64 (default) or float32: the input's type and the graph's arithmetic. In float64
        the probabilities are nbstream's to rounding; float32 is for runtimes that want it, with
        float32's precision (docs/elsewhere.md gives the differences measured).
    max_dense_values : a model of sparse counts becomes dense tables of n_classes x n_features:
        refused (ValueError) above this many values

    The graph's input ``X`` has shape (N, n_features) (category codes, as numbers, for a categorical
    model: a code never learned, or negative, says nothing about any class). Its outputs: ``label``,
    shape (N,), the most probable class (int64, double, bool or string, as the labels are), and
    ``probabilities``, shape (N, n_classes), columns in the order of the model's ``classes_``. The
    graph does not check its input (NaN, a fractional code): check before, as ``predict`` would.
    """
    chosen = np.dtype(dtype)
    if chosen.name not in _DTYPES:
        raise ValueError(f"dtype must be float64 or float32; got {chosen.name}.")
    estimator, metadata = _model_and_metadata(model)
    check_dense_size(estimator, max_values=max_dense_values, purpose="ONNX")
    classes = estimator.classes_  # NotFittedError before the model has learned
    graph = GraphBuilder(chosen)
    scores = joint_log_likelihood(graph, INPUT, estimator)
    graph.add("Softmax", scores, name=PROBABILITIES, axis=1)
    best = graph.add("ArgMax", scores, axis=1, keepdims=0)
    graph.add("Gather", graph.labels(classes, "classes"), best, name=LABEL, axis=0)
    metadata.update({"nbstream.kind": estimator.kind, "nbstream.classes": json.dumps(classes.tolist()),
                     "nbstream.dtype": chosen.name})
    outputs: list[tuple[str, int, list[Any]]] = [(LABEL, graph.label_type(classes), ["N"]),
                                                 (PROBABILITIES, graph.float_type, ["N", len(classes)])]
    return graph.model(estimator.n_features_in_, outputs, input_name=INPUT, metadata=metadata,
                       doc=f"nbstream {type(estimator).__name__} of {len(classes)} classes and "
                           f"{estimator.n_features_in_} features, in {chosen.name} (opset {OPSET}).")


def _model_and_metadata(source: object) -> tuple[NaiveBayes[Any, Any], dict[str, str]]:
    """The model to export and the metadata that describes its input."""
    from .. import __version__

    metadata = {"nbstream.version": __version__}
    if isinstance(source, NaiveBayes):
        return source, metadata
    if not is_pipeline(source):
        raise TypeError(f"to_onnx takes one of nbstream's five models or a nbstream.arrow.Pipeline; "
                        f"got a {type(source).__name__}.")
    features = source.features
    if features.kind == "text":
        raise NotExportable("a text pipeline cannot be an ONNX graph, as hashing words is no ONNX operator: export "
                            "its model alone (its input: the hashed counts) and hash the text outside, with the "
                            "pipeline's transform.")
    metadata["nbstream.features"] = json.dumps(features.to_json())
    if source.label is not None:
        metadata["nbstream.label"] = source.label
    return source.model, metadata
