"""`worker serve-model` as a user runs it: tritonclient's answers equal the library's for MNIST
(Bernoulli) and the SMS text pipeline, a snapshot replaced by `worker train` is served at the next
request, a forged one is refused in one log line while the old model answers, SIGTERM ends it with 0,
and what cannot be served is one line with exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from nbstream.arrow import load_pipeline
from tests.helpers.cli import run_worker, worker_env
from tests.helpers.paths import SMS
from tests.helpers.service import free_port, wait_for

triton = pytest.importorskip("tritonclient.http")


class ServedModel:
    """`worker serve-model SNAPSHOT --http-port PORT ...` as a subprocess, its log in a file."""

    def __init__(self, snapshot, folder, *extra):
        self.port = free_port()
        self.log = folder / f"serve-model-{self.port}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "worker", "serve-model", str(snapshot),
                                             "--http-port", str(self.port), *map(str, extra)],
                                            stdout=log, stderr=subprocess.STDOUT, env=worker_env())
        self.client = triton.InferenceServerClient(f"127.0.0.1:{self.port}")
        assert wait_for(self._ready, timeout=60), self.log.read_text()

    def _ready(self) -> bool:
        try:
            return self.client.is_server_ready()
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def mnist_snapshot(mnist_parquet, tmp_path_factory):
    out = tmp_path_factory.mktemp("mnist-model") / "digits.nbs"
    result = run_worker("train", mnist_parquet["train"], "--features", "pixels", "--label", "label",
                        "--model", "bernoulli", "--binarize", "127.5", "--out", out, "--no-progress")
    assert result.returncode == 0, result.stderr
    return out


def _text_snapshot(out, rows: int | None = None):
    path = SMS / "train.parquet"
    if rows is not None:
        part = out.with_suffix(".parquet")
        pq.write_table(pq.read_table(path).slice(0, rows), part)
        path = part
    result = run_worker("train", path, "--text", "text", "--label", "label", "--out", out, "--no-progress")
    assert result.returncode == 0, result.stderr
    return out


def test_mnist_answers_equal_the_library_from_binary_and_json_tensors(mnist_snapshot, mnist, tmp_path):
    served = ServedModel(mnist_snapshot, tmp_path)
    try:
        metadata = served.client.get_model_metadata("digits")
        assert metadata["inputs"] == [{"name": "pixels", "datatype": "FP64", "shape": [-1, 784]}]
        images = mnist["test_images"][:200].reshape(200, -1)
        expected = load_pipeline(mnist_snapshot).model.predict_proba(images)
        for binary in (True, False):
            tensor = triton.InferInput("pixels", [200, 784], "FP64")
            tensor.set_data_from_numpy(images.astype(np.float64), binary_data=binary)
            answer = served.client.infer("digits", [tensor])
            np.testing.assert_allclose(answer.as_numpy("probabilities"), expected, rtol=1e-12, atol=0)
        labels = answer.as_numpy("label")
        accuracy = np.mean([int(label) == truth for label, truth in zip(labels, mnist["test_labels"][:200],
                                                                         strict=True)])
        assert accuracy > 0.8
    finally:
        assert served.stop() == 0, served.log.read_text()


def test_sms_answers_and_explanations_equal_the_pipelines(tmp_path):
    snapshot = _text_snapshot(tmp_path / "spam.nbs")
    texts = pq.read_table(SMS / "test.parquet").column("text").to_pylist()[:100]
    pipeline = load_pipeline(snapshot)
    served = ServedModel(snapshot, tmp_path)
    try:
        tensor = triton.InferInput("text", [len(texts)], "BYTES")
        tensor.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
        answer = served.client.infer("spam", [tensor], parameters={"explain": 5})
        np.testing.assert_allclose(answer.as_numpy("probabilities"), pipeline.predict_proba(texts), rtol=1e-12,
                                   atol=0)
        explanations = [json.loads(row) for row in answer.as_numpy("explanation")]
        assert explanations == pipeline.explain(texts, top=5)
        assert [e["class"] for e in explanations] == [label.decode() if isinstance(label, bytes) else label
                                                      for label in answer.as_numpy("label")]
    finally:
        assert served.stop() == 0


def test_a_replaced_snapshot_is_served_and_a_forged_one_refused(tmp_path):
    snapshot = _text_snapshot(tmp_path / "spam.nbs", rows=300)
    served = ServedModel(snapshot, tmp_path, "--reload")
    try:
        first = served.client.get_model_metadata("spam")["versions"]
        _text_snapshot(snapshot, rows=600)  # worker train writes it atomically
        second = served.client.get_model_metadata("spam")["versions"]
        assert second != first and second == [snapshot.read_bytes()[-32:].hex()[:16]]
        forged = snapshot.read_bytes()
        forged = forged[:100] + bytes([forged[100] ^ 1]) + forged[101:]
        temporary = tmp_path / "forged.nbs"
        temporary.write_bytes(forged)
        os.replace(temporary, snapshot)
        tensor = triton.InferInput("text", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([b"free prize"], dtype=object))
        assert served.client.infer("spam", [tensor]).get_response()["model_version"] == second[0]
        time.sleep(0.2)
        refusals = [line for line in served.log.read_text().splitlines() if "refused" in line]
        assert len(refusals) == 1 and "Traceback" not in served.log.read_text()
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("arguments, words", [
    (["missing.nbs", "--http-port", "0"], "No such file"),
    (["{folder}", "--http-port", "0"], "directory"),
    (["{fifo}", "--http-port", "0"], "not a regular file"),
    (["{snapshot}"], "needs --http-port"),
    (["{snapshot}", "--http-port", "0", "--model-name", "a b"], "is not one"),
    (["{snapshot}", "--http-port", "0", "--http-tls-cert", "{snapshot}"], "go together"),
    (["{snapshot}", "--http-port", "0", "--http-token-file", "{empty}"], "empty"),
])
def test_what_cannot_be_served_is_one_line_and_exit_2(tmp_path, arguments, words):
    snapshot = _text_snapshot(tmp_path / "spam.nbs", rows=50)
    fifo, empty = tmp_path / "fifo.nbs", tmp_path / "empty"
    os.mkfifo(fifo)
    empty.write_text("")
    given = [a.format(folder=tmp_path, fifo=fifo, snapshot=snapshot, empty=empty) for a in arguments]
    result = run_worker("serve-model", *given, timeout=60)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
