"""The client seam on confluent-kafka (librdkafka, C; for throughput): ``--kafka-client confluent``.

librdkafka fetches its own OAUTHBEARER tokens, and says only that it could not authenticate when
the token endpoint refuses it, does not answer, or gave a token that librdkafka or the broker
refuses. Under OIDC client credentials, a refusal of access is put on whom it is due by asking the
endpoint afresh (``_Reporting._blamed``): its refusal ends the command, as at start; an endpoint
that does not answer (or answers again, after failing librdkafka's request) ends the session, to
be tried again; a token refused (expired, signed by a key the broker does not trust) stays a
refusal of access."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import operator
import time
import uuid
from collections.abc import Callable
from itertools import repeat
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

import confluent_kafka as ck
import numpy as np
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from ...errors import ConfigError
from ..records import Header, Polled, Record, RecordLike
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
from .oauth import TokenRefused, TokenSource, checked_source
from .settings import KafkaSettings, OAuthClient

_E = ck.KafkaError
_ACCESS = {_E._AUTHENTICATION, _E._SSL, _E.SASL_AUTHENTICATION_FAILED, _E.TOPIC_AUTHORIZATION_FAILED,
           _E.GROUP_AUTHORIZATION_FAILED, _E.CLUSTER_AUTHORIZATION_FAILED, _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
           _E.UNSUPPORTED_SASL_MECHANISM}
_REJECTED = {_E.MSG_SIZE_TOO_LARGE, _E.INVALID_RECORD, _E.RECORD_LIST_TOO_LARGE, _E.INVALID_MSG_SIZE, _E.INVALID_MSG,
             _E.INVALID_TIMESTAMP}
_library_log = logging.getLogger("kafka.librdkafka")
# librdkafka's words for a token it did not get: from the endpoint (an error answer, quoted; an
# answer without "access_token"; no answer), or refused by its own checks of the token, which the
# endpoint gives alike every time ("Must supply an unexpired token", a JWT without "exp" or "sub")
_NO_TOKEN = "Failed to acquire SASL OAUTHBEARER token"
_TOKEN_CHECKS = ("unexpired", "JWT", '"exp"', '"sub"', "xtension", "decode", "nvalid token")
_SECOND = operator.itemgetter(1)  # of a (timestamp type, timestamp) pair
P = ParamSpec("P")
R = TypeVar("R")
ClientT = TypeVar("ClientT")
ReportingT = TypeVar("ReportingT", bound="_Reporting")


class _Message(Protocol):
    """A message librdkafka gives back (consumed, or reported undelivered): its topic, partition and
    offset are set (confluent-kafka's types allow None) and its headers are (name, bytes) pairs."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[Header] | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def error(self) -> ck.KafkaError | None: ...


def describe(error: ck.KafkaError) -> str:
    return f"{error.name()}: {error.str().strip()}"  # librdkafka ends some with a newline


def failure(error: ck.KafkaError | ck.KafkaException) -> Exception:
    """The seam's exception for a librdkafka error (a KafkaError, or a KafkaException holding one)."""
    if isinstance(error, ck.KafkaException):
        held = error.args[0] if error.args and isinstance(error.args[0], ck.KafkaError) else None
        if held is None:
            return KafkaFailure("Kafka client error")
        error = held
    if error.code() in _ACCESS:
        return KafkaAccessError(f"Kafka refused access: {describe(error)}")
    if error.code() == _E._INVALID_ARG:
        return ConfigError(f"Kafka client configuration: {error.str().strip()}")
    return KafkaFailure(describe(error))


def translated(method: Callable[Concatenate[ReportingT, P], R]) -> Callable[Concatenate[ReportingT, P], R]:
    """Raise the seam's exceptions instead of confluent-kafka's; an access error librdkafka
    reported meanwhile wins (a call against a cluster that refuses us fails only by timing out)."""
    @functools.wraps(method)
    def wrapper(self: ReportingT, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = method(self, *args, **kwargs)
        except ck.KafkaException as error:
            self._raise_reported(serve=True)
            raise self._blamed(failure(error)) from error
        except KafkaAccessError as refused:  # a consumer's poll raises those librdkafka hands it
            raise self._blamed(refused) from None
        except concurrent.futures.TimeoutError:
            self._raise_reported(serve=True)
            raise KafkaFailure(f"{method.__name__}: no answer from Kafka in time") from None
        self._raise_reported()
        return result
    return wrapper


class _Reporting:
    """Keeps what librdkafka reports through ``error_cb``: access errors end the command.

    tokens : the OIDC client's token source, under OAUTHBEARER with client credentials (else None)."""

    def __init__(self, tokens: TokenSource | None = None) -> None:
        self._access_error: Exception | None = None
        self._tokens = tokens
        self._blame: Exception | None = None  # what a refusal of access was put down to (asked once per client)

    def _error_cb(self, error: ck.KafkaError) -> None:
        if error.code() in _ACCESS or refuses_access(error.str()):
            self._access_error = self._access_error or KafkaAccessError(f"Kafka refused access: {error.str().strip()}")
        else:
            _library_log.debug("%s", describe(error))

    def _serve(self) -> None:
        """Deliver what librdkafka has queued for ``error_cb`` (producers and admin clients need a poll)."""

    def _raise_reported(self, serve: bool = False) -> None:
        if serve:
            self._serve()
        if self._access_error is not None:
            self._access_error = self._blamed(self._access_error)
            raise self._access_error

    def _blamed(self, error: Exception) -> Exception:
        """A refusal of access, under OIDC client credentials put on whom it is due (the module
        docstring): the token endpoint's TokenRefused, a KafkaFailure, or the refusal itself."""
        if self._tokens is None or not isinstance(error, KafkaAccessError):
            return error
        if self._blame is None:
            fault = self._tokens.blame()
            if isinstance(fault, TokenRefused):
                self._blame = fault
            elif fault is not None:
                self._blame = KafkaFailure(str(fault))
            elif _NO_TOKEN in str(error) and not any(check in str(error) for check in _TOKEN_CHECKS):
                self._blame = KafkaFailure(f"the OAuth token endpoint failed librdkafka's request, and gives a token "
                                           f"now ({str(error)[:300]})")
            else:
                self._blame = error
        return self._blame

    def _configured(self, factory: Callable[[dict[str, Any]], ClientT], conf: dict[str, Any]) -> ClientT:
        try:
            return factory({**conf, "error_cb": self._error_cb, "logger": _library_log})
        except ck.KafkaException as error:
            raise failure(error) from None
        except (TypeError, ValueError) as error:
            raise ConfigError(f"Kafka client configuration: {error}") from None


def connection(settings: KafkaSettings) -> dict[str, str]:
    """librdkafka properties for reaching the cluster (the --kafka-config properties pass through as written)."""
    conf = {"bootstrap.servers": settings.bootstrap, "security.protocol": settings.security_protocol.lower()}
    if settings.uses_ssl:
        conf.update({key: value for key, value in (("ssl.ca.location", settings.ssl_cafile),
                                                   ("ssl.certificate.location", settings.ssl_certfile),
                                                   ("ssl.key.location", settings.ssl_keyfile)) if value})
    conf.update({key: value for key, value in (("sasl.mechanism", settings.sasl_mechanism),
                                               ("sasl.username", settings.sasl_username),
                                               ("sasl.password", settings.sasl_password and
                                                settings.sasl_password.reveal())) if value})
    if settings.oauth is not None:
        conf.update(oidc(settings.oauth, settings.ssl_cafile))
    conf.update(settings.properties)
    return conf


def oidc(client: OAuthClient, cafile: str | None) -> dict[str, str]:
    """librdkafka properties for fetching (and refreshing) OAUTHBEARER tokens itself."""
    conf = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": client.token_url,
            "sasl.oauthbearer.client.id": client.client_id,
            "sasl.oauthbearer.client.secret": client.client_secret.reveal()}
    if client.scope:
        conf["sasl.oauthbearer.scope"] = client.scope
    if client.uses_https and cafile:
        conf["https.ca.location"] = cafile
    return conf


class _Consumer(_Reporting, Consumer):
    def __init__(self, topic: str, conf: dict[str, Any], labels_topic: str | None = None,
                 tokens: TokenSource | None = None):
        super().__init__(tokens)
        self.topic, self.labels_topic = topic, labels_topic
        self._labels = Polled.of(labels_topic or "", [])
        self._callback_error: BaseException | None = None
        self._consumer = self._configured(ck.Consumer, conf)

    def _tp(self, partition: int, offset: int = ck.OFFSET_INVALID) -> ck.TopicPartition:
        return ck.TopicPartition(self.topic, partition, offset)

    def _run(self, handler: Callable[[list[int]], R], partitions: list[ck.TopicPartition],
             topic: str | None = None) -> R | None:
        try:
            return handler(sorted(tp.partition for tp in partitions if tp.topic == (topic or self.topic)))
        except BaseException as error:  # noqa: BLE001 - re-raised by poll
            self._callback_error = self._callback_error or error
            return None

    def _label_starts(self, handler: AssignHandler | None, partitions: list[ck.TopicPartition]) -> dict[int, Start]:
        """Where the labels topic's partitions start; none when they are not the topic's."""
        ours = {tp.partition for tp in partitions if tp.topic == self.topic}
        labels = {tp.partition for tp in partitions if tp.topic == self.labels_topic}
        if ours != labels:
            assert self.labels_topic is not None
            self._callback_error = self._callback_error or KafkaFailure(
                mismatched_assignment(self.topic, ours, self.labels_topic, labels))
            return {}
        return (self._run(handler, partitions, self.labels_topic) or {}) if handler else {}

    @translated
    def subscribe(self, on_assigned: AssignHandler, on_revoked: RevokeHandler, on_lost: RevokeHandler,
                  label_starts: AssignHandler | None = None) -> None:
        def assigned(consumer: ck.Consumer, partitions: list[ck.TopicPartition]) -> None:
            starts = {self.topic: self._run(on_assigned, partitions) or {}}
            if self.labels_topic is not None:
                starts[self.labels_topic] = self._label_starts(label_starts, partitions)
            for tp in partitions:
                start = starts.get(tp.topic, {}).get(tp.partition)
                if start is not None:
                    tp.offset = start if isinstance(start, int) else \
                        {"earliest": ck.OFFSET_BEGINNING, "latest": ck.OFFSET_END}[start]
            consumer.assign(partitions)

        topics = [self.topic] if self.labels_topic is None else [self.topic, self.labels_topic]
        self._consumer.subscribe(topics, on_assign=assigned,
                                 on_revoke=lambda consumer, partitions: self._run(on_revoked, partitions),
                                 on_lost=lambda consumer, partitions: self._run(on_lost, partitions))

    @translated
    def poll(self, timeout_s: float, max_records: int) -> Polled:
        # librdkafka's consume() waits for the whole timeout unless max_records arrive: take what
        # is queued, else wait for one message only, then take what came with it.
        messages = self._consumer.consume(num_messages=max_records, timeout=0)
        if not messages:
            messages = self._consumer.consume(num_messages=1, timeout=timeout_s)
            if messages and max_records > 1:
                messages += self._consumer.consume(num_messages=max_records - 1, timeout=0)
        if self._callback_error is not None:
            callback_error, self._callback_error = self._callback_error, None
            raise callback_error
        errors = list(map(ck.Message.error, messages))
        if errors.count(None) != len(errors):
            for error in errors:
                if error is not None and (error.fatal() or error.code() in _ACCESS):
                    raise failure(error)
                if error is not None:
                    _library_log.debug("consumer: %s", describe(error))
            messages = [m for m, error in zip(messages, errors, strict=True) if error is None]
        if self.labels_topic is None:
            return _polled(self.topic, messages)
        labels = self.labels_topic
        self._labels = _polled(labels, [m for m in messages if m.topic() == labels])
        return _polled(self.topic, [m for m in messages if m.topic() != labels])

    def polled_labels(self) -> Polled:
        return self._labels

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment() if tp.topic == self.topic}

    @translated
    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        found = self._consumer.committed([self._tp(p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in found}

    @translated
    def end_offsets(self, partitions: list[int], *, cached: bool = False) -> dict[int, int]:
        ends = {}
        for p in partitions:
            end = self._consumer.get_watermark_offsets(self._tp(p), cached=True)[1] if cached else -1
            ends[p] = end if end >= 0 else self._consumer.get_watermark_offsets(self._tp(p), timeout=5)[1]
        return ends

    @translated
    def commit(self, offsets: dict[int, int], label_offsets: dict[int, int] | None = None) -> None:
        tps = [self._tp(p, o) for p, o in offsets.items()]
        if label_offsets and self.labels_topic is not None:
            tps += [ck.TopicPartition(self.labels_topic, p, o) for p, o in label_offsets.items()]
        if tps:
            results = self._consumer.commit(offsets=tps, asynchronous=False)
            for tp in results or []:
                if tp.error is not None:
                    raise failure(tp.error)

    def group_metadata(self) -> object:
        if not self._consumer.memberid():
            raise KafkaFailure(LAPSED)
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        try:
            self._consumer.close()
        except (ck.KafkaException, RuntimeError):
            pass


def _polled(topic: str, messages: list[ck.Message]) -> Polled:
    """The messages of one topic, column by column."""
    n = len(messages)  # each column in one pass of C calls: a Python loop per message costs more
    # a consumed message's headers are (name, bytes) pairs
    headers = cast(list[list[Header] | None], list(map(ck.Message.headers, messages)))
    return Polled(topic, list(map(ck.Message.value, messages)), list(map(ck.Message.key, messages)),
                  np.fromiter(map(ck.Message.partition, messages), np.int64, n),
                  np.fromiter(map(ck.Message.offset, messages), np.int64, n),
                  np.fromiter(map(_SECOND, map(ck.Message.timestamp, messages)), np.int64, n),
                  headers=headers if any(headers) else None)


class _Reader(_Reporting, Reader):
    def __init__(self, conf: dict[str, Any], tokens: TokenSource | None = None):
        super().__init__(tokens)
        self._consumer = self._configured(ck.Consumer, conf)
        self._at_end: dict[tuple[str, int], bool] = {}

    @translated
    def assign(self, topic: str, timeout_s: float = 15.0, partitions: list[int] | None = None) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while True:
            metadata = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
            found = sorted(metadata.partitions) if metadata is not None and metadata.error is None else []
            if found:
                break
            if time.monotonic() > deadline:
                raise KafkaFailure(f"topic {topic} shows no partitions (does it exist?)")
            time.sleep(0.2)
        partitions = found if partitions is None else sorted(set(found) & set(partitions))
        self._at_end = {(topic, p): False for p in partitions}
        self._consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        return partitions

    @translated
    def assign_at(self, topic: str, starts: dict[int, int]) -> None:
        self._at_end = {(topic, p): False for p in starts}
        self._consumer.assign([ck.TopicPartition(topic, p, offset) for p, offset in starts.items()])

    @translated
    def poll(self, timeout_s: float, max_records: int = 10_000) -> list[RecordLike]:
        records: list[RecordLike] = []
        for m in cast(list[_Message], self._consumer.consume(num_messages=max_records, timeout=timeout_s)):
            error = m.error()
            if error is not None:
                if error.code() == _E._PARTITION_EOF:
                    self._at_end[(m.topic(), m.partition())] = True
                elif error.fatal() or error.code() in _ACCESS:
                    raise failure(error)
                continue
            self._at_end[(m.topic(), m.partition())] = False
            records.append(Record(m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers() or [],
                                  m.timestamp()[1]))
        return records

    def caught_up(self, *, cached: bool = False) -> bool:
        return all(self._at_end.values())  # end-of-partition events: nothing to ask either way

    def close(self) -> None:
        self._consumer.close()


class _Producer(_Reporting, Producer):
    def __init__(self, conf: dict[str, Any], tokens: TokenSource | None = None, report_offsets: bool = False):
        super().__init__(tokens)
        self._producer = self._configured(ck.Producer, {**conf, "on_delivery": self._delivered,
                                                        "delivery.report.only.error": not report_offsets})
        self._failures: list[Failure] = []
        self._queued = 0

    def _serve(self) -> None:
        self._producer.poll(0.2)

    def _delivered(self, error: ck.KafkaError | None, message: _Message, headers: list[Header] | None = None,
                   delivered: Callable[[int], None] | None = None) -> None:
        """The producer's delivery callback; called for failures only unless made to report offsets
        (delivery.report.only.error). headers : those the record was sent with (librdkafka's report
        does not give them back); delivered : the sender's, told the record's offset."""
        if error is not None:
            self._failures.append(Failure(message.topic(), message.key(), message.value(), headers or [],
                                          describe(error), error.code() in _REJECTED))
        elif delivered is not None:
            delivered(message.offset())

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, headers: list[Header] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             delivered: Callable[[int], None] | None = None) -> None:
        produce = self._producer.produce
        stamp = timestamp_ms or 0  # librdkafka's "the time of sending"
        # a record's headers say where a dead letter came from, should it be refused
        reported = {"on_delivery": functools.partial(self._delivered, headers=headers, delivered=delivered)} \
            if headers or delivered else {}
        while True:
            try:  # (confluent-kafka's types take no list[Header]: theirs is a list of another type)
                if partition is None:
                    produce(topic, value, key, headers=headers, timestamp=stamp, **reported)  # type: ignore[arg-type]
                else:
                    produce(topic, value, key, partition, headers=headers, timestamp=stamp, **reported)  # type: ignore[arg-type]
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.1)
            except ck.KafkaException as error:
                kafka_error = error.args[0]
                if kafka_error.code() in _REJECTED:
                    self._failures.append(Failure(topic, key, value, headers or [], describe(kafka_error), True))
                    return
                raise failure(error) from None
        self._queued += 1
        if self._queued % 1_000 == 0:
            self._producer.poll(0)  # serve delivery callbacks as we go

    def send_many(self, topic: str, values: list[bytes], keys: list[bytes | None],
                  headers: list[list[Header] | None] | None = None,
                  timestamps_ms: list[int | None] | None = None) -> None:
        produce = self._producer.produce
        if headers is None and timestamps_ms is None:  # no argument more than needed: this runs per prediction
            for value, key in zip(values, keys, strict=True):
                try:
                    produce(topic, value, key)
                except (BufferError, ck.KafkaException):
                    self.send(topic, value, key)  # waits for room, or records the refusal
        else:
            stamps = repeat(0) if timestamps_ms is None else (stamp or 0 for stamp in timestamps_ms)
            heads = repeat(None) if headers is None else headers
            for value, key, stamp, head in zip(values, keys, stamps, heads, strict=False):
                try:
                    produce(topic, value, key, timestamp=stamp, headers=head)  # type: ignore[arg-type]
                except (BufferError, ck.KafkaException):
                    self.send(topic, value, key, head, None, stamp)
        self._producer.poll(0)  # serve delivery callbacks

    @translated
    def flush(self, timeout_s: float) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise KafkaFailure(f"{remaining} record(s) not delivered within {timeout_s:.0f}s")
        if self._failures:
            failures, self._failures = self._failures, []
            raise DeliveryFailed(failures)

    @translated
    def init_transactions(self, timeout_s: float) -> None:
        self._producer.init_transactions(timeout_s)

    @translated
    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    @translated
    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object, timeout_s: float) -> None:
        self._producer.send_offsets_to_transaction([ck.TopicPartition(topic, p, o) for p, o in offsets.items()],
                                                   group_metadata, timeout_s)

    @translated
    def commit_transaction(self, timeout_s: float) -> None:
        self._producer.commit_transaction(timeout_s)

    @translated
    def abort_transaction(self, timeout_s: float) -> None:
        self._producer.abort_transaction(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self._producer.flush(timeout_s)


class _Admin(_Reporting, Admin):
    def __init__(self, conf: dict[str, Any], tokens: TokenSource | None = None):
        super().__init__(tokens)
        self._admin = self._configured(AdminClient, conf)

    def _serve(self) -> None:
        self._admin.poll(0.2)

    @translated
    def topic(self, name: str) -> TopicInfo | None:
        metadata = self._admin.list_topics(timeout=10).topics.get(name)
        if metadata is None or metadata.error is not None:
            return None
        (future,) = self._admin.describe_configs([ConfigResource("topic", name)]).values()
        entry = future.result(timeout=10).get("max.message.bytes")
        return TopicInfo(len(metadata.partitions), int(entry.value) if entry is not None else 1_048_588)

    @translated
    def create_topic(self, name: str, partitions: int, config: dict[str, str]) -> None:
        (future,) = self._admin.create_topics([NewTopic(name, num_partitions=partitions, config=config)],
                                              operation_timeout=10).values()
        try:
            future.result(timeout=15)
        except ck.KafkaException as error:
            if error.args[0].code() != _E.TOPIC_ALREADY_EXISTS:
                raise

    @translated
    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return self._offsets(topic, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    @translated
    def start_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return self._offsets(topic, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def _offsets(self, topic: str, partitions: list[int], spec: OffsetSpec) -> dict[int, int]:
        futures = self._admin.list_offsets({ck.TopicPartition(topic, p): spec for p in partitions},
                                           isolation_level=ck.IsolationLevel.READ_COMMITTED, request_timeout=10)
        return {tp.partition: future.result(timeout=15).offset for tp, future in futures.items()}

    @translated
    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        (future,) = self._admin.list_consumer_group_offsets(
            [ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, p) for p in partitions])],
            request_timeout=10).values()
        found = {tp.partition: tp.offset for tp in future.result(timeout=15).topic_partitions}
        return {p: found[p] if found.get(p, -1) >= 0 else None for p in partitions}

    def close(self) -> None:
        pass


class ConfluentClient(KafkaClient):
    def __init__(self, settings: KafkaSettings):
        super().__init__(settings)
        # librdkafka fetches its own tokens: this checks the credentials at start, and asks the
        # endpoint whose fault it is when the cluster refuses access
        self._tokens = checked_source(settings)
        self._connection = connection(settings)

    def consumer(self, topic: str, group: str, options: ConsumerOptions = ConsumerOptions()) -> Consumer:
        session_ms = int(options.session_timeout_s * 1000)
        conf = {**self._connection, "group.id": group, "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": options.start,
                "isolation.level": "read_committed" if options.read_committed else "read_uncommitted",
                "session.timeout.ms": session_ms, "heartbeat.interval.ms": max(1_000, session_ms // 4),
                "fetch.max.bytes": options.fetch_max_bytes, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
                "partition.assignment.strategy": "range"}
        if options.instance_id:
            conf["group.instance.id"] = options.instance_id
        if options.client_id:
            conf["client.id"] = options.client_id
        return _Consumer(topic, conf, options.labels_topic, self._tokens)

    def reader(self, *, read_committed: bool = True) -> Reader:
        return _Reader({**self._connection, "group.id": f"nbstream-reader-{uuid.uuid4().hex}",
                        "enable.auto.commit": False, "enable.partition.eof": True,
                        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                        "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES},
                       self._tokens)

    def producer(self, *, transactional_id: str | None = None, transaction_timeout_s: float = 60.0,
                 linger_ms: int = 20, max_request_bytes: int = 16 << 20, batch_bytes: int = 1 << 20,
                 delivery_timeout_s: float = 120.0, compression: str | None = None,
                 report_offsets: bool = False) -> Producer:
        conf = {**self._connection, "acks": "all", "enable.idempotence": True, "linger.ms": linger_ms,
                "message.max.bytes": max_request_bytes, "batch.size": max(64, batch_bytes - RECORD_BATCH_OVERHEAD),
                "message.timeout.ms": int(delivery_timeout_s * 1000),
                "queue.buffering.max.messages": 1_000_000, "compression.type": compression or "none"}
        if transactional_id:
            conf.update({"transactional.id": transactional_id,
                         "transaction.timeout.ms": int(transaction_timeout_s * 1000),
                         "message.timeout.ms": int(min(delivery_timeout_s, transaction_timeout_s) * 1000)})
        return _Producer(conf, self._tokens, report_offsets)

    def admin(self) -> Admin:
        return _Admin(dict(self._connection), self._tokens)
