"""Predictions and dead letters to Kafka topics, through one producer, with every delivery checked.

Each record is measured against its topic's size limit before it is sent, so the broker is
never asked to take what it must refuse: a prediction too large for the output topic sends
its input to the dead-letter topic instead, with that reason; a dead letter too large for the
dead-letter topic is cut to fit (its value, and its key when the key alone is too large),
the original sizes in headers. ``flush`` returns only when every record arrived.

Should the broker refuse records all the same (a limit lowered while running, a record it
finds invalid), a refusal of a batch cannot be pinned on one of its records: their inputs
become suspects and the flush fails, so the session starts again from the last commit (and
measures the limits again). The next session sends each suspect's output in a batch of its
own; one refused then is refused for itself: its input is poisoned, and after one more
restart it goes to the dead-letter topic with the broker's error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from nbstream.arrow import RowProblems

from ..arrow_messages import prediction_origin
from ..records import Polled
from .client import RECORD_BATCH_OVERHEAD, DeliveryFailed, Failure, Producer

MAX_ERROR_CHARACTERS = 1_000


@dataclass(frozen=True)
class Destination:
    topic: str
    max_record_bytes: int  # the topic's max.message.bytes


@dataclass
class Refusals:
    """What the broker refused, kept across sessions; inputs are (topic, partition, offset)."""
    suspects: set = field(default_factory=set)  # in a refused batch: next time, sent alone
    poisoned: dict = field(default_factory=dict)  # refused alone: next time, a dead letter with this error


def input_key(record) -> tuple:
    return record.topic, record.partition, record.offset


def record_bytes(key: bytes | None, value: bytes | None, headers: list) -> int:
    """What a record costs of its topic's limit when it travels alone in a batch."""
    return (RECORD_BATCH_OVERHEAD + len(key or b"") + len(value or b"")
            + sum(len(name) + len(data) for name, data in headers))


def cut_to_fit(key: bytes | None, value: bytes | None, headers: list, limit: int) -> tuple[bytes | None, bytes | None]:
    """(key, value) of a dead letter cut so the record fits ``limit`` bytes: the value first, the key
    too when it alone is too large; each cut adds a header with the original size."""
    room = limit - record_bytes(None, None, headers) - 64  # 64: the headers a cut adds
    if key is not None and len(key) > room:
        headers.append(("key.truncated.from", str(len(key)).encode()))
        key = key[:max(0, room)]
    room -= len(key or b"")
    if value is not None and len(value) > room:
        headers.append(("value.truncated.from", str(len(value)).encode()))
        value = value[:max(0, room)]
    return key, value


def origin_headers(record, error: str, field: str) -> list[tuple[str, bytes]]:
    """Kafka Connect style: the error and where the message came from (and the row, for a row
    of an Arrow batch message)."""
    if len(error) > MAX_ERROR_CHARACTERS:  # errors quote the offending value, which may be huge
        error = error[:MAX_ERROR_CHARACTERS] + f"... ({len(error):,} characters)"
    headers = [("error", error.encode("utf-8", "replace")), ("error.field", field.encode("utf-8", "replace")),
               ("source.topic", record.topic.encode()), ("source.partition", str(record.partition).encode()),
               ("source.offset", str(record.offset).encode())]
    row = getattr(record, "row", None)
    if row is not None and row >= 0:
        headers.append(("source.row", str(row).encode()))
    return headers


class KafkaSink:
    """The prediction sink and the reject sink of `worker serve`.

    refusals : what the broker refused, kept by the caller across sessions (see the module docstring)
    count : dead letters sent by this sink
    """

    def __init__(self, producer: Producer, predictions: Destination, dead_letters: Destination,
                 refusals: Refusals, flush_timeout_s: float = 60.0, on_dead_letter=None):
        """on_dead_letter(error) : told of every dead letter sent (for counting)."""
        self.producer = producer
        self.on_dead_letter = on_dead_letter
        self.predictions, self.dead_letters = predictions, dead_letters
        self.refusals = refusals
        self.flush_timeout_s = flush_timeout_s
        self.count = 0

    def send_predictions(self, polled: Polled, rows: list[int], values: list[bytes]) -> list[int]:
        """values[j] is the prediction of message rows[j] of the poll, keyed like it; returns the j
        whose prediction was too large for the output topic (its input went to the dead-letter topic)."""
        topic, room = self.predictions.topic, self.predictions.max_record_bytes - RECORD_BATCH_OVERHEAD
        keys, send, suspects = polled.keys, self.producer.send, self.refusals.suspects
        row_keys = [keys[row] for row in rows]
        if not suspects and values and max(map(len, values)) + max(map(len, filter(None, row_keys)), default=0) <= room:
            self.producer.send_many(topic, values, row_keys)  # the usual case: every record fits
            return []
        diverted = []
        for j, (row, value) in enumerate(zip(rows, values, strict=True)):
            key = keys[row]
            if len(value) + len(key or b"") > room:
                diverted.append(j)
                self.dead_letter(polled.record(row), f"prediction of {record_bytes(key, value, [])} bytes exceeds "
                                 f"the limit of {self.predictions.max_record_bytes} of topic {topic}", "prediction")
            elif suspects and (polled.topic, int(polled.partitions[row]), int(polled.offsets[row])) in suspects:
                self._alone(polled.record(row), topic, key, value, [])
            else:
                send(topic, value, key)
        return diverted

    def reject(self, polled: Polled, problems: RowProblems) -> None:
        """Each bad message, unchanged, to the dead-letter topic with the error and its origin in headers."""
        for row, column, message in problems:
            self.dead_letter(polled.record(row), message, column)

    def dead_letter(self, record, error: str, field: str) -> None:
        headers = origin_headers(record, error, field)
        key, value = cut_to_fit(record.key, record.value, headers, self.dead_letters.max_record_bytes)
        if self.refusals.suspects and input_key(record) in self.refusals.suspects:
            self._alone(record, self.dead_letters.topic, key, value, headers)
        else:
            self.producer.send(self.dead_letters.topic, value, key=key, headers=headers)
        self.count += 1
        if self.on_dead_letter is not None:
            self.on_dead_letter(error)

    def _alone(self, record, topic: str, key: bytes | None, value: bytes | None, headers: list) -> None:
        """The output of a suspect input ``record`` in a batch of its own: a refusal now is this record's."""
        self.flush()
        self.producer.send(topic, value, key=key, headers=headers or None)
        try:
            self.producer.flush(self.flush_timeout_s)
        except DeliveryFailed as failed:
            if any(failure.rejected for failure in failed.failures):
                self.refusals.poisoned[input_key(record)] = \
                    f"the broker refused the output: {failed.failures[0].error}"
            raise

    def flush(self) -> None:
        try:
            self.producer.flush(self.flush_timeout_s)
        except DeliveryFailed as failed:
            self.refusals.suspects.update(origin for f in failed.failures if f.rejected
                                          and (origin := self.origin_of(f)) is not None)
            raise

    def origin_of(self, failure: Failure) -> tuple | None:
        """The input message (topic, partition, offset) an undelivered output came from: a dead
        letter names it in its headers, a prediction in its JSON (or Arrow) columns."""
        if failure.topic == self.dead_letters.topic:
            headers = {name: value for name, value in failure.headers}
            try:
                return (headers["source.topic"].decode(), int(headers["source.partition"]),
                        int(headers["source.offset"]))
            except (KeyError, ValueError):
                return None
        if failure.value is None:
            return None
        try:
            prediction = orjson.loads(failure.value)
            return prediction["topic"], prediction["partition"], prediction["offset"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return prediction_origin(failure.value)
