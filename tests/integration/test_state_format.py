"""A group's state topic holding a state this release cannot read, on a real broker: of a newer state
format version, or (of a partition the group committed offsets for) one whose payload does not
read. `worker serve` refuses the group in one line with exit status 2, leaving the state topic,
the group's committed offsets and the predictions as they were (no restart from earliest, nothing
written); `worker export` refuses a newer format the same way. A replica of an older release had
passed such a state over as unreadable and predicted the whole input again."""

from __future__ import annotations

import json
import time

import numpy as np
from kafka import KafkaAdminClient, KafkaProducer

from tests.helpers.cli import run_worker
from tests.helpers.kafka import new_topic, read_all, send
from tests.helpers.service import Service, labeled_messages
from tests.helpers.state_records import forged_state
from worker.io.kafka.state_topic import STATE_FORMAT, state_topic_name

NEWER = STATE_FORMAT + 1


def records_of(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of a topic, aborted transactions' too (read_uncommitted): (offset, key, value)."""
    return [(record.offset, record.key, record.value) for record in read_all(bootstrap, topic, timeout=30)]


def ends_of(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset (transaction markers count: a transaction opened and aborted moves it)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        return {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.list_group_offsets({group: None}).get(group, {})
        return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}
    finally:
        admin.close()


def resend_as_newer(bootstrap: str, topic: str, key: bytes) -> dict:
    """The newest manifest of ``key`` the service wrote, sent again under the same key with its state
    format version one above this release's (its digest is of the chunks, which stay as they are)."""
    manifests = [value for _, record_key, value in records_of(bootstrap, topic) if record_key == key and value]
    manifest = json.loads(manifests[-1])
    assert manifest["format"] == STATE_FORMAT, manifest  # the service writes the field
    newer = manifest | {"format": NEWER}
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send(topic, key=key, value=json.dumps(newer).encode()).get(timeout=30)
    producer.close()
    return newer


def served_200(bootstrap: str, client: str, folder) -> tuple[Service, str, np.random.Generator]:
    """A group that predicted and committed 200 messages, stopped; its service and state topic."""
    rng = np.random.default_rng(41)
    topic = new_topic(bootstrap, "state-format")
    first, _, _ = labeled_messages(200, rng)
    send(bootstrap, topic, first)
    service = Service(bootstrap, topic, folder, client=client).start()
    try:
        assert len(read_all(bootstrap, service.output, expected=200, timeout=120, committed_only=True)) == 200
        assert service.terminate() == 0, service.log_tail()
    finally:
        if service.running():
            service.kill()
    return service, state_topic_name(service.group, topic), rng


def refused_untouched(bootstrap: str, client: str, service: Service, states: str, folder,
                      rng: np.random.Generator) -> tuple[str, str]:
    """Start `worker serve` on the group again, with 200 more messages to predict: it ends with exit
    status 2 and touches nothing (state topic, committed offsets, predictions). Its one error
    line, and its whole log."""
    later, _, _ = labeled_messages(200, rng, start_id=200)
    send(bootstrap, service.topic, later, first_key=200)  # what a replica going on would predict
    before = records_of(bootstrap, states), ends_of(bootstrap, states), committed_offsets(bootstrap, service.group)
    assert before[2] == {(service.topic, 0): 200}
    assert len(read_all(bootstrap, service.output, timeout=30)) == 200

    again = Service(bootstrap, service.topic, folder, client=client, group=service.group)
    started = time.monotonic()
    again.start()
    try:
        status = again.process.wait(timeout=120)
    finally:
        if again.running():
            again.kill()
    elapsed = time.monotonic() - started
    log = again.log.read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line or line.startswith("error:")]
    assert status == 2, log[-4000:]
    assert len(errors) == 1 and "Traceback" not in log, log[-4000:]
    assert elapsed < 60, elapsed

    after = records_of(bootstrap, states), ends_of(bootstrap, states), committed_offsets(bootstrap, service.group)
    assert after == before  # not a record written, not even an aborted one; the offsets as committed
    assert len(read_all(bootstrap, service.output, timeout=30)) == 200  # not one prediction sent, even uncommitted
    return errors[0], log


def test_a_state_of_a_newer_format_version_is_refused_in_one_line_and_nothing_is_touched(kafka_bootstrap,
                                                                                          kafka_client, tmp_path):
    service, states, rng = served_200(kafka_bootstrap, kafka_client, tmp_path)
    resend_as_newer(kafka_bootstrap, states, b"partition-0")

    error, log = refused_untouched(kafka_bootstrap, kafka_client, service, states, tmp_path / "again", rng)
    assert f"state topic {states}, partition-0: state format version {NEWER}; this nbstream reads version " \
        f"{STATE_FORMAT}. A newer nbstream wrote this group's states: serve the group with that version or a newer " \
        "one, or use a new --group." in error, error
    assert "skipped a state-topic record" not in log and "partitions assigned" not in log  # it never joined the group

    exported = run_worker("export", "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client,
                          "--input", service.topic, "--group", service.group, "--out", tmp_path / "exported.nbs",
                          timeout=120)
    assert exported.returncode == 2, exported.stderr[-3000:]
    assert f"partition-0: state format version {NEWER}" in exported.stderr and "Traceback" not in exported.stderr
    assert not (tmp_path / "exported.nbs").exists()


def test_an_unreadable_state_of_a_partition_the_group_committed_is_refused_not_predicted_again(kafka_bootstrap,
                                                                                                kafka_client, tmp_path):
    """The state of partition 0 replaced by one this release cannot read (as another version's, whose
    writer tombstoned the chunks of the state it replaced): the group committed offset 200 for it,
    so it is not started afresh from earliest (which predicted the 200 messages again)."""
    service, states, rng = served_200(kafka_bootstrap, kafka_client, tmp_path)
    replaced = {key for _, key, value in records_of(kafka_bootstrap, states)
                if key.startswith(b"partition-0#") and value is not None}
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for key, value in forged_state("partition-0", {"next_offset": "200"}) + [(key, None) for key in sorted(replaced)]:
        producer.send(states, key=key, value=value).get(timeout=30)
    producer.close()

    error, log = refused_untouched(kafka_bootstrap, kafka_client, service, states, tmp_path / "again", rng)
    assert f"state topic {states}, partition-0: the group committed offset 200 of partition 0, but its state does " \
        "not read (next_offset must be an integer" in error, error
    assert error.rstrip().endswith("starting the partition afresh would replace that state, and predict its messages "
                                   "again from the earliest. Serve the group with the nbstream version that wrote it, "
                                   "or use a new --group. exit_status=2"), error
