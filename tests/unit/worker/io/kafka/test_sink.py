"""The Kafka sink's checks: sizes measured before sending, refused batches narrowed down to their culprit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbstream.arrow import RowProblems
from worker.io.interfaces import Refusals
from worker.io.kafka.client import DeliveryFailed, Failure, KafkaFailure, record_bytes
from worker.io.kafka.dead_letters import cut_to_fit
from worker.io.kafka.sink import Destination, KafkaSink
from worker.io.records import Polled, Record

from .....helpers.fakes import records


class BatchRefusingProducer:
    """Refuses a whole batch when one of its records is larger than ``limit`` (as librdkafka does)."""

    def __init__(self, limit: int):
        self.limit, self.batch, self.delivered, self.flushes = limit, [], [], 0

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        self.batch.append((topic, value, headers, key))

    def send_many(self, topic, values, keys, headers=None, timestamps_ms=None):
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            self.send(topic, value, key, None if headers is None else headers[i])

    def flush(self, timeout_s):
        self.flushes += 1
        batch, self.batch = self.batch, []
        if any(len(value or b"") > self.limit for _, value, _, _ in batch):
            raise DeliveryFailed([Failure(topic, key, value, headers or [], "MSG_SIZE_TOO_LARGE", True)
                                  for topic, value, headers, key in batch])
        self.delivered += batch


def sink(producer, refusals, output_limit=1 << 20):
    return KafkaSink(producer, Destination("out", output_limit), Destination("dlq", 1 << 20), refusals)


def test_a_prediction_too_large_for_its_topic_sends_its_input_to_the_dead_letters():
    producer = BatchRefusingProducer(limit=1 << 20)
    out = sink(producer, Refusals(), output_limit=300)
    out.send_predictions(records([b'{"id": 1}'], first_offset=7), [0], [b"x" * 400])
    out.flush()
    ((topic, value, headers, _),) = producer.delivered
    assert topic == "dlq" and value == b'{"id": 1}'
    assert dict(headers)["error"].startswith(b"prediction of 657 bytes exceeds the limit of 300")


def prediction(offset: int, size: int) -> bytes:
    """A prediction's JSON (it names its input), padded to about ``size`` bytes."""
    return json.dumps({"topic": "in", "partition": 0, "offset": offset, "pad": "p" * size}).encode()


def test_a_refused_batch_makes_suspects_and_only_the_culprit_is_poisoned():
    refusals = Refusals()
    polled = records([b"{}"] * 3)
    first = sink(BatchRefusingProducer(limit=200), refusals)
    first.send_predictions(polled, [0, 1, 2], [prediction(0, 10), prediction(1, 500), prediction(2, 10)])
    with pytest.raises(DeliveryFailed):
        first.flush()
    assert refusals.suspects == {("in", 0, 0), ("in", 0, 1), ("in", 0, 2)} and not refusals.poisoned
    producer = BatchRefusingProducer(limit=200)  # the next session: each suspect alone
    second = sink(producer, refusals)
    second.send_predictions(polled, [0], [prediction(0, 10)])
    with pytest.raises(DeliveryFailed):
        second.send_predictions(polled, [1], [prediction(1, 500)])
    assert list(refusals.poisoned) == [("in", 0, 1)]
    assert refusals.poisoned[("in", 0, 1)].startswith("the broker refused the output: MSG_SIZE_TOO_LARGE")
    assert [json.loads(value)["offset"] for _, value, _, _ in producer.delivered] == [0]


def test_a_dead_letter_too_large_for_its_topic_is_cut_to_fit():
    producer = BatchRefusingProducer(limit=1 << 20)
    out = KafkaSink(producer, Destination("out", 1 << 20), Destination("dlq", 1_000), Refusals())
    problems = RowProblems(1)
    problems.flag(np.array([True]), "message", "message of 5000 bytes exceeds the limit of 4000")
    out.reject(records([b"v" * 5_000]), problems)
    out.flush()
    ((_, value, headers, _),) = producer.delivered
    assert len(value) < 1_000 and dict(headers)["value.truncated.from"] == b"5000"


@pytest.mark.parametrize("key_bytes, value_bytes", [(10, 5_000), (5_000, 10), (5_000, 5_000), (0, 0), (900, 900)])
def test_a_dead_letter_is_cut_to_its_topic_limit_key_too_when_the_key_alone_is_too_large(key_bytes, value_bytes):
    headers = [("error", b"too large"), ("source.offset", b"7")]
    key, value = b"k" * key_bytes, b"v" * value_bytes
    cut_key, cut_value = cut_to_fit(key, value, headers, limit=2_000)
    named = dict(headers)
    assert record_bytes(cut_key, cut_value, headers) <= 2_000
    assert key.startswith(cut_key) and value.startswith(cut_value)
    assert (cut_key != key) == ("key.truncated.from" in named) == (key_bytes > 1_500)
    assert (cut_value != value) == ("value.truncated.from" in named)
    if cut_key != key:
        assert int(named["key.truncated.from"]) == key_bytes and cut_value == b""
    if key_bytes + value_bytes < 1_500:
        assert (cut_key, cut_value) == (key, value)


class RecordingProducer:
    """Keeps every record sent, with its headers and timestamp."""

    def __init__(self):
        self.sent: list[dict] = []

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        self.sent.append({"topic": topic, "value": value, "key": key, "headers": headers or [],
                          "timestamp": timestamp_ms})

    def send_many(self, topic, values, keys, headers=None, timestamps_ms=None):
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            self.send(topic, value, key, None if headers is None else headers[i], None,
                      None if timestamps_ms is None else timestamps_ms[i])

    def flush(self, timeout_s):
        pass


def traced(values: list, headers: list, timestamps: list) -> Polled:
    """A poll of these values with these headers and timestamps, at offsets 0, 1, ..."""
    return Polled.of("in", [Record("in", 0, i, str(i).encode(), value, head, stamp)
                            for i, (value, head, stamp) in enumerate(zip(values, headers, timestamps, strict=True))])


TRACE = [("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), ("empty", None)]


@pytest.mark.parametrize("input_timestamps", [True, False], ids=["input", "now"])
def test_a_prediction_carries_its_inputs_headers_and_by_default_its_timestamp(input_timestamps):
    producer = RecordingProducer()
    out = KafkaSink(producer, Destination("out", 1 << 20), Destination("dlq", 1 << 20), Refusals(),
                    input_timestamps=input_timestamps)
    polled = traced([b"{}", b"{}", b"{}"], [TRACE, [], None], [1_700_000_000_123, 1_700_000_000_456, 0])
    out.send_predictions(polled, [0, 1, 2], [b"p0", b"p1", b"p2"])
    assert [record["headers"] for record in producer.sent] == [TRACE, [], []]
    expected = [1_700_000_000_123, 1_700_000_000_456, None] if input_timestamps else [None] * 3
    assert [record["timestamp"] for record in producer.sent] == expected


def test_a_prediction_too_large_with_its_inputs_headers_is_a_dead_letter():
    producer = RecordingProducer()
    out = KafkaSink(producer, Destination("out", 1_000), Destination("dlq", 1 << 20), Refusals())
    polled = traced([b"{}", b"{}"], [[("big", b"h" * 800)], []], [1, 2])
    assert out.send_predictions(polled, [0, 1], [b"p" * 100, b"p" * 100]) == [0]
    dead, prediction = producer.sent
    assert dead["topic"] == "dlq" and prediction == {"topic": "out", "value": b"p" * 100, "key": b"1",
                                                     "headers": [], "timestamp": 2}
    assert dict(dead["headers"])["error"].startswith(b"prediction of 1170 bytes exceeds the limit of 1000")


def test_a_dead_letter_is_its_input_with_its_headers_first_then_ours_and_its_timestamp():
    producer = RecordingProducer()
    out = KafkaSink(producer, Destination("out", 1 << 20), Destination("dlq", 1 << 20), Refusals())
    polled = traced([b"{oops"], [TRACE + [("error", b"an older one")]], [1_700_000_000_123])
    problems = RowProblems(1)
    problems.flag(np.array([True]), "message", "malformed JSON: unexpected character")
    out.reject(polled, problems)
    ((dead,),) = [producer.sent]
    assert (dead["topic"], dead["value"], dead["key"], dead["timestamp"]) == ("dlq", b"{oops", b"0", 1_700_000_000_123)
    names = [name for name, _ in dead["headers"]]
    assert dead["headers"][:3] == TRACE + [("error", b"an older one")]  # the input's, as they came
    assert names[3:] == ["error", "error.field", "source.topic", "source.partition", "source.offset",
                         "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
                         "__connect.errors.exception.class.name", "__connect.errors.exception.message"]
    ours = dict(dead["headers"])  # the last of a name wins: ours
    assert ours["error"] == ours["__connect.errors.exception.message"] == b"malformed JSON: unexpected character"
    assert ours["__connect.errors.exception.class.name"] == b"nbstream.malformed"
    assert (ours["__connect.errors.topic"], ours["__connect.errors.partition"], ours["__connect.errors.offset"]) \
        == (b"in", b"0", b"0")


def test_the_dead_letter_of_an_input_whose_output_was_refused_is_stamped_when_sent():
    """The broker may have refused the output for its timestamp (message.timestamp.before.max.ms)."""
    producer = RecordingProducer()
    refusals = Refusals(poisoned={("in", 0, 0): "the broker refused the output: INVALID_TIMESTAMP"})
    out = KafkaSink(producer, Destination("out", 1 << 20), Destination("dlq", 1 << 20), refusals)
    out.dead_letter(traced([b"{}"], [TRACE], [1_000]).record(0), refusals.poisoned[("in", 0, 0)], "output")
    ((dead,),) = [producer.sent]
    assert dead["timestamp"] is None and dead["headers"][:2] == TRACE
    assert dict(dead["headers"])["__connect.errors.exception.class.name"] == b"nbstream.output_refused"


class TransactionRefusingProducer(RecordingProducer):
    """Refuses records stamped before ``oldest``, and then (as both clients do within a transaction)
    every send, until a flush has reported the refusal."""

    def __init__(self, oldest: int):
        super().__init__()
        self.oldest, self.refused = oldest, []

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        if self.refused:
            raise KafkaFailure("Cannot perform send because at least one previous transactional request has failed")
        if timestamp_ms is not None and timestamp_ms < self.oldest:
            self.refused.append(Failure(topic, key, value, headers or [], "INVALID_TIMESTAMP", True))
            return
        super().send(topic, value, key, headers, partition, timestamp_ms)

    def flush(self, timeout_s):
        refused, self.refused = self.refused, []
        if refused:
            raise DeliveryFailed(refused)


def test_a_send_refused_after_an_earlier_refusal_still_makes_that_records_input_a_suspect():
    refusals = Refusals()
    out = KafkaSink(TransactionRefusingProducer(oldest=1_000), Destination("out", 1 << 20),
                    Destination("dlq", 1 << 20), refusals)
    out.send_predictions(traced([b"{}"], [[]], [5]), [0], [prediction(0, 10)])  # refused, silently for now
    problems = RowProblems(2)
    problems.flag(np.array([False, True]), "message", "malformed JSON: x")
    with pytest.raises(DeliveryFailed):  # the dead letter of offset 1 cannot be sent: the flush says why
        out.reject(traced([b"{}", b"{oops"], [[], []], [5, 2_000]), problems)
    assert refusals.suspects == {("in", 0, 0)}
