"""`worker serve` as the tools around Kafka expect it: a dead letter is its input — headers and
timestamp included — with Kafka Connect's error headers; a prediction carries its input's headers and
timestamp; the lag of every partition is reported, a dead replica's too."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, json_message, new_topic
from tests.helpers.paths import SMS
from tests.helpers.service import Service, free_port, metric_values, wait_for
from tests.integration.test_poison import POISON
from tests.integration.test_security import PASSWORD
from worker.io.arrow_messages import read_stream, write_stream
from worker.io.kafka.dead_letters import reason_of

HOUR_MS = 3_600_000
CONNECT = ["__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
           "__connect.errors.exception.class.name", "__connect.errors.exception.message"]
OURS = ["error", "error.field", "source.topic", "source.partition", "source.offset"]


def trace(i: int) -> list[tuple[str, bytes]]:
    """The headers a traced request carries (W3C trace context, a correlation id)."""
    return [("traceparent", f"00-{i:032x}-{i:016x}-01".encode()), ("correlation-id", f"request-{i}".encode())]


def send_traced(bootstrap: str, topic: str, values: list, first: int = 0, timestamp_ms: int | None = None) -> list[int]:
    """Each value with trace(first + i) headers and a timestamp an hour ago (+ i ms); their timestamps."""
    stamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000) - HOUR_MS
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=16 << 20)
    stamps = [stamp + i for i in range(len(values))]
    for i, value in enumerate(values):
        producer.send(topic, value, key=str(first + i).encode(), headers=trace(first + i),
                      timestamp_ms=stamps[i]).get(timeout=30)
    producer.close()
    return stamps


def names(record) -> list[str]:
    return [name for name, _ in record.headers]


def assert_a_dead_letter_of(record, topic: str, offset: int, headers: list, stamp: int, error: str) -> None:
    """The input's headers as they came, then ours, then Kafka Connect's; the input's timestamp."""
    assert record.headers[:len(headers)] == headers, record.headers
    ours = names(record)[len(headers):]
    assert ours[:5] == OURS and ours[-5:] == CONNECT, ours
    named = dict(record.headers)
    assert named["error"].decode().startswith(error) and named["__connect.errors.exception.message"] == named["error"]
    assert named["__connect.errors.exception.class.name"].decode() == f"nbstream.{reason_of(error)}"
    assert (named["__connect.errors.topic"].decode(), int(named["__connect.errors.partition"]),
            int(named["__connect.errors.offset"])) == (topic, 0, offset)
    assert (record.timestamp, record.timestamp_type) == (stamp, 0)  # CreateTime, the input's


def test_each_dead_letter_alone_and_among_others_is_its_input_with_kafka_connects_headers(
        kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "connect-dlq")
    service = Service(kafka_bootstrap, topic, tmp_path, "--max-message-bytes", 4_000, client=kafka_client).start()
    dead = TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    predictions = TopicWatcher(kafka_bootstrap, service.output)
    good = json_message(features=[1, 0, 2, 0, 3, 0], label=1, id="good")
    try:
        send_traced(kafka_bootstrap, topic, [good])  # the model's width: 6 features
        assert predictions.wait_until(lambda records: len(records) == 1, timeout=60), service.log_tail()
        for offset, (value, error) in enumerate(POISON, start=1):
            (stamp,) = send_traced(kafka_bootstrap, topic, [value], first=offset)
            assert dead.wait_until(lambda records, n=offset: len(records) == n, timeout=60), service.log_tail()
            assert_a_dead_letter_of(dead.records[-1], topic, offset, trace(offset), stamp, error)
        # all of them again, among good messages, in one poll
        first = len(POISON) + 1
        stamps = send_traced(kafka_bootstrap, topic, [v for value, _ in POISON for v in (value, good)], first=first)
        assert dead.wait_until(lambda records: len(records) == 2 * len(POISON), timeout=60), service.log_tail()
        for i, record in enumerate(dead.records[len(POISON):]):
            offset = first + 2 * i
            assert_a_dead_letter_of(record, topic, offset, trace(offset), stamps[2 * i], POISON[i][1])
        assert predictions.wait_until(lambda records: len(records) == 1 + len(POISON), timeout=60), service.log_tail()
        for record in predictions.records[1:]:  # each good one answered with its own headers and timestamp
            offset = json.loads(record.value)["offset"]
            assert record.headers == trace(offset) and record.timestamp == stamps[offset - first]
        assert service.running() and service.terminate() == 0
    finally:
        dead.close(), predictions.close()
        if service.running():
            service.kill()


@pytest.mark.parametrize("output_timestamp", ["input", "now"])
def test_a_prediction_carries_its_inputs_headers_and_timestamp(kafka_bootstrap, kafka_client, tmp_path,
                                                               output_timestamp):
    topic = new_topic(kafka_bootstrap, f"traced-{output_timestamp}")
    service = Service(kafka_bootstrap, topic, tmp_path, "--output-timestamp", output_timestamp,
                      client=kafka_client).start()
    predictions = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    try:
        sent_at = time.time() * 1000
        stamps = send_traced(kafka_bootstrap, topic, [json_message(features=[i, 1, 2, 0, 3, 0], label=i % 2, id=i)
                                                      for i in range(5)])
        assert predictions.wait_until(lambda records: len(records) == 5, timeout=60), service.log_tail()
        for record in predictions.records:
            offset = json.loads(record.value)["offset"]
            assert record.headers == trace(offset), record.headers  # after ours: we add none
            if output_timestamp == "input":
                assert record.timestamp == stamps[offset]
            else:
                assert sent_at <= record.timestamp <= time.time() * 1000
        assert service.terminate() == 0
    finally:
        predictions.close()
        if service.running():
            service.kill()


def test_arrow_predictions_and_the_dead_letter_of_a_row_carry_their_messages_headers(
        kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "traced-arrow")
    service = Service(kafka_bootstrap, topic, tmp_path, "--format", "arrow", client=kafka_client).start()
    predictions = TopicWatcher(kafka_bootstrap, service.output)
    dead = TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    six = [1, 0, 2, 0, 3, 0]
    messages = [write_stream(pa.table({"features": [six, None, six], "label": [1, 2, 1]})),
                write_stream(pa.table({"features": [six, six], "label": [2, 1]}))]
    try:
        stamps = send_traced(kafka_bootstrap, topic, messages)
        assert predictions.wait_until(lambda records: len(records) == 2, timeout=60), service.log_tail()
        for offset, record in enumerate(predictions.records):
            assert record.headers == trace(offset) and record.timestamp == stamps[offset]
        assert read_stream(predictions.records[0].value).column("row").to_pylist() == [0, 2]
        assert dead.wait_until(lambda records: len(records) == 1, timeout=60), service.log_tail()
        (letter,) = dead.records
        assert letter.headers[:2] == trace(0) and dict(letter.headers)["source.row"] == b"1"
        assert names(letter)[-5:] == CONNECT and letter.timestamp == stamps[0]
        assert service.terminate() == 0
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_an_output_refused_for_its_timestamp_dead_letters_its_input_stamped_when_sent(
        kafka_bootstrap, kafka_client, tmp_path):
    """Topics that refuse timestamps more than an hour old: the prediction of an input two hours old is
    refused, and so would be its dead letter with the input's timestamp; the service goes on."""
    topic = new_topic(kafka_bootstrap, "old-input")
    recent_only = {"message.timestamp.before.max.ms": str(HOUR_MS)}
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(name, 1, 1, topic_configs=recent_only)
                         for name in (f"{topic}.predictions", f"{topic}.dlq")])
    admin.close()
    service = Service(kafka_bootstrap, topic, tmp_path, client=kafka_client).start()
    # sessions restart on the way: what their aborted transactions wrote is not read
    predictions = TopicWatcher(kafka_bootstrap, service.output, committed_only=True)
    dead = TopicWatcher(kafka_bootstrap, f"{topic}.dlq", committed_only=True)
    try:
        old = int(time.time() * 1000) - 2 * HOUR_MS
        send_traced(kafka_bootstrap, topic, [json_message(features=[1] * 6, label=1, id="old")], timestamp_ms=old)
        (recent,) = send_traced(kafka_bootstrap, topic, [json_message(features=[2] * 6, label=2, id="new")], first=1,
                                timestamp_ms=int(time.time() * 1000))
        send_traced(kafka_bootstrap, topic, [b"{oops"], first=2, timestamp_ms=old)  # its dead letter is refused too
        assert dead.wait_until(lambda records: len(records) == 2, timeout=180), service.log_tail()
        refused, malformed = sorted(dead.records, key=lambda record: int(dict(record.headers)["source.offset"]))
        named = dict(refused.headers)
        assert named["error"].decode().startswith("the broker refused the output") and refused.value is not None
        assert named["__connect.errors.exception.class.name"] == b"nbstream.output_refused"
        assert refused.headers[:2] == trace(0) and refused.timestamp > old + HOUR_MS  # stamped when it was sent
        named = dict(malformed.headers)
        assert named["error"].decode().startswith("malformed JSON") and named["source.offset"] == b"2"
        assert malformed.headers[:2] == trace(2) and malformed.timestamp > old + HOUR_MS
        assert predictions.wait_until(lambda records: len(records) == 1, timeout=60), service.log_tail()
        assert json.loads(predictions.records[0].value)["offset"] == 1 and predictions.records[0].timestamp == recent
        assert service.running() and service.terminate() == 0, service.log_tail()
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def lags(port: int, topic: str) -> dict[int, float]:
    """nbstream_consumer_lag of each partition of ``topic`` as the replica on ``port`` reports it."""
    found = {}
    for name, value in metric_values(port).items():
        if name.startswith("nbstream_consumer_lag{") and f'topic="{topic}"' in name:
            found[int(name.split('partition="')[1].split('"')[0])] = value
    return found


def test_a_killed_replicas_partitions_keep_their_lag_on_the_survivor_until_it_takes_them_over(
        kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "lag", partitions=4)
    ports = {"a": free_port(), "b": free_port()}

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, "--metrics-port", ports[name], "--session-timeout", 30,
                       client=kafka_client, instance=f"replica-{name}", name=name)

    a, b = replica("a").start(), replica("b").start()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    predictions = TopicWatcher(kafka_bootstrap, a.output, committed_only=True)

    def send_to_every_partition(count: int, first: int) -> None:
        for partition in range(4):
            for i in range(count):
                producer.send(topic, json_message(features=[1, 0, 2, 0, 3, i], label=i % 2, id=first + i),
                              partition=partition)
        producer.flush()

    try:
        assert wait_for(lambda: metric_values(ports["a"]).get("nbstream_assigned_partitions") == 2
                        and metric_values(ports["b"]).get("nbstream_assigned_partitions") == 2, timeout=90), \
            a.log_tail() + b.log_tail()
        send_to_every_partition(5, 0)
        # predictions visible to read_committed readers: their offsets are committed with them
        assert predictions.wait_until(lambda records: len(records) == 20, timeout=60), a.log_tail() + b.log_tail()
        b.kill()
        send_to_every_partition(7, 100)
        # the survivor catches up on its own partitions; the dead one's show what waits for them
        assert wait_for(lambda: sorted(lags(ports["a"], topic).values()) == [0.0, 0.0, 7.0, 7.0], timeout=15), \
            (lags(ports["a"], topic), a.log_tail())
        assert metric_values(ports["a"])[f'nbstream_consumer_lag_sum{{group="{a.group}",topic="{topic}"}}'] == 14.0
        assert metric_values(ports["a"]).get("nbstream_assigned_partitions") == 2
        # once the group gives them to the survivor, it works them off
        assert wait_for(lambda: lags(ports["a"], topic) == dict.fromkeys(range(4), 0.0)
                        and metric_values(ports["a"]).get("nbstream_assigned_partitions") == 4, timeout=90), \
            (lags(ports["a"], topic), a.log_tail())
        assert a.terminate() == 0
    finally:
        producer.close(), predictions.close()
        for replica_ in (a, b):
            if replica_.running():
                replica_.kill()


def test_a_file_as_confluent_cloud_hands_it_out_reaches_a_sasl_listener(own_broker, kafka_client, tmp_path):
    """librdkafka's names (metadata.broker.list, the plural sasl.mechanisms), and properties the
    service sets itself kept to its own values with a warning."""
    properties = tmp_path / "client.properties"
    properties.write_text("\n".join([
        f"metadata.broker.list={own_broker.address('SASL_SSL')}", "security.protocol=SASL_SSL",
        "sasl.mechanisms=SCRAM-SHA-256", "sasl.username=alice", f"sasl.password={PASSWORD}",
        f"ssl.ca.location={own_broker.ca_file}", "session.timeout.ms=45000", "acks=all", ""]))
    topic = new_topic(own_broker.bootstrap, "cloud-file")
    produced = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--label", "label",
                          "--limit", 50, "--kafka-client", kafka_client, "--kafka-config", properties, timeout=120)
    assert produced.returncode == 0 and "sent 50 messages" in produced.stdout, produced.stderr
    service = Service(own_broker.bootstrap, topic, tmp_path, "--text-features", client=kafka_client,
                      connection=["--kafka-config", properties]).start()
    predictions = TopicWatcher(own_broker.bootstrap, service.output, committed_only=True)
    try:
        assert predictions.wait_until(lambda records: len(records) == 50, timeout=120), service.log_tail()
        assert service.terminate() == 0
    finally:
        predictions.close()
        if service.running():
            service.kill()
    written = service.log.read_text()
    assert 'the file\'s value is not used property="session.timeout.ms" option="--session-timeout"' in written
    assert 'property="acks"' in written and PASSWORD not in written


@pytest.mark.parametrize("lines, expected", [
    (["socket.keepalive.enable=true"], "kafka-python has no equivalent of the property socket.keepalive.enable"),
    (["security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=GSSAPI"],
     "kafka-python has no equivalent of sasl.mechanisms=GSSAPI (it takes PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
     "and OAUTHBEARER"),
    (["ssl.cipher.suites=ECDHE-RSA-AES256-GCM-SHA384"],
     "kafka-python's admin client has no equivalent of the property ssl.cipher.suites"),
], ids=["librdkafka only", "a mechanism", "not for its admin client"])
def test_kafka_python_refuses_by_name_a_property_it_has_no_equivalent_of(kafka_bootstrap, tmp_path, lines, expected):
    properties = tmp_path / "client.properties"
    properties.write_text("\n".join(lines) + "\n")
    done = run_worker("serve", "--bootstrap-server", kafka_bootstrap, "--input", "t", "--output", "t.out", "--group",
                      "g", "--text-features", "--kafka-config", properties, "--kafka-client", "kafka-python",
                      timeout=120)
    lines_written = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines_written) == 1, done.stderr[-3000:]
    assert f"--kafka-config: {expected}" in lines_written[0]


def test_the_confluent_client_gets_every_property_as_written(kafka_bootstrap, tmp_path):
    """A property only librdkafka knows is used; a value librdkafka refuses is its own one line."""
    properties = tmp_path / "client.properties"
    topic = new_topic(kafka_bootstrap, "librdkafka-names")
    properties.write_text(f"metadata.broker.list={kafka_bootstrap}\nsocket.keepalive.enable=true\n")
    done = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--limit", 5,
                      "--kafka-client", "confluent", "--kafka-config", properties, timeout=120)
    assert done.returncode == 0 and "sent 5 messages" in done.stdout, done.stderr
    properties.write_text(f"metadata.broker.list={kafka_bootstrap}\nsocket.keepalive.enable=perhaps\n")
    done = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--limit", 5,
                      "--kafka-client", "confluent", "--kafka-config", properties, timeout=120)
    assert done.returncode == 2 and "Kafka client configuration" in done.stderr, done.stderr
    assert "socket.keepalive.enable" in done.stderr and "Traceback" not in done.stderr
