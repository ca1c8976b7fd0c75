"""Each bad message alone on a quiet topic: `worker serve` dead-letters it and keeps running."""

from __future__ import annotations

import json

from kafka import KafkaProducer

from tests.helpers.kafka import TopicWatcher, json_message, new_topic, send
from tests.helpers.service import Service

POISON = [  # (value, the start of the error in the dead letter's headers)
    (b"{oops", "malformed JSON"),
    (None, "empty message (null value)"),
    (b"", "empty message"),
    (json_message(features=[1] * 6, label=1, padding="x" * 5_000), "message of 5"),
    (json_message(features=[1, 2, 3], label=1), "list has 3 values; expected 6"),
    (json_message(features=[1] * 6, label="one"), "label 'one' is a string; the model's labels are numbers"),
    (json_message(features=[1] * 6, label={"class": 1}), "label must be a string or a number; got an object"),
    (b'{"features": [1, 1, 1, 1, 1, 1], "label": ' + b"[" * 1_000 + b"]" * 1_000 + b"}",
     "label must be a string or a number; got a list"),
    (b'{"features": [1, 1, 1, 1, 1, 1], "label": ' + b"[" * 1_500 + b"]" * 1_500 + b"}", "malformed JSON"),
    (json_message(features=[1, 2, "x", 4, 5, 6], label=1), "non-numeric value"),
    (json_message(features=[1, 2, 3, 4, 5, -6], label=1), "negative value (this model needs counts)"),
    (json_message(features=[1] * 6, label=2.5), "fractional label"),
    (b'{"features": [1, 1, 1, 1, 1, 1], "label": 1e999}', "malformed JSON: number is infinity"),
]


def test_each_bad_message_alone_is_dead_lettered_and_the_service_goes_on(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "poison")
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-message-bytes", 4_000, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    try:
        send(kafka_bootstrap, topic, [json_message(features=[1, 0, 2, 0, 3, 0], label=1, id="first")])
        assert predictions.wait_until(lambda records: len(records) == 1), service.log_tail()
        for offset, (value, error) in enumerate(POISON, start=1):
            send(kafka_bootstrap, topic, [value], first_key=offset)
            arrived = dead.wait_until(lambda records, offset=offset: len(records) == offset, timeout=60)
            assert arrived, (error, service.log_tail())
            headers = dict(dead.records[-1].headers)
            assert headers["error"].decode().startswith(error), headers["error"]
            assert int(headers["source.offset"]) == offset and headers["source.topic"].decode() == topic
            assert dead.records[-1].value == (value[:len(dead.records[-1].value)] if value else value)
            assert service.running(), service.log_tail()
        last = len(POISON) + 1
        send(kafka_bootstrap, topic, [json_message(features=[0, 3, 0, 2, 0, 1], label=2, id="last")], first_key=last)
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert json.loads(predictions.records[-1].value)["offset"] == last
        assert service.terminate() == 0
        model, meta = service.state()
        assert model.n_examples_seen_ == 2 and meta["source"]["offsets"] == {"0": last + 1}
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_a_label_beyond_max_classes_is_dead_lettered(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "max-classes")
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-classes", 2, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    try:
        labels = [1, 2, 3, 1, 4, 2]
        send(kafka_bootstrap, topic, [json_message(features=[1, 0, 2, 0, 3, i], label=label, id=f"m{i}")
                                      for i, label in enumerate(labels)])
        assert dead.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert [json.loads(r.value)["label"] for r in dead.records] == [3, 4]
        assert all(dict(r.headers)["error"].decode() == "label would add a class beyond --max-classes 2"
                   for r in dead.records)
        assert predictions.wait_until(lambda records: len(records) == 4), service.log_tail()
        assert service.running() and service.terminate() == 0
        model, _ = service.state()
        assert sorted(model.classes_.tolist()) == [1, 2] and model.n_examples_seen_ == 4
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_a_key_larger_than_the_output_topics_take_is_dead_lettered_cut_to_fit(kafka_bootstrap, kafka_client, tmp_path):
    """A prediction is keyed like its input: with a 3 MiB key it fits neither the output topic nor,
    whole, the dead-letter topic (2 MiB each); its dead letter carries the key cut, and the size."""
    topic = new_topic(kafka_bootstrap, "big-key", config={"max.message.bytes": str(8 << 20)})
    service = Service(kafka_bootstrap, topic, tmp_path, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    big_key = b"k" * (3 << 20)
    try:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_request_size=16 << 20)
        for key, i in ((b"a", 0), (big_key, 1), (b"c", 2)):
            producer.send(topic, json_message(features=[1, 0, 2, 0, 3, i], label=1, id=i), key=key).get(timeout=30)
        producer.close()
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert dead.wait_until(lambda records: len(records) == 1), service.log_tail()
        headers = dict(dead.records[0].headers)
        error = headers["error"].decode()
        assert error.startswith("prediction of ") and "exceeds the limit" in error
        assert int(headers["key.truncated.from"]) == len(big_key) and big_key.startswith(dead.records[0].key)
        assert int(headers["source.offset"]) == 1
        assert [json.loads(r.value)["offset"] for r in predictions.records] == [0, 2]
        assert service.running() and service.terminate() == 0
        assert "Kafka failed" not in service.log_tail(100_000)  # not one refused record, so no session restarts
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_an_error_quoting_a_huge_value_is_cut_so_its_dead_letter_fits(kafka_bootstrap, kafka_client, tmp_path):
    """The error names the offending label; a 3 MB label would make a header larger than a dead-letter
    topic of 2 MiB takes, whatever is cut of the message itself."""
    topic = new_topic(kafka_bootstrap, "huge-label", config={"max.message.bytes": str(8 << 20)})
    dlq = new_topic(kafka_bootstrap, "huge-label-dlq", config={"max.message.bytes": str(2 << 20)})
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-message-bytes", 8 << 20, "--dlq", dlq,
                      client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, dlq)
    try:
        send(kafka_bootstrap, topic, [json_message(features=[1] * 6, label=1, id=0),
                                      json_message(features=[1] * 6, label="x" * 3_000_000, id=1),
                                      json_message(features=[2] * 6, label=2, id=2)])
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert dead.wait_until(lambda records: len(records) == 1), service.log_tail()
        error = dict(dead.records[0].headers)["error"].decode()
        assert error.startswith("label 'xxx") and error.endswith("characters)") and len(error) < 1_100
        assert "value.truncated.from" in dict(dead.records[0].headers)
        assert service.running() and service.terminate() == 0
        assert "Kafka failed" not in service.log_tail(100_000)
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def _arrow(columns: dict, names: list[str] | None = None) -> bytes:
    import pyarrow as pa

    from worker.io.arrow_messages import write_stream

    arrays = [value if isinstance(value, pa.Array) else pa.array(value) for value in columns.values()]
    return write_stream(pa.Table.from_arrays(arrays, names=names or list(columns)))


def test_each_bad_arrow_message_alone_is_dead_lettered(
        kafka_bootstrap, kafka_client, tmp_path):
    import pyarrow as pa

    topic = new_topic(kafka_bootstrap, "arrow-poison")
    service = Service(kafka_bootstrap, topic, tmp_path, "--format", "arrow", client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    six = [[1, 0, 2, 0, 3, 0]]
    poison = [
        (_arrow({"features": six, "label": pa.array([2**64 - 1], pa.uint64())}),
         f"label {2**64 - 1} is beyond ±2**53, where numbers are not all exact"),
        (_arrow({"features": six, "label": pa.array([2**62 + 1], pa.int64())}),
         f"label {2**62 + 1} is beyond ±2**53, where numbers are not all exact"),
        (_arrow({"features": six, "x": six}, names=["features", "features"]),
         "column names appear more than once: ['features']"),
        (_arrow({"features": six, "label": [1], "again": [2]}, names=["features", "label", "label"]),
         "column names appear more than once: ['label']"),
    ]
    try:
        send(kafka_bootstrap, topic, [_arrow({"features": six, "label": pa.array([1], pa.int64())})])
        assert predictions.wait_until(lambda records: len(records) == 1), service.log_tail()
        for offset, (value, error) in enumerate(poison, start=1):
            send(kafka_bootstrap, topic, [value], first_key=offset)
            arrived = dead.wait_until(lambda records, offset=offset: len(records) == offset, timeout=60)
            assert arrived, (error, service.log_tail())
            assert dict(dead.records[-1].headers)["error"].decode() == error
            assert service.running(), service.log_tail()
        last = len(poison) + 1
        send(kafka_bootstrap, topic, [_arrow({"features": six, "label": pa.array([2**53], pa.int64())})],
             first_key=last)
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        model, meta = service.state()
        assert model.classes_.tolist() == [1, 2**53] and meta["source"]["offsets"] == {"0": last + 1}
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_a_json_feature_named_like_the_label_is_read_as_a_feature(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "label-named-feature")
    service = Service(kafka_bootstrap, topic, tmp_path, "--feature-names", "a,label", "--label-field", "y",
                      client=kafka_client).start()
    predictions = TopicWatcher(kafka_bootstrap, service.output)
    try:
        send(kafka_bootstrap, topic, [b'{"features": {"a": 1, "label": 7}, "y": "p"}',
                                      b'{"features": {"a": 2, "label": 0}, "y": "q"}'])
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        model, _ = service.state()
        assert model.classes_.tolist() == ["p", "q"] and model.feature_count_.tolist() == [[1, 7], [2, 0]]
    finally:
        predictions.close()
        if service.running():
            service.kill()
