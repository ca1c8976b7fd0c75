"""A partition's pending examples through a real broker: written by chunk in transactions by the
state step of `worker serve`, then read back by a replica that takes the partition over, from a
state topic read from its beginning, and again once the broker has compacted it."""

from __future__ import annotations

import time
import uuid

import numpy as np

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.kafka import read_all
from tests.unit.worker.service.pending.test_codec import mnist_like
from tests.unit.worker.service.test_pending_state import assert_same_store, serve
from worker.io.kafka.client import KafkaClient
from worker.io.kafka.connect import connect
from worker.io.kafka.settings import KafkaSettings
from worker.io.kafka.state_topic import CHUNK_BYTES, TOPIC_CONFIG
from worker.service.commit import StateWriter, TransactionalProducer
from worker.service.follower import StateFollower
from worker.service.group_state import GroupState, PartitionSettings
from worker.service.partition.partition import Partition
from worker.service.pending.join import LabelsConfig

# The broker's cleaner compacts what is older than the active segment: roll it fast, clean it soon.
QUICK_COMPACTION = {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
                    "delete.retention.ms": "1000"}
DROPPED = b"partition-0/pending/examples/0"


def replica(client: KafkaClient, topic: str) -> GroupState:
    """A replica's view of the group's states, read from the topic's beginning."""
    fresh = nbstream.MultinomialNB
    follower = StateFollower(client.reader(read_committed=True), topic,
                             reopen=lambda: client.reader(read_committed=True))
    return GroupState(fresh, FeatureSpec.vector("features").encoder(), follower,
                      settings=PartitionSettings(labels=LabelsConfig("labels", max_pending=10_000)))


def taken_over(client: KafkaClient, topic: str) -> Partition:
    group = replica(client, topic)
    try:
        group.assign([0], {}, wait_s=0, strict=True)
        return group.owned[0]
    finally:
        group.follower.reader.close()


def test_pending_examples_are_read_back_from_the_topic_read_afresh_and_compacted(kafka_bootstrap, kafka_client):
    client = connect(KafkaSettings(kafka_bootstrap, client=kafka_client))
    topic = f"pending-state-{uuid.uuid4().hex[:8]}"
    admin = client.admin()
    admin.create_topic(topic, 1, TOPIC_CONFIG | QUICK_COMPACTION)
    admin.close()
    producer = TransactionalProducer(client.producer(transactional_id=f"pending-state-{uuid.uuid4().hex[:8]}"))
    producer.init_transactions(30)
    owner = replica(client, topic)
    owner.assign([0], {}, wait_s=0, strict=True)
    state = owner.owned[0]
    writer = StateWriter(owner, producer, topic, "label", flush_timeout_s=30)

    def commit(next_offset: int) -> None:
        state.advance(next_offset)
        writer.write()
        producer.commit_transaction(30)

    try:
        noise = np.random.default_rng(5).integers(0, 256, (1_000, 784), dtype=np.uint8)  # 784 kB: 2 pieces
        serve(state.pending, noise, 0, 1_000)
        commit(1_000)
        serve(state.pending, mnist_like(500), 1_000, 500)
        commit(1_500)
        state.pending.add_labels(list(range(1_000)), np.zeros(1_000), 1_500)  # the first chunk is dropped
        serve(state.pending, mnist_like(200, seed=1), 1_500, 200)
        commit(1_700)

        written = read_all(kafka_bootstrap, topic, committed_only=True)
        assert max(len(record.value or b"") for record in written) <= CHUNK_BYTES
        assert any(record.key.startswith(DROPPED + b"#") and record.value is None for record in written)
        from_scratch = taken_over(client, topic)
        assert from_scratch.next_offset == 1_700
        assert_same_store(from_scratch.pending, state.pending)

        time.sleep(0.5)  # then one more commit rolls the segment, and the records before it can be compacted
        commit(1_701)
        deadline = time.monotonic() + 90
        while any(record.key.startswith(DROPPED) and record.value is not None for record in written):
            assert time.monotonic() < deadline, "the state topic was not compacted within 90 s"
            time.sleep(1)
            written = read_all(kafka_bootstrap, topic, committed_only=True)
        compacted = taken_over(client, topic)
        assert compacted.next_offset == 1_701
        assert_same_store(compacted.pending, state.pending)
    finally:
        owner.follower.reader.close()
        producer.close()
