"""Labels that come later on a topic of their own, on the real broker with both clients: each label
learned once through kill -9 and a rebalance that moves pending examples between replicas, one
prediction per input offset, and a labels topic that cannot be read beside the input refused."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from kafka import KafkaProducer

import nbstream
from tests.helpers.cli import run_worker
from tests.helpers.kafka import json_message, new_topic, read_all, send
from tests.helpers.service import (
    Service,
    assert_equal_statistics,
    free_port,
    labeled_messages,
    metric_values,
    wait_for,
)
from tests.integration.test_faults import SteadyProducer, committed_predictions, export

pytestmark = pytest.mark.faults

PARTITIONS = 2


def unlabeled_and_labels(n: int, rng) -> tuple[list[bytes], list[bytes], np.ndarray, np.ndarray]:
    """n messages without their label and n label events, message i and its label in partition i % 2;
    and the features and labels of each."""
    _, X, labels = labeled_messages(n, rng)
    messages = [json_message(features=row, id=f"m{i}") for i, row in enumerate(X.tolist())]
    events = [json_message(id=f"m{i}", label=str(label)) for i, label in enumerate(labels)]
    return messages, events, X, labels


def send_some(bootstrap: str, topic: str, values: list[bytes], ids) -> None:
    """values[i] for each i of ids, each to partition i % 2."""
    chosen = list(ids)
    send(bootstrap, topic, [values[i] for i in chosen], partition_of=lambda j: chosen[j] % PARTITIONS)


def test_each_label_is_learned_once_through_kill_9_and_a_rebalance_that_moves_pending_examples(
        kafka_bootstrap, kafka_client, tmp_path):
    n = 1_200
    topic = new_topic(kafka_bootstrap, "delayed", partitions=PARTITIONS)
    labels_topic = new_topic(kafka_bootstrap, "delayed-labels", partitions=PARTITIONS)
    messages, events, X, labels = unlabeled_and_labels(n, np.random.default_rng(23))
    labeled_ids = [i for i in range(n) if i % 5 != 4]  # a fifth never gets its label

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, "--session-timeout", "6",
                       client=kafka_client, instance=name, name=name)

    a = replica("a").start()
    b = replica("b")
    try:
        send_some(kafka_bootstrap, labels_topic, events, labeled_ids[:150])  # labels before their messages
        send_some(kafka_bootstrap, topic, messages, range(600))
        send_some(kafka_bootstrap, labels_topic, events, labeled_ids[150:300])
        assert wait_for(lambda: a.checkpoints() > 0, timeout=120), a.log_tail()
        time.sleep(2)
        a.kill()  # mid-stream: whatever it did since its last commit is redone once
        b.start()  # takes both partitions, pending examples included, after a's session times out
        send_some(kafka_bootstrap, topic, messages, range(600, n))
        send_some(kafka_bootstrap, labels_topic, events, [i for i in labeled_ids[300:] if i < 900])
        time.sleep(8)
        a.start()  # back: the group splits the partitions again, and their pending examples move
        send_some(kafka_bootstrap, labels_topic, events, [i for i in labeled_ids[300:] if i >= 900])
        seen = committed_predictions(kafka_bootstrap, a.output, n, timeout=240)
        assert sorted(seen) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(n)), \
            a.log_tail() + b.log_tail()  # one prediction per input offset
        assert wait_for(lambda: export_count(kafka_bootstrap, kafka_client, a, tmp_path) == len(labeled_ids),
                        timeout=120, every=3), a.log_tail() + b.log_tail()
        for r in (a, b):
            assert r.terminate() == 0, r.log_tail()
        model = export(kafka_bootstrap, kafka_client, topic, a.group, tmp_path / "group.nbs")
        assert_equal_statistics(model, X[labeled_ids], labels[labeled_ids])  # exactly the pairs that met
    finally:
        for r in (a, b):
            if r.running():
                r.kill()


def export_count(bootstrap, client, service: Service, tmp_path) -> int:
    """The examples the group's committed states hold, as `worker export` reads them (0 before the
    group has committed any)."""
    out = tmp_path / "probe.nbs"
    result = run_worker("export", "--bootstrap", bootstrap, "--kafka-client", client, "--input", service.topic,
                        "--group", service.group, "--out", out, timeout=120)
    return int(nbstream.load(out).n_examples_seen_) if result.returncode == 0 else 0


def test_pending_examples_and_label_outcomes_are_in_the_metrics(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "delayed-metrics", partitions=PARTITIONS)
    labels_topic = new_topic(kafka_bootstrap, "delayed-metrics-labels", partitions=PARTITIONS)
    messages, events, _, _ = unlabeled_and_labels(40, np.random.default_rng(4))
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, "--metrics-port", port,
                      client=kafka_client).start()
    try:
        send_some(kafka_bootstrap, topic, messages, range(40))
        send_some(kafka_bootstrap, labels_topic, events, range(30))
        send_some(kafka_bootstrap, labels_topic, events, range(5))  # each a second time: duplicates
        assert wait_for(lambda: metric_values(port).get("nbstream_labels_joined_total") == 30
                        and metric_values(port).get("nbstream_labels_duplicate_total") == 5, timeout=120), \
            service.log_tail()
        values = metric_values(port)
        assert values["nbstream_pending_examples"] == 10
        assert values["nbstream_label_delay_seconds_count"] == 30
        assert service.terminate() == 0, service.log_tail()
    finally:
        if service.running():
            service.kill()


def test_a_labels_topic_with_another_partition_count_is_refused_in_one_line(kafka_bootstrap, kafka_client,
                                                                             tmp_path):
    topic = new_topic(kafka_bootstrap, "delayed-mismatch", partitions=2)
    labels_topic = new_topic(kafka_bootstrap, "delayed-mismatch-labels", partitions=3)
    result = run_worker("serve", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client, "--input", topic,
                        "--output", f"{topic}.out", "--group", "g", "--labels-topic", labels_topic, timeout=120)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if " INFO " not in line and line.strip()]
    assert len(errors) == 1 and "has 3 partitions and" in errors[0] and "Traceback" not in result.stderr, errors


def test_worker_produce_sends_labels_apart_and_serve_learns_every_row_once(kafka_bootstrap, kafka_client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 400
    _, X, labels = labeled_messages(n, np.random.default_rng(31))
    data = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"pixels": X.tolist(), "y": labels.tolist(), "key": [f"r{i}" for i in range(n)]}), data)
    topic = new_topic(kafka_bootstrap, "produced", partitions=PARTITIONS)
    labels_topic = f"{topic}.labels"  # missing: produce makes it with the topic's partitions
    produced = run_worker("produce", data, "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client,
                          "--topic", topic, "--features", "pixels", "--label", "y", "--id", "key",
                          "--labels-topic", labels_topic, "--label-delay", "50", timeout=120)
    assert produced.returncode == 0, produced.stderr
    assert f"sent {n} messages to {topic} and {n} labels to {labels_topic}" in produced.stdout
    service = Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, client=kafka_client).start()
    try:
        assert wait_for(lambda: export_count(kafka_bootstrap, kafka_client, service, tmp_path) == n, timeout=120,
                        every=3), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        assert_equal_statistics(export(kafka_bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs"),
                                X, labels)
    finally:
        if service.running():
            service.kill()


def test_pending_examples_larger_than_a_state_record_are_written_in_pieces_and_learned(kafka_bootstrap, kafka_client,
                                                                                        tmp_path):
    """3,000 MNIST-sized rows of noise: each commit writes megabytes of pending chunks, in pieces the
    state topic takes (a batch of them above its record limit would be refused whole)."""
    n, rng = 3_000, np.random.default_rng(12)
    X = rng.integers(0, 256, size=(n, 784))
    labels = np.array(["a", "b"])[rng.integers(0, 2, size=n)]
    topic = new_topic(kafka_bootstrap, "delayed-large", partitions=1)
    labels_topic = new_topic(kafka_bootstrap, "delayed-large-labels", partitions=1)
    send(kafka_bootstrap, topic, [json_message(features=row, id=i) for i, row in enumerate(X.tolist())])
    service = Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, "--checkpoint-every", "5000",
                      client=kafka_client).start()
    try:
        assert len(committed_predictions(kafka_bootstrap, service.output, n, timeout=180)) == n, service.log_tail()
        send(kafka_bootstrap, labels_topic, [json_message(id=i, label=str(label)) for i, label in enumerate(labels)])
        assert wait_for(lambda: export_count(kafka_bootstrap, kafka_client, service, tmp_path) == n, timeout=180,
                        every=3), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        assert "Kafka failed" not in service.log.read_text(), service.log_tail()
        assert_equal_statistics(export(kafka_bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs"),
                                X, labels)
    finally:
        if service.running():
            service.kill()


def send_at(bootstrap: str, topic: str, values: list[bytes], timestamp_ms: int) -> None:
    """Each value to partition 0 with this event time; every send confirmed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = [producer.send(topic, value=value, partition=0, timestamp_ms=timestamp_ms) for value in values]
    producer.flush()
    for future in futures:
        future.get(timeout=30)
    producer.close()


def test_the_ttl_and_max_pending_drop_what_they_must_and_an_unmatched_label_is_a_dead_letter(
        kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "delayed-ttl")
    labels_topic = new_topic(kafka_bootstrap, "delayed-ttl-labels")
    messages, events, X, labels = unlabeled_and_labels(11, np.random.default_rng(6))
    hour = 3_600_000
    port, start = free_port(), int(time.time() * 1000) - 240 * hour  # in the past: the clock stops an hour ahead
    service = Service(kafka_bootstrap, topic, tmp_path, "--labels-topic", labels_topic, "--label-ttl", "1h",
                      "--max-pending", 3, "--dlq-unmatched-labels", "--metrics-port", port,
                      client=kafka_client).start()

    def reaches(name, value):
        assert wait_for(lambda: metric_values(port).get(name) == value, timeout=90), (name, service.log_tail())

    try:
        send_at(kafka_bootstrap, topic, messages[:3], start)  # m0, m1, m2
        send_at(kafka_bootstrap, labels_topic, [json_message(id="x9", label="a")], start)  # no such message
        reaches("nbstream_pending_examples", 3)
        send_at(kafka_bootstrap, topic, messages[3:4], start + 2 * hour)  # the clock passes the TTL of all four
        reaches("nbstream_pending_expired_total", 3)
        reaches("nbstream_labels_unmatched_total", 1)
        send_at(kafka_bootstrap, labels_topic, events[:1], start + 2 * hour)  # m0's, too late: it waits
        send_at(kafka_bootstrap, topic, messages[4:9], start + 2 * hour)  # m4 .. m8: m3, m4, m5 give way
        reaches("nbstream_pending_evicted_total", 3)
        send_at(kafka_bootstrap, labels_topic, events[6:9], start + 2 * hour)
        reaches("nbstream_labels_joined_total", 3)
        [letter] = read_all(kafka_bootstrap, f"{topic}.dlq", expected=1, committed_only=True)
        headers = dict(letter.headers)
        assert json.loads(letter.value) == {"id": "x9", "label": "a"}
        assert headers["__connect.errors.exception.class.name"] == b"nbstream.unmatched_label"
        assert headers["source.topic"] == labels_topic.encode() and headers["source.offset"] == b"0"
        assert service.terminate() == 0, service.log_tail()
        model = export(kafka_bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs")
        assert_equal_statistics(model, X[6:9], labels[6:9])
    finally:
        if service.running():
            service.kill()


def test_a_broker_killed_while_labels_come_loses_no_label_and_learns_none_twice(own_broker, kafka_client, tmp_path):
    bootstrap = own_broker.bootstrap
    n = 1_000
    topic = new_topic(bootstrap, "delayed-broker", partitions=PARTITIONS)
    labels_topic = new_topic(bootstrap, "delayed-broker-labels", partitions=PARTITIONS)
    messages, events, X, labels = unlabeled_and_labels(n, np.random.default_rng(8))
    send_some(bootstrap, topic, messages, range(n))
    service = Service(bootstrap, topic, tmp_path, "--labels-topic", labels_topic, client=kafka_client).start()
    producer = SteadyProducer(bootstrap, labels_topic, events, rate=80, partitions=PARTITIONS)
    try:
        assert len(committed_predictions(bootstrap, service.output, n)) == n, service.log_tail()
        producer.start()
        time.sleep(4)
        own_broker.kill()
        time.sleep(10)
        assert service.running(), service.log_tail()
        own_broker.restart()
        producer.join(timeout=300)
        assert producer.error is None, producer.error
        assert wait_for(lambda: export_count(bootstrap, kafka_client, service, tmp_path) == n, timeout=180,
                        every=3), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        assert_equal_statistics(export(bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs"), X, labels)
    finally:
        if own_broker.pid is None:
            own_broker.restart()
        if service.running():
            service.kill()
