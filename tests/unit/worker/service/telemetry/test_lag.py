"""The group's lag on every partition of its input, from its committed offsets."""

from __future__ import annotations

import time

from prometheus_client import generate_latest

from worker.service.telemetry.lag import GroupLag, partition_lags
from worker.service.telemetry.metrics import ServiceMetrics

from .....helpers.fake_kafka import FakeKafka


def test_a_partition_is_behind_by_what_the_group_has_not_committed():
    assert partition_lags({0: 10, 1: 7, 2: 5}, {0: 4, 1: None, 2: 5}, {1: 2}, "earliest") == {0: 6, 1: 5, 2: 0}


def test_a_partition_never_committed_is_behind_by_nothing_when_the_service_starts_at_the_end():
    assert partition_lags({0: 10, 1: 7}, {0: 12, 1: None}, {}, "latest") == {0: 0, 1: 0}


def kafka_with(ends: list[int], committed: dict[int, int]) -> FakeKafka:
    kafka = FakeKafka()
    kafka.create("in", partitions=len(ends))
    for partition, end in enumerate(ends):
        for _ in range(end):
            kafka.append("in", b"{}", partition=partition)
    kafka.group_offsets["g"] = dict(committed)
    return kafka


def test_every_partition_is_measured_whoever_owns_it():
    kafka = kafka_with([5, 9, 3], {0: 5, 1: 2})
    lag = GroupLag(kafka, "in", "g", "earliest", ServiceMetrics())
    assert lag.measure(kafka.admin()) == {0: 0, 1: 7, 2: 3}


def test_the_thread_reports_the_lag_and_its_sum_to_the_metrics_until_stopped():
    kafka = kafka_with([4, 6], {0: 1})
    metrics = ServiceMetrics()
    lag = GroupLag(kafka, "in", "g", "earliest", metrics, every_s=0.01)
    lag.start()
    try:
        deadline = time.monotonic() + 10
        while not metrics.lag.measured and time.monotonic() < deadline:
            time.sleep(0.01)
        kafka.append("in", b"{}", partition=0)  # the partition grows: so does its lag
        deadline = time.monotonic() + 10
        while metrics.lag.measured != {"in": ("g", {0: 4, 1: 6})} and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        lag.stop()
    text = generate_latest(metrics.registry).decode()
    assert 'nbstream_consumer_lag{group="g",partition="0",topic="in"} 4.0' in text
    assert 'nbstream_consumer_lag{group="g",partition="1",topic="in"} 6.0' in text
    assert 'nbstream_consumer_lag_sum{group="g",topic="in"} 10.0' in text


def test_a_broker_that_does_not_answer_keeps_the_last_measure():
    kafka = kafka_with([4], {})
    metrics = ServiceMetrics()
    metrics.lag.update("in", "g", {0: 2})
    kafka.answers = False
    lag = GroupLag(kafka, "in", "g", "earliest", metrics, every_s=0.01)
    lag.start()
    time.sleep(0.2)
    lag.stop()
    assert metrics.lag.measured == {"in": ("g", {0: 2})}


def test_the_labels_topic_has_its_lag_beside_the_inputs():
    metrics = ServiceMetrics()
    metrics.lag.update("in", "g", {0: 2, 1: 3})
    metrics.lag.update("in.labels", "g", {0: 7, 1: 0})
    text = generate_latest(metrics.registry).decode()
    assert 'nbstream_consumer_lag_sum{group="g",topic="in"} 5.0' in text
    assert 'nbstream_consumer_lag_sum{group="g",topic="in.labels"} 7.0' in text
    assert 'nbstream_consumer_lag{group="g",partition="0",topic="in.labels"} 7.0' in text
