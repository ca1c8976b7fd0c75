"""The client seam on kafka-python (pure Python; the default client)."""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import kafka.errors as errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic, OffsetSpec
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.net.sasl.oauth import AbstractTokenProvider
from kafka.protocol.consumer import IsolationLevel

from ...errors import ConfigError
from ..records import Header, Polled, RecordLike
from . import kafka_python_fixes  # noqa: F401, I001  (applied on import)
from .client import (
    LAPSED,
    PARTITION_FETCH_BYTES,
    RECORD_BATCH_OVERHEAD,
    Admin,
    AssignHandler,
    Consumer,
    ConsumerOptions,
    DeliveryFailed,
    Failure,
    KafkaAccessError,
    KafkaClient,
    KafkaFailure,
    Producer,
    Reader,
    RevokeHandler,
    Start,
    TopicInfo,
    mismatched_assignment,
    refuses_access,
)
from .kafka_python_properties import ADMIN, CONSUMER, PRODUCER, options_by_client
from .oauth import TokenRefused, TokenSource, TokenUnavailable, checked_source
from .settings import OAUTHBEARER, KafkaSettings

_ACCESS = (errors.AuthorizationError, errors.SaslAuthenticationFailedError, errors.UnsupportedSaslMechanismError,
           errors.IllegalSaslStateError)
_REJECTED = (errors.MessageSizeTooLargeError, errors.RecordListTooLargeError, errors.InvalidRecordError,
             errors.CorruptRecordError, errors.InvalidTopicError, errors.InvalidTimestampError)
P = ParamSpec("P")
R = TypeVar("R")


def describe(error: BaseException) -> str:
    name, text = type(error).__name__, str(error)
    return text if text.startswith(name) else f"{name}: {text}" if text else name


class _ConnectionCauses(logging.Handler):
    """Why kafka-python's connections failed lately: when it gives up with a bare "Unable to
    bootstrap", a refusal (credentials, an untrusted certificate) it logged on the way is the news,
    even if later attempts only saw the broker hang up."""

    RECENT_SECONDS = 60.0

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self.refusal: tuple[float, str] | None = None  # (when, cause)
        self.token_refusal: tuple[float, TokenRefused] | None = None  # the token endpoint's, until it gives a token

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "failed:" not in message or "Unable to bootstrap" in message:
            return
        self.last = re.sub(r"\s*\(backoff [^)]*\)$", "", message.split("failed:", 1)[1].strip())
        if refuses_access(self.last):
            self.refusal = (record.created, self.last)

    def recent_refusal(self) -> str | None:
        if self.refusal and time.time() - self.refusal[0] < self.RECENT_SECONDS:
            return self.refusal[1]
        return None

    def recent_token_refusal(self) -> TokenRefused | None:
        if self.token_refusal and time.time() - self.token_refusal[0] < self.RECENT_SECONDS:
            return self.token_refusal[1]
        return None


_causes = _ConnectionCauses()
logging.getLogger("kafka.net").addHandler(_causes)
log = logging.getLogger(__name__)


def failure(error: BaseException) -> Exception:
    """The seam's exception for a kafka-python one."""
    if isinstance(error, NoOAuthToken):  # the token endpoint's answer, passed through kafka-python
        return error.cause if isinstance(error.cause, TokenRefused) else KafkaFailure(str(error.cause))
    if isinstance(error, errors.KafkaConfigurationError):  # settings that contradict each other
        return ConfigError(f"Kafka client configuration: {describe(error)}")
    if isinstance(error, _ACCESS):
        return KafkaAccessError(f"Kafka refused access: {describe(error)}")
    if isinstance(error, errors.KafkaTimeoutError) and "bootstrap" in str(error):
        if token_refusal := _causes.recent_token_refusal():  # the first connections asked, and were refused
            return token_refusal
        if refusal := _causes.recent_refusal():
            return KafkaAccessError(f"Kafka refused access: {refusal}")
        if _causes.last:
            return KafkaFailure(f"{describe(error)} (last cause: {_causes.last})")
    return KafkaFailure(describe(error))


def translated(method: Callable[P, R]) -> Callable[P, R]:
    """Raise the seam's exceptions instead of kafka-python's."""
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except errors.KafkaError as error:
            raise failure(error) from error
    return wrapper


BOOTSTRAP_TIMEOUT_MS = 10_000  # a client that cannot reach any broker gives up after this
ASK_TIMEOUT_MS = 5_000  # where partitions end: asked to hear the broker answer, which a stalled loop must not wait on


class NoOAuthToken(errors.KafkaConnectionError):  # type: ignore[misc]  # kafka-python is untyped
    """A token not given, as kafka-python is told it: a connection that could not authenticate,
    which it tries again (it expects none of its other exceptions there, and let a TokenUnavailable
    out of a poll, a traceback). ``failure`` gives the endpoint's own back: a refusal ends the
    command, an endpoint that does not answer ends the session."""

    def __init__(self, cause: TokenRefused | TokenUnavailable):
        super().__init__(str(cause))
        self.cause = cause


class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # kafka-python is untyped
    """OAUTHBEARER tokens for kafka-python, which asks each time it opens or re-authenticates a
    connection (on its network thread, or on the thread of the call that needs the connection); a
    failure fails that connection (``NoOAuthToken``). A refusal is kept for ``failure``: when the
    connections of a client's bootstrap all fail on it, kafka-python says only that it could not
    bootstrap."""

    def __init__(self, source: TokenSource):
        super().__init__()
        self.source = source

    def token(self) -> str:
        try:
            token = self.source.token()
        except (TokenRefused, TokenUnavailable) as fault:
            if isinstance(fault, TokenRefused):
                _causes.token_refusal = (time.time(), fault)
            raise NoOAuthToken(fault) from None
        _causes.token_refusal = None
        return token

    def __repr__(self) -> str:
        return repr(self.source)


def connection(settings: KafkaSettings, tokens: TokenSource | None = None) -> dict[str, Any]:
    """kafka-python keyword arguments for reaching the cluster, common to its three clients (the
    --kafka-config properties come on top, see ``kafka_python_properties.py``).

    tokens : where OAUTHBEARER's tokens come from (one source for every client: they share its token)."""
    options: dict[str, Any] = {"bootstrap_servers": settings.bootstrap.split(","),
                     "security_protocol": settings.security_protocol, "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS,
                     # several attempts within the bootstrap timeout, and so within a broker's restart
                     "reconnect_backoff_max_ms": 1_000}
    if settings.uses_ssl:
        options.update(ssl_cafile=settings.ssl_cafile, ssl_certfile=settings.ssl_certfile,
                       ssl_keyfile=settings.ssl_keyfile)
    sasl = settings.sasl()
    if sasl is not None:
        mechanism, username, password = sasl
        options.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    if tokens is not None:
        options.update(sasl_mechanism=OAUTHBEARER, sasl_oauth_token_provider=_TokenProvider(tokens))
    return options


def _sendable(headers: list[Header] | None) -> list[tuple[str, bytes]] | None:
    """Headers as kafka-python writes them: it cannot write a null value, so one is written empty."""
    if not headers:
        return None
    return [(name, b"" if value is None else value) for name, value in headers]


def _log_failed_commit(offsets: dict[TopicPartition, OffsetAndMetadata], response: object) -> None:
    if isinstance(response, Exception):
        log.warning("offsets committed while partitions were revoked were refused", extra={"cause": describe(response)})


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's rebalance callbacks, each running the consumer's handler for it."""

    def __init__(self, consumer: _Consumer, on_assigned: AssignHandler, on_revoked: RevokeHandler,
                 on_lost: RevokeHandler, label_starts: AssignHandler | None = None):
        self.consumer = consumer
        self.handlers = on_assigned, on_revoked, on_lost
        self.label_starts = label_starts

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        consumer = self.consumer
        consumer.start_from(consumer.run_handler(self.handlers[0], assigned) or {})
        if consumer.labels_topic is not None:
            consumer.start_labels_from(assigned, self.label_starts)

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.consumer.run_handler(self.handlers[1], revoked)

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.consumer.run_handler(self.handlers[2], lost)


class _Consumer(Consumer):
    @translated
    def __init__(self, topic: str, admin: dict[str, Any], labels_topic: str | None = None, **options: Any):
        """admin : the options of an admin client of the same cluster."""
        self.topic, self.labels_topic = topic, labels_topic
        self._labels = Polled.of(labels_topic or "", [])
        self._group = options["group_id"]
        self._callback_error: BaseException | None = None
        self._in_listener = False  # True while a rebalance handler runs (on the consumer's IO thread)
        self._consumer = KafkaConsumer(**options)
        # Rebalance handlers run on the consumer's IO thread, where its own blocking calls are
        # refused; committed offsets are read through an admin client, which has a thread of its own.
        self._admin = KafkaAdminClient(**admin)

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    @translated
    def subscribe(self, on_assigned: AssignHandler, on_revoked: RevokeHandler, on_lost: RevokeHandler,
                  label_starts: AssignHandler | None = None) -> None:
        topics = [self.topic] if self.labels_topic is None else [self.topic, self.labels_topic]
        self._consumer.subscribe(topics, listener=_Listener(self, on_assigned, on_revoked, on_lost, label_starts))

    def run_handler(self, handler: Callable[[list[int]], R], partitions: list[TopicPartition],
                    topic: str | None = None) -> R | None:
        """Runs a rebalance handler on this topic's partitions among ``partitions`` (or ``topic``'s)
        and returns its result; keeps the first exception so ``poll`` can raise it (kafka-python
        would only log it)."""
        self._in_listener = True
        try:
            return handler(sorted(tp.partition for tp in partitions if tp.topic == (topic or self.topic)))
        except BaseException as error:  # noqa: BLE001 - re-raised by poll
            self._callback_error = self._callback_error or error
            return None
        finally:
            self._in_listener = False

    def start_labels_from(self, assigned: list[TopicPartition], label_starts: AssignHandler | None) -> None:
        """Moves the labels topic's partitions to where ``label_starts`` says; a member given other
        partitions of it than of the topic fails its next poll."""
        assert self.labels_topic is not None
        ours = {tp.partition for tp in assigned if tp.topic == self.topic}
        labels = {tp.partition for tp in assigned if tp.topic == self.labels_topic}
        if ours != labels:
            self._callback_error = self._callback_error or KafkaFailure(
                mismatched_assignment(self.topic, ours, self.labels_topic, labels))
        elif label_starts is not None:
            self.start_from(self.run_handler(label_starts, assigned, self.labels_topic) or {}, self.labels_topic)

    def start_from(self, starts: dict[int, Start], topic: str | None = None) -> None:
        """Moves each partition (of the topic, or ``topic``) to where reading starts: "earliest",
        "latest" or an offset."""
        for partition, start in starts.items():
            tp = TopicPartition(topic or self.topic, partition)
            if start == "earliest":
                self._consumer.seek_to_beginning(tp)
            elif start == "latest":
                self._consumer.seek_to_end(tp)
            else:
                self._consumer.seek(tp, start)

    @translated
    def poll(self, timeout_s: float, max_records: int) -> Polled:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        if self._callback_error is not None:
            error, self._callback_error = self._callback_error, None
            raise error
        if self.labels_topic is None:
            return Polled.of(self.topic, [record for records in batches.values() for record in records])
        self._labels = Polled.of(self.labels_topic, [record for tp, records in batches.items()
                                                     if tp.topic == self.labels_topic for record in records])
        return Polled.of(self.topic, [record for tp, records in batches.items()
                                      if tp.topic == self.topic for record in records])

    def polled_labels(self) -> Polled:
        return self._labels

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment() if tp.topic == self.topic}

    @translated
    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        return _committed(self._admin, self._group, self.topic, partitions)

    @translated
    def end_offsets(self, partitions: list[int], *, cached: bool = False) -> dict[int, int]:
        tps = [self._tp(p) for p in partitions]
        ends = _reported_ends(self._consumer, tps) if cached else None
        if ends is None:
            ends = self._consumer.end_offsets(tps, timeout_ms=ASK_TIMEOUT_MS)
        return {tp.partition: offset for tp, offset in ends.items()}

    @translated
    def commit(self, offsets: dict[int, int], label_offsets: dict[int, int] | None = None) -> None:
        named = {self._tp(p): o for p, o in offsets.items()}
        if label_offsets and self.labels_topic is not None:
            named.update({TopicPartition(self.labels_topic, p): o for p, o in label_offsets.items()})
        if not named:
            return
        offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in named.items()}
        if self._in_listener:
            # The IO thread cannot wait for itself: the commit is queued, and reaches the coordinator
            # before this member's JoinGroup on the same connection. Should it fail, the next owner
            # starts from the partition's state, which holds the same offset (at-least-once).
            self._consumer.commit_async(offsets, callback=_log_failed_commit)
        else:
            self._consumer.commit(offsets)

    def group_metadata(self) -> object:
        metadata = self._consumer.group_metadata()
        if metadata.generation_id < 0 or not metadata.member_id:
            raise KafkaFailure(LAPSED)
        return metadata

    def close(self) -> None:
        for close in (lambda: self._consumer.close(autocommit=False), self._admin.close):
            try:
                close()
            except errors.KafkaError:  # leaving a group the broker forgot is not worth an error
                pass


class _Reader(Reader):
    @translated
    def __init__(self, **options: Any):
        self._consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, **options)
        self._partitions: list[TopicPartition] = []
        self._was_caught_up = False  # the last answer the broker gave

    @translated
    def assign(self, topic: str, timeout_s: float = 15.0, partitions: list[int] | None = None) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while not (found := self._consumer.partitions_for_topic(topic)):
            if time.monotonic() > deadline:
                raise KafkaFailure(f"topic {topic} shows no partitions (does it exist?)")
            self._consumer.topics()  # refresh the metadata
            time.sleep(0.2)
        partitions = sorted(found) if partitions is None else sorted(set(found) & set(partitions))
        self._partitions = [TopicPartition(topic, p) for p in partitions]
        self._consumer.assign(self._partitions)
        if self._partitions:
            self._consumer.seek_to_beginning(*self._partitions)
        return partitions

    @translated
    def assign_at(self, topic: str, starts: dict[int, int]) -> None:
        self._partitions = [TopicPartition(topic, p) for p in starts]
        self._consumer.assign(self._partitions)
        for partition, offset in starts.items():
            self._consumer.seek(TopicPartition(topic, partition), offset)

    @translated
    def poll(self, timeout_s: float, max_records: int = 10_000) -> list[RecordLike]:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        return [record for tp in sorted(batches, key=lambda tp: tp.partition) for record in batches[tp]]

    @translated
    def caught_up(self, *, cached: bool = False) -> bool:
        if cached:  # until every partition's end is reported, the last answer: asking takes ~0.3 s
            ends = _reported_ends(self._consumer, self._partitions)
            if ends is None:
                return self._was_caught_up
            return all(self._consumer.position(tp) >= end for tp, end in ends.items())
        ends = self._consumer.end_offsets(self._partitions, timeout_ms=ASK_TIMEOUT_MS)
        self._was_caught_up = all(self._consumer.position(tp) >= ends[tp] for tp in self._partitions)
        return self._was_caught_up

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class _Producer(Producer):
    @translated
    def __init__(self, **options: Any):
        self._producer = KafkaProducer(**options)
        self._failures: list[Failure] = []

    def _failed(self, topic: str, key: bytes | None, value: bytes | None, headers: list[Header] | None,
                error: BaseException) -> None:
        self._failures.append(Failure(topic, key, value, headers or [], describe(error), isinstance(error, _REJECTED)))

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, headers: list[Header] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             delivered: Callable[[int], None] | None = None) -> None:
        try:
            future = self._producer.send(topic, value=value, key=key, headers=_sendable(headers), partition=partition,
                                         timestamp_ms=timestamp_ms)
        except _REJECTED as error:  # refused before sending (larger than max_request_size)
            self._failed(topic, key, value, headers, error)
            return
        except errors.KafkaError as error:
            raise failure(error) from error
        future.add_errback(self._failed, topic, key, value, headers)
        if delivered is not None:
            future.add_callback(lambda metadata: delivered(metadata.offset))

    @translated
    def flush(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._producer.flush(timeout=max(0.0, deadline - time.monotonic()))
                break
            except errors.KafkaTimeoutError:
                raise KafkaFailure(f"records not delivered within {timeout_s:.0f}s") from None
            except errors.UnknownError:  # a batch the broker refused as too large was split and re-queued
                if time.monotonic() > deadline:
                    raise KafkaFailure(f"records not delivered within {timeout_s:.0f}s") from None
        if self._failures:
            failures, self._failures = self._failures, []
            raise DeliveryFailed(failures)

    @translated
    def init_transactions(self, timeout_s: float) -> None:
        self._producer.init_transactions()

    @translated
    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    @translated
    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object, timeout_s: float) -> None:
        self._producer.send_offsets_to_transaction(
            {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}, group_metadata)

    @translated
    def commit_transaction(self, timeout_s: float) -> None:
        self._producer.commit_transaction()

    @translated
    def abort_transaction(self, timeout_s: float) -> None:
        self._producer.abort_transaction()

    def close(self, timeout_s: float = 5.0) -> None:
        try:
            self._producer.close(timeout=timeout_s)
        except errors.KafkaError:
            pass


class _Admin(Admin):
    @translated
    def __init__(self, **options: Any):
        self._admin = KafkaAdminClient(**options)

    @translated
    def topic(self, name: str) -> TopicInfo | None:
        described = self._admin.describe_topics([name])
        if not described or described[0].get("error_code", 0) != 0:
            return None
        configs = self._admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                               configs=["max.message.bytes"])], config_filter="all")
        limit = configs.get("topic", {}).get(name, {}).get("max.message.bytes", {}).get("value")
        return TopicInfo(len(described[0]["partitions"]), int(limit) if limit else 1_048_588)

    @translated
    def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        try:
            self._admin.create_topics([NewTopic(name, partitions, -1, topic_configs=config)])
        except errors.TopicAlreadyExistsError:
            pass

    @translated
    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return self._offsets(topic, partitions, OffsetSpec.LATEST)

    @translated
    def start_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return self._offsets(topic, partitions, OffsetSpec.EARLIEST)

    def _offsets(self, topic: str, partitions: list[int], spec: OffsetSpec) -> dict[int, int]:
        found = self._admin.list_partition_offsets({TopicPartition(topic, p): spec for p in partitions},
                                                   IsolationLevel.READ_COMMITTED)
        return {tp.partition: answer.offset for tp, answer in found.items()}

    @translated
    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        return _committed(self._admin, group, topic, partitions)

    def close(self) -> None:
        self._admin.close()


class KafkaPythonClient(KafkaClient):
    def __init__(self, settings: KafkaSettings):
        super().__init__(settings)
        common, by_client = connection(settings, checked_source(settings)), options_by_client(settings.properties)
        self._options = {client: {**common, **options} for client, options in by_client.items()}

    def consumer(self, topic: str, group: str, options: ConsumerOptions = ConsumerOptions()) -> Consumer:
        session_ms = int(options.session_timeout_s * 1000)
        named = {"client_id": options.client_id} if options.client_id else {}
        properties = {**self._options[CONSUMER], **named}
        if options.labels_topic is not None:  # the default adds round robin, which would part a message from its label
            properties["partition_assignment_strategy"] = (RangePartitionAssignor,)
        return _Consumer(topic, {**self._options[ADMIN], **named}, options.labels_topic, group_id=group,
                         group_instance_id=options.instance_id, enable_auto_commit=False,
                         auto_offset_reset=options.start, session_timeout_ms=session_ms,
                         heartbeat_interval_ms=max(1_000, session_ms // 4), fetch_max_bytes=options.fetch_max_bytes,
                         max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
                         isolation_level="read_committed" if options.read_committed else "read_uncommitted",
                         **properties)

    def reader(self, *, read_committed: bool = True) -> Reader:
        return _Reader(isolation_level="read_committed" if read_committed else "read_uncommitted",
                       fetch_max_bytes=64 << 20, max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
                       **self._options[CONSUMER])

    def producer(self, *, transactional_id: str | None = None, transaction_timeout_s: float = 60.0,
                 linger_ms: int = 20, max_request_bytes: int = 16 << 20, batch_bytes: int = 1 << 20,
                 delivery_timeout_s: float = 120.0, compression: str | None = None,
                 report_offsets: bool = False) -> Producer:
        options = dict(acks="all", linger_ms=linger_ms, batch_size=max(64, batch_bytes - RECORD_BATCH_OVERHEAD),
                       max_request_size=max_request_bytes,
                       delivery_timeout_ms=int(delivery_timeout_s * 1000), max_block_ms=10_000,
                       compression_type=compression, **self._options[PRODUCER])
        if transactional_id:
            options.update(transactional_id=transactional_id, enable_idempotence=True,
                           transaction_timeout_ms=int(transaction_timeout_s * 1000))
        return _Producer(**options)

    def admin(self) -> Admin:
        return _Admin(**self._options[ADMIN])


def _committed(admin: KafkaAdminClient, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
    """The group's committed next offset of each partition (None: none committed)."""
    found = admin.list_group_offsets({group: [TopicPartition(topic, p) for p in partitions]}).get(group, {})
    offsets = {tp.partition: meta.offset for tp, meta in found.items() if tp.topic == topic}
    return {p: offsets[p] if offsets.get(p, -1) >= 0 else None for p in partitions}


def _reported_ends(consumer: KafkaConsumer, partitions: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """The end of each partition as the latest fetch responses reported it (no request to the
    broker); None while any is not known yet."""
    ends = {tp: consumer.highwater(tp) for tp in partitions}
    return None if any(end is None for end in ends.values()) else ends
