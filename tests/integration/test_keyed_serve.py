"""worker serve --model-key key on a real broker: each SMS message predicted by its user's own model
(--key-prior-weight 0) equals an offline fit of that user's earlier messages, through a kill -9 and a
restart; messages without a usable key are dead letters, alone."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer
from sklearn.naive_bayes import MultinomialNB

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, json_message, new_topic, read_all
from tests.helpers.paths import SMS
from tests.helpers.service import Service, free_port, metric_values, wait_for

KEYED = ("--text-features", "--model", "multinomial", "--model-key", "key", "--key-prior-weight", "0",
         "--max-poll-records", "300")
USERS = 40


def sms_by_user(n: int):
    table = pq.read_table(SMS / "train.parquet").slice(0, n)
    rows = table.to_pylist()
    X = FeatureSpec.text("text").encoder().encode(table.combine_chunks().to_batches()[0], learn=False)[0]
    users = [f"user-{(i * 7919) % USERS}" for i in range(n)]
    return rows, X.tocsr(), np.asarray([r["label"] for r in rows]), users


def send_keyed(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes | None]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    futures = [producer.send(topic, value=value, key=key) for value, key in zip(values, keys, strict=True)]
    producer.flush()
    for future in futures:
        future.get(timeout=30)
    producer.close()


def offline_check(predictions: list[dict], rows, X, labels, users, offsets: dict[tuple[int, int], int]) -> int:
    """Every prediction of a key that had learned before equals a fit of that key's earlier rows
    alone (scikit-learn, the classes the prediction names); how many were checked."""
    checked = 0
    for prediction in predictions:
        i = offsets[(prediction["partition"], prediction["offset"])]
        earlier = [j for j in range(i) if users[j] == users[i]]
        assert prediction["key"] == users[i] and prediction["key_examples"] == len(earlier)
        if not earlier or prediction["prediction"] is None:
            continue
        classes = list(prediction["probabilities"])
        alone = MultinomialNB().partial_fit(X[earlier], labels[earlier], classes=classes)
        expected = dict(zip(alone.classes_.tolist(), alone.predict_proba(X[i])[0].tolist(), strict=True))
        np.testing.assert_allclose([prediction["probabilities"][c] for c in classes], [expected[c] for c in classes],
                                   rtol=1e-9, atol=1e-12, err_msg=f"{prediction} after {labels[earlier].tolist()}")
        checked += 1
    return checked


def test_each_user_is_predicted_by_its_own_model_through_a_kill_9(kafka_bootstrap, kafka_client, tmp_path, started):
    rows, X, labels, users = sms_by_user(1_200)
    topic = new_topic(kafka_bootstrap, "keyed-sms", partitions=2)
    values = [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows]
    send_keyed(kafka_bootstrap, topic, values[:600], [u.encode() for u in users[:600]])
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED, client=kafka_client)
    watcher = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    assert watcher.wait_until(lambda records: len(records) >= 600, timeout=120), service.log_tail()
    service.kill()
    send_keyed(kafka_bootstrap, topic, values[600:], [u.encode() for u in users[600:]])
    service.start()
    assert watcher.wait_until(lambda records: len(records) >= 1_200, timeout=120), service.log_tail()
    assert service.terminate() == 0
    watcher.close()
    predictions = [json.loads(r.value) for r in watcher.records]
    assert len(predictions) == 1_200  # exactly once: none lost, none twice
    inputs = read_all(kafka_bootstrap, topic, expected=1_200)
    position = {row["id"]: i for i, row in enumerate(rows)}
    offsets = {(r.partition, r.offset): position[json.loads(r.value)["id"]] for r in inputs}
    assert sorted(offsets.values()) == list(range(1_200))
    assert offline_check(predictions, rows, X, labels, users, offsets) > 800  # the first poll meets no class

    # one user's model, exported: that user's messages alone (prior weight 0)
    done = run_worker("export", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client, "--input", topic,
                      "--group", service.group, "--out", tmp_path / "user-3.nbs", "--model-key", "user-3", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "backed off for the key 'user-3'" in done.stdout
    mine = [i for i, user in enumerate(users) if user == "user-3"]
    exported = nbstream.load(tmp_path / "user-3.nbs")
    alone = MultinomialNB().fit(X[mine], labels[mine])
    order = [exported.classes_.tolist().index(c) for c in alone.classes_]
    np.testing.assert_allclose(exported.predict_proba(X[:50])[:, order], alone.predict_proba(X[:50]), rtol=1e-9)
    assert exported.n_examples_seen_ == len(mine)
    missing = run_worker("export", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client, "--input", topic,
                         "--group", service.group, "--out", tmp_path / "nobody.nbs", "--model-key", "nobody",
                         timeout=120)
    assert missing.returncode == 2 and "has no key 'nobody'" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize(("key", "problem"), [(None, "no record key"), (b"", "no record key"),
                                              (b"\xff\xfe", "not UTF-8"), (b"k" * 2_000, "at most 1,024")])
def test_a_message_without_a_usable_key_alone_is_a_dead_letter(kafka_bootstrap, tmp_path, key, problem, started):
    topic = new_topic(kafka_bootstrap, "keyed-bad")
    send_keyed(kafka_bootstrap, topic, [json_message(text="win a prize", label="spam", id=1),
                                        json_message(text="lunch at noon", label="ham", id=2)], [key, b"bob"])
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED, "--dlq", f"{topic}.dlq")
    dead = TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    assert dead.wait_until(lambda records: len(records) >= 1, timeout=90), service.log_tail()
    out = TopicWatcher(kafka_bootstrap, service.output)
    assert out.wait_until(lambda records: len(records) >= 1, timeout=60), service.log_tail()
    assert service.terminate() == 0
    headers = dict(dead.records[0].headers)
    assert problem in headers["error"].decode() and headers["error.field"] == b"key"
    assert [json.loads(r.value)["key"] for r in out.records] == ["bob"]
    dead.close()
    out.close()


def test_keys_move_with_their_partitions_through_replicas_with_churn(kafka_bootstrap, kafka_client, tmp_path):
    rows, X, labels, users = sms_by_user(2_000)
    topic = new_topic(kafka_bootstrap, "keyed-churn", partitions=4)
    values = [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows]

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, *KEYED, client=kafka_client, instance=name, name=name)

    def burst(part: slice) -> None:
        send_keyed(kafka_bootstrap, topic, values[part], [u.encode() for u in users[part]])
        time.sleep(3)

    a, b = replica("a").start(), replica("b").start()
    replicas = [a, b]
    try:
        burst(slice(0, 500))
        b.kill()  # a crash: its partitions, and their keys, move once the session timeout passes
        burst(slice(500, 1_000))
        c = replica("c").start()  # a scale-up takes partitions, and their keys, over
        replicas.append(c)
        burst(slice(1_000, 1_500))
        b.start()  # the crashed replica comes back under its id
        burst(slice(1_500, 2_000))
        watcher = TopicWatcher(kafka_bootstrap, a.output, committed_only=True)
        assert watcher.wait_until(lambda records: len(records) >= 2_000, timeout=300), \
            "\n".join(r.log_tail(2000) for r in replicas)
        time.sleep(2)
        watcher.wait_until(lambda records: False, timeout=1)
        watcher.close()
        for r in replicas:
            assert r.terminate() == 0, f"replica {r.instance}: " + r.log_tail()
    finally:
        for r in replicas:
            if r.running():
                r.kill()
    predictions = [json.loads(r.value) for r in watcher.records]
    inputs = read_all(kafka_bootstrap, topic, expected=2_000)
    position = {row["id"]: i for i, row in enumerate(rows)}
    offsets = {(r.partition, r.offset): position[json.loads(r.value)["id"]] for r in inputs}
    assert sorted((p["partition"], p["offset"]) for p in predictions) == sorted(offsets)  # each once
    # every prediction a user's earlier messages make checkable matches; how many there are depends on when each
    # replica first read a learned state (until then its group's model knows no class and predicts none)
    assert offline_check(predictions, rows, X, labels, users, offsets) > 500


def test_a_key_unseen_past_the_ttl_is_dropped_and_starts_again_from_the_group(kafka_bootstrap, tmp_path, started):
    topic = new_topic(kafka_bootstrap, "keyed-ttl")
    port = free_port()
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED, "--key-ttl", "60s", "--metrics-port", port)
    now = int(time.time() * 1000)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    out = TopicWatcher(kafka_bootstrap, service.output)
    sent = [("old", "win cash now", "spam", now - 600_000), ("old", "win a prize", "spam", now - 590_000),
            ("fresh", "lunch at noon", "ham", now - 10_000), ("old", "win big", "spam", now)]
    for i, (key, text, label, stamp) in enumerate(sent):  # one at a time: the clock moves with each poll
        producer.send(topic, value=json_message(text=text, label=label, id=i), key=key.encode(), timestamp_ms=stamp)
        producer.flush()
        assert out.wait_until(lambda records, n=i + 1: len(records) >= n, timeout=90), service.log_tail()
    producer.close()
    assert wait_for(lambda: metric_values(port).get('nbstream_keys{state="dropped"}') == 1.0, timeout=30), \
        service.log_tail()
    assert service.terminate() == 0
    by_id = {p["id"]: p for p in (json.loads(r.value) for r in out.records)}
    assert [by_id[i]["key_examples"] for i in range(4)] == [0, 1, 0, 0]  # "old" was dropped before its last message
    keys_topic = read_all(kafka_bootstrap, f"{topic}.{service.group}.nbstream-state-keys", committed_only=True)
    assert any(r.value is None for r in keys_topic), "a dropped key's record gets a tombstone"
    out.close()


def test_a_forged_record_in_the_keys_topic_is_refused_in_one_line_not_started_afresh(kafka_bootstrap, tmp_path,
                                                                                      started):
    topic = new_topic(kafka_bootstrap, "keyed-forged")
    send_keyed(kafka_bootstrap, topic, [json_message(text="win cash", label="spam", id=1),
                                        json_message(text="see you", label="ham", id=2)], [b"ann", b"bob"])
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED)
    out = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    assert out.wait_until(lambda records: len(records) >= 2, timeout=90), service.log_tail()
    assert service.terminate() == 0
    out.close()
    keys_topic = f"{topic}.{service.group}.nbstream-state-keys"
    name = next(r.key for r in read_all(kafka_bootstrap, keys_topic, committed_only=True) if r.value is not None)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    producer.send(keys_topic, key=name, value=b"NBKY\x01junk", partition=0).get(timeout=30)
    producer.close()
    service.start()
    assert service.process.wait(timeout=120) == 2
    log = service.log.read_text()
    assert "the keys of a partition's state do not restore" in log and "Traceback" not in log, log[-3000:]


def _ask_key(port: int, texts: list[str], **parameters) -> tuple[int, dict]:
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}],
            "parameters": {"timeout_ms": 20_000, **parameters}}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/main/infer", json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _settled(port: int, messages: int) -> bool:
    try:
        status, answer = _ask_key(port, ["hi"])
    except OSError:
        return False
    return status == 200 and sum(answer["parameters"]["position"].values()) == messages


def test_the_inference_api_answers_a_key_by_its_committed_model_on_the_replica_that_owns_it(
        kafka_bootstrap, kafka_client, tmp_path, started):
    rows, X, labels, users = sms_by_user(600)
    topic = new_topic(kafka_bootstrap, "keyed-asked", partitions=2)
    values = [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows]
    send_keyed(kafka_bootstrap, topic, values, [u.encode() for u in users])
    ports = [free_port(), free_port()]
    replicas = [started(kafka_bootstrap, topic, tmp_path, *KEYED, "--http-port", port, client=kafka_client,
                        instance=f"asked-{i}", name=f"asked-{i}") for i, port in enumerate(ports)]
    assert wait_for(lambda: all(_settled(port, 600) for port in ports), timeout=180), replicas[0].log_tail()
    asked = ["free prize call now to claim", "see you at lunch"]
    encoded = FeatureSpec.text("text").encoder().encode(pa.record_batch({"text": asked}), learn=False)[0]

    def alone(user: str) -> tuple[np.ndarray, list[str]]:
        mine = [i for i, u in enumerate(users) if u == user]
        fitted = MultinomialNB().fit(X[mine], labels[mine])
        return fitted.predict_proba(encoded), fitted.classes_.tolist()

    def split(user: str) -> list[tuple[int, dict]]:
        answers = [_ask_key(port, asked, key=user) for port in ports]
        statuses = sorted(status for status, _ in answers)
        assert statuses in ([200, 404], [200, 200]), answers  # (both, while one replica still owns both)
        assert all(answer["parameters"]["key_examples"] == users.count(user) for status, answer in answers
                   if status == 200), answers  # never a key's model taken for one never seen
        return answers

    assert wait_for(lambda: sorted(status for status, _ in split("user-3")) == [200, 404], timeout=120)
    for user in ("user-3", "user-8"):
        answers = split(user)
        assert sorted(status for status, _ in answers) == [200, 404], answers  # one replica owns its partition
        answer = next(a for status, a in answers if status == 200)
        assert answer["parameters"]["key"] == user
        assert answer["parameters"]["key_examples"] == users.count(user)
        expected, classes = alone(user)
        served = next(o for o in answer["outputs"] if o["name"] == "probabilities")
        order = [served["parameters"]["classes"].index(c) for c in classes]
        np.testing.assert_allclose(np.reshape(served["data"], (2, -1))[:, order], expected, rtol=1e-9)
        refused = next(a for status, a in answers if status == 404)
        assert "in none of the partitions this replica owns" in refused["error"]
    for key, words in ((7, "its keys are record keys, strings"), ("", "an empty key")):
        status, answer = _ask_key(ports[0], asked, key=key)
        assert status == 400 and words in answer["error"], answer

    # one replica left owns every partition: it reads the other's keys back and knows an unseen key
    assert replicas[1].terminate() == 0
    seen: list[tuple[str, int, object]] = []  # every answer while the partition moves: never a wrong one

    def answered_by_both() -> bool:
        answers = {user: _ask_key(ports[0], asked, key=user) for user in ("user-3", "user-8")}
        seen.extend((user, status, answer.get("parameters", {}).get("key_examples", answer.get("error")))
                    for user, (status, answer) in answers.items())
        return all(status == 200 for status, _ in answers.values())

    assert wait_for(answered_by_both, timeout=120), replicas[0].log_tail()
    assert all(status == 404 or examples == users.count(user) for user, status, examples in seen), seen
    for user in ("user-3", "user-8"):
        status, answer = _ask_key(ports[0], asked, key=user)
        served = next(o for o in answer["outputs"] if o["name"] == "probabilities")
        expected, classes = alone(user)
        order = [served["parameters"]["classes"].index(c) for c in classes]
        np.testing.assert_allclose(np.reshape(served["data"], (2, -1))[:, order], expected, rtol=1e-9,
                                   err_msg=f"{answer['parameters']} {replicas[0].log_tail()}")
    status, unseen = _ask_key(ports[0], asked, key="nobody")
    status_group, group = _ask_key(ports[0], asked)
    assert status == status_group == 200 and unseen["parameters"]["key_examples"] == 0
    assert unseen["outputs"][1]["data"] == pytest.approx(group["outputs"][1]["data"], rel=1e-12)


def test_keys_beyond_max_keys_leave_memory_and_come_back_exactly_through_a_kill_9(kafka_bootstrap, kafka_client,
                                                                                  tmp_path, started):
    rows, X, labels, users = sms_by_user(1_200)
    topic = new_topic(kafka_bootstrap, "keyed-bounded", partitions=2)
    values = [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows]
    send_keyed(kafka_bootstrap, topic, values[:600], [u.encode() for u in users[:600]])
    port = free_port()
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED, "--max-keys", "6", "--metrics-port", port,
                      client=kafka_client)
    watcher = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    assert watcher.wait_until(lambda records: len(records) >= 600, timeout=180), service.log_tail()
    assert wait_for(lambda: metric_values(port).get('nbstream_keys{state="evicted"}', 0) > 0, timeout=30)
    held = metric_values(port)
    assert held['nbstream_keys{state="in_memory"}'] <= 6 + 40  # the bound, and the keys of the poll since
    service.kill()
    send_keyed(kafka_bootstrap, topic, values[600:], [u.encode() for u in users[600:]])
    service.start()
    assert watcher.wait_until(lambda records: len(records) >= 1_200, timeout=180), service.log_tail()
    assert service.terminate() == 0
    watcher.close()
    predictions = [json.loads(r.value) for r in watcher.records]
    assert len(predictions) == 1_200  # exactly once: none lost, none twice
    inputs = read_all(kafka_bootstrap, topic, expected=1_200)
    position = {row["id"]: i for i, row in enumerate(rows)}
    offsets = {(r.partition, r.offset): position[json.loads(r.value)["id"]] for r in inputs}
    assert offline_check(predictions, rows, X, labels, users, offsets) > 800  # every key exact, read back or not

