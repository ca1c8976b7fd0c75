"""nbstream.onnx.to_onnx: the graphs, run by ONNX Runtime, against the models they come from."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import nbstream
from nbstream.arrow import FeatureSpec, Pipeline
from nbstream.onnx import OPSET, NotExportable, to_onnx
from nbstream.utils.optional import MissingDependency
from tests.helpers.paths import SMS

FLOAT64_TOLERANCE = 1e-7  # what the graph promises; the differences measured are far smaller
FLOAT32_TOLERANCE = 2e-2  # float32 arithmetic: docs/elsewhere.md gives the differences measured


def run(graph: onnx.ModelProto, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    session = onnxruntime.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    labels, proba = session.run(None, {"X": X})
    return labels, proba


def _data(kind: str, rng: np.random.Generator, n_rows: int = 300) -> tuple[np.ndarray, np.ndarray]:
    y = rng.choice(np.array([3, 7, 11]), size=n_rows)
    shift = (y == 7)[:, None] * 0.6 + (y == 11)[:, None] * 0.3
    if kind == "gaussian":
        return rng.normal(size=(n_rows, 12)) * np.geomspace(1e-3, 1e3, 12) + shift, y
    if kind == "categorical":
        return np.minimum(rng.poisson(1.0 + 2 * shift, size=(n_rows, 8)), 4).astype(np.float64), y
    return rng.poisson(1.0 + 2 * shift, size=(n_rows, 20)).astype(np.float64), y


FAMILIES = {
    "bernoulli": lambda: nbstream.BernoulliNB(alpha=0.5, binarize=1.0),
    "bernoulli-without-binarize": lambda: nbstream.BernoulliNB(binarize=None),
    "multinomial": lambda: nbstream.MultinomialNB(alpha=0.3),
    "complement": lambda: nbstream.ComplementNB(norm=True),
    "gaussian": lambda: nbstream.GaussianNB(),
    "categorical": lambda: nbstream.CategoricalNB(alpha=0.7),
}


def _fitted(kind: str, rng: np.random.Generator) -> tuple[nbstream.naive_bayes.NaiveBayes, np.ndarray]:
    X, y = _data(kind.split("-")[0], rng)
    if kind == "bernoulli-without-binarize":
        X = (X > 1).astype(np.float64)
    return FAMILIES[kind]().fit(X, y), X


@pytest.mark.parametrize("kind", FAMILIES)
def test_a_float64_graph_gives_the_model_s_probabilities_and_labels(kind, rng):
    model, X = _fitted(kind, rng)

    labels, proba = run(to_onnx(model), X)

    expected = model.predict_proba(X)
    assert 0.01 < expected.max(axis=1).min() and expected.min() < 0.99  # not certainties only
    np.testing.assert_allclose(proba, expected, rtol=0, atol=FLOAT64_TOLERANCE)
    assert np.abs(proba - expected).max() < 1e-12  # what float64 gives on rows this small
    assert labels.dtype == np.int64 and labels.tolist() == model.predict(X).tolist()


@pytest.mark.parametrize("kind", FAMILIES)
def test_a_float32_graph_takes_float32_and_is_as_precise_as_float32(kind, rng):
    model, X = _fitted(kind, rng)

    graph = to_onnx(model, dtype=np.float32)
    labels, proba = run(graph, X.astype(np.float32))

    assert graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert proba.dtype == np.float32
    np.testing.assert_allclose(proba, model.predict_proba(X), rtol=0, atol=FLOAT32_TOLERANCE)
    assert (labels == model.predict(X)).mean() > 0.97


def test_the_graph_has_one_input_two_outputs_and_standard_operators_only(rng):
    model, _ = _fitted("gaussian", rng)

    graph = to_onnx(model)

    assert [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in graph.graph.input] \
        == [("X", ["N", 12])]
    assert graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    outputs = {o.name: [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim] for o in graph.graph.output}
    assert outputs == {"label": ["N"], "probabilities": ["N", 3]}
    assert [(opset.domain, opset.version) for opset in graph.opset_import] == [("", OPSET)]
    assert {node.domain for node in graph.graph.node} == {""}
    onnx.checker.check_model(graph, full_check=True)
    assert {p.key: p.value for p in graph.metadata_props}["nbstream.classes"] == "[3, 7, 11]"


def test_string_labels_come_out_as_strings(rng):
    X, y = _data("multinomial", rng)
    model = nbstream.MultinomialNB().fit(X, np.array(["ham", "spam", "eggs"])[y % 3])

    labels, _ = run(to_onnx(model), X)

    assert labels.tolist() == model.predict(X).tolist()


def test_categorical_codes_never_learned_or_negative_say_nothing(rng):
    model, X = _fitted("categorical", rng)
    unseen = X[:5].copy()
    unseen[:, 0] = [9, 1e6, float(np.iinfo(np.int32).max), -1, -7]  # never learned; negative
    expected_rows = X[:5].copy()
    expected_rows[:, 0] = 9  # the model's own way: an unseen code is left out of the row's score

    _, proba = run(to_onnx(model), unseen)

    np.testing.assert_allclose(proba, model.predict_proba(expected_rows), rtol=0, atol=1e-12)


def test_sparse_counts_go_dense_and_too_large_ones_are_refused(rng):
    X, y = _data("multinomial", rng)
    model = nbstream.MultinomialNB(counts="sparse").fit(sp.csr_matrix(X), y)

    _, proba = run(to_onnx(model), X)

    np.testing.assert_allclose(proba, model.predict_proba(X), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"^ONNX needs this model's sparse counts as dense tables of 3 classes x 20 "
                                         r"features \(60 values.*max_dense_values=59"):
        to_onnx(model, max_dense_values=59)


def test_a_vector_pipeline_exports_its_model_and_records_its_features(rng):
    X, y = _data("multinomial", rng)
    encoder = FeatureSpec.vector("counts").encoder()
    batch = pa.record_batch({"counts": pa.array(X.astype(np.int64).tolist()), "label": y})
    encoded, _ = encoder.encode(batch, learn=True)
    pipeline = Pipeline(nbstream.MultinomialNB().fit(encoded, y), encoder, label="label")

    graph = to_onnx(pipeline)

    metadata = {p.key: p.value for p in graph.metadata_props}
    assert json.loads(metadata["nbstream.features"]) == encoder.to_json()
    assert metadata["nbstream.label"] == "label"
    np.testing.assert_allclose(run(graph, X)[1], pipeline.predict_proba(batch), rtol=0, atol=1e-12)


def test_a_text_pipeline_is_refused_with_what_to_do():
    table = pq.read_table(SMS / "train.parquet").slice(0, 200)
    encoder = FeatureSpec.text("text", hash_bits=10).encoder()
    X, _ = encoder.encode(table.to_batches()[0], learn=True)
    pipeline = Pipeline(nbstream.MultinomialNB().fit(X, table.column("label").to_numpy(zero_copy_only=False)),
                        encoder)

    with pytest.raises(NotExportable, match="hashing words is no ONNX operator: export its model alone") as caught:
        to_onnx(pipeline)
    assert "\n" not in str(caught.value)
    assert len(run(to_onnx(pipeline.model), X.toarray().astype(np.float64))[0]) == 200  # the model part goes


def test_unfitted_models_other_objects_and_other_dtypes_are_refused(rng):
    with pytest.raises(nbstream.NotFittedError):
        to_onnx(nbstream.BernoulliNB())
    with pytest.raises(TypeError, match="^to_onnx takes one of nbstream's five models or a nbstream.arrow.Pipeline; "
                                        "got a dict"):
        to_onnx({})
    with pytest.raises(ValueError, match="^dtype must be float64 or float32; got float16"):
        to_onnx(_fitted("gaussian", rng)[0], dtype=np.float16)


def test_without_onnx_the_error_names_the_extra(monkeypatch, rng):
    monkeypatch.setitem(__import__("sys").modules, "onnx", None)  # as if not installed

    with pytest.raises(MissingDependency, match=r"pip install 'nbstream\[onnx\]'$"):
        to_onnx(_fitted("multinomial", rng)[0])
