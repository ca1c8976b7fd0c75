"""A real Apache Kafka broker for the tests, and small helpers around it.

The broker comes from, in order: NBSTREAM_KAFKA_BOOTSTRAP; testcontainers' Kafka module when
a Docker engine answers; else scripts/kafka_broker.py (Apache Kafka jars from Maven Central,
KRaft, Java 17, 127.0.0.1). In CI (CI set) a broker that cannot start fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from .paths import REPO


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
    script = REPO / "scripts" / "kafka_broker.py"
    started = subprocess.run([sys.executable, str(script), "start", "--dir", str(workdir)],
                             capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        raise RuntimeError(f"the local Kafka broker did not start:\n{started.stderr[-3000:]}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([sys.executable, str(script), "stop", "--dir", str(workdir)], timeout=60)


def new_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    """A topic with a unique name (one broker serves the whole session)."""
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    return topic


def send(bootstrap: str, topic: str, values: list[bytes], partition_of=None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i, value in enumerate(values):
        producer.send(topic, value=value, key=str(i).encode(),
                      partition=None if partition_of is None else partition_of(i))
    producer.flush()
    producer.close()


def read_all(bootstrap: str, topic: str, expected: int | None = None, timeout: float = 60.0) -> list:
    """Every record of a topic from the start (until ``expected`` records, or the end)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
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

    def __init__(self, bootstrap: str, topic: str):
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
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
