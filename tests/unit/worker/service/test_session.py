"""One Kafka session of `worker serve` on an in-memory cluster: its topics, the state read before
joining, the order of each commit's steps under both guarantees, the base state, failures and
the broker-answers log lines."""

from __future__ import annotations

import json
import logging
import time

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.serve_config import serve_config
from worker.io.kafka.client import KafkaFailure
from worker.io.kafka.state_topic import TOPIC_CONFIG, StateAssembler, write_records
from worker.service.config import ServeConfig
from worker.service.follower import BASE, state_name
from worker.service.partition.record import PartitionRecord
from worker.service.session import ServiceContext, Session
from worker.service.snapshots import SnapshotStore, starting_point
from worker.service.telemetry.metrics import ServiceMetrics
from worker.snapshot_meta import SnapshotMeta, write_snapshot

from ....helpers.fake_kafka import FakeKafka, FakeProducer, runs

STATES = "in.g.nbstream-state"  # the default state topic of group g reading topic in
CREATED = ["admin.create_topic out", "admin.create_topic in.dlq", f"admin.create_topic {STATES}", "admin.close"]
EXACTLY_ONCE_COMMIT = ["producer.flush", f"producer.send {STATES}", "producer.flush",
                       "producer.send_offsets in {0: 2} GroupMetadata(group='g', generation=1)",
                       "producer.commit_transaction"]
AT_LEAST_ONCE_COMMIT = ["producer.flush", f"producer.send {STATES}", "producer.flush", "consumer.commit {0: 2}"]


def settings(**options) -> ServeConfig:
    """Nothing connects to this address: the FakeKafka is the client."""
    return serve_config(**options)


def cluster(partitions: int = 1, messages: int = 2) -> FakeKafka:
    """An input topic ``in`` holding ``messages`` labeled examples in each partition."""
    kafka = FakeKafka()
    kafka.create("in", partitions)
    for partition in range(partitions):
        for i in range(messages):
            example = {"features": [3, 0] if i % 2 == 0 else [0, 3], "label": "a" if i % 2 == 0 else "b"}
            kafka.append("in", json.dumps(example).encode(), key=f"k{i}".encode(), partition=partition)
    return kafka


def open_session(kafka: FakeKafka, config: ServeConfig, metrics: ServiceMetrics | None = None) -> Session:
    """A session as `worker serve` opens it (the starting point from --init-model, if given)."""
    return Session(ServiceContext(kafka, config, metrics or ServiceMetrics(), starting_point(config, None),
                                  "nbstream.g.test"))


def polls(count: int):
    """should_stop for ``run``: true once the loop has turned ``count`` times."""
    turns = iter(range(count + 1))
    return lambda: next(turns) == count


def transaction_calls(journal: list[str]) -> list[str]:
    calls = ("init_transactions", "begin_transaction", "send_offsets", "commit_transaction", "abort_transaction")
    return [entry for entry in journal if entry.split()[0].removeprefix("producer.") in calls]


def after(journal: list[str], entry: str) -> list[str]:
    """The journal from ``entry`` on."""
    return journal[journal.index(entry):]


def states_in(kafka: FakeKafka, skip: tuple[str, ...] | list[str] = ()) -> dict[str, PartitionRecord]:
    """The states the state topic holds, by name, as a replica reads them (but those named in ``skip``)."""
    assembler = StateAssembler()
    names = [assembler.add(record.key, record.value) for record in kafka.topics[STATES].log[0]]
    return {name: PartitionRecord.from_payload(assembler.take(name), nbstream.MultinomialNB(), name)[0]
            for name in dict.fromkeys(filter(None, names)) if name not in skip}


def state_records(partition: int, next_offset: int, model=None) -> list[tuple[bytes, bytes | None]]:
    """The state-topic records of a partition state another replica committed."""
    model = model or nbstream.MultinomialNB().partial_fit(np.array([[1, 0]]), ["a"])
    encoder = FeatureSpec.vector("features").encoder()
    encoder.width = 2
    payload = PartitionRecord(model, next_offset=next_offset).to_payload(encoder)
    return write_records(state_name(partition), payload).records


@pytest.fixture
def init_model(tmp_path):
    """A snapshot to start a new group from (--init-model), 4 examples learned."""
    model = nbstream.MultinomialNB().partial_fit(np.array([[3, 0], [0, 3], [2, 0], [0, 2]]), ["a", "b", "a", "b"])
    encoder = FeatureSpec.vector("features").encoder()
    encoder.width = 2
    return write_snapshot(model, tmp_path / "init.nbs", SnapshotMeta(features=encoder))


# ---- opening ------------------------------------------------------------------------------------
def test_opening_creates_the_missing_topics_with_the_input_partition_count():
    kafka = cluster(partitions=3)
    open_session(kafka, settings())
    assert kafka.journal[:4] == CREATED
    created = {name: (kafka.topics[name].partitions, kafka.topics[name].config) for name in ("out", "in.dlq", STATES)}
    assert created == {"out": (3, {"max.message.bytes": "2097152"}), "in.dlq": (3, {"max.message.bytes": "2097152"}),
                       STATES: (1, TOPIC_CONFIG)}
    assert TOPIC_CONFIG["cleanup.policy"] == "compact"


def test_opening_keeps_existing_topics_and_their_record_size_limits():
    kafka = cluster(partitions=2)
    kafka.create("out", 1, {"max.message.bytes": "5000"})
    kafka.create("in.dlq", 2)
    session = open_session(kafka, settings())
    assert [entry for entry in kafka.journal if entry.startswith("admin.")] == [
        f"admin.create_topic {STATES}", "admin.close"]
    assert kafka.topics["out"].partitions == 1
    assert (session.sink.predictions.max_record_bytes, session.sink.dead_letters.max_record_bytes) == (5000, 1_048_588)


def test_the_producer_builds_no_batch_larger_than_the_smallest_record_limit_of_the_topics_it_writes():
    """A batch of state chunks (512 KiB each) larger than the state topic's limit would be refused whole."""
    kafka = cluster()
    open_session(kafka, settings())
    assert kafka.producers[0].batch_bytes == int(TOPIC_CONFIG["max.message.bytes"])  # below the outputs' 2 MiB


def test_opening_reads_the_state_topic_to_its_end_before_joining():
    kafka = cluster(partitions=2)
    kafka.create(STATES, 1, TOPIC_CONFIG)
    for partition in (0, 1):
        for key, value in state_records(partition, next_offset=7 + partition):
            kafka.append(STATES, value, key)
    kafka.reader_batch = 2  # one state a poll
    session = open_session(kafka, settings())
    assert after(kafka.journal, "reader.assign " + STATES) == [
        f"reader.assign {STATES}", "reader.poll 2 records", "reader.poll 2 records", "consumer.subscribe"]
    assert {p: state.next_offset for p, state in session.group.latest.items()} == {0: 7, 1: 8}


def test_exactly_once_takes_the_transactional_id_over_before_reading_the_state_topic():
    kafka = cluster()
    open_session(kafka, settings())
    assert kafka.journal[kafka.journal.index("admin.close") + 1:] == [
        "producer.init_transactions", f"reader.assign {STATES}", "consumer.subscribe"]


# ---- commits --------------------------------------------------------------------------------------
def test_an_exactly_once_checkpoint_sends_predictions_states_offsets_then_commits():
    kafka = cluster()
    session = open_session(kafka, settings(checkpoint_every=2))
    session.run(polls(1))
    assert runs(after(kafka.journal, "consumer.assigned [0]")) == [
        "consumer.assigned [0]", "consumer.poll 2 records", "producer.begin_transaction", "producer.send out",
        *EXACTLY_ONCE_COMMIT,
        "producer.flush"]  # the final commit: nothing changed since, nothing written
    predictions = [json.loads(value) for value in kafka.topics["out"].values()]
    assert [(p["offset"], p["prediction"]) for p in predictions] == [(0, None), (1, "a")]  # test-then-train
    assert kafka.group_offsets == {"g": {0: 2}}
    state = states_in(kafka)[state_name(0)]
    assert (state.next_offset, state.model.n_examples_seen_) == (2, 2)


def test_at_least_once_commits_offsets_by_the_consumer_after_the_state_is_flushed_without_transactions():
    kafka = cluster()
    session = open_session(kafka, settings(guarantee="at-least-once", checkpoint_every=2))
    session.run(polls(1))
    assert runs(after(kafka.journal, "consumer.assigned [0]")) == [
        "consumer.assigned [0]", "consumer.poll 2 records", "producer.send out", *AT_LEAST_ONCE_COMMIT,
        "producer.flush"]
    assert transaction_calls(kafka.journal) == []
    assert kafka.group_offsets == {"g": {0: 2}} and states_in(kafka)[state_name(0)].next_offset == 2


@pytest.mark.parametrize(("guarantee", "steps"), [("exactly-once", EXACTLY_ONCE_COMMIT),
                                                  ("at-least-once", AT_LEAST_ONCE_COMMIT)])
def test_a_revoke_commits_before_the_partitions_are_released(guarantee, steps):
    kafka = cluster()
    session = open_session(kafka, settings(guarantee=guarantee))  # no checkpoint due within the test
    kafka.consumers[0].revoke([0])  # at the second poll
    session.run(polls(2))
    revoked = after(kafka.journal, "consumer.revoke [0]")
    assert runs(revoked[:revoked.index("consumer.released [0]") + 1]) == [
        "consumer.revoke [0]", *steps, "consumer.released [0]"]
    assert session.group.owned == {} and session.group.latest[0].next_offset == 2
    assert kafka.group_offsets == {"g": {0: 2}}


# ---- the base state -------------------------------------------------------------------------------
@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_new_group_writes_its_base_state_once_before_joining(init_model, guarantee):
    kafka = cluster()
    session = open_session(kafka, settings(guarantee=guarantee, init_model=init_model, checkpoint_every=2))
    joining = kafka.journal.index("consumer.subscribe")
    base_write = [f"producer.send {STATES}", "producer.flush"]  # the sink's flush (nothing sent), then the base
    if guarantee == "exactly-once":
        assert runs(kafka.journal[:joining]) == [
            *CREATED, "producer.init_transactions", f"reader.assign {STATES}", "producer.flush",
            "producer.begin_transaction", *base_write, "producer.commit_transaction"]
    else:
        assert runs(kafka.journal[:joining]) == [
            *CREATED, f"reader.assign {STATES}", "producer.flush", *base_write, "consumer.commit {}"]
    assert list(states_in(kafka)) == [BASE] and states_in(kafka)[BASE].model.n_examples_seen_ == 4
    assert kafka.group_offsets.get("g", {}) == {}

    session.run(polls(1))  # partition 0 learns two examples and commits
    assert list(states_in(kafka)) == [BASE, state_name(0)]
    assert [record.key for record in kafka.topics[STATES].log[0]].count(BASE.encode()) == 1
    assert session.group.global_model.model.n_examples_seen_ == 4 + 2
    if guarantee == "at-least-once":
        assert transaction_calls(kafka.journal) == []


@pytest.mark.parametrize("earlier", ["the base", "partition states"])
def test_a_group_that_has_states_does_not_write_the_base_again(init_model, earlier):
    kafka = cluster()
    first = open_session(kafka, settings(init_model=init_model if earlier == "the base" else None, checkpoint_every=2))
    first.run(polls(1))
    first.close()
    written, opened = len(kafka.topics[STATES].values()), len(kafka.journal)
    second = open_session(kafka, settings(init_model=init_model, checkpoint_every=2))
    assert kafka.journal[opened:] == ["admin.close", "producer.init_transactions", f"reader.assign {STATES}",
                                      f"reader.poll {written} records", "consumer.subscribe"]
    assert len(kafka.topics[STATES].values()) == written
    assert (second.group.base is not None) == (earlier == "the base")


# ---- failures and closing ---------------------------------------------------------------------------
@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_kafka_failure_from_poll_ends_the_run_without_committing(guarantee):
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, settings(guarantee=guarantee), metrics)
    kafka.consumers[0].fail(KafkaFailure("the group coordinator is gone"))  # at the second poll
    with pytest.raises(KafkaFailure, match="the group coordinator is gone"):
        session.run(polls(5))
    assert kafka.journal[-1] == "consumer.poll failed: the group coordinator is gone"
    assert not [entry for entry in kafka.journal if "commit" in entry]
    assert metrics.registry.get_sample_value("nbstream_checkpoints_total") == 0 and kafka.group_offsets == {}
    # the discarded work is redone by the next session: counting it now would count it twice
    for name in ("nbstream_messages_total", "nbstream_predictions_total", "nbstream_examples_learned_total"):
        assert metrics.registry.get_sample_value(name) == 0, name


def test_the_counters_take_the_work_of_a_commit_once_it_is_committed():
    kafka = cluster(messages=4)
    metrics = ServiceMetrics()
    session = open_session(kafka, settings(max_poll_records=2), metrics)
    session.run(polls(3))  # then the final commit
    for name, expected in (("nbstream_messages_total", 4), ("nbstream_predictions_total", 4),
                           ("nbstream_examples_learned_total", 4)):
        assert metrics.registry.get_sample_value(name) == expected, name


@pytest.mark.parametrize("guarantee, step", [("exactly-once", "commit_transaction"), ("at-least-once", "commit")])
def test_a_commit_that_fails_is_counted_and_ends_the_run(monkeypatch, guarantee, step):
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, settings(guarantee=guarantee), metrics)

    def refused(*args, **kwargs):
        raise KafkaFailure("the commit timed out")

    client = FakeProducer if step == "commit_transaction" else type(kafka.consumers[0])
    monkeypatch.setattr(client, step, refused)
    with pytest.raises(KafkaFailure, match="the commit timed out"):
        session.run(polls(5))
    assert metrics.registry.get_sample_value("nbstream_commit_failures_total") == 1
    assert metrics.registry.get_sample_value("nbstream_checkpoints_total") == 0


def test_close_aborts_the_open_transaction_and_commits_nothing_more():
    kafka = cluster()
    session = open_session(kafka, settings())
    kafka.consumers[0].fail(KafkaFailure("fenced"))  # at the second poll: the first reads and predicts
    with pytest.raises(KafkaFailure):
        session.run(polls(5))
    failed = len(kafka.journal)
    session.close()
    assert kafka.journal[failed:] == ["producer.abort_transaction", "consumer.close", "consumer.revoke [0]",
                                      "consumer.released [0]", "producer.close", "reader.close"]
    assert kafka.topics["out"].values() == [] and kafka.topics[STATES].values() == [] and kafka.group_offsets == {}


# ---- does the broker answer? ----------------------------------------------------------------------
def heartbeat(session: Session, probe: bool) -> None:
    """One idle turn of the loop; ``probe``: the probe interval has passed."""
    if probe:
        session._probed = float("-inf")
    session._heartbeat(busy=False)


def connected(metrics: ServiceMetrics) -> float:
    return metrics.registry.get_sample_value("nbstream_kafka_connected")


def broker_lines(caplog) -> list[tuple[str, str, str | None]]:
    """(level, message, cause) of the lines about the broker."""
    return [(record.levelname, record.getMessage(), getattr(record, "cause", None)) for record in caplog.records
            if "broker" in record.getMessage()]


def test_the_first_answer_of_the_broker_is_not_logged_as_a_recovery(caplog):
    kafka = cluster(messages=0)
    metrics = ServiceMetrics()
    session = open_session(kafka, settings(), metrics)
    caplog.set_level(logging.INFO)
    session.run(polls(1))  # joins, and is idle before the first probe
    heartbeat(session, probe=False)
    heartbeat(session, probe=True)
    assert broker_lines(caplog) == []
    assert connected(metrics) == 1 and metrics.ready


def test_the_broker_answers_again_only_after_it_did_not(caplog):
    kafka = cluster()
    metrics = ServiceMetrics()
    session = open_session(kafka, settings(), metrics)
    session.run(polls(1))
    caplog.set_level(logging.INFO)
    heartbeat(session, probe=True)
    kafka.answers = False
    heartbeat(session, probe=True)
    assert (connected(metrics), metrics.ready) == (0, False)
    heartbeat(session, probe=False)  # between probes: still not answering, not logged again
    kafka.answers = True
    heartbeat(session, probe=True)
    assert broker_lines(caplog) == [("WARNING", "the broker does not answer", "no broker at 127.0.0.1:9"),
                                    ("INFO", "the broker answers again", None)]
    assert (connected(metrics), metrics.ready) == (1, True)


def scripted(*steps):
    """should_stop for ``run``: each turn runs the next step (a callable) and goes on; then stops."""
    turns = iter(steps)

    def should_stop() -> bool:
        step = next(turns, None)
        if step is None:
            return True
        step()
        return False
    return should_stop


def silenced(kafka: FakeKafka, session: Session, answers: bool = False):
    """A step: the broker answers (or not) from now on, and the session probes it at its next beat."""
    def step() -> None:
        kafka.answers = answers
        session._probed = float("-inf")
    return step


def test_while_the_broker_is_silent_a_due_commit_waits_and_the_work_is_committed_once_it_answers():
    """Building state records only to fail would cost as much at every try: a commit that comes
    due waits for the broker's next answer, then commits what was learned."""
    kafka = cluster(messages=4)
    session = open_session(kafka, settings(checkpoint_interval=0.1))
    idle = lambda: time.sleep(0.15)  # noqa: E731 - a commit comes due by time
    session.run(scripted(lambda: None, silenced(kafka, session), idle, idle))
    assert "producer.commit_transaction" not in transaction_calls(kafka.journal)
    session.run(scripted(silenced(kafka, session, answers=True), idle))
    assert transaction_calls(kafka.journal).count("producer.commit_transaction") == 1
    assert kafka.group_offsets["g"][0] == 4


def test_a_stop_while_the_broker_is_silent_neither_commits_nor_waits_on_it(caplog):
    kafka = cluster(messages=4)
    session = open_session(kafka, settings())
    caplog.set_level(logging.INFO)
    session.run(scripted(lambda: None, silenced(kafka, session)))  # learns, then finds the broker silent
    session.close()
    assert [call for call in transaction_calls(kafka.journal) if call != "producer.init_transactions"] == [
        "producer.begin_transaction"]  # no commit, and no abort to wait on
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("stop")] == [
        "stopping while the broker does not answer: what was not committed is left to the partitions' next owner, "
        "which reads it again from the last commit"]


def test_readiness_is_a_metric_too():
    kafka = cluster()
    metrics = ServiceMetrics()
    ready = lambda: metrics.registry.get_sample_value("nbstream_ready")  # noqa: E731
    assert ready() == 0  # not before a session has partitions
    session = open_session(kafka, settings(), metrics)
    session.run(polls(1))
    heartbeat(session, probe=True)
    assert ready() == 1
    kafka.answers = False
    heartbeat(session, probe=True)
    assert ready() == 0


@pytest.mark.parametrize("interval, copies", [(0.0, 3), (3600.0, 2)])  # after each commit; the first and the last
def test_local_copies_come_every_snapshot_interval_and_at_the_last_commit(tmp_path, interval, copies):
    kafka = cluster(messages=6)
    config = settings(max_poll_records=2, checkpoint_every=2, snapshot_dir=tmp_path, snapshot_interval=interval)
    session = Session(ServiceContext(kafka, config, ServiceMetrics(), starting_point(config, None), "nbstream.g.test",
                                     store=SnapshotStore(tmp_path)))
    session.run(polls(3))  # three polls of two messages, a commit after each; then the final commit
    written = sorted(tmp_path.glob("snapshot-*.nbs"))
    assert len(written) == copies
    model, meta, _ = SnapshotStore(tmp_path).latest()
    assert model.n_examples_seen_ == 6 and meta.source.offsets == {0: 6}  # the last copy holds every commit
