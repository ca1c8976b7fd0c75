"""The Kafka side of `worker serve`'s checkpoint: the three steps of ``Checkpointer.commit`` on topics.

``ServeCheckpoint`` is the one place serve commits; the order of the steps is the Checkpointer's:

  1. outputs: the sink flushes the predictions and dead letters sent since the last commit
     (inside the open transaction under exactly-once) and confirms every delivery
  2. state: every partition state changed since its last write (and, once, the group's base
     state; and the group's choice of its served model after a promotion) becomes records of the
     state topic, flushed; a partition's pending examples, when the service keeps them, are
     written around it (``pending/records.py``): the chunks made since the last commit before
     it, tombstones for those dropped after it; its keys that changed (--model-key) go to the
     keys topic before it (``keys/records.py``)
  3. upstream: under exactly-once, the owned partitions' next offsets join the transaction with
     this member's group metadata (KIP-447: a fenced zombie cannot commit), then predictions,
     dead letters, states and offsets commit together; under at-least-once the consumer
     commits the offsets (none yet: nothing to do)

A new group's base state (--init-model, a snapshot folder) is written by a commit like any
other, before the group is joined, so no transaction is opened outside these steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..checkpoint import Checkpointer, CheckpointPolicy, Output
from ..io.kafka.client import Consumer, Producer
from ..io.kafka.state_topic import Record, write_records
from ..io.records import Header
from .follower import BASE, state_name
from .group_state import GroupState
from .keys.records import PartitionKeys
from .models.choice import SERVED_MODEL
from .partition.record import PartitionRecord
from .pending.records import PendingWrite


@dataclass(frozen=True)
class StateTopics:
    """Where a group's state goes: its state topic, and its keys topic (None: it keeps no model per key)."""
    states: str
    keys: str | None = None


class ServeCheckpoint:
    """producer : the session's producer (a TransactionalProducer under exactly-once);
    step_timeout_s : the longest one step may wait for Kafka."""

    def __init__(self, policy: CheckpointPolicy, producer: Producer, consumer: Consumer, group: GroupState,
                 sink: Output, topics: StateTopics, label_field: str, step_timeout_s: float):
        self.state = StateWriter(group, producer, topics.states, label_field, step_timeout_s, topics.keys)
        upstream = TransactionCommit(producer, consumer, group, step_timeout_s) \
            if isinstance(producer, TransactionalProducer) else OffsetCommit(consumer, group)
        self.checkpointer = Checkpointer(policy, outputs=[sink], state=self.state, upstream=upstream)

    def due(self, rows: int) -> bool:
        """Count rows just processed; True when a commit is due."""
        return self.checkpointer.policy.record(rows)

    def commit(self) -> bool:
        """Flush the outputs, write the changed states, acknowledge upstream; True if state was written."""
        return self.checkpointer.commit()

    def start_group_from(self, base: PartitionRecord) -> None:
        """Make ``base`` the group's starting model: written and committed at once, with no offsets."""
        self.state.start_from(base)
        self.commit()

    @property
    def last_bytes(self) -> int:
        """Compressed state bytes the last commit wrote."""
        return self.state.last_bytes


class StateWriter:
    """The checkpoint's state step: every owned partition state changed since its last write,
    as records of the state topic (inside the open transaction, under exactly-once).

    label_field : the message field labels come from, recorded with each state.
    keys_topic : where the partitions' keys go (--model-key), each to its partition's partition
        there, before its state (None: the group keeps no model per key).
    base : the group's starting model, when it is still to be written (once, before any partition state).
    """

    def __init__(self, group: GroupState, producer: Producer, topic: str, label_field: str,
                 flush_timeout_s: float = 60.0, keys_topic: str | None = None):
        self.group, self.producer, self.topic, self.label_field = group, producer, topic, label_field
        self.keys_topic = keys_topic
        self.flush_timeout_s = flush_timeout_s
        self.base: PartitionRecord | None = None
        self.last_bytes = 0  # compressed state bytes written by the last checkpoint

    def start_from(self, base: PartitionRecord) -> None:
        """Write ``base`` as the group's starting model at the next commit, before any partition state."""
        self.base = base

    def write(self) -> bool:
        changed = {state_name(p): partition for p, partition in self.group.owned.items() if partition.changed}
        choice = self.group.choice.to_write()
        if not changed and self.base is None and choice is None:
            return False
        self.last_bytes = 0
        if self.base is not None:
            self._write(BASE, self.base, PendingWrite())
        if choice is not None:
            self._write_payload(SERVED_MODEL, choice.to_payload())
        for name, partition in changed.items():
            self._write_keys(partition.number, partition.key_records(name), partition.keys)
            self._write(name, *partition.snapshot(name))
        self.producer.flush(self.flush_timeout_s)
        if self.base is not None:
            self.group.start_from(self.base)
            self.base = None
        if choice is not None:
            self.group.choice.written(choice)
        return True

    def _write(self, name: str, record: PartitionRecord, pending: PendingWrite) -> None:
        """The records of one state: its pending examples' new chunks, its pieces, then tombstones."""
        payload = record.to_payload(record.encoder or self.group.global_model.group_encoder, self.label_field)
        self._write_payload(name, payload, pending)

    def _write_keys(self, partition: int, records: list[Record], keys: PartitionKeys | None) -> None:
        """A partition's keys that changed, to its partition of the keys topic (each record's offset
        told to ``keys`` when it keeps track of where they are: --max-keys)."""
        if not records:
            return
        assert self.keys_topic is not None and keys is not None, "a partition keeps keys only in a keyed group"
        for key, value in records:
            self.producer.send(self.keys_topic, value, key=key, partition=partition,
                               delivered=None if value is None else keys.delivery(key))
            self.last_bytes += len(value or b"")

    def _write_payload(self, name: str, payload: bytes, pending: PendingWrite | None = None) -> None:
        pending = pending or PendingWrite()
        write = write_records(name, payload, replaced=self.group.written(name))
        for key, value in pending.before + write.records + pending.after:
            self.producer.send(self.topic, value, key=key)
        self.group.wrote(name, write.chunk_keys)
        self.last_bytes += write.payload_bytes + pending.payload_bytes


class TransactionCommit:
    """The checkpoint's upstream step under exactly-once: the owned partitions' offsets (of the
    input, and of the labels topic when one is read) join the open transaction with this member's
    group metadata (so a fenced zombie cannot commit), then predictions, dead letters, states and
    offsets commit together."""

    def __init__(self, producer: TransactionalProducer, consumer: Consumer, group: GroupState,
                 timeout_s: float = 60.0):
        self.producer, self.consumer, self.group, self.timeout_s = producer, consumer, group, timeout_s

    def acknowledge(self) -> None:
        consumer = self.consumer
        for topic, offsets in ((consumer.topic, self.group.offsets()),
                               (consumer.labels_topic, self.group.label_offsets())):
            if topic is not None and offsets:
                self.producer.send_offsets(topic, offsets, consumer.group_metadata(), self.timeout_s)
        self.producer.commit_transaction(self.timeout_s)


class OffsetCommit:
    """The checkpoint's upstream step under at-least-once: commit the owned partitions' offsets."""

    def __init__(self, consumer: Consumer, group: GroupState):
        self.consumer, self.group = consumer, group

    def acknowledge(self) -> None:
        self.consumer.commit(self.group.offsets(), self.group.label_offsets())


class TransactionalProducer(Producer):
    """A producer whose transaction begins with the first record sent after a commit."""

    def __init__(self, inner: Producer):
        self.inner = inner
        self.open = False

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, headers: list[Header] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             delivered: Callable[[int], None] | None = None) -> None:
        self.begin_transaction()
        self.inner.send(topic, value, key, headers, partition, timestamp_ms, delivered)

    def send_many(self, topic: str, values: list[bytes], keys: list[bytes | None],
                  headers: list[list[Header] | None] | None = None,
                  timestamps_ms: list[int | None] | None = None) -> None:
        self.begin_transaction()
        self.inner.send_many(topic, values, keys, headers, timestamps_ms)

    def flush(self, timeout_s: float) -> None:
        self.inner.flush(timeout_s)

    def init_transactions(self, timeout_s: float) -> None:
        self.inner.init_transactions(timeout_s)

    def begin_transaction(self) -> None:
        if not self.open:
            self.inner.begin_transaction()
            self.open = True

    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object, timeout_s: float) -> None:
        self.begin_transaction()
        self.inner.send_offsets(topic, offsets, group_metadata, timeout_s)

    def commit_transaction(self, timeout_s: float) -> None:
        if self.open:
            self.inner.commit_transaction(timeout_s)
            self.open = False

    def abort_transaction(self, timeout_s: float) -> None:
        if self.open:
            self.open = False
            self.inner.abort_transaction(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self.inner.close(timeout_s)
