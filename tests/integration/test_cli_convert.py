"""`worker convert`: snapshots to ONNX, run by ONNX Runtime; every bad input is one line and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnxruntime
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from nbstream.arrow import load_pipeline
from tests.helpers.cli import invoke, worker_env
from tests.helpers.paths import SMS


def run_python(code: str, *args) -> subprocess.CompletedProcess:
    """``python -c code ARGS...`` in a process of its own, output captured as text."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=worker_env(), timeout=120)


def run(path, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    labels, proba = session.run(None, {"X": X})
    return labels, proba


@pytest.fixture(scope="module")
def gaussian_snapshot(tmp_path_factory):
    """A worker snapshot of a Gaussian model over three numeric columns, and the rows it learned."""
    folder = tmp_path_factory.mktemp("convert")
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 3)) + (np.arange(400) % 2)[:, None] * 0.8
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": np.where(np.arange(400) % 2, "odd", "even")})
    pq.write_table(table, folder / "rows.parquet")
    result = invoke("train", folder / "rows.parquet", "--label", "label", "--features", "a,b,c", "--model", "gaussian",
                    "--out", folder / "gaussian.nbs")
    assert result.exit_code == 0, result.output
    return folder / "gaussian.nbs", X


@pytest.fixture(scope="module")
def text_snapshot(tmp_path_factory):
    out = tmp_path_factory.mktemp("convert-text") / "sms.nbs"
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--hash-bits", "12",
                    "--out", out)
    assert result.exit_code == 0, result.output
    return out


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_pipeline_of_numeric_columns_converts_and_runs(gaussian_snapshot, tmp_path, dtype):
    snapshot, X = gaussian_snapshot

    result = invoke("convert", snapshot, "--out", tmp_path / "m.onnx", "--dtype", dtype)

    assert result.exit_code == 0, result.output
    assert result.output.strip() == \
        f"gaussian model of 2 classes and 3 features -> {tmp_path / 'm.onnx'} (onnx, {dtype})"
    pipeline = load_pipeline(snapshot)
    labels, proba = run(tmp_path / "m.onnx", X.astype(dtype))
    expected = pipeline.predict_proba({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2]})
    np.testing.assert_allclose(proba, expected, rtol=0, atol=1e-12 if dtype == "float64" else 1e-4)
    assert labels.tolist() == pipeline.model.predict(X).tolist()
    metadata = {p.key: p.value for p in onnx.load(tmp_path / "m.onnx").metadata_props}
    assert metadata["nbstream.label"] == "label" and '"columns": ["a", "b", "c"]' in metadata["nbstream.features"]


def test_a_snapshot_saved_by_the_library_converts(tmp_path):
    model = nbstream.BernoulliNB().fit([[1, 0], [0, 1], [1, 1]], [1, 2, 2])
    nbstream.save(model, tmp_path / "m.nbs")

    assert invoke("convert", tmp_path / "m.nbs", "--out", tmp_path / "m.onnx").exit_code == 0

    labels, proba = run(tmp_path / "m.onnx", np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert labels.tolist() == [1, 2]
    np.testing.assert_allclose(proba, model.predict_proba([[1, 0], [0, 1]]), rtol=0, atol=1e-12)


_MEASURED = """
import resource, sys
import nbstream.onnx, onnx, worker.cli
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
worker.cli.app(["convert", sys.argv[1], "--out", sys.argv[2]], standalone_mode=False)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_converting_holds_the_statistics_and_the_table_and_no_copy_of_them(tmp_path):
    """A dense model of 250 classes x 40,000 features (a table of 80 MB): converting it holds its
    counts and its table, a block of either at a time more, and never a copy of the file or the graph."""
    n_classes, n_features = 250, 40_000
    counts = np.random.default_rng(3).integers(0, 5, size=(n_classes, n_features)).astype(np.float64)
    state = nbstream.ModelState(kind="multinomial", params={}, classes=np.arange(n_classes), open_classes=False,
                                n_features=n_features, examples_seen=n_classes,
                                statistics={"class_count": np.ones(n_classes), "feature_count": counts})
    nbstream.save(nbstream.MultinomialNB.from_state(state, copy=False), tmp_path / "m.nbs")
    table = counts.nbytes
    del counts, state

    done = run_python(_MEASURED, tmp_path / "m.nbs", tmp_path / "m.onnx")

    assert done.returncode == 0, done.stderr
    grown = int(done.stdout.strip().splitlines()[-1])
    assert grown <= 2 * table + (32 << 20), f"converting grew the peak by {grown:,} bytes, the table being {table:,}"
    assert os.path.getsize(tmp_path / "m.onnx") > table


def test_a_gaussian_without_smoothing_and_a_constant_column_trains_predicts_and_converts(tmp_path):
    """var_smoothing=0 and a column that never varies: no NaN, no warning, the same labels everywhere."""
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    pq.write_table(pa.table({"a": x, "k": np.full(6, 5.0), "label": ["x"] * 3 + ["y"] * 3}), tmp_path / "rows.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trained = invoke("train", tmp_path / "rows.parquet", "--label", "label", "--features", "a,k", "--model",
                         "gaussian", "--var-smoothing", "0", "--out", tmp_path / "m.nbs")
        predicted = invoke("predict", tmp_path / "m.nbs", tmp_path / "rows.parquet", "--proba",
                           "--out", tmp_path / "p.parquet")
        converted = invoke("convert", tmp_path / "m.nbs", "--out", tmp_path / "m.onnx")

    assert trained.exit_code == 0, trained.output
    assert predicted.output.strip() == f"wrote 6 predictions to {tmp_path / 'p.parquet'}", predicted.output
    predictions = pq.read_table(tmp_path / "p.parquet")
    assert predictions.column("prediction").to_pylist() == ["x"] * 3 + ["y"] * 3
    proba = np.column_stack([predictions.column("proba_x").to_numpy(), predictions.column("proba_y").to_numpy()])
    assert np.isfinite(proba).all()
    assert converted.output.strip() == f"gaussian model of 2 classes and 2 features -> {tmp_path / 'm.onnx'} " \
                                       "(onnx, float64)", converted.output
    labels, onnx_proba = run(tmp_path / "m.onnx", np.column_stack([x, np.full(6, 5.0)]))
    assert labels.tolist() == ["x"] * 3 + ["y"] * 3
    np.testing.assert_allclose(onnx_proba, proba, rtol=0, atol=1e-12)
    assert nbstream.load(tmp_path / "m.nbs").var_[:, 1].tolist() == [0.0, 0.0]


def test_a_text_pipeline_is_refused_in_one_line_that_says_what_to_do(text_snapshot, tmp_path):
    line = one_error_line(invoke("convert", text_snapshot, "--out", tmp_path / "m.onnx"))

    assert line.startswith(f"error: {text_snapshot} is a text pipeline, whose words are hashed")
    assert "add --model-only to convert its model alone (its input: the hashed counts of 4,096 features)" in line
    assert not (tmp_path / "m.onnx").exists()


def test_the_model_of_a_text_pipeline_converts_alone(text_snapshot, tmp_path):
    result = invoke("convert", text_snapshot, "--out", tmp_path / "m.onnx", "--model-only")

    assert result.exit_code == 0, result.output
    pipeline = load_pipeline(text_snapshot)
    texts = pq.read_table(SMS / "test.parquet").column("text").to_pylist()[:300]
    counts = pipeline.transform(texts)
    labels, proba = run(tmp_path / "m.onnx", counts.toarray().astype(np.float64))
    np.testing.assert_allclose(proba, pipeline.predict_proba(texts), rtol=0, atol=1e-7)
    assert labels.tolist() == pipeline.predict(texts).tolist()


def test_a_missing_snapshot(tmp_path):
    line = one_error_line(invoke("convert", tmp_path / "nope.nbs", "--out", tmp_path / "m.onnx"))
    assert line == f"error: {tmp_path / 'nope.nbs'}: cannot read snapshot (No such file or directory)."


def test_a_file_that_is_not_a_snapshot(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n" * 10)
    line = one_error_line(invoke("convert", tmp_path / "notes.txt", "--out", tmp_path / "m.onnx"))
    assert line == f"error: {tmp_path / 'notes.txt'}: not an nbstream snapshot (bad magic or too short)."


def test_a_directory_for_the_snapshot(tmp_path):
    line = one_error_line(invoke("convert", tmp_path, "--out", tmp_path / "m.onnx"))
    assert line == f"error: {tmp_path}: is a directory, not a snapshot."


def test_a_fifo_for_the_snapshot_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    line = one_error_line(invoke("convert", tmp_path / "pipe", "--out", tmp_path / "m.onnx"))
    assert line == f"error: {tmp_path / 'pipe'}: not a regular file."


def test_an_out_that_cannot_be_written(gaussian_snapshot, tmp_path):
    (tmp_path / "a-file").write_text("")  # a folder cannot be made where a file is: even root cannot write there
    line = one_error_line(invoke("convert", gaussian_snapshot[0], "--out", tmp_path / "a-file" / "m.onnx"))
    assert line.startswith("error: ") and "a-file" in line


def test_an_out_that_is_a_directory(gaussian_snapshot, tmp_path):
    line = one_error_line(invoke("convert", gaussian_snapshot[0], "--out", tmp_path))
    assert line == f"error: {tmp_path}: Is a directory"


def test_an_out_that_is_the_snapshot_itself(gaussian_snapshot):
    snapshot = gaussian_snapshot[0]
    before = snapshot.read_bytes()
    line = one_error_line(invoke("convert", snapshot, "--out", snapshot))
    assert line == f"error: --out {snapshot} is also an input ({snapshot}); the ONNX model would replace it."
    assert snapshot.read_bytes() == before


def test_an_unknown_format_or_dtype(gaussian_snapshot, tmp_path):
    assert one_error_line(invoke("convert", gaussian_snapshot[0], "--out", tmp_path / "m", "--format", "pmml")) \
        == "error: --format must be one of onnx; got 'pmml'."
    assert one_error_line(invoke("convert", gaussian_snapshot[0], "--out", tmp_path / "m", "--dtype", "float16")) \
        == "error: --dtype must be float64 or float32; got 'float16'."
