"""An in-memory Kafka cluster behind the client seam (worker/io/kafka/client.py); every call that
changes something, or reads records, is logged in the cluster's journal, in order.

Readers and consumers see what read_committed readers see: a record sent in a transaction
shows (with the offsets sent in it) when the transaction commits, and never if it aborts; a
record sent without one shows at once. Partitions are lists: a record's offset is its index.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from worker.io.kafka.client import (
    Admin,
    Consumer,
    ConsumerOptions,
    KafkaClient,
    KafkaFailure,
    Producer,
    Reader,
    TopicInfo,
)
from worker.io.kafka.settings import KafkaSettings
from worker.io.records import Polled, Record

from .fakes import Journal


def runs(entries: list[str]) -> list[str]:
    """The entries with each run of equal neighbours written once: ["a", "a", "b"] -> ["a", "b"]."""
    return [entry for i, entry in enumerate(entries) if i == 0 or entries[i - 1] != entry]


@dataclass
class FakeTopic:
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    log: dict[int, list[Record]] = field(init=False)  # partition -> its records, in offset order

    def __post_init__(self):
        self.log = {p: [] for p in range(self.partitions)}

    def end(self, partition: int) -> int:
        return len(self.log[partition])

    def values(self, partition: int = 0) -> list[bytes | None]:
        return [record.value for record in self.log[partition]]


@dataclass(frozen=True)
class GroupMetadata:
    group: str
    generation: int


class FakeKafka(KafkaClient):
    """The cluster and its client at once. ``answers = False`` makes every request that asks the
    broker something fail as an unreachable broker does."""

    def __init__(self):
        super().__init__(KafkaSettings("127.0.0.1:9"))
        self.journal = Journal()
        self.topics: dict[str, FakeTopic] = {}
        self.group_offsets: dict[str, dict[int, int]] = {}  # group -> committed next offsets
        self.consumers: list[FakeConsumer] = []
        self.producers: list[FakeProducer] = []
        self.reader_batch = 10_000  # the most records a reader's poll returns
        self.answers = True

    def create(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> FakeTopic:
        self.topics[name] = FakeTopic(partitions, dict(config or {}))
        return self.topics[name]

    def append(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int = 0,
               headers: list | None = None, timestamp_ms: int | None = None, delivered=None) -> None:
        log = self.topics[topic].log[partition]
        log.append(Record(topic, partition, len(log), key, value, headers or [], timestamp_ms or 0))
        if delivered is not None:
            delivered(len(log) - 1)

    def ask(self) -> None:
        """A request to the broker."""
        if not self.answers:
            raise KafkaFailure(f"no broker at {self.settings.bootstrap}")

    # ---- the client seam ---------------------------------------------------------------------
    def consumer(self, topic, group, options: ConsumerOptions = ConsumerOptions()) -> FakeConsumer:
        self.consumers.append(FakeConsumer(self, topic, group, options.labels_topic))
        return self.consumers[-1]

    def reader(self, *, read_committed=True) -> FakeReader:
        return FakeReader(self)

    def producer(self, *, transactional_id=None, transaction_timeout_s=60.0, linger_ms=20,
                 max_request_bytes=16 << 20, batch_bytes=1 << 20, delivery_timeout_s=120.0,
                 compression=None, report_offsets=False) -> FakeProducer:
        self.producers.append(FakeProducer(self, transactional_id))
        self.producers[-1].batch_bytes = batch_bytes
        return self.producers[-1]

    def admin(self) -> FakeAdmin:
        return FakeAdmin(self)


class FakeAdmin(Admin):
    def __init__(self, kafka: FakeKafka):
        self.kafka = kafka

    def topic(self, name: str) -> TopicInfo | None:
        topic = self.kafka.topics.get(name)
        if topic is None:
            return None
        return TopicInfo(topic.partitions, int(topic.config.get("max.message.bytes", 1_048_588)))

    def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        self.kafka.journal.append(f"admin.create_topic {name}")
        if name not in self.kafka.topics:
            self.kafka.create(name, partitions, config)

    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        self.kafka.ask()
        return {partition: self.kafka.topics[topic].end(partition) for partition in partitions}

    def start_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        self.kafka.ask()
        return dict.fromkeys(partitions, 0)

    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        self.kafka.ask()
        offsets = self.kafka.group_offsets.get(group, {})
        return {partition: offsets.get(partition) for partition in partitions}

    def close(self) -> None:
        self.kafka.journal.append("admin.close")


class FakeReader(Reader):
    """Reads one topic from its beginning, at most ``kafka.reader_batch`` records a poll."""

    def __init__(self, kafka: FakeKafka):
        self.kafka = kafka
        self.topic: FakeTopic | None = None
        self.positions: dict[int, int] = {}

    def assign(self, topic: str, timeout_s: float = 15.0, partitions: list[int] | None = None) -> list[int]:
        self.kafka.journal.append(f"reader.assign {topic}")
        if topic not in self.kafka.topics:
            raise KafkaFailure(f"the topic {topic} has no partitions")
        self.topic = self.kafka.topics[topic]
        self.positions = {p: 0 for p in range(self.topic.partitions) if partitions is None or p in partitions}
        return list(self.positions)

    def assign_at(self, topic: str, starts: dict[int, int]) -> None:
        self.kafka.journal.append(f"reader.assign_at {topic} {starts}")
        self.topic = self.kafka.topics[topic]
        self.positions = dict(starts)

    def poll(self, timeout_s: float, max_records: int = 10_000) -> list:
        room, read = min(max_records, self.kafka.reader_batch), []
        for partition, position in self.positions.items():
            records = self.topic.log[partition][position:position + room - len(read)]
            self.positions[partition] += len(records)
            read += records
        if read:
            self.kafka.journal.append(f"reader.poll {len(read)} records")
        return read

    def caught_up(self, *, cached: bool = False) -> bool:
        self.kafka.ask()
        return all(position == self.topic.end(p) for p, position in self.positions.items())

    def close(self) -> None:
        self.kafka.journal.append("reader.close")


class FakeConsumer(Consumer):
    """A member that is given every partition of its topic at its first poll. What later polls do
    before reading is queued with ``revoke`` and ``fail``, one event a poll."""

    def __init__(self, kafka: FakeKafka, topic: str, group: str, labels_topic: str | None = None):
        self.kafka, self.topic, self.group, self.labels_topic = kafka, topic, group, labels_topic
        self.handlers = None
        self.label_starts = None
        self.positions: dict[int, int] = {}  # owned partition -> next offset to return
        self.label_positions: dict[int, int] = {}  # the same on the labels topic
        self.labels = Polled.of(labels_topic or "", [])
        self.events: deque = deque()
        self.generation = 0

    def revoke(self, partitions: list[int]) -> None:
        """At the next poll, take these partitions back (after on_revoked returns)."""
        self.events.append(("revoke", partitions))

    def fail(self, failure: Exception) -> None:
        """At the next poll, raise ``failure``."""
        self.events.append(("fail", failure))

    def subscribe(self, on_assigned, on_revoked, on_lost, label_starts=None) -> None:
        self.kafka.journal.append("consumer.subscribe")
        self.handlers = on_assigned, on_revoked, on_lost
        self.label_starts = label_starts
        self.events.appendleft(("assign", list(range(self.kafka.topics[self.topic].partitions))))

    def poll(self, timeout_s: float, max_records: int) -> Polled:
        if self.events:
            self._happen(*self.events.popleft())
        topic, read = self.kafka.topics[self.topic], []
        for partition, position in self.positions.items():
            records = topic.log[partition][position:position + max_records - len(read)]
            self.positions[partition] += len(records)
            read += records
        if read:
            self.kafka.journal.append(f"consumer.poll {len(read)} records")
        if self.labels_topic is not None:
            self.labels = Polled.of(self.labels_topic, self._read(self.labels_topic, self.label_positions, max_records))
        return Polled.of(self.topic, read)

    def _read(self, name: str, positions: dict[int, int], max_records: int) -> list:
        topic, read = self.kafka.topics[name], []
        for partition, position in positions.items():
            records = topic.log[partition][position:position + max_records - len(read)]
            positions[partition] += len(records)
            read += records
        return read

    def polled_labels(self) -> Polled:
        return self.labels

    def _happen(self, kind: str, argument) -> None:
        on_assigned, on_revoked, _ = self.handlers
        if kind == "fail":
            self.kafka.journal.append(f"consumer.poll failed: {argument}")
            raise argument
        if kind == "assign":
            self.generation += 1
            self.kafka.journal.append(f"consumer.assigned {argument}")
            starts = on_assigned(argument)
            topic = self.kafka.topics[self.topic]
            for partition in argument:
                start = starts[partition]
                self.positions[partition] = 0 if start == "earliest" else topic.end(partition) \
                    if start == "latest" else start
            if self.labels_topic is not None:
                labels, label_starts = self.kafka.topics[self.labels_topic], self.label_starts(argument)
                for partition in argument:
                    start = label_starts[partition]
                    self.label_positions[partition] = 0 if start == "earliest" else labels.end(partition) \
                        if start == "latest" else start
        elif kind == "revoke":
            self.kafka.journal.append(f"consumer.revoke {argument}")
            on_revoked(argument)
            for partition in argument:
                self.positions.pop(partition, None)
                self.label_positions.pop(partition, None)
            self.kafka.journal.append(f"consumer.released {argument}")

    def assignment(self) -> set[int]:
        return set(self.positions)

    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        self.kafka.ask()
        offsets = self.kafka.group_offsets.get(self.group, {})
        return {partition: offsets.get(partition) for partition in partitions}

    def end_offsets(self, partitions: list[int], *, cached: bool = False) -> dict[int, int]:
        self.kafka.ask()
        return {partition: self.kafka.topics[self.topic].end(partition) for partition in partitions}

    def commit(self, offsets: dict[int, int], label_offsets: dict[int, int] | None = None) -> None:
        self.kafka.journal.append(f"consumer.commit {offsets}" + (f" labels {label_offsets}" if label_offsets else ""))
        self.kafka.group_offsets.setdefault(self.group, {}).update(offsets)
        if label_offsets:
            self.kafka.group_offsets.setdefault(f"{self.group} labels", {}).update(label_offsets)

    def group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self.group, self.generation)

    def close(self) -> None:
        """Leave the group; the partitions still owned are revoked first (as librdkafka does)."""
        self.kafka.journal.append("consumer.close")
        if self.positions:
            self._happen("revoke", sorted(self.positions))


class FakeProducer(Producer):
    """Transactional when made with a transactional id: then a record, or offsets, sent outside a
    transaction is a bug (as the real clients refuse it), raised as an AssertionError."""

    def __init__(self, kafka: FakeKafka, transactional_id: str | None):
        self.kafka, self.transactional_id = kafka, transactional_id
        self.batch_bytes = 1 << 20  # the largest record batch it may build
        self.in_transaction = False
        self.pending: list[tuple] = []  # (topic, value, key, partition, headers, timestamp) in the open transaction
        self.offsets: list[tuple[str, dict[int, int]]] = []  # (group, offsets) sent in the open transaction

    def _log(self, entry: str) -> None:
        self.kafka.journal.append(f"producer.{entry}")

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None, delivered=None) -> None:
        self._log(f"send {topic}")
        if self.transactional_id is None:
            self.kafka.append(topic, value, key, partition or 0, headers, timestamp_ms, delivered)
            return
        assert self.in_transaction, f"a record for {topic} sent outside a transaction"
        self.pending.append((topic, value, key, partition or 0, headers, timestamp_ms, delivered))

    def flush(self, timeout_s: float) -> None:
        self._log("flush")

    def init_transactions(self, timeout_s: float) -> None:
        self._log("init_transactions")
        assert self.transactional_id is not None, "init_transactions without a transactional id"

    def begin_transaction(self) -> None:
        self._log("begin_transaction")
        assert self.transactional_id is not None and not self.in_transaction, "a transaction begun twice"
        self.in_transaction = True

    def send_offsets(self, topic, offsets, group_metadata, timeout_s) -> None:
        self._log(f"send_offsets {topic} {offsets} {group_metadata}")
        assert self.in_transaction, "offsets sent outside a transaction"
        consumer = next((c for c in self.kafka.consumers if c.group == group_metadata.group), None)
        labels = consumer is not None and topic == consumer.labels_topic
        self.offsets.append((group_metadata.group + (" labels" if labels else ""), dict(offsets)))

    def commit_transaction(self, timeout_s: float) -> None:
        self._log("commit_transaction")
        assert self.in_transaction, "a commit without a transaction"
        for topic, value, key, partition, headers, timestamp_ms, delivered in self.pending:
            self.kafka.append(topic, value, key, partition, headers, timestamp_ms, delivered)
        for group, offsets in self.offsets:
            self.kafka.group_offsets.setdefault(group, {}).update(offsets)
        self._end()

    def abort_transaction(self, timeout_s: float) -> None:
        self._log("abort_transaction")
        self._end()

    def _end(self) -> None:
        self.pending, self.offsets, self.in_transaction = [], [], False

    def close(self, timeout_s: float = 5.0) -> None:
        self._log("close")
