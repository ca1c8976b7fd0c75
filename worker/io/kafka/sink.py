"""Predictions and dead letters to Kafka topics, through one producer, with every delivery checked.

A prediction carries the headers of the message it answers (W3C ``traceparent``, correlation
ids) and, unless told otherwise, its timestamp, so that event-time windows and joins downstream
see the input's time; a dead letter is its input as it came, with headers saying why
(``dead_letters.py``).

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

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from nbstream.arrow import RowProblems

from ..arrow_messages import prediction_origin
from ..interfaces import Refusals
from ..records import Header, Origin, Polled, Record
from .client import DeliveryFailed, Failure, KafkaFailure, Producer, record_bytes
from .dead_letters import dead_letter_record


@dataclass(frozen=True)
class Destination:
    topic: str
    max_record_bytes: int  # the topic's max.message.bytes


def input_key(record: Record) -> Origin:
    return record.topic, record.partition, record.offset


def _timestamp(milliseconds: int) -> int | None:
    """A record timestamp to send on: None (the time of sending) for an input that had none."""
    return milliseconds if milliseconds > 0 else None


class KafkaSink:
    """The prediction sink and the reject sink of `worker serve`.

    refusals : what the broker refused, kept by the caller across sessions (see the module docstring)
    count : dead letters sent by this sink
    """

    def __init__(self, producer: Producer, predictions: Destination, dead_letters: Destination,
                 refusals: Refusals, flush_timeout_s: float = 60.0, on_dead_letter: Callable[[str], None] | None = None,
                 input_timestamps: bool = True):
        """on_dead_letter(error) : told of every dead letter sent (for counting);
        input_timestamps : a prediction takes its input's timestamp (False: the time it is sent)."""
        self.producer = producer
        self.on_dead_letter = on_dead_letter
        self.predictions, self.dead_letters = predictions, dead_letters
        self.refusals = refusals
        self.flush_timeout_s = flush_timeout_s
        self.input_timestamps = input_timestamps
        self.count = 0

    def send_predictions(self, polled: Polled, rows: list[int], values: list[bytes]) -> list[int]:
        """values[j] is the prediction of message rows[j] of the poll, keyed like it and with its
        headers; returns the j whose prediction was too large for the output topic (its input went
        to the dead-letter topic)."""
        topic, limit = self.predictions.topic, self.predictions.max_record_bytes
        keys, suspects = polled.keys, self.refusals.suspects
        row_keys = [keys[row] for row in rows]
        headers = None if polled.headers is None else [polled.headers[row] for row in rows]
        stamps = self._timestamps(polled, rows)
        if not suspects and values and record_bytes(max(filter(None, row_keys), key=len, default=None),
                                                    max(values, key=len), _largest(headers)) <= limit:
            self._send(self.producer.send_many, topic, values, row_keys, headers, stamps)  # the usual case: all fit
            return []
        diverted = []
        for j, (row, value) in enumerate(zip(rows, values, strict=True)):
            key, head = keys[row], polled.headers_of(row)
            stamp = None if stamps is None else stamps[j]
            if record_bytes(key, value, head) > limit:
                diverted.append(j)
                self.dead_letter(polled.record(row), f"prediction of {record_bytes(key, value, head)} bytes "
                                 f"exceeds the limit of {limit} of topic {topic}", "prediction")
            elif suspects and (polled.topic, int(polled.partitions[row]), int(polled.offsets[row])) in suspects:
                self._alone(polled.record(row), topic, key, value, head, stamp)
            else:
                self._send(self.producer.send, topic, value, key, head or None, None, stamp)
        return diverted

    def _timestamps(self, polled: Polled, rows: list[int]) -> list[int | None] | None:
        """The timestamps of the predictions of messages ``rows``: their inputs' (None: the time of sending)."""
        if not self.input_timestamps:
            return None
        stamps = polled.timestamps[rows]
        if (stamps > 0).all():
            return stamps.tolist()  # type: ignore[no-any-return]  # numpy's tolist is untyped
        return [_timestamp(stamp) for stamp in stamps.tolist()]

    def reject(self, polled: Polled, problems: RowProblems) -> None:
        """Each bad message, unchanged, to the dead-letter topic with the error and its origin in headers."""
        for row, column, message in problems:
            self.dead_letter(polled.record(row), message, column)

    def dead_letter(self, record: Record, error: str, field: str) -> None:
        """``record`` to the dead-letter topic, with its timestamp; an input whose output the broker
        refused is stamped with the time of sending instead (the refusal may have been of its timestamp)."""
        key, value, headers = dead_letter_record(record, error, field, self.dead_letters.max_record_bytes)
        stamp = None if input_key(record) in self.refusals.poisoned else _timestamp(record.timestamp)
        if self.refusals.suspects and input_key(record) in self.refusals.suspects:
            self._alone(record, self.dead_letters.topic, key, value, headers, stamp)
        else:
            self._send(self.producer.send, self.dead_letters.topic, value, key, headers, None, stamp)
        self.count += 1
        if self.on_dead_letter is not None:
            self.on_dead_letter(error)

    def _alone(self, record: Record, topic: str, key: bytes | None, value: bytes | None, headers: list[Header],
               timestamp_ms: int | None) -> None:
        """The output of a suspect input ``record`` in a batch of its own: a refusal now is this record's."""
        self.flush()
        self._send(self.producer.send, topic, value, key, headers or None, None, timestamp_ms)
        try:
            self.producer.flush(self.flush_timeout_s)
        except DeliveryFailed as failed:
            if any(failure.rejected for failure in failed.failures):
                self.refusals.poisoned[input_key(record)] = \
                    f"the broker refused the output: {failed.failures[0].error}"
            raise

    def _send(self, send: Callable[..., None], *record: object) -> None:
        """``send(*record)``. Within a transaction, both clients refuse to send once a record sent
        before was refused: the flush then says which it was, so that its input becomes a suspect
        (a new session would meet the same refusal, and restart, forever)."""
        try:
            send(*record)
        except KafkaFailure:
            self.flush()  # raises DeliveryFailed when a record was refused
            raise

    def flush(self) -> None:
        try:
            self.producer.flush(self.flush_timeout_s)
        except DeliveryFailed as failed:
            self.refusals.suspects.update(origin for f in failed.failures if f.rejected
                                          and (origin := self.origin_of(f)) is not None)
            raise

    def origin_of(self, failure: Failure) -> Origin | None:
        """The input message (topic, partition, offset) an undelivered output came from: a dead
        letter names it in its headers (ours come last, after the input's), a prediction in its JSON
        (or Arrow) columns."""
        if failure.topic == self.dead_letters.topic:
            headers = {name: value for name, value in failure.headers if value is not None}  # ours have values
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


def _largest(headers: list[list[Header] | None] | None) -> list[Header]:
    """The headers of the most bytes among ``headers`` (each a list of headers, or None)."""
    if headers is None:
        return []
    return max((head or [] for head in headers), key=lambda head: record_bytes(None, None, head), default=[])
