"""The Kafka sink's checks: sizes measured before sending, refused batches narrowed down to their culprit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbstream.arrow import RowProblems
from worker.io.kafka.client import DeliveryFailed, Failure
from worker.io.kafka.sink import Destination, KafkaSink, Refusals, cut_to_fit, record_bytes

from .fakes import records


class BatchRefusingProducer:
    """Refuses a whole batch when one of its records is larger than ``limit`` (as librdkafka does)."""

    def __init__(self, limit: int):
        self.limit, self.batch, self.delivered, self.flushes = limit, [], [], 0

    def send(self, topic, value, key=None, headers=None, partition=None):
        self.batch.append((topic, value, headers, key))

    def send_many(self, topic, values, keys):
        for value, key in zip(values, keys, strict=True):
            self.send(topic, value, key)

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
