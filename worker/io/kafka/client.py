"""The Kafka client seam: what the worker asks of Kafka, with one vocabulary for records and failures.

Two implementations sit behind it: ``kafka_python.py`` (the default) and ``confluent.py``
(librdkafka, for throughput), chosen by ``KafkaSettings.client`` in ``connect.py``. Sources, sinks, the state
topic and every command are written against these classes only.

Failures come in three kinds:

- ``KafkaFailure``: the broker is unreachable, a request timed out, the group moved on
  without this member, the producer was fenced, a transaction had to be aborted. A new
  session (fresh clients, rejoin, state restored) recovers from it.
- ``DeliveryFailed`` (a KafkaFailure): some produced records did not arrive; each failure
  says whether the broker refused the record itself (``rejected``: too large, invalid), so
  retrying it can never succeed.
- ``KafkaAccessError`` (a UserError): authentication, TLS or authorization refused — the
  settings must change; it ends the command with one line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import UserError
from ..records import Header, Polled, RecordLike
from .settings import KafkaSettings


class KafkaFailure(Exception):
    """Something a new Kafka session recovers from (see the module docstring)."""


LAPSED = "this member's group membership has lapsed (its session timed out): its work is not committed"


@dataclass
class Failure:
    """One record that was not delivered: the record as it was sent, and why."""
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    error: str
    rejected: bool  # the broker refuses this record itself (too large, invalid): retrying cannot help


class DeliveryFailed(KafkaFailure):
    def __init__(self, failures: list[Failure]):
        self.failures = failures
        super().__init__(f"{len(failures)} record(s) not delivered; first: {failures[0].error}")


class KafkaAccessError(UserError):
    """Authentication, TLS or authorization refused by the cluster."""


# What the client libraries say when the cluster refuses who we are (their own wording).
ACCESS_REFUSED = ("SaslAuthenticationFailed", "SASL authentication error", "Authentication failed",
                  "CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "Handshake failed", "SSL handshake failed",
                  "UnsupportedSaslMechanism", "IllegalSaslState")


def refuses_access(cause: str | None) -> bool:
    """Whether a connection failure's cause, as a client library logged it, is a refusal of access."""
    return cause is not None and any(marker in cause for marker in ACCESS_REFUSED)


PARTITION_FETCH_BYTES = 16 << 20  # per partition and fetch: Arrow batch messages are often near 1 MiB each
RECORD_BATCH_OVERHEAD = 256  # bytes a record batch may add to its records (header, lengths, attributes)
HEADER_OVERHEAD = 10  # bytes a record header adds to its name and value (their two lengths, as varints)


def record_bytes(key: bytes | None, value: bytes | None, headers: list[Header]) -> int:
    """What a record costs of its topic's limit when it travels alone in a batch."""
    return (RECORD_BATCH_OVERHEAD + len(key or b"") + len(value or b"")
            + sum(HEADER_OVERHEAD + len(name.encode()) + len(data or b"") for name, data in headers))

# on_assigned(partitions) returns where each partition starts: an offset, "earliest" or "latest".
Start = int | str
AssignHandler = Callable[[list[int]], dict[int, Start]]
RevokeHandler = Callable[[list[int]], None]


class Consumer(ABC):
    """A member of a consumer group reading one topic, and beside it, when given one, the topic of
    its labels (``labels_topic``: partition p of both goes to the same member, the range assignor's
    rule for topics of equal partition counts); offsets are committed only when asked."""

    topic: str
    labels_topic: str | None = None

    @abstractmethod
    def subscribe(self, on_assigned: AssignHandler, on_revoked: RevokeHandler, on_lost: RevokeHandler,
                  label_starts: AssignHandler | None = None) -> None:
        """Join the group. The handlers run inside ``poll``; an exception they raise comes out of ``poll``.
        on_revoked: partitions about to move (commit what you have); on_lost: partitions already gone.
        The handlers see the topic's partitions; the labels topic's partitions of the same numbers
        move with them, starting where ``label_starts`` (called after on_assigned) says. A member
        given other partitions of the labels topic than of the topic fails its poll."""

    @abstractmethod
    def poll(self, timeout_s: float, max_records: int) -> Polled:
        """The topic's next messages, each partition's in order; none after the timeout."""

    def polled_labels(self) -> Polled:
        """The labels topic's messages the last ``poll`` brought (none without a labels topic)."""
        return Polled.of(self.labels_topic or "", [])

    @abstractmethod
    def assignment(self) -> set[int]:
        """Partitions this member owns now."""

    @abstractmethod
    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        """The group's committed offset of each partition (None: never committed)."""

    @abstractmethod
    def end_offsets(self, partitions: list[int], *, cached: bool = False) -> dict[int, int]:
        """The offset after the last readable record of each partition.

        cached : the end the latest fetch responses reported, without asking the broker (a
            partition whose end is not known yet is asked for)."""

    @abstractmethod
    def commit(self, offsets: dict[int, int], label_offsets: dict[int, int] | None = None) -> None:
        """Commit these next offsets for the group, and those of the labels topic (at-least-once;
        transactions commit offsets themselves)."""

    @abstractmethod
    def group_metadata(self) -> object:
        """This member's group metadata, for ``Producer.send_offsets`` (KIP-447 fencing).

        Raises KafkaFailure when the membership has lapsed (a session that timed out, seen by the
        client but not yet by the poll loop): the broker fences a stale member id or generation,
        but metadata without any is taken as from outside the group, and would commit."""

    @abstractmethod
    def close(self) -> None:
        """Leave the group without committing."""


class Reader(ABC):
    """Reads whole topics from the beginning, outside any group (state topic, exports, tests)."""

    @abstractmethod
    def assign(self, topic: str, timeout_s: float = 15.0, partitions: list[int] | None = None) -> list[int]:
        """Read every partition of ``topic`` (or those of ``partitions`` it has) from its beginning;
        returns the partitions read. Waits for a topic just created to show them; KafkaFailure when
        it has none after ``timeout_s``."""

    @abstractmethod
    def assign_at(self, topic: str, starts: dict[int, int]) -> None:
        """Read these partitions of ``topic`` (and no other) from these offsets: partition -> offset."""

    @abstractmethod
    def poll(self, timeout_s: float, max_records: int = 10_000) -> list[RecordLike]:
        """The next records, in partition order."""

    @abstractmethod
    def caught_up(self, *, cached: bool = False) -> bool:
        """Whether every assigned partition has been read to its end (for read_committed: its last
        stable offset) as of now; cached: as of the latest fetch (no request to the broker)."""

    @abstractmethod
    def close(self) -> None: ...


class Producer(ABC):
    """Sends records; delivery is checked by ``flush``. Transactional when made with a transactional id."""

    @abstractmethod
    def send(self, topic: str, value: bytes | None, key: bytes | None = None, headers: list[Header] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             delivered: Callable[[int], None] | None = None) -> None:
        """Queue a record. A failure to deliver it is reported, with the record, by the next ``flush``.

        timestamp_ms : the record's timestamp, milliseconds since the epoch (None: the time of sending).
        delivered : called with the record's offset once it is delivered, by ``flush`` at the latest
            (a producer made with ``report_offsets``; others may never call it)."""

    def send_many(self, topic: str, values: list[bytes], keys: list[bytes | None],
                  headers: list[list[Header] | None] | None = None,
                  timestamps_ms: list[int | None] | None = None) -> None:
        """Queue one record per value, keyed alike, with headers[i] (a list of Header, or None) and
        timestamps_ms[i] when given (as ``send`` each, faster where the client allows)."""
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            self.send(topic, value, key, None if headers is None else headers[i], None,
                      None if timestamps_ms is None else timestamps_ms[i])

    @abstractmethod
    def flush(self, timeout_s: float) -> None:
        """Wait until every queued record is delivered. Raise DeliveryFailed naming those that were not,
        or KafkaFailure when the timeout passes first."""

    @abstractmethod
    def init_transactions(self, timeout_s: float) -> None:
        """Take over the transactional id (aborting what an earlier holder left open)."""

    @abstractmethod
    def begin_transaction(self) -> None: ...

    @abstractmethod
    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object, timeout_s: float) -> None:
        """Make committing these input offsets part of the open transaction."""

    @abstractmethod
    def commit_transaction(self, timeout_s: float) -> None: ...

    @abstractmethod
    def abort_transaction(self, timeout_s: float) -> None: ...

    @abstractmethod
    def close(self, timeout_s: float = 5.0) -> None: ...


@dataclass(frozen=True)
class TopicInfo:
    partitions: int
    max_message_bytes: int  # the largest record batch the topic accepts


class Admin(ABC):
    @abstractmethod
    def topic(self, name: str) -> TopicInfo | None:
        """The topic's partition count and record size limit; None when it does not exist."""

    @abstractmethod
    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """Each partition's end as read_committed consumers see it: its last stable offset (the
        records of transactions still open are not counted)."""

    @abstractmethod
    def start_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """Each partition's first offset (records before it were deleted)."""

    @abstractmethod
    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        """The group's committed next offset of each partition (None: never committed)."""

    @abstractmethod
    def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create the topic (replication: the cluster's default); nothing when it exists already."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True)
class ConsumerOptions:
    """How a group consumer reads. instance_id : static membership (None: dynamic);
    session_timeout_s : before the group gives a silent member's partitions away; start : where
    a partition the group never committed starts (earliest, latest); read_committed : skip what
    aborted transactions wrote; client_id : names the consumer to the broker (None: the
    client's default); labels_topic : a topic read beside the input, partition by partition
    (the same numbers are assigned together)."""
    instance_id: str | None = None
    session_timeout_s: float = 10.0
    start: str = "earliest"
    read_committed: bool = True
    fetch_max_bytes: int = 64 << 20
    client_id: str | None = None
    labels_topic: str | None = None


class KafkaClient(ABC):
    """Makes the consumers, readers, producers and admin clients of one cluster."""

    def __init__(self, settings: KafkaSettings):
        self.settings = settings

    @abstractmethod
    def consumer(self, topic: str, group: str, options: ConsumerOptions = ConsumerOptions()) -> Consumer: ...

    @abstractmethod
    def reader(self, *, read_committed: bool = True) -> Reader: ...

    @abstractmethod
    def producer(self, *, transactional_id: str | None = None, transaction_timeout_s: float = 60.0,
                 linger_ms: int = 20, max_request_bytes: int = 16 << 20, batch_bytes: int = 1 << 20,
                 delivery_timeout_s: float = 120.0, compression: str | None = None,
                 report_offsets: bool = False) -> Producer:
        """batch_bytes : the largest record batch to build (at most the smallest limit of the topics written);
        report_offsets : ``send``'s ``delivered`` is called (a delivery report for every record)."""

    @abstractmethod
    def admin(self) -> Admin: ...


def mismatched_assignment(topic: str, partitions: set[int], labels_topic: str, label_partitions: set[int]) -> str:
    """Why a member given these partitions of the two topics cannot join their messages."""
    return (f"the group gave this member partitions {sorted(partitions)} of {topic} but {sorted(label_partitions)} "
            f"of {labels_topic}: a message and its label must be read by the same member (the topics need "
            f"as many partitions, and every member the range assignor)")
