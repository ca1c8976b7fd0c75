"""worker serve --model-key key --max-keys through faults on a real broker: a broker killed and
restarted, a replica paused past its session timeout. Every message gets one prediction, and every
prediction of a key equals an offline fit of that key's earlier messages."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pytest

from nbstream.arrow import FeatureSpec
from tests.helpers.kafka import TopicWatcher, json_message, new_topic, read_all
from tests.integration.test_faults import SteadyProducer
from tests.integration.test_keyed_serve import KEYED, offline_check, sms_by_user

pytestmark = pytest.mark.faults


def _history(bootstrap: str, topic: str):
    """(messages, X, labels, keys, (partition, offset) -> index) of every message the broker kept, in
    partition and offset order: a key lives in one partition, so its earlier messages come before."""
    records = sorted(read_all(bootstrap, topic), key=lambda r: (r.partition, r.offset))
    messages = [json.loads(r.value) for r in records]
    X = FeatureSpec.text("text").encoder().encode(pa.record_batch({"text": [m["text"] for m in messages]}),
                                                  learn=False)[0].tocsr()
    return (messages, X, np.asarray([m["label"] for m in messages]), [r.key.decode() for r in records],
            {(r.partition, r.offset): i for i, r in enumerate(records)})


def _committed(bootstrap: str, output: str, expected: int) -> list[dict]:
    watcher = TopicWatcher(bootstrap, output, committed_only=True)
    watcher.wait_until(lambda records: len(records) >= expected, timeout=240)
    time.sleep(2)  # anything beyond would be a duplicate: give it the time to show
    watcher.wait_until(lambda records: False, timeout=1)
    watcher.close()
    return [json.loads(r.value) for r in watcher.records]


def _steady_keyed(bootstrap: str, topic: str, n: int) -> SteadyProducer:
    rows, _, _, users = sms_by_user(n)
    values = [json_message(text=r["text"], label=r["label"], id=r["id"]) for r in rows]
    return SteadyProducer(bootstrap, topic, values, rate=100, keys=[u.encode() for u in users])


def test_keys_through_a_broker_killed_and_restarted_lose_nothing_and_stay_exact(own_broker, kafka_client, tmp_path,
                                                                                started):
    bootstrap = own_broker.bootstrap
    topic = new_topic(bootstrap, "keyed-crash", partitions=2)
    service = started(bootstrap, topic, tmp_path, *KEYED, "--max-keys", "8", client=kafka_client)
    producer = _steady_keyed(bootstrap, topic, 1_500)
    producer.start()
    try:
        time.sleep(6)
        own_broker.kill()
        time.sleep(15)
        assert service.running(), service.log_tail()
        own_broker.restart()
        producer.join(timeout=300)
        assert producer.error is None, producer.error
        messages, X, labels, users, offsets = _history(bootstrap, topic)
        predictions = _committed(bootstrap, service.output, len(offsets))
        assert sorted((p["partition"], p["offset"]) for p in predictions) == sorted(offsets), service.log_tail()
        assert offline_check(predictions, messages, X, labels, users, offsets) > 900
        assert service.terminate() == 0
    finally:
        if own_broker.pid is None:
            own_broker.restart()


def test_keys_of_a_replica_paused_past_its_session_timeout_carry_on_exactly(kafka_bootstrap, kafka_client, tmp_path,
                                                                            started):
    topic = new_topic(kafka_bootstrap, "keyed-paused", partitions=2)
    service = started(kafka_bootstrap, topic, tmp_path, *KEYED, "--max-keys", "8", "--session-timeout", 6,
                      client=kafka_client)
    producer = _steady_keyed(kafka_bootstrap, topic, 1_500)
    producer.start()
    try:
        time.sleep(5)
        service.pause()
        time.sleep(15)
    finally:
        service.resume()
    producer.join(timeout=120)
    assert producer.error is None, producer.error
    messages, X, labels, users, offsets = _history(kafka_bootstrap, topic)
    predictions = _committed(kafka_bootstrap, service.output, len(offsets))
    assert sorted((p["partition"], p["offset"]) for p in predictions) == sorted(offsets), service.log_tail()
    assert offline_check(predictions, messages, X, labels, users, offsets) > 900
    assert service.running(), service.log_tail()
    assert service.terminate() == 0
