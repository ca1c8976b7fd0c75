"""A Kafka topic as a source of records, positioned by the snapshot's offsets.

Offsets are never committed automatically. On every partition assignment the consumer seeks
to the offset the state holds for that partition (the snapshot is the source of truth);
a partition the state has never seen starts at the earliest or latest offset (--start).
With a stable instance id (static group membership) a restarted worker takes its
partitions back at once instead of waiting for the group to evict the old process.
Offsets only move forward: a record below the position already processed is skipped.
"""

from __future__ import annotations

import logging

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener

log = logging.getLogger(__name__)


class _SeekToState(ConsumerRebalanceListener):
    def __init__(self, source: "KafkaSource"):
        self.source = source

    def on_partitions_revoked(self, revoked):
        self.source.assigned -= set(revoked)

    def on_partitions_assigned(self, assigned):
        consumer = self.source.consumer
        for partition in assigned:
            offset = self.source.positions.get(partition)
            if offset is not None:
                consumer.seek(partition, offset)
            elif self.source.start == "earliest":
                consumer.seek_to_beginning(partition)
            else:
                consumer.seek_to_end(partition)
        self.source.assigned |= set(assigned)
        log.info("assigned %s", sorted((p.topic, p.partition) for p in assigned))


class KafkaSource:
    def __init__(self, bootstrap: str, topic: str, group: str, positions: dict[TopicPartition, int],
                 start: str = "earliest", max_poll_records: int = 2000, instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, **settings):
        self.positions = dict(positions)  # next offset to process, per partition
        self.start = start
        self.assigned: set[TopicPartition] = set()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                      auto_offset_reset=start, max_poll_records=max_poll_records,
                                      fetch_max_bytes=64 * 1024 * 1024, group_instance_id=instance_id,
                                      session_timeout_ms=session_timeout_ms,
                                      heartbeat_interval_ms=max(1_000, session_timeout_ms // 4), **settings)
        self.consumer.subscribe([topic], listener=_SeekToState(self))

    def poll(self, timeout_ms: int) -> list:
        """Records in partition order, none twice; positions advance past each one."""
        fresh = []
        for partition, records in self.consumer.poll(timeout_ms=timeout_ms).items():
            floor = self.positions.get(partition, -1)
            for record in records:
                if record.offset >= floor:
                    fresh.append(record)
            if records:
                self.positions[partition] = max(floor, records[-1].offset + 1)
        return fresh

    def acknowledge(self) -> None:
        """Commit to the group how far the state goes (for lag monitoring; the snapshot decides)."""
        owned = {p: OffsetAndMetadata(o, "", -1) for p, o in self.positions.items() if p in self.assigned}
        if owned:
            self.consumer.commit(owned)

    def close(self) -> None:
        self.consumer.close(autocommit=False)
