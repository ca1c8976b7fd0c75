"""`worker serve` against a real Apache Kafka broker, as a real subprocess."""

from __future__ import annotations

import json
import random
import re
import socket
import time
import urllib.request

import numpy as np
import pytest

from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, json_message, new_topic, read_all, send
from tests.helpers.service import Service, assert_equal_statistics, covered, labeled_messages, metric_values, wait_for


def test_kill_9_at_random_moments_loses_nothing_and_counts_nothing_twice(kafka_bootstrap, kafka_client, tmp_path):
    rng = np.random.default_rng(7)
    chooser = random.Random(7)
    topic = new_topic(kafka_bootstrap, "exactly-once", partitions=3)
    service = Service(kafka_bootstrap, topic, tmp_path, client=kafka_client)
    all_X, all_labels, sent = [], [], 0
    for _ in range(3):
        values, X, labels = labeled_messages(4_000, rng, start_id=sent)
        send(kafka_bootstrap, topic, values, partition_of=lambda i, first=sent: (first + i) % 3)
        all_X.append(X), all_labels.append(labels)
        sent += len(values)
        before = service.checkpoints() if service.snapshots.exists() else 0
        service.start()
        assert wait_for(lambda before=before: service.checkpoints() > before, timeout=60)  # it is working
        time.sleep(chooser.uniform(0.0, 1.0))
        service.kill()
    service.start()
    everything = {(p, o) for p in range(3) for o in range(sent // 3)}
    watcher = TopicWatcher(kafka_bootstrap, service.output)
    assert watcher.wait_until(lambda records: covered(records) >= everything), service.log.read_text()[-3000:]
    watcher.close()
    assert service.terminate() == 0
    model, meta = service.state()
    assert meta["source"]["offsets"] == {"0": sent // 3, "1": sent // 3, "2": sent // 3}
    assert_equal_statistics(model, np.concatenate(all_X), np.concatenate(all_labels))


def test_malformed_messages_go_to_the_dead_letter_topic_and_the_service_keeps_running(
        kafka_bootstrap, kafka_client, tmp_path):
    rng = np.random.default_rng(11)
    topic = new_topic(kafka_bootstrap, "dead-letters")
    good, X, labels = labeled_messages(2_000, rng)
    malformed = [b"{not json", b"[1, 2, 3]", json_message(features=[1, 2, 3], label="ham"),
                 json_message(features=[1, "two", 3, 4, 5, 6], label="ham"), json_message(features="1,2,3"),
                 json_message(features=[1, 2, 3, 4, 5, -6], label="spam"), b"\xff\xfe",
                 json_message(features=[0] * 6, label="ham", padding="x" * 3_000)]
    bad = [malformed[i % len(malformed)] for i in range(1_000)]
    values, is_bad = [], []
    for i in range(3_000):
        take_bad = i % 3 == 1
        values.append(bad.pop() if take_bad else good.pop(0))
        is_bad.append(take_bad)
    send(kafka_bootstrap, topic, values)
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-message-bytes", 2_000, "--metrics-port", 0,
                      client=kafka_client).start()
    dead = read_all(kafka_bootstrap, f"{topic}.dlq", expected=1_000, timeout=90)
    predictions = read_all(kafka_bootstrap, service.output, expected=2_000, timeout=90)
    assert service.process.poll() is None, "the service stopped"
    assert len(dead) == 1_000
    bad_offsets = {i for i, b in enumerate(is_bad) if b}
    assert {int(dict(r.headers)["source.offset"]) for r in dead} == bad_offsets
    errors = {dict(r.headers)["error"].decode().split(":")[0] for r in dead}
    assert {"malformed JSON", "expected a JSON object; got list", "list has 3 values; expected 6",
            "non-numeric value", "field 'features' must be a list of numbers",
            "negative value (this model needs counts)"} <= errors
    assert any(re.fullmatch(r"message of \d+ bytes exceeds the limit of 2000", e) for e in errors)
    assert all(dict(r.headers)["source.topic"].decode() == topic for r in dead)
    assert {json.loads(r.value)["offset"] for r in predictions} == set(range(3_000)) - bad_offsets
    assert service.terminate() == 0
    model, _ = service.state()
    assert_equal_statistics(model, X, labels)


def test_sigterm_leaves_a_snapshot_from_which_a_restart_continues_without_gap_or_double_count(
        kafka_bootstrap, kafka_client, tmp_path):
    rng = np.random.default_rng(5)
    topic = new_topic(kafka_bootstrap, "sigterm")
    first, X1, y1 = labeled_messages(1_500, rng)
    send(kafka_bootstrap, topic, first)
    service = Service(kafka_bootstrap, topic, tmp_path, "--checkpoint-interval", 3600, client=kafka_client).start()
    assert len(read_all(kafka_bootstrap, service.output, expected=1_500)) == 1_500
    assert service.terminate() == 0
    model, meta = service.state()
    assert meta["source"]["offsets"] == {"0": 1_500}
    assert_equal_statistics(model, X1, y1)
    second, X2, y2 = labeled_messages(1_000, rng, start_id=1_500)
    send(kafka_bootstrap, topic, second)
    service.start()
    predictions = read_all(kafka_bootstrap, service.output, expected=2_500)
    assert service.terminate() == 0
    offsets = [json.loads(r.value)["offset"] for r in predictions]
    assert sorted(offsets) == list(range(2_500))  # each message predicted exactly once
    model, _ = service.state()
    assert_equal_statistics(model, np.concatenate([X1, X2]), np.concatenate([y1, y2]))


def test_predictions_carry_id_probabilities_version_and_source(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "predictions")
    send(kafka_bootstrap, topic, [json_message(text="win a free prize now", label="spam", id="a"),
                                  json_message(text="see you at lunch", label="ham", id="b"),
                                  json_message(text="free prize", id="c")])
    service = Service(kafka_bootstrap, topic, tmp_path, "--text-features", "--classes", "ham,spam",
                      "--metrics-port", 0).start()
    records = read_all(kafka_bootstrap, service.output, expected=3)
    by_id = {json.loads(r.value)["id"]: (r, json.loads(r.value)) for r in records}
    record, first = by_id["a"]
    assert record.key == b"0"  # keyed like the input
    assert first["prediction"] is None and first["model_version"] == 0  # nothing learned yet
    _, third = by_id["c"]  # test-then-train, in one poll or not: by the model of the two before it
    assert third["model_version"] == 2
    assert third["prediction"] == "spam" and set(third["probabilities"]) == {"ham", "spam"}
    assert {(v["topic"], v["partition"], v["offset"]) for _, v in by_id.values()} == \
        {(topic, 0, 0), (topic, 0, 1), (topic, 0, 2)}
    assert service.terminate() == 0


def test_metrics_health_and_readiness_endpoints(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "metrics")
    rng = np.random.default_rng(2)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    service = Service(kafka_bootstrap, topic, tmp_path, "--metrics-port", port, client=kafka_client).start()
    watcher = TopicWatcher(kafka_bootstrap, service.output)
    for round_ in range(2):  # the second round is predicted by a model that learned the first
        values, _, _ = labeled_messages(300, rng, start_id=300 * round_)
        send(kafka_bootstrap, topic, values)
        assert watcher.wait_until(lambda records, round_=round_: len(records) >= 300 * (round_ + 1))
    watcher.close()

    def get(path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except OSError:
            return None, ""

    assert wait_for(lambda: get("/readyz")[0] == 200, timeout=30)
    assert get("/healthz")[0] == 200
    # counted once committed: the predictions can be read a moment before
    assert wait_for(lambda: metric_values(port).get("nbstream_messages_total") == 600, timeout=30)
    status, text = get("/metrics")
    assert status == 200
    assert "nbstream_messages_total 600.0" in text
    assert "nbstream_examples_learned_total 600.0" in text
    accuracy = float(next(line.split()[1] for line in text.splitlines()
                          if line.startswith("nbstream_prequential_accuracy")))
    assert 0.4 < accuracy <= 1.0  # three classes: chance is 1/3
    assert get("/nowhere")[0] is None  # 404 raises in urllib
    assert service.terminate() == 0


def test_produce_loads_a_parquet_file_into_a_topic(kafka_bootstrap, kafka_client):
    from tests.helpers.paths import SMS

    topic = new_topic(kafka_bootstrap, "produce")
    result = run_worker("produce", SMS / "test.parquet", "--bootstrap", kafka_bootstrap, "--topic", topic,
                        "--text", "text", "--label", "label", "--id", "id", "--kafka-client", kafka_client, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "sent 1,115 messages" in result.stdout
    records = read_all(kafka_bootstrap, topic, expected=1_115)
    first = json.loads(records[0].value)
    assert set(first) == {"text", "label", "id"} and records[0].key == str(first["id"]).encode()


def test_a_group_starts_from_a_train_snapshot_and_keeps_learning_or_only_predicts(kafka_bootstrap, kafka_client,
                                                                                   tmp_path):
    import pyarrow.parquet as pq

    from tests.helpers.cli import invoke
    from tests.helpers.paths import SMS

    trained = tmp_path / "sms.nbs"
    assert invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", trained).exit_code == 0
    rows = pq.read_table(SMS / "test.parquet").to_pylist()[:400]
    topic = new_topic(kafka_bootstrap, "init-model")
    send(kafka_bootstrap, topic, [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows])
    for learn in ("--learn", "--no-learn"):
        service = Service(kafka_bootstrap, topic, tmp_path / learn, "--init-model", trained, learn,
                          client=kafka_client, group=f"{topic}{learn}").start()
        output = f"{topic}.predictions"
        predictions = [json.loads(r.value) for r in read_all(kafka_bootstrap, output, expected=400 * (
            2 if learn == "--no-learn" else 1), timeout=120, committed_only=True)][-400:]
        assert service.terminate() == 0, service.log_tail()
        in_order = sorted(predictions, key=lambda p: p["offset"])
        right = sum(p["prediction"] == r["label"] for p, r in zip(in_order, rows, strict=True))
        assert right / 400 > 0.95  # the trained model predicts from the first message on
        assert min(p["model_version"] for p in predictions) >= 4_459
        result = run_worker("export", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client, "--input",
                            topic, "--group", service.group, "--out", tmp_path / f"export{learn}.nbs", timeout=120)
        assert result.returncode == 0, result.stderr
        expected = 4_459 + 400 if learn == "--learn" else 4_459  # predict-only learns nothing
        assert f"exported {expected:,} examples" in result.stdout and "offsets {0: 400}" in result.stdout
        evaluated = invoke("evaluate", tmp_path / f"export{learn}.nbs", SMS / "test.parquet")
        assert evaluated.exit_code == 0 and "accuracy:" in evaluated.output, evaluated.output  # knows its label


def test_arrow_batch_messages_from_produce_are_answered_per_message_and_bad_rows_dead_letter_alone(
        kafka_bootstrap, kafka_client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from worker.io.arrow_messages import read_stream, write_stream

    rng = np.random.default_rng(5)
    _, X, labels = labeled_messages(1_000, rng)
    pq.write_table(pa.table({"pixels": X.tolist(), "digit": labels, "key": [f"r{i}" for i in range(1_000)]}),
                   tmp_path / "rows.parquet")
    topic = new_topic(kafka_bootstrap, "arrow-batches")
    produced = run_worker("produce", tmp_path / "rows.parquet", "--topic", topic, "--bootstrap", kafka_bootstrap,
                          "--kafka-client", kafka_client, "--features", "pixels", "--label", "digit", "--id", "key",
                          "--format", "arrow", "--rows-per-message", 100)
    assert produced.returncode == 0 and "sent 10 messages (1,000 rows)" in produced.stdout
    # A lone unreadable message, a small message that inflates past --max-message-bytes, and a
    # message whose middle row is bad.
    zeros = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(6 * 300_000, np.uint8)), 6)
    bomb = write_stream(pa.table({"features": zeros}), compression="zstd")
    assert len(bomb) < 100_000
    send(kafka_bootstrap, topic, [b"not arrow at all", bomb,
                                  write_stream(pa.table({"features": [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, -6],
                                                                      [6, 5, 4, 3, 2, 1]], "label": ["ham"] * 3}))])
    service = Service(kafka_bootstrap, topic, tmp_path, "--format", "arrow", client=kafka_client).start()
    dead = read_all(kafka_bootstrap, f"{topic}.dlq", expected=3, timeout=90)
    outputs = read_all(kafka_bootstrap, service.output, expected=11, timeout=90)
    assert service.process.poll() is None, service.log_tail()
    tables = [read_stream(r.value) for r in outputs]
    assert sum(t.num_rows for t in tables) == 1_002
    assert [t.column("row").to_pylist() for t in tables[:10]] == [list(range(100))] * 10
    assert tables[0].column("id").to_pylist()[:2] == ["r0", "r1"]
    assert tables[10].column("row").to_pylist() == [0, 2] and tables[10].column("offset")[0].as_py() == 12
    headers = [dict(r.headers) for r in dead]
    assert headers[0]["error"].decode().startswith("not an Arrow IPC stream") and "source.row" not in headers[0]
    assert dead[0].value == b"not arrow at all"
    assert headers[1]["error"].decode().startswith(f"message of {len(bomb)} bytes holds ")
    assert "more than the limit of 1048576" in headers[1]["error"].decode() and dead[1].value == bomb
    assert headers[2]["error"] == b"negative value (this model needs counts)" and headers[2]["source.row"] == b"1"
    assert read_stream(dead[2].value).column("features").to_pylist() == [[1, 2, 3, 4, 5, -6]]
    assert service.terminate() == 0
    model, _ = service.state()
    assert_equal_statistics(model, np.vstack([X, [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]]),
                            np.concatenate([labels, ["ham", "ham"]]))


def test_at_least_once_starts_a_group_from_a_model_in_one_session(kafka_bootstrap, kafka_client, tmp_path):
    """The base state needs no transaction when there are none: no failed first session."""
    from tests.helpers.cli import invoke
    from tests.helpers.paths import SMS

    trained = tmp_path / "sms.nbs"
    assert invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", trained).exit_code == 0
    topic = new_topic(kafka_bootstrap, "init-at-least-once")
    send(kafka_bootstrap, topic, [json_message(text="free prize now", id=i) for i in range(20)])
    service = Service(kafka_bootstrap, topic, tmp_path, "--init-model", trained, "--guarantee", "at-least-once",
                      "--text-features", client=kafka_client).start()
    predictions = read_all(kafka_bootstrap, service.output, expected=20, timeout=90)
    assert service.terminate() == 0, service.log_tail()
    log = service.log.read_text()
    assert "Kafka failed" not in log and "started again" not in log, log[-3000:]
    assert {json.loads(r.value)["model_version"] for r in predictions} == {4_459}


def test_a_group_starts_from_a_categorical_snapshot_and_learns_new_categories(kafka_bootstrap, kafka_client,
                                                                             tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers.cli import invoke

    pq.write_table(pa.table({"c1": ["a", "b", "a"], "c2": [0, 1, 1], "label": ["y", "z", "y"]}), tmp_path / "c.parquet")
    trained = tmp_path / "cat.nbs"
    assert invoke("train", tmp_path / "c.parquet", "--label", "label", "--features", "c1,c2", "--model", "categorical",
                  "--out", trained).exit_code == 0
    for learn in ("--learn", "--no-learn"):
        topic = new_topic(kafka_bootstrap, f"init-categorical{learn}")
        send(kafka_bootstrap, topic, [b'{"features": {"c1": "r", "c2": 1}, "label": "x"}',
                                      b'{"features": {"c1": "a", "c2": 0}, "label": "y"}'])
        service = Service(kafka_bootstrap, topic, tmp_path / learn, "--init-model", trained, "--model", "categorical",
                          "--feature-names", "c1,c2", learn, client=kafka_client).start()
        predictions = [json.loads(r.value) for r in read_all(kafka_bootstrap, service.output, expected=2, timeout=90)]
        assert service.terminate() == 0, service.log_tail()
        assert [p["prediction"] for p in predictions][1] == "y"
        model, _ = service.state()
        assert model.n_examples_seen_ == (5 if learn == "--learn" else 3)
        if learn == "--learn":
            assert sorted(model.classes_.tolist()) == ["x", "y", "z"]


def _sms_served_test_then_train(kafka_bootstrap, kafka_client, tmp_path, fmt):
    """The SMS training set produced in one go and served with --text: (served predictions in
    offset order, as (prediction, model_version, label)), and the same replayed offline."""
    import pyarrow.parquet as pq

    import nbstream
    from nbstream.arrow import FeatureSpec
    from tests.helpers.paths import SMS
    from worker.io.arrow_messages import read_stream

    table = pq.read_table(SMS / "train.parquet")
    topic = new_topic(kafka_bootstrap, f"sms-prequential-{fmt}")
    produced = run_worker("produce", SMS / "train.parquet", "--topic", topic, "--bootstrap", kafka_bootstrap,
                          "--kafka-client", kafka_client, "--text", "text", "--label", "label", "--id", "id",
                          "--format", fmt, *(["--rows-per-message", 500] if fmt == "arrow" else []))
    assert produced.returncode == 0, produced.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    service = Service(kafka_bootstrap, topic, tmp_path, "--text-features", "--format", fmt, "--drift-detector", "adwin",
                      "--metrics-port", port, client=kafka_client).start()
    expected = 9 if fmt == "arrow" else table.num_rows
    outputs = read_all(kafka_bootstrap, service.output, expected=expected, timeout=120)
    rows = []
    for record in sorted(outputs, key=lambda r: json.loads(r.value)["offset"] if fmt == "json" else 0):
        if fmt == "json":
            value = json.loads(record.value)
            rows.append((value["id"], value["prediction"], value["model_version"]))
        else:
            batch = read_stream(record.value)
            rows += list(zip(batch.column("id").to_pylist(), batch.column("prediction").to_pylist(),
                             batch.column("model_version").to_pylist(), strict=True))
    assert wait_for(lambda: metric_values(port).get("nbstream_examples_learned_total") == table.num_rows, timeout=30)
    accuracy = metric_values(port).get('nbstream_prequential_accuracy{model="main",window="all"}')
    assert service.terminate() == 0, service.log_tail()
    batch = table.combine_chunks().to_batches()[0]
    X = FeatureSpec.text("text").encoder().encode(batch, learn=False)[0]
    offline = nbstream.MultinomialNB().predict_then_learn(X, np.asarray(table.column("label").to_pylist()))
    return rows, offline, accuracy, table.column("id").to_pylist()


def test_a_backlog_is_served_test_then_train_as_the_offline_replay(kafka_bootstrap, kafka_client, tmp_path):
    rows, offline, accuracy, ids = _sms_served_test_then_train(kafka_bootstrap, kafka_client, tmp_path, "json")
    served = {id_: (prediction, version) for id_, prediction, version in rows}
    assert len(served) == len(ids) == 4_459
    in_order = [served[id_] for id_ in ids]
    assert [version for _, version in in_order] == list(range(4_459))  # message i by the model of the i before
    assert in_order[0][0] is None and all(prediction is not None for prediction, _ in in_order[1:])
    assert [prediction for prediction, _ in in_order[1:]] == offline[1:].tolist()
    labels_right = (offline[1:] == np.asarray(_sms_labels()[1:])).mean()
    assert accuracy == pytest.approx(labels_right, abs=1e-12)


def test_arrow_batches_are_served_test_then_train_row_by_row(kafka_bootstrap, kafka_client, tmp_path):
    rows, offline, _, ids = _sms_served_test_then_train(kafka_bootstrap, kafka_client, tmp_path, "arrow")
    served = {id_: (prediction, version) for id_, prediction, version in rows}
    in_order = [served[id_] for id_ in ids]
    assert [version for _, version in in_order] == list(range(4_459))
    assert [prediction for prediction, _ in in_order[1:]] == offline[1:].tolist()


def _sms_labels():
    import pyarrow.parquet as pq

    from tests.helpers.paths import SMS
    return pq.read_table(SMS / "train.parquet").column("label").to_pylist()
