"""The inference API in the test process: a real uvicorn server on 127.0.0.1 (a free port) over
any model source, and plain HTTP requests to it that return (status, JSON) whatever the status."""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureSpec, Pipeline
from worker.inference.answering import AnsweringModel
from worker.inference.config import InferenceApiConfig
from worker.inference.server import InferenceServer
from worker.inference.sources import ModelSource, PublishedModels


@contextlib.contextmanager
def running_api(source: ModelSource, **settings: Any) -> Iterator[InferenceServer]:
    """An InferenceServer answering from ``source`` until the block ends."""
    server = InferenceServer(InferenceApiConfig(http_port=0, **settings), source)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def call(server: InferenceServer, method: str, path: str, body: bytes | dict[str, Any] | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30.0,
         context: ssl.SSLContext | None = None) -> tuple[int, dict[str, Any]]:
    """(status, the JSON answer) of one request ({"text": ...} for an answer that is not JSON)."""
    if context is not None:
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", server.port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    payload = json.dumps(body).encode() if isinstance(body, dict) else body
    try:
        connection.request(method, path, body=payload, headers=headers or {})
        answer = connection.getresponse()
        content = answer.read()
        if answer.getheader("content-type", "").startswith("application/json"):
            return answer.status, json.loads(content)
        return answer.status, {"text": content.decode(errors="replace")}
    finally:
        connection.close()


def infer_body(name: str, datatype: str, values: np.ndarray | list[Any], **parameters: Any) -> dict[str, Any]:
    """A JSON infer request of one input."""
    array = np.asarray(values)
    data = array.ravel().tolist() if datatype != "BYTES" else list(values)
    request: dict[str, Any] = {"inputs": [{"name": name, "datatype": datatype, "shape": list(array.shape),
                                           "data": data}]}
    if parameters:
        request["parameters"] = parameters
    return request


def vector_model(name: str = "digits", kind: str = "bernoulli", seed: int = 0,
                 version: str = "1", position: dict[str, int] | None = None) -> AnsweringModel:
    """A model of a list column 'pixels' of 16 small counts, three classes, learned from random rows."""
    import nbstream

    rng = np.random.default_rng(seed)
    X = rng.integers(0, 4, size=(300, 16))
    y = np.array(["a", "b", "c"])[X[:, 0] % 3]
    model = {"bernoulli": nbstream.BernoulliNB(binarize=1.0), "multinomial": nbstream.MultinomialNB(),
             "gaussian": nbstream.GaussianNB()}[kind].fit(X, y)
    encoder = FeatureSpec.vector("pixels").encoder()
    encoder.encode(pa.record_batch({"pixels": pa.array(list(X[:1]), pa.list_(pa.int64()))}), learn=True)
    return AnsweringModel(name, Pipeline(model, encoder), version, position or {})


def text_model(name: str = "spam") -> AnsweringModel:
    """A multinomial model of a text column 'text' (2^12 hashed words)."""
    import nbstream

    texts = ["win a prize now", "free cash prize", "see you at six", "lunch at noon?", "claim your free prize"]
    labels = ["spam", "spam", "ham", "ham", "spam"]
    encoder = FeatureSpec.text("text", hash_bits=12).encoder()
    X, _ = encoder.encode(pa.record_batch({"text": texts}), learn=True)
    return AnsweringModel(name, Pipeline(nbstream.MultinomialNB().fit(X, labels), encoder), "5")


def published(*models: AnsweringModel) -> PublishedModels:
    """A board of these models, the first one served."""
    board = PublishedModels([model.name for model in models])
    if models:
        board.publish({model.name: model for model in models}, models[0].name)
    return board
