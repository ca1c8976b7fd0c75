"""Pending examples as part of each partition's state in the state topic: written by chunk at each
commit, restored when a partition is taken over, refused as an unreadable state when a chunk it
names is missing or forged (and then not started afresh when the group committed offsets for it),
and absent (byte for byte) when the service keeps none."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.state_records import forged_state
from worker.errors import ConfigError
from worker.io.kafka.state_topic import CHUNK_BYTES, StateAssembler, write_records
from worker.service.commit import StateWriter
from worker.service.follower import BASE, partition_of
from worker.service.group_state import GroupState, PartitionSettings
from worker.service.partition.partition import Partition
from worker.service.partition.record import PartitionRecord
from worker.service.pending.join import LabelsConfig
from worker.service.pending.records import pending_of
from worker.service.pending.store import PendingExamples

from ....helpers.fake_kafka import FakeKafka
from ....helpers.fakes import FakeFollower
from .pending.test_codec import mnist_like, sms_like

TOPIC = "state"
PENDING = b"partition-0/pending/"


class Cluster:
    """One state topic that replicas write and read."""

    def __init__(self) -> None:
        self.kafka = FakeKafka()
        self.kafka.create(TOPIC)

    def records(self) -> list[tuple[bytes | None, bytes | None]]:
        return [(record.key, record.value) for record in self.kafka.topics[TOPIC].log[0]]


class Replica:
    """A replica's view of the group (what it read of ``records``, the whole topic by default) and its
    state step."""

    def __init__(self, cluster: Cluster, records=None, max_pending: int | None = 1_000):
        self.cluster = cluster
        records = cluster.records() if records is None else records
        self.seen = len(cluster.records())
        self.follower = FakeFollower(records)
        fresh = nbstream.MultinomialNB
        self.group = GroupState(fresh, FeatureSpec.vector("features").encoder(), self.follower,
                                settings=PartitionSettings(
            labels=None if max_pending is None else LabelsConfig("labels", max_pending=max_pending)))
        self.writer = StateWriter(self.group, cluster.kafka.producer(), TOPIC, "label")

    def take(self, partition: int = 0) -> Partition:
        self.group.assign([partition], {}, wait_s=0, strict=True)
        return self.group.owned[partition]

    def commit(self) -> list[tuple[bytes | None, bytes | None]]:
        """Write the owned states that changed; the records this commit wrote."""
        before = len(self.cluster.records())
        self.writer.write()
        return self.cluster.records()[before:]

    def follow(self) -> None:
        """Read what was written since, as the service does between polls."""
        self.follower.put(self.cluster.records()[self.seen:])
        self.seen = len(self.cluster.records())
        self.group.take_updates(self.follower.poll())


def serve(store: PendingExamples, X, first: int, n: int) -> None:
    """``n`` messages served (X's first rows), ids, offsets and event times from ``first`` on."""
    proba = np.random.default_rng(first).dirichlet([1, 1, 1], n)
    store.add(list(range(first, first + n)), X[:n], proba.argmax(axis=1), proba, np.arange(first, first + n),
              np.arange(first, first + n))


def assert_same_store(restored: PendingExamples, store: PendingExamples) -> None:
    """Same ids, rows bit for bit and served predictions (and so the same bytes)."""
    for name, log in store.logs().items():
        mine, theirs = (s.logs()[name] for s in (restored, store))
        a, b = mine.take(mine.live_seqs()), log.take(log.live_seqs())
        assert a.ids == b.ids and np.array_equal(a.times, b.times) and a.columns.keys() == b.columns.keys()
        for column in b.columns:
            x, y = a.columns[column], b.columns[column]
            if column == "rows":
                x, y = x.features(), y.features()
                assert type(x) is type(y) and x.shape == y.shape, name
                if hasattr(x, "indptr"):  # CSR: compared part by part (dense, 2^20 columns would not fit)
                    assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
                    x, y = x.data, y.data
            assert x.dtype == y.dtype and np.array_equal(x, y), (name, column)
    assert restored.to_bytes() == store.to_bytes()


def pending_keys(records) -> list[bytes]:
    return [key for key, _ in records if key.startswith(PENDING)]


def compacted(records) -> list[tuple[bytes, bytes]]:
    """What log compaction leaves: the last value of each key, tombstoned keys gone."""
    last = dict(records)
    return [(key, value) for key, value in last.items() if value is not None]


# ---- written over several commits, restored ----------------------------------------------------------

@pytest.mark.parametrize("make_rows", [mnist_like, sms_like])
def test_a_store_written_over_several_commits_restores_to_the_same_store(make_rows):
    cluster = Cluster()
    writer = Replica(cluster)
    state = writer.take()
    X = make_rows(300)
    for round_ in range(8):
        serve(state.pending, X, round_ * 300, 300)
        state.pending.add_labels(list(range(round_ * 300 - 400, round_ * 300 - 200, 7)) + [f"early-{round_}"],
                                 np.arange(30), round_ * 300)
        state.pending.expire(round_ * 300, 1_000)
        state.advance((round_ + 1) * 300)
        writer.commit()
        for records in (cluster.records(), compacted(cluster.records())):
            restored = Replica(cluster, records).take()
            assert restored.next_offset == state.next_offset
            assert_same_store(restored.pending, state.pending)


def test_another_replica_following_the_topic_takes_the_partition_over_and_goes_on_writing_by_chunk():
    cluster = Cluster()
    first, second = Replica(cluster), Replica(cluster)
    state = first.take()
    X = mnist_like(1_000)
    for round_ in range(4):
        serve(state.pending, X, round_ * 1_000, 1_000)
        first.commit()
        second.follow()  # reads every commit as it comes, the partition not being its own
    assert second.group.latest[0].pending is None  # restored only when taken over
    held = [key for key in second.follower.assembler._chunks if key.startswith(PENDING)]
    assert held == []  # nor held meanwhile: read again from the topic at the take-over
    taken = second.take()
    assert_same_store(taken.pending, state.pending)
    serve(taken.pending, X, 4_000, 100)
    written = second.commit()
    new = [pending_of(key.decode())[1] for key in pending_keys(written) if b"#" not in key]
    assert len(new) == 1 and new[0].startswith("examples/") and new[0] not in state.record().pending_records.digests
    assert_same_store(Replica(cluster).take().pending, taken.pending)


def test_a_replica_that_took_a_partition_over_can_take_it_over_again_after_others_wrote_it():
    """Restoring reads the chunks' records without forgetting them: another owner may list them later."""
    cluster = Cluster()
    first, second = Replica(cluster), Replica(cluster)
    X = mnist_like(200)
    serve(first.take().pending, X, 0, 200)
    first.commit()
    second.follow()
    second.take()
    second.group.release([0])
    serve(first.group.owned[0].pending, X, 200, 100)  # the chunk of the first 200 stays, listed again
    first.commit()
    second.follow()
    assert_same_store(second.take().pending, first.group.owned[0].pending)


def test_a_partition_released_and_assigned_again_keeps_its_live_store():
    cluster = Cluster()
    replica = Replica(cluster)
    store = replica.take().pending
    serve(store, mnist_like(10), 0, 10)  # not committed yet
    replica.group.release([0])
    assert replica.take().pending is store and len(store) == 10
    replica.commit()
    replica.group.release([0])
    assert replica.take().pending is store
    assert not pending_keys(replica.commit())  # nothing new to write


# ---- what each commit writes --------------------------------------------------------------------------

def test_a_commit_writes_only_the_chunks_made_since_the_last_one():
    cluster = Cluster()
    replica = Replica(cluster, max_pending=100_000)
    state = replica.take()
    X = mnist_like(10_000)
    serve(state.pending, X, 0, 10_000)
    serve(state.pending, X, 10_000, 10_000)
    first = replica.commit()
    whole = len(state.pending.to_bytes())
    serve(state.pending, X, 20_000, 500)
    second = replica.commit()
    new_chunk = sum(len(value) for key, value in second if key.startswith(PENDING))
    assert sum(len(value) for key, value in first if key.startswith(PENDING)) > whole * 0.9
    assert 0 < new_chunk < whole * 0.05  # 500 rows of 20,500
    assert all(value is not None for key, value in second if key.startswith(PENDING))  # nothing dropped
    state.pending.add_labels([5, 15_000], np.array([1, 2]), 0)
    third = replica.commit()  # the examples' chunks stay: only their masks, in the directory, change
    assert {key.split(b"#")[0] for key in pending_keys(third)} == {b"partition-0/pending/joined/0"}
    payload = next(value for key, value in third if key == b"partition-0")
    assert json.loads(payload)["bytes"] < 60_000  # the state, its directory and masks of 20,500 rows, compressed


def test_chunks_dropped_get_tombstones_after_the_state_and_a_compacted_topic_forgets_them():
    cluster = Cluster()
    replica = Replica(cluster)
    state = replica.take()
    X = mnist_like(100)
    serve(state.pending, X, 0, 100)
    replica.commit()
    state.pending.add_labels(list(range(100)), np.zeros(100), 0)  # every example joins: its chunk goes
    written = replica.commit()
    tombstones = [key for key, value in written if value is None and key.startswith(PENDING)]
    assert tombstones[-1] == b"partition-0/pending/examples/0"
    assert {key.split(b"#")[0] for key in tombstones} == {b"partition-0/pending/examples/0"}
    assert written.index((tombstones[0], None)) > written.index(next(r for r in written if r[0] == b"partition-0"))
    left = compacted(cluster.records())
    assert not [key for key in pending_keys(left) if key.startswith(b"partition-0/pending/examples/")]
    assert_same_store(Replica(cluster, left).take().pending, state.pending)


def test_a_chunk_larger_than_a_record_is_cut_by_the_state_topic():
    cluster = Cluster()
    replica = Replica(cluster)
    state = replica.take()
    noise = np.random.default_rng(3).integers(0, 256, (1_000, 784), dtype=np.uint8)  # 784 kB that do not compress
    serve(state.pending, noise, 0, 1_000)
    written = replica.commit()
    pieces = [key for key in pending_keys(written) if key.startswith(b"partition-0/pending/examples/0#")]
    assert len(pieces) == 2 and all(len(value) <= CHUNK_BYTES for _, value in written)
    assert_same_store(Replica(cluster).take().pending, state.pending)


# ---- without pending examples -------------------------------------------------------------------------

# Written by the version before pending examples existed, for the state below.
PREVIOUS_PAYLOAD = (
    b'NBPSv\x02\x00\x00{"next_offset": 5, "quality": {"labels": ["a", "b"], "all": {"judged": 1, "correct": 1, '
    b'"scored": 1, "log_loss": 0.2876820724517809, "brier": 0.125, "served": 0, "support": [1, 0], "hits": [1, 0], '
    b'"predicted": [0, 0]}, "recent": {"judged": 1.0, "correct": 1.0, "scored": 1.0, "log_loss": 0.2876820724517809, '
    b'"brier": 0.125, "served": 0.0, "support": [1.0, 0.0], "hits": [1.0, 0.0], "predicted": [0.0, 0.0]}}, '
    b'"judged": 1, "correct": 1, "recent_judged": 1.0, "recent_correct": 1.0, "starts": {"1": 7}, "features": '
    b'{"kind": "vector", "columns": ["features"], "n_features": 3}, "fitted": false, "label_field": "label", '
    b'"drift": null}')


def test_a_state_without_pending_examples_is_written_byte_for_byte_as_before():
    state = PartitionRecord(nbstream.MultinomialNB(), next_offset=5, starts={1: 7})
    state.quality.judge(np.array(["a"]), np.array(["a", "b"]), np.array([[0.75, 0.25]]))
    encoder = FeatureSpec.vector("features").encoder()
    encoder.width = 3
    assert state.to_payload(encoder, "label") == PREVIOUS_PAYLOAD
    cluster = Cluster()
    replica = Replica(cluster, max_pending=None)
    replica.take().advance(1)
    written = replica.commit()
    assert [key.split(b"#")[0] for key, _ in written] == [b"partition-0", b"partition-0"]  # a piece, a manifest
    assert replica.group.owned[0].pending is None and b'"pending"' not in _payload(cluster, "partition-0")


def test_a_service_without_pending_examples_tombstones_those_an_earlier_run_left():
    cluster = Cluster()
    earlier = Replica(cluster)
    serve(earlier.take().pending, mnist_like(50), 0, 50)
    earlier.commit()
    later = Replica(cluster, max_pending=None)
    taken = later.take()
    assert taken.pending is None
    taken.advance(1)  # its next commit, once it processed something
    written = later.commit()
    assert {key.split(b"#")[0] for key, value in written if value is None and key.startswith(PENDING)} == \
        {b"partition-0/pending/examples/0"}
    assert b'"pending"' not in _payload(cluster, "partition-0")
    assert not pending_keys(compacted(cluster.records()))


def _payload(cluster: Cluster, name: str) -> bytes:
    assembler = StateAssembler()
    for key, value in cluster.records():
        assembler.add(key, value)
    return assembler.take(name)


# ---- records the state does not list -------------------------------------------------------------------

def test_chunk_records_written_without_their_state_are_ignored_and_then_tombstoned():
    """A writer without transactions that stopped between a commit's chunks and its state."""
    cluster = Cluster()
    writer = Replica(cluster)
    state = writer.take()
    X = mnist_like(100)
    serve(state.pending, X, 0, 100)
    writer.commit()
    kept = state.pending.to_bytes()
    serve(state.pending, X, 100, 100)
    second = writer.commit()
    chunks = next(i for i, (key, _) in enumerate(second) if not key.startswith(PENDING))
    survivor = Replica(cluster, cluster.records()[:len(cluster.records()) - len(second) + chunks])
    taken = survivor.take()
    assert taken.pending.to_bytes() == kept
    taken.advance(1)  # its next commit, once it processed something
    written = survivor.commit()
    assert {key for key, value in written if value is None and key.startswith(PENDING)} == \
        {key for key, _ in second[:chunks]}


# ---- missing or forged ------------------------------------------------------------------------------

def committed_topic() -> Cluster:
    cluster = Cluster()
    replica = Replica(cluster)
    state = replica.take()
    serve(state.pending, mnist_like(100), 0, 100)
    state.advance(100)
    replica.commit()
    return cluster


def without_chunk(records):
    return [(key, value) for key, value in records if not key.startswith(b"partition-0/pending/examples/0")]


def with_piece_flipped(records):
    """The first piece of the examples' chunk, one bit changed: as long, another digest."""
    def flipped(key, value):
        if key.startswith(b"partition-0/pending/examples/0#"):
            return key, bytes([value[0] ^ 1]) + value[1:]
        return key, value
    return [flipped(key, value) for key, value in records]


def with_listing(change):
    """A newer state of partition 0 whose pending field is the last one's, changed."""
    def edit(records):
        pending = _header(_payload_of(records))["pending"]
        change(pending)
        return records + forged_state("partition-0", {"pending": pending, "next_offset": 100})
    return edit


def with_unnamed_record(records):
    """A newer state that lists, besides the directory's chunks, a record the directory does not name."""
    extra = write_records("partition-0/pending/labels/7", b"anything")
    return with_listing(lambda p: p["records"].update({"labels/7": extra.digest}))(records + extra.records)


def _payload_of(records) -> bytes:
    assembler = StateAssembler()
    for key, value in records:
        assembler.add(key, value)
    return assembler.take("partition-0")


def _header(payload: bytes) -> dict:
    (length,) = struct.unpack_from("<I", payload, 4)
    return json.loads(payload[8:8 + length])


UNREADABLE = "unreadable partition state (pending examples: "
NOT_IN_TOPIC = "it lists are not in the topic)"
FORGED = {  # how the topic is changed, the problem its warning names, and whether the state before it is taken
    # found when the state is read: passed over for the one before it, as any unreadable state
    "a chunk missing": (without_chunk, UNREADABLE + "the records of chunks ['examples/0'] " + NOT_IN_TOPIC, False),
    "a listed digest of no record": (with_listing(lambda p: p["records"].update({"examples/0": "0" * 64})),
                                     UNREADABLE + "the records of chunks ['examples/0'] " + NOT_IN_TOPIC, True),
    "a listed chunk of no record": (
        with_listing(lambda p: p["records"].update({"labels/7": p["records"]["examples/0"]})),
        UNREADABLE + "the records of chunks ['labels/7'] " + NOT_IN_TOPIC, True),
    "a directory that is not base64": (with_listing(lambda p: p.update(directory="%%")),
                                       "unreadable partition state (pending.directory must be base64", True),
    "a chunk key of no log": (with_listing(lambda p: p["records"].update({"pixels/0": "0" * 64})),
                              "unreadable partition state (pending.records names chunk 'pixels/0'", True),
    # found when the partition is taken over (the records are decoded only then): it starts afresh
    "a chunk's bytes changed": (with_piece_flipped, UNREADABLE + "the record of chunk examples/0: its manifest's "
                                                                 "digest does not match its chunks)", False),
    "a directory of other bytes": (with_listing(lambda p: p.update(directory="AAAA")),
                                   UNREADABLE + "the directory: ", False),
    "a listed record the directory does not name": (
        with_unnamed_record, UNREADABLE + "the header lists records of chunks ['labels/7'] the directory does not "
                                          "name)", False),
}


@pytest.mark.parametrize("case", FORGED)
def test_a_state_whose_pending_examples_are_missing_or_forged_is_unreadable(case, caplog):
    change, problem, earlier_taken = FORGED[case]
    cluster = committed_topic()
    with caplog.at_level("WARNING", logger="worker.service.group_state"):
        taken = Replica(cluster, change(cluster.records())).take()
    assert [record.problem[:len(problem)] for record in caplog.records] == [problem]
    assert "\n" not in caplog.records[0].problem
    if earlier_taken:
        assert taken.next_offset == 100 and len(taken.pending) == 100
    else:
        assert taken.next_offset is None and len(taken.pending) == 0


@pytest.mark.parametrize("case", [case for case, (_, _, earlier_taken) in FORGED.items() if not earlier_taken])
def test_a_partition_the_group_committed_whose_pending_examples_do_not_read_is_not_started_afresh(case):
    """As a replica of a version that cannot read the pending examples a newer one wrote: starting
    the partition afresh would predict its messages from earliest again, then replace its state."""
    change, problem, _ = FORGED[case]
    cluster = committed_topic()
    replica = Replica(cluster, change(cluster.records()))
    with pytest.raises(ConfigError, match="^state topic state, partition-0: the group committed offset 100 of "
                                          "partition 0, but its state does not read "):
        replica.group.assign([0], {0: 100}, wait_s=0, strict=True)
    assert replica.group.owned == {} and replica.commit() == []  # nothing taken over, nothing written


def test_a_forged_record_under_a_listed_chunk_name_is_passed_over_for_the_listed_one():
    cluster = committed_topic()
    other = PendingExamples()
    serve(other, mnist_like(100, seed=9), 0, 100)
    forged = write_records("partition-0/pending/examples/0", other.to_bytes()).records
    taken = Replica(cluster, cluster.records() + forged).take()
    assert_same_store(taken.pending, Replica(cluster).take().pending)


# ---- the previous version -------------------------------------------------------------------------------

def test_the_previous_version_skips_the_pending_records_and_reads_the_partition_state():
    cluster = Cluster()
    replica = Replica(cluster)
    state = replica.take()
    serve(state.pending, mnist_like(100), 0, 100)
    state.advance(100)
    replica.commit()
    state.pending.add_labels(list(range(100)), np.zeros(100), 0)
    replica.commit()
    skipped = []
    previous = StateAssembler(on_skip=lambda key, problem: skipped.append((key, problem)),
                              is_name=lambda name: name == BASE or partition_of(name) is not None)  # its rule
    for key, value in cluster.records():
        previous.add(key, value)
    read, _ = previous.take("partition-0", lambda payload: PartitionRecord.from_payload(
        payload, nbstream.MultinomialNB(), "partition-0"))
    assert read.next_offset == 100
    assert {problem for _, problem in skipped} == {"the key names no state"}
    assert sorted(key.encode() for key, _ in skipped) == sorted(
        key for key, value in cluster.records() if key.startswith(PENDING) and value is not None)
