"""Several `worker serve` replicas in one consumer group: exactly-once through churn and zombies,
every replica predicting with the group's global model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from kafka import KafkaProducer

from tests.helpers import group_member
from tests.helpers.kafka import TopicWatcher, new_topic
from tests.helpers.service import Service, assert_equal_statistics, labeled_messages, wait_for
from tests.integration.test_faults import SteadyProducer, export, topic_contents

pytestmark = pytest.mark.faults


def committed(bootstrap, output, expected, timeout=240):
    """Every prediction a read_committed consumer sees, once it sees ``expected`` (plus a grace period)."""
    watcher = TopicWatcher(bootstrap, output, committed_only=True)
    watcher.wait_until(lambda records: len(records) >= expected, timeout=timeout)
    watcher.wait_until(lambda records: False, timeout=3)
    watcher.close()
    return [json.loads(r.value) for r in watcher.records]


def group_model_reached(bootstrap, topic, output, learned, deadline_s, partitions=6) -> bool:
    """Whether, before ``deadline_s``, every partition had a prediction made with (nearly) all the
    ``learned`` examples, asking with an unlabeled message per partition each second."""
    watcher = TopicWatcher(bootstrap, output, committed_only=True)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    reached: set[int] = set()
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline and len(reached) < partitions:
            for partition in range(partitions):
                producer.send(topic, json.dumps({"features": [1] * 6}).encode(), partition=partition)
            producer.flush()
            watcher.wait_until(lambda records: False, timeout=1)
            reached = {p["partition"] for p in map(json.loads, (r.value for r in watcher.records))
                       if p["model_version"] > 0.98 * learned}
        return len(reached) == partitions
    finally:
        producer.close()
        watcher.close()


def test_three_replicas_with_churn_commit_each_message_once_and_merge_to_the_offline_fit(
        kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "replicas", partitions=6)
    values, _, _ = labeled_messages(6_000, np.random.default_rng(8))

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, client=kafka_client, instance=name, name=name)

    a, b, c = replica("a").start(), replica("b").start(), replica("c").start()
    replicas = [a, b, c]
    producer = SteadyProducer(kafka_bootstrap, topic, values, rate=150, partitions=6)
    producer.start()
    try:
        time.sleep(8)
        b.kill()  # a crash: its partitions move once the session timeout passes
        time.sleep(6)
        d = replica("d").start()  # a scale-up
        replicas.append(d)
        time.sleep(8)
        b.start()  # the crashed replica comes back under its id
        producer.join(timeout=240)
        assert producer.error is None
        X, labels, offsets = topic_contents(kafka_bootstrap, topic)
        predictions = committed(kafka_bootstrap, a.output, len(offsets))
        seen = sorted((p["partition"], p["offset"]) for p in predictions)
        assert seen == sorted(offsets), "\n".join(r.log_tail(2000) for r in replicas)  # once each, none missing
        # Replicas predict with the group's model, not only with what their own partitions taught them
        # (two of six partitions at most: about a third of the messages): within a bounded time, a
        # prediction of every partition counts (nearly) every example the group learned. Asked with
        # unlabeled messages (predicted, never learned), one per partition each second, until then;
        # the bound is the transaction timeout (60 s), the longest a replica killed in the middle
        # of a commit holds back the state topic from read_committed readers.
        assert group_model_reached(kafka_bootstrap, topic, a.output, len(offsets), deadline_s=90), \
            "\n".join(r.log_tail(2000) for r in replicas)
        for r in replicas:
            assert r.running(), r.log_tail()
            assert r.terminate() == 0, r.log_tail()
        model = export(kafka_bootstrap, kafka_client, topic, a.group, tmp_path / "group.nbs")
        assert_equal_statistics(model, X, labels)
    finally:
        for r in replicas:
            if r.running():
                r.kill()


def test_a_zombie_paused_past_its_session_timeout_commits_nothing_afterwards(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "zombie", partitions=4)
    values, _, _ = labeled_messages(3_000, np.random.default_rng(9))

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, "--session-timeout", 6, client=kafka_client, instance=name,
                       name=name)

    zombie, survivor = replica("zombie").start(), replica("survivor").start()
    producer = SteadyProducer(kafka_bootstrap, topic, values, rate=150, partitions=4)
    producer.start()
    try:
        time.sleep(6)
        zombie.pause()  # mid-transaction, with records in hand
        time.sleep(20)  # the group gives its partitions to the survivor meanwhile
        zombie.resume()  # its transaction and its offsets must now be refused
        producer.join(timeout=180)
        assert producer.error is None
        X, labels, offsets = topic_contents(kafka_bootstrap, topic)
        predictions = committed(kafka_bootstrap, survivor.output, len(offsets))
        seen = sorted((p["partition"], p["offset"]) for p in predictions)
        assert seen == sorted(offsets), zombie.log_tail() + survivor.log_tail()
        assert zombie.running() and survivor.running()
        assert zombie.terminate() == 0 and survivor.terminate() == 0
        assert_equal_statistics(export(kafka_bootstrap, kafka_client, topic, survivor.group, tmp_path / "g.nbs"),
                                X, labels)
    finally:
        for r in (zombie, survivor):
            if r.running():
                r.resume()
                r.kill()


def test_a_member_whose_session_lapsed_hands_out_no_group_metadata(kafka_bootstrap, kafka_client):
    """A member paused past its session timeout is out of the group, and both clients then describe it
    with no member id and no generation, which the broker takes for a commit from outside any group.
    A transaction committed with that metadata would land although the partitions moved on."""
    topic = new_topic(kafka_bootstrap, "lapse", partitions=2)
    member = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.group_member", kafka_bootstrap, kafka_client, topic,
         f"lapse-{uuid.uuid4().hex[:8]}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask() -> str:
        member.stdin.write("?\n")
        member.stdin.flush()
        return member.stdout.readline().strip()

    try:
        assert member.stdout.readline().strip() == "joined"
        assert ask() == "member"
        os.kill(member.pid, signal.SIGSTOP)
        time.sleep(group_member.SESSION_TIMEOUT_S + 4)
        os.kill(member.pid, signal.SIGCONT)
        answers = []
        for _ in range(15):  # the client learns it at its next heartbeat
            answers.append(ask())
            if answers[-1] == "lapsed":
                break
            time.sleep(1)
        assert answers[-1] == "lapsed", answers
    finally:
        member.kill()
        member.wait()


def test_at_least_once_replicas_commit_on_revocation_and_survive_rebalances(kafka_bootstrap, kafka_client, tmp_path):
    """Each join and each departure revokes partitions, and a replica commits what it has first
    (with kafka-python, from the consumer's IO thread, where a blocking commit is refused)."""
    topic = new_topic(kafka_bootstrap, "alo-churn", partitions=4)
    values, _, _ = labeled_messages(2_400, np.random.default_rng(5))

    def replica(name):
        return Service(kafka_bootstrap, topic, tmp_path, "--guarantee", "at-least-once", client=kafka_client,
                       instance=name, name=name)

    a = replica("a").start()
    replicas = [a]
    producer = SteadyProducer(kafka_bootstrap, topic, values, rate=150, partitions=4)
    producer.start()
    try:
        time.sleep(4)
        b = replica("b").start()  # a gives up two partitions, committing first
        replicas.append(b)
        assert wait_for(lambda: re.search(r"partitions assigned partitions=\[\d", b.log_tail(100_000)), timeout=60), \
            b.log_tail() + a.log_tail()
        time.sleep(2)
        assert b.terminate() == 0, b.log_tail()  # b leaves: its partitions come back to a
        producer.join(timeout=120)
        assert producer.error is None
        X, labels, offsets = topic_contents(kafka_bootstrap, topic)
        watcher = TopicWatcher(kafka_bootstrap, a.output)
        assert watcher.wait_until(lambda records: {(json.loads(r.value)["partition"], json.loads(r.value)["offset"])
                                                   for r in records} >= offsets, timeout=120), a.log_tail()
        watcher.close()
        assert a.running(), a.log_tail()
        assert a.terminate() == 0, a.log_tail()
        assert "revoked" in a.log_tail(100_000) and "Traceback" not in a.log_tail(100_000)
        model = export(kafka_bootstrap, kafka_client, topic, a.group, tmp_path / "group.nbs")
        assert_equal_statistics(model, X, labels)  # at-least-once repeats predictions, never statistics
    finally:
        for r in replicas:
            if r.running():
                r.kill()
