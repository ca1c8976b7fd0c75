"""Real Apache Kafka brokers for the tests, and small helpers around them.

The session's broker comes from, in order: NBSTREAM_KAFKA_BOOTSTRAP; testcontainers' Kafka
module when a Docker engine answers; else scripts/kafka_broker.py (Apache Kafka jars from
Maven Central, KRaft, Java 17, 127.0.0.1). Tests that kill the broker or need TLS and SASL
listeners get a broker of their own from the same launcher. In CI (CI set) a broker that
cannot start fails the run.

The helpers read and write with kafka-python directly, as an independent client: they check
what the worker did, whatever client the worker used.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from .paths import script

CLIENTS = ["kafka-python", "confluent"]


def local_broker(workdir: Path, **listeners):
    """A started broker of our own (see scripts/kafka_broker.py); ``stop()`` it when done."""
    return script("kafka_broker").Broker(Path(workdir), **listeners).start()


def oauth_audience() -> str:
    """The aud claim a broker's OAUTHBEARER listener expects of a token (see scripts/kafka_broker.py)."""
    return script("kafka_broker").OAUTH_AUDIENCE


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # no client library, no socket, no engine: all mean "no Docker"
        return False


@contextmanager
def kafka_broker(workdir: Path):
    """Yield a bootstrap address for the session's broker."""
    configured = os.environ.get("NBSTREAM_KAFKA_BOOTSTRAP")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    broker = local_broker(workdir)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def new_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> str:
    """A topic with a unique name (one broker serves the whole session)."""
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config or {})])
    admin.close()
    return topic


def send(bootstrap: str, topic: str, values: list, partition_of=None, first_key: int = 0) -> None:
    """Each value (bytes, or None for a tombstone) as one message keyed by its number; every send confirmed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=16 << 20)
    futures = [producer.send(topic, value=value, key=str(first_key + i).encode(),
                             partition=None if partition_of is None else partition_of(i))
               for i, value in enumerate(values)]
    producer.flush()
    for future in futures:
        future.get(timeout=30)
    producer.close()


def read_all(bootstrap: str, topic: str, expected: int | None = None, timeout: float = 60.0,
             committed_only: bool = False) -> list:
    """Every record of a topic from the start (until ``expected`` records, or the end)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             isolation_level="read_committed" if committed_only else "read_uncommitted")
    records, deadline = [], time.monotonic() + timeout
    while not consumer.partitions_for_topic(topic):  # the service may not have created it yet
        if time.monotonic() > deadline:
            consumer.close()
            return records
        time.sleep(0.2)
        consumer.topics()  # refresh the metadata
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    while time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
        if expected is None:
            ends = consumer.end_offsets(partitions)
            if all(consumer.position(p) >= ends[p] for p in partitions):
                break
        elif len(records) >= expected:
            break
    consumer.close()
    return records


def json_message(features=None, label=None, **fields) -> bytes:
    message = dict(fields)
    if features is not None:
        message["features"] = features
    if label is not None:
        message["label"] = label
    return json.dumps(message).encode()


class TopicWatcher:
    """Reads a topic from the start, keeping every record seen so far (for polling in tests)."""

    def __init__(self, bootstrap: str, topic: str, committed_only: bool = False):
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                      isolation_level="read_committed" if committed_only else "read_uncommitted")
        self.topic = topic
        self.records: list = []

    def _assign(self) -> bool:
        if self.consumer.assignment():
            return True
        partitions = self.consumer.partitions_for_topic(self.topic)
        if not partitions:
            self.consumer.topics()  # refresh the metadata; the topic may not exist yet
            return False
        assigned = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(assigned)
        self.consumer.seek_to_beginning(*assigned)
        return True

    def wait_until(self, condition, timeout: float = 90.0) -> bool:
        """Poll until condition(records) holds; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._assign():
                for batch in self.consumer.poll(timeout_ms=200).values():
                    self.records.extend(batch)
            else:
                time.sleep(0.2)
            if condition(self.records):
                return True
        return False

    def close(self) -> None:
        self.consumer.close()
