"""The Kafka sink's checks: sizes measured before sending, refused batches narrowed down to their culprit."""

from __future__ import annotations

import numpy as np
import pytest

from nbstream.arrow import RowProblems
from worker.io.kafka.client import DeliveryFailed, Failure
from worker.io.kafka.sink import Destination, KafkaSink, Refusals

from .fakes import FakeRecord


class BatchRefusingProducer:
    """Refuses a whole batch when one of its records is larger than ``limit`` (as librdkafka does)."""

    def __init__(self, limit: int):
        self.limit, self.batch, self.delivered, self.flushes = limit, [], [], 0

    def send(self, topic, value, key=None, headers=None, partition=None, context=None):
        self.batch.append((topic, value, headers, context))

    def flush(self, timeout_s):
        self.flushes += 1
        batch, self.batch = self.batch, []
        if any(len(value or b"") > self.limit for _, value, _, _ in batch):
            raise DeliveryFailed([Failure(context, "MSG_SIZE_TOO_LARGE", True) for *_, context in batch])
        self.delivered += batch


def sink(producer, refusals, output_limit=1 << 20):
    return KafkaSink(producer, Destination("out", output_limit), Destination("dlq", 1 << 20), refusals)


def test_a_prediction_too_large_for_its_topic_sends_its_input_to_the_dead_letters():
    producer = BatchRefusingProducer(limit=1 << 20)
    out = sink(producer, Refusals(), output_limit=300)
    record = FakeRecord(b'{"id": 1}', offset=7)
    out.prediction(record, b"x" * 400)
    out.flush()
    ((topic, value, headers, _),) = producer.delivered
    assert topic == "dlq" and value == b'{"id": 1}'
    assert dict(headers)["error"].startswith(b"prediction of 656 bytes exceeds the limit of 300")


def test_a_refused_batch_makes_suspects_and_only_the_culprit_is_poisoned():
    refusals = Refusals()
    records = [FakeRecord(b"{}", offset=i) for i in range(3)]
    first = sink(BatchRefusingProducer(limit=100), refusals)
    for record, size in zip(records, (10, 500, 10)):
        first.prediction(record, b"p" * size)
    with pytest.raises(DeliveryFailed):
        first.flush()
    assert refusals.suspects == {("in", 0, 0), ("in", 0, 1), ("in", 0, 2)} and not refusals.poisoned
    producer = BatchRefusingProducer(limit=100)  # the next session: each suspect alone
    second = sink(producer, refusals)
    second.prediction(records[0], b"p" * 10)
    with pytest.raises(DeliveryFailed):
        second.prediction(records[1], b"p" * 500)
    assert list(refusals.poisoned) == [("in", 0, 1)]
    assert refusals.poisoned[("in", 0, 1)].startswith("the broker refused the output: MSG_SIZE_TOO_LARGE")
    assert [context.offset for *_, context in producer.delivered] == [0]


def test_a_dead_letter_too_large_for_its_topic_is_cut_to_fit():
    producer = BatchRefusingProducer(limit=1 << 20)
    out = KafkaSink(producer, Destination("out", 1 << 20), Destination("dlq", 1_000), Refusals())
    problems = RowProblems(1)
    problems.flag(np.array([True]), "message", "message of 5000 bytes exceeds the limit of 4000")
    out.reject([FakeRecord(b"v" * 5_000, offset=0)], problems)
    out.flush()
    ((_, value, headers, _),) = producer.delivered
    assert len(value) < 1_000 and dict(headers)["value.truncated.from"] == b"5000"
