"""`worker serve --http-port` on the real broker: every replica answers for the whole group from
committed state only, with the position that state includes; a min_position from a message just
produced (to any partition) is answered once the state includes it, by either replica; tritonclient's
answers equal the exported model's."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
from kafka import KafkaProducer

from tests.helpers.kafka import new_topic, send
from tests.helpers.service import Service, free_port, labeled_messages, wait_for
from tests.integration.test_faults import export

pytestmark = pytest.mark.faults


def _ask(port: int, body: dict, timeout: float = 30) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/main/infer", json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _features_request(rows: list[list[int]], **parameters) -> dict:
    return {"inputs": [{"name": "features", "datatype": "INT64", "shape": [len(rows), 6],
                        "data": [v for row in rows for v in row]}], "parameters": parameters}


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def test_two_replicas_answer_for_the_group_from_committed_state_and_read_your_writes(kafka_bootstrap,
                                                                                       kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "asked", partitions=2)
    values, X, _ = labeled_messages(400, np.random.default_rng(4))
    send(kafka_bootstrap, topic, values, partition_of=lambda i: i % 2)
    ports = [free_port(), free_port()]
    replicas = [Service(kafka_bootstrap, topic, tmp_path, "--http-port", port, client=kafka_client,
                        instance=f"asked-{i}", name=f"asked-{i}").start() for i, port in enumerate(ports)]
    try:
        assert wait_for(lambda: all(_ready(port) for port in ports), timeout=120), replicas[0].log_tail()

        def settled() -> bool:
            answers = [_ask(port, _features_request(X[:1].tolist())) for port in ports]
            return all(status == 200 and sum(a["parameters"]["position"].values()) == 400 for status, a in answers)

        assert wait_for(settled, timeout=120), [r.log_tail() for r in replicas]
        for port in ports:  # committed state: every message learned is counted by the position it answers at
            status, answer = _ask(port, _features_request(X[:3].tolist()))
            assert status == 200
            assert answer["parameters"]["position"] == {f"{topic}:0": 200, f"{topic}:1": 200}
            assert answer["model_version"] == answer["parameters"]["model_version"] == "400"

        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        for port in ports:
            for partition in (0, 1):  # one partition is the asked replica's own, the other its peer's
                sent = producer.send(topic, values[partition], partition=partition).get(timeout=30)
                asked = {f"{topic}:{partition}": sent.offset + 1}
                status, answer = _ask(port, _features_request(X[:1].tolist(), min_position=asked, timeout_ms=30_000))
                assert status == 200, answer
                assert answer["parameters"]["position"][f"{topic}:{partition}"] >= sent.offset + 1
                assert int(answer["model_version"]) == sum(answer["parameters"]["position"].values())
        producer.close()

        status, answer = _ask(ports[0], _features_request(X[:1].tolist(), min_position={f"{topic}:0": 10_000},
                                                          timeout_ms=300))
        assert status == 503 and "has not reached min_position" in answer["error"]

        # tritonclient against the exported group model, once nothing moves
        tritonclient = pytest.importorskip("tritonclient.http")
        assert wait_for(lambda: sum(_ask(ports[1], _features_request(X[:1].tolist()))[1]["parameters"]
                                    ["position"].values()) == 404, timeout=60)
        model = export(kafka_bootstrap, kafka_client, topic, replicas[0].group, tmp_path / "group.nbs")
        client = tritonclient.InferenceServerClient(f"127.0.0.1:{ports[1]}")
        rows = X[:50].astype(np.float64)
        tensor = tritonclient.InferInput("features", list(rows.shape), "FP64")
        tensor.set_data_from_numpy(rows)
        result = client.infer("main", [tensor])
        np.testing.assert_allclose(result.as_numpy("probabilities"), model.predict_proba(rows), rtol=1e-12, atol=0)
        classes = result.get_output("probabilities")["parameters"]["classes"]
        assert classes == model.classes_.tolist()
    finally:
        for replica in replicas:
            replica.terminate()


def test_explain_adds_each_predictions_weightiest_features(kafka_bootstrap, kafka_client, tmp_path):
    from tests.helpers.kafka import read_all

    topic = new_topic(kafka_bootstrap, "explained")
    values, X, _ = labeled_messages(300, np.random.default_rng(5))
    send(kafka_bootstrap, topic, values)
    service = Service(kafka_bootstrap, topic, tmp_path, "--explain", "2", client=kafka_client).start()
    try:
        predictions = [json.loads(r.value) for r in read_all(kafka_bootstrap, service.output, expected=300,
                                                             timeout=120)]
    finally:
        assert service.terminate() == 0, service.log_tail()
    assert len(predictions) == 300
    explained = [p for p in predictions if p["offset"] >= 20]  # by a model that knows every class
    assert len(explained) == 280
    for prediction in explained:  # (a count of 0 weighs nothing in a multinomial model: a row may show fewer)
        features = prediction["explanation"]
        assert 1 <= len(features) <= 2 and all(f["feature"].startswith("features[") for f in features)
        assert abs(features[0]["contribution"]) >= abs(features[-1]["contribution"])
    assert sum(len(p["explanation"]) == 2 for p in explained) > 200


def _sms_messages(n: int) -> tuple[list[bytes], list[str]]:
    import pyarrow.parquet as pq

    from tests.helpers.paths import SMS

    rows = pq.read_table(SMS / "train.parquet").slice(0, n).to_pylist()
    return [json.dumps({"id": i, "text": r["text"], "label": r["label"]}).encode() for i, r in enumerate(rows)], \
        [r["text"] for r in pq.read_table(SMS / "test.parquet").slice(0, 50).to_pylist()]


@pytest.mark.parametrize("data", ["mnist", "sms"])
def test_tritonclient_answers_equal_the_exported_group_model(kafka_bootstrap, kafka_client, tmp_path, data, request):
    from nbstream.arrow import load_pipeline

    tritonclient = pytest.importorskip("tritonclient.http")
    topic = new_topic(kafka_bootstrap, f"triton-{data}", partitions=2)
    if data == "mnist":
        mnist = request.getfixturevalue("mnist")
        images, labels = mnist["train_images"][:600].reshape(600, -1), mnist["train_labels"][:600]
        values = [json.dumps({"id": i, "features": image.tolist(), "label": int(label)}).encode()
                  for i, (image, label) in enumerate(zip(images, labels, strict=True))]
        extra = ["--model", "bernoulli", "--binarize", "127.5"]
        rows = mnist["test_images"][:50].reshape(50, -1).astype(np.float64)
        tensor = tritonclient.InferInput("features", list(rows.shape), "FP64")
        tensor.set_data_from_numpy(rows)
    else:
        values, texts = _sms_messages(600)
        extra = ["--text-features", "--model", "multinomial"]
        rows = texts
        tensor = tritonclient.InferInput("text", [len(texts)], "BYTES")
        tensor.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    send(kafka_bootstrap, topic, values, partition_of=lambda i: i % 2)
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, *extra, "--http-port", port, client=kafka_client).start()
    try:
        def learned_all() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/main", timeout=5) as answer:
                    return sum(json.loads(answer.read())["parameters"]["position"].values()) == 600
            except OSError:
                return False

        assert wait_for(learned_all, timeout=120), service.log_tail()
        answer = tritonclient.InferenceServerClient(f"127.0.0.1:{port}").infer("main", [tensor])
        export(kafka_bootstrap, kafka_client, topic, service.group, tmp_path / "group.nbs")
        pipeline = load_pipeline(tmp_path / "group.nbs")
        expected = pipeline.predict_proba(rows) if data == "sms" else pipeline.model.predict_proba(rows)
        np.testing.assert_allclose(answer.as_numpy("probabilities"), expected, rtol=1e-12, atol=0)
        assert answer.get_response()["model_version"] == "600"
    finally:
        assert service.terminate() == 0, service.log_tail()
