"""Labels that come later on a topic of their own, joined by id on an in-memory cluster: each pair
learned once whatever the order, the served prediction judged, bad and unmatched labels told
apart, the pending examples bounded in time and number and carried over by the partition state."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import nbstream
from worker.errors import ConfigError
from worker.io.kafka.state_topic import StateAssembler
from worker.service.follower import is_state_name, partition_of, state_name
from worker.service.partition.record import PartitionRecord
from worker.service.pending.join import widened
from worker.service.telemetry.metrics import ServiceMetrics

from ....helpers.fake_kafka import FakeKafka
from .test_session import STATES, open_session, polls, settings

DAY_MS = 86_400_000
FEATURES = {"m0": [3, 0], "m1": [0, 3], "m2": [2, 1], "m3": [1, 2], "m4": [4, 0]}
LABELS = {"m0": "a", "m1": "b", "m2": "a", "m3": "b", "m4": "a"}


def cluster(partitions: int = 1, label_partitions: int | None = None) -> FakeKafka:
    kafka = FakeKafka()
    kafka.create("in", partitions)
    kafka.create("labels", partitions if label_partitions is None else label_partitions)
    return kafka


def send_features(kafka: FakeKafka, ids, at_ms: int = 1_000, partition: int = 0) -> None:
    for key in ids:
        kafka.append("in", json.dumps({"id": key, "features": FEATURES[key]}).encode(), key=key.encode(),
                     partition=partition, timestamp_ms=at_ms)


def send_labels(kafka: FakeKafka, ids, at_ms: int = 2_000, partition: int = 0, labels=LABELS) -> None:
    for key in ids:
        kafka.append("labels", json.dumps({"id": key, "label": labels[key]}).encode(), key=key.encode(),
                     partition=partition, timestamp_ms=at_ms)


def states_in(kafka: FakeKafka) -> dict[str, PartitionRecord]:
    """The committed partition states, by name (their pending examples' records aside)."""
    assembler = StateAssembler(is_name=is_state_name)
    names = [assembler.add(record.key, record.value) for record in kafka.topics[STATES].log[0]]
    return {name: PartitionRecord.from_payload(assembler.take(name), nbstream.MultinomialNB(), name)[0]
            for name in dict.fromkeys(filter(None, names)) if partition_of(name) is not None}


def labeled(**options):
    return settings(labels_topic="labels", checkpoint_every=1_000, **options)


def offline(ids) -> nbstream.MultinomialNB:
    """The model of exactly these (features, label) pairs, learned in this order."""
    return nbstream.MultinomialNB().partial_fit(np.array([FEATURES[k] for k in ids]), [LABELS[k] for k in ids])


def assert_learned_exactly(kafka: FakeKafka, ids, partition: int = 0) -> None:
    model = states_in(kafka)[state_name(partition)].model
    expected = offline(ids)
    assert model.n_examples_seen_ == len(ids)
    np.testing.assert_array_equal(model.classes_, expected.classes_)
    np.testing.assert_array_equal(model.class_count_, expected.class_count_)
    np.testing.assert_array_equal(model.feature_count_, expected.feature_count_)


def predictions_of(kafka: FakeKafka) -> dict:
    return {p["id"]: p for p in map(json.loads, kafka.topics["out"].values())}


def dead_letters_of(kafka: FakeKafka) -> list[tuple[bytes, dict]]:
    return [(r.value, dict(r.headers)) for r in kafka.topics["in.dlq"].log[0]]


@pytest.mark.parametrize("order", ["labels after", "labels before", "same poll"])
def test_each_pair_is_learned_once_whatever_comes_first(order):
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(), metrics)
    first, second = (send_labels, send_features) if order == "labels before" else (send_features, send_labels)
    first(kafka, ["m0", "m1", "m2"])
    if order != "same poll":
        session.run(polls(1))
    second(kafka, ["m0", "m1", "m2"])
    session.run(polls(2))
    assert_learned_exactly(kafka, ["m0", "m1", "m2"])
    assert set(predictions_of(kafka)) == {"m0", "m1", "m2"}
    state = states_in(kafka)[state_name(0)]
    assert state.labels_next_offset == 3 and state.next_offset == 3
    assert kafka.group_offsets["g labels"] == {0: 3} and kafka.group_offsets["g"] == {0: 3}
    assert metrics.delayed_labels["joined"]._value.get() == 3
    assert metrics.learned._value.get() == 3


def test_the_prediction_served_is_judged_not_a_new_one():
    kafka = cluster()
    session = open_session(kafka, labeled())
    send_features(kafka, ["m0", "m1"])
    send_labels(kafka, ["m0", "m1"])
    session.run(polls(1))  # both learned: the model now knows a and b
    send_features(kafka, ["m2"])  # served "a" by a model that knows both
    session.run(polls(1))
    served = predictions_of(kafka)["m2"]["prediction"]
    send_labels(kafka, ["m2"], labels={"m2": "b" if served == "a" else "a"})  # the served one was wrong
    session.run(polls(1))
    report = states_in(kafka)[state_name(0)].quality.report()["all"]
    assert report["judged"] == 1 and report["accuracy"] == 0.0  # m0, m1: served before any class was known


def test_a_second_label_for_an_id_is_a_duplicate_and_the_first_wins():
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(), metrics)
    send_features(kafka, ["m0"])
    send_labels(kafka, ["m0"])
    send_labels(kafka, ["m0"], labels={"m0": "b"})
    session.run(polls(2))
    assert_learned_exactly(kafka, ["m0"])
    assert metrics.delayed_labels["duplicate"]._value.get() == 1


@pytest.mark.parametrize("value, reason", [
    (b"not json", "malformed JSON"),
    (b'{"label": "a"}', "field 'id' is missing"),
    (b'{"id": true, "label": "a"}', "field 'id' must be a string or an integer"),
    (b'{"id": "m0"}', "field 'label' is missing"),
    (b'{"id": "m0", "label": [1]}', "label must be a string or a number"),
    (b"", "empty message"),
])
def test_a_bad_label_event_alone_is_a_dead_letter_with_its_reason(value, reason):
    kafka = cluster()
    session = open_session(kafka, labeled())
    send_features(kafka, ["m0"])
    kafka.append("labels", value, partition=0, timestamp_ms=2_000)
    session.run(polls(2))
    [(letter, headers)] = dead_letters_of(kafka)
    assert letter == value and headers["error"].decode().startswith(reason)
    assert headers["source.topic"] == b"labels" and headers["source.offset"] == b"0"
    state = states_in(kafka)[state_name(0)]
    assert state.labels_next_offset == 1 and not state.model.is_fitted
    assert len(session.group.owned[0].pending) == 1


@pytest.mark.parametrize("dlq", [False, True])
def test_what_the_ttl_drops_is_counted_and_an_unmatched_label_may_be_a_dead_letter(dlq):
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(label_ttl=86_400.0, dlq_unmatched_labels=dlq), metrics)
    send_features(kafka, ["m0"], at_ms=1_000)
    send_labels(kafka, ["m9"], at_ms=1_000, labels={"m9": "b"})  # no message m9 ever comes
    session.run(polls(1))
    send_features(kafka, ["m1"], at_ms=1_000 + DAY_MS + 1)  # the clock passes the TTL of both
    send_labels(kafka, ["m0"], at_ms=1_000 + DAY_MS + 2)  # too late: m0 is gone, and this one waits
    session.run(polls(1))
    assert metrics.delayed_labels["expired"]._value.get() == 1
    assert metrics.delayed_labels["unmatched"]._value.get() == 1
    assert not states_in(kafka)[state_name(0)].model.is_fitted
    pending = session.group.owned[0].pending
    assert len(pending) == 1 and pending.waiting_labels == 1
    letters = dead_letters_of(kafka)
    if dlq:
        [(letter, headers)] = letters
        assert json.loads(letter) == {"id": "m9", "label": "b"}
        assert headers["error"].startswith(b"unmatched label") and headers["source.offset"] == b"0"
        assert headers["__connect.errors.exception.class.name"] == b"nbstream.unmatched_label"
    else:
        assert letters == []


def test_max_pending_lets_the_oldest_give_way():
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(max_pending=2), metrics)
    send_features(kafka, ["m0", "m1", "m2"])
    send_labels(kafka, ["m0", "m1", "m2"])
    session.run(polls(2))
    assert_learned_exactly(kafka, ["m1", "m2"])
    assert metrics.delayed_labels["evicted"]._value.get() == 1


def test_a_restarted_service_joins_labels_to_the_examples_it_kept():
    kafka = cluster()
    session = open_session(kafka, labeled())
    send_features(kafka, ["m0", "m1", "m2", "m3"])
    send_labels(kafka, ["m0"])
    session.run(polls(1))
    session.close()
    send_labels(kafka, ["m1", "m2", "m3"])
    again = open_session(kafka, labeled())
    again.run(polls(2))
    assert_learned_exactly(kafka, ["m0", "m1", "m2", "m3"])
    assert len(predictions_of(kafka)) == 4 and len(kafka.topics["out"].values()) == 4  # none served twice


def test_inline_labels_are_learned_as_before_beside_a_labels_topic():
    kafka = cluster()
    session = open_session(kafka, labeled())
    kafka.append("in", json.dumps({"id": "m0", "features": FEATURES["m0"], "label": "a"}).encode(), timestamp_ms=1)
    send_features(kafka, ["m1"])
    send_labels(kafka, ["m1"])
    session.run(polls(2))
    assert_learned_exactly(kafka, ["m0", "m1"])


@pytest.mark.parametrize("partitions, message", [
    (3, "the labels topic labels has 3 partitions and in 2"),
    (None, "the labels topic labels does not exist"),
])
def test_a_labels_topic_that_cannot_be_read_beside_the_input_is_refused(partitions, message):
    kafka = cluster(2, partitions)
    if partitions is None:
        del kafka.topics["labels"]
    with pytest.raises(ConfigError, match=message):
        open_session(kafka, labeled())


def test_served_probabilities_of_more_classes_than_this_replica_knows_yet_are_not_judged():
    proba = np.array([[0.5, 0.3, 0.2]])
    assert widened(proba, 3) is proba
    np.testing.assert_array_equal(widened(proba, 4), [[0.5, 0.3, 0.2, 0.0]])
    assert widened(proba, 2) is None


def test_a_message_stamped_far_in_the_future_moves_the_clock_an_hour_past_now_at_most():
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(label_ttl=7 * 86_400.0), metrics)
    now_ms = int(time.time() * 1000)
    send_features(kafka, ["m0"], at_ms=now_ms - 86_400_000)  # a day old: within the TTL
    session.run(polls(1))
    send_features(kafka, ["m1"], at_ms=now_ms + 1000 * 365 * 86_400_000)  # a thousand years ahead
    session.run(polls(1))
    send_labels(kafka, ["m0"], at_ms=now_ms)
    session.run(polls(1))
    assert metrics.delayed_labels["expired"]._value.get() == 0
    assert_learned_exactly(kafka, ["m0"])


def test_an_id_longer_than_1024_characters_is_served_but_not_kept_and_its_label_is_a_dead_letter():
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(), metrics)
    long_id = "x" * 1_025
    kafka.append("in", json.dumps({"id": long_id, "features": [1, 2]}).encode(), timestamp_ms=1_000)
    kafka.append("labels", json.dumps({"id": long_id, "label": "a"}).encode(), timestamp_ms=2_000)
    session.run(polls(2))
    assert len(kafka.topics["out"].values()) == 1  # served
    assert metrics.pending._value.get() == 0
    [(_, headers)] = dead_letters_of(kafka)
    assert headers["error"] == b"field 'id' is longer than 1,024 characters"
    assert headers["source.topic"] == b"labels"


def test_a_message_of_a_poll_older_than_the_ttl_by_the_polls_newest_is_expired_not_kept():
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, labeled(label_ttl=7 * 86_400.0), metrics)
    now_ms = int(time.time() * 1000)
    send_features(kafka, ["m0", "m1"], at_ms=now_ms)
    send_features(kafka, ["m2"], at_ms=now_ms - 8 * DAY_MS)  # in the same poll, eight days older
    session.run(polls(1))
    assert metrics.delayed_labels["expired"]._value.get() == 1
    assert len(session.group.owned[0].pending) == 2
    send_labels(kafka, ["m0", "m1", "m2"], at_ms=now_ms)
    session.run(polls(1))
    assert_learned_exactly(kafka, ["m0", "m1"])  # m2's label met nothing: it waits, unmatched
    assert metrics.delayed_labels["joined"]._value.get() == 2
    assert session.group.owned[0].pending.waiting_labels == 1
    assert set(predictions_of(kafka)) == {"m0", "m1", "m2"}  # every message was served all the same
