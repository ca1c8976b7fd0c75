"""Taking partitions over from the state topic: restore, start positions, and the exactly-once check."""

from __future__ import annotations

import time

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.state_records import forged_state, partition_payload, with_format
from worker.errors import ConfigError
from worker.io.kafka.client import KafkaFailure
from worker.io.kafka.state_topic import STATE_FORMAT, NewerStateFormat, write_records
from worker.service.follower import state_name
from worker.service.group_state import GroupState
from worker.service.partition.record import PartitionRecord

from ....helpers.fakes import FakeFollower


def stored(partition, next_offset, rows=1, model=None):
    """The state-topic records of a partition state that learned ``rows`` examples."""
    return write_records(state_name(partition), partition_payload(next_offset, rows, model=model)).records


def group(follower):
    fresh = nbstream.MultinomialNB
    return GroupState(fresh, FeatureSpec.vector("features").encoder(), follower)


def test_assigned_partitions_resume_from_their_committed_states_or_start_fresh():
    states = group(FakeFollower(stored(0, next_offset=40, rows=3)))
    starts = states.assign([0, 1], {0: 40, 1: None}, wait_s=0, strict=True)
    assert starts == {0: 40, 1: "earliest"}
    assert states.owned[0].model.n_examples_seen_ == 3 and not states.owned[1].model.is_fitted
    assert states.global_model.encoder.n_features == 2  # the list width learned elsewhere


def test_a_state_behind_its_committed_offset_is_waited_for():
    follower = FakeFollower(stored(0, next_offset=10))
    states = group(follower)
    newer = stored(0, next_offset=20, rows=2)
    real_poll = follower.poll

    def poll(timeout_s=0.0):  # the open transaction ends while we wait
        follower.put(newer)
        return real_poll()

    follower.poll = poll
    assert states.assign([0], {0: 20}, wait_s=5, strict=True) == {0: 20}
    assert states.owned[0].model.n_examples_seen_ == 2


def test_a_committed_offset_whose_state_is_not_visible_yet_is_waited_for():
    """The group's offsets can show a commit before the state topic's commit marker lands."""
    follower = FakeFollower([])
    states = group(follower)
    real_poll, polls = follower.poll, []

    def poll(timeout_s=0.0):
        polls.append(1)
        if len(polls) == 3:  # the marker lands while we wait
            follower.put(stored(0, next_offset=487, rows=4))
        return real_poll()

    follower.poll = poll
    assert states.assign([0], {0: 487}, wait_s=5, strict=True) == {0: 487}
    assert states.owned[0].model.n_examples_seen_ == 4


def test_a_committed_offset_without_any_state_starts_afresh_after_the_wait():
    states = group(FakeFollower([]))
    assert states.assign([0], {0: 487}, wait_s=0.2, strict=True) == {0: "earliest"}


def test_under_exactly_once_a_state_that_stays_behind_fails_the_session_instead_of_repeating():
    states = group(FakeFollower(stored(0, next_offset=10)))
    with pytest.raises(KafkaFailure, match=r"partitions \[0\] are still behind"):
        states.assign([0], {0: 20}, wait_s=0.2, strict=True)
    lenient = group(FakeFollower(stored(0, next_offset=10)))
    assert lenient.assign([0], {0: 20}, wait_s=0.2, strict=False) == {0: 10}  # at-least-once: repeat


def test_a_state_of_another_model_is_refused():
    other = nbstream.MultinomialNB(alpha=0.5).partial_fit(np.ones((1, 2)), ["a"])
    states = group(FakeFollower(stored(3, next_offset=1, model=other)))
    with pytest.raises(ConfigError, match=r"holds a MultinomialNB\(alpha=0.5\); this service is configured for "
                                          r"MultinomialNB\(\)"):
        states.assign([3], {}, wait_s=0, strict=True)


@pytest.mark.parametrize("header", [b"[" * 100_000 + b"]" * 100_000, b'{"starts": [1], "fitted": false}',
                                    b'{"fitted": false, "next_offset": 1, "judged": 1e400}'])
def test_an_unreadable_partition_state_is_a_snapshot_error(header):
    import struct

    import nbstream

    payload = b"NBPS" + struct.pack("<I", len(header)) + header
    with pytest.raises(nbstream.SnapshotError, match="unreadable partition state"):
        PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")


# ---- records the service did not write ---------------------------------------------------------

def header(**changes):
    """Partition 0's state with these header fields changed (None removes one)."""
    return forged_state("partition-0", changes)


def features(**changes):
    """Partition 0's state with these feature fields changed (None removes one)."""
    return forged_state("partition-0", features_changes=changes)


TEXT = {"kind": "text", "columns": ["text"], "hash_bits": 1, "ngram_max": 1, "n_features": 2}
UNREADABLE = "unreadable partition state ("

FORGED_STATES = {  # (records alone, the start of the problem the warning names)
    "key partition-² with a manifest": ([(b"partition-\xc2\xb2", b'{"generation": "x"}')], "the key names no state"),
    "key partition- and 5,000 digits": ([(b"partition-" + b"7" * 5_000, b"{}")], "the key names no state"),
    "key partition-01": ([(b"partition-01", b"{}")], "the key names no state"),
    "key beyond Kafka's partitions": ([(b"partition-2147483648", b"{}")], "the key names no state"),
    "features without columns": (features(columns=None), UNREADABLE + "features.columns must be a non-empty list"),
    "text features of 2^40 columns": (features(**TEXT | {"hash_bits": 40}), UNREADABLE + "hash_bits must be "),
    "hash_bits a float": (features(**TEXT | {"hash_bits": 1.0}), UNREADABLE + "features.hash_bits must be an integer"),
    "ngram_max beyond --ngrams": (features(**TEXT | {"ngram_max": 6}),
                                  UNREADABLE + "features.ngram_max must be an integer from 1 to 5; got 6"),
    "features of an unknown kind": (features(kind="pixels"), UNREADABLE + "features.kind must be one of"),
    "a list width in words": (features(n_features="2"), UNREADABLE + "features.n_features must be an integer"),
    "features wider than the model": (features(n_features=3), UNREADABLE + "its model has 2 features; its features 3"),
    "categorical features without categories": (features(kind="categorical", columns=["a", "b"]),
                                                UNREADABLE + "features.categories must be 2 lists of strings"),
    "numeric columns of the wrong count": (features(kind="columns", columns=["a", "b", "c"], n_features=2),
                                           UNREADABLE + "features.n_features is 2 where the other fields make it 3"),
    "next_offset 10^30": (header(next_offset=10 ** 30),
                          UNREADABLE + "next_offset must be an integer from 0 to 9,223,372,036,854,775,807; got 1000"),
    "next_offset abc": (header(next_offset="abc"), UNREADABLE + "next_offset must be an integer from 0"),
    "next_offset -5": (header(next_offset=-5), UNREADABLE + "next_offset must be an integer from 0"),
    "next_offset 1.5": (header(next_offset=1.5), UNREADABLE + "next_offset must be an integer from 0"),
    "next_offset [1]": (header(next_offset=[1]), UNREADABLE + "next_offset must be an integer from 0"),
    "next_offset true": (header(next_offset=True), UNREADABLE + "next_offset must be an integer from 0"),
    "quality a list": (header(quality=[1]), UNREADABLE + "quality must be a JSON object; got a list"),
    "a quality window without its counts": (header(quality={"labels": ["a"], "all": {"hits": [1]}}),
                                            UNREADABLE + "quality.all has no 'judged' field"),
    "an older header, judged -1": (header(quality=None, judged=-1), UNREADABLE + "judged must be an integer from 0"),
    "an older header, more correct than judged": (header(quality=None, judged=3, correct=4),
                                                  UNREADABLE + "correct must be an integer from 0 to 3"),
    "an older header, recent_judged NaN": (header(quality=None, recent_judged=float("nan")),
                                           UNREADABLE + "recent_judged must be a finite non-negative number; got nan"),
    "an older header, recent_correct a word": (header(quality=None, recent_correct="x"),
                                               UNREADABLE + "recent_correct must be a finite"),
    "starts of partition ²": (header(starts={"²": 1}), UNREADABLE + "starts names partition '²'"),
    "fitted yes": (header(fitted="yes"), UNREADABLE + "fitted must be true or false"),
    "label_field a number": (header(label_field=5), UNREADABLE + "label_field must be a string or null; got 5"),
    "an older header without judged": (header(quality=None, judged=None), UNREADABLE + "no 'judged' field"),
    "a model that is not a snapshot": (forged_state("partition-0", model_bytes=b"junk"), UNREADABLE + "its model: "),
    "bytes after a state that learned nothing": (forged_state("partition-0", {"fitted": False}, model_bytes=b"xyz"),
                                                 UNREADABLE + "3 bytes after the header of a state that learned"),
    "a header longer than the payload": (write_records("partition-0", b"NBPS\xff\xff\x00\x00{}").records,
                                         UNREADABLE + "a header of 65,535 bytes"),
    "not a partition state": (write_records("partition-0", b"PK\x03\x04").records, UNREADABLE + "not a partition"),
}


@pytest.mark.parametrize("records, problem", FORGED_STATES.values(), ids=FORGED_STATES.keys())
def test_a_forged_record_alone_is_skipped_with_a_warning_and_the_last_valid_state_is_taken_over(
        records, problem, caplog):
    from worker.service.telemetry.metrics import ServiceMetrics

    registry = ServiceMetrics().registry  # the service's /metrics

    def skipped():
        return registry.get_sample_value("nbstream_state_records_skipped_total")

    follower = FakeFollower(stored(0, next_offset=40, rows=3) + records)
    skipped_before = skipped()
    with caplog.at_level("WARNING", logger="worker.service.group_state"):
        states = group(follower)
        assert states.assign([0, 1], {0: 40}, wait_s=0, strict=True) == {0: 40, 1: "earliest"}
    assert states.owned[0].model.n_examples_seen_ == 3
    [warning] = caplog.records
    assert warning.levelname == "WARNING" and warning.topic == "state"
    assert warning.key == records[-1][0].decode("utf-8", "replace")[:100] + (
        "... (5,010 characters)" if len(records[-1][0]) > 100 else "")
    assert warning.problem.startswith(problem), warning.problem
    assert skipped() == skipped_before + 1


def test_a_base_state_starting_a_partition_at_a_negative_offset_is_skipped(caplog):
    """It made the service restart its session forever (a seek to -7)."""
    base = write_records("base", partition_payload(next_offset=None, rows=0, starts={0: 5})).records
    forged = forged_state("base", {"starts": {"0": -7}})
    states = group(FakeFollower(base + forged))
    with caplog.at_level("WARNING", logger="worker.service.group_state"):
        assert states.assign([0], {}, wait_s=0, strict=True) == {0: 5}
    assert [r.problem for r in caplog.records] == ["unreadable partition state (starts[0] must be an integer from 0 "
                                                   "to 9,223,372,036,854,775,807; got -7)"]


def test_a_forged_record_while_running_leaves_the_others_state_and_an_owned_one_is_not_read(caplog):
    follower = FakeFollower(stored(0, next_offset=40, rows=3))
    states = group(follower)
    states.assign([1], {}, wait_s=0, strict=True)
    follower.put(forged_state("partition-0", {"next_offset": -5}) + forged_state("partition-1", {"next_offset": -5}))
    with caplog.at_level("WARNING", logger="worker.service.group_state"):
        states.take_updates(follower.poll())
    assert states.latest[0].next_offset == 40 and states.latest[0].model.n_examples_seen_ == 3
    assert [r.key for r in caplog.records] == ["partition-0"]  # partition 1's is dropped unread: its live one is newer


def test_a_readable_state_of_another_model_kind_stays_a_config_error():
    other = nbstream.BernoulliNB().partial_fit(np.ones((1, 2)), ["a"])
    states = group(FakeFollower(stored(2, next_offset=1, model=other)))
    with pytest.raises(ConfigError, match=r"state topic state, partition-2 holds a BernoulliNB\(\); this service is "
                                          r"configured for MultinomialNB\(\)"):
        states.assign([2], {}, wait_s=0, strict=True)


def test_partition_numbers_are_plain_ascii_digits_within_kafkas_range():
    from worker.service.follower import partition_of

    assert [partition_of(f"partition-{n}") for n in ("0", "17", "2147483647")] == [0, 17, 2_147_483_647]
    assert {partition_of(name) for name in ("partition-²", "partition-٣", "partition-01", "partition--1",
                                            "partition-+1", "partition- 1", "partition-2147483648",
                                            "partition-" + "9" * 5_000, "partition-", "base", "partition1")} == {None}


def test_a_state_of_a_newer_format_version_stops_the_service_instead_of_being_passed_over():
    """Its digest matches: the service wrote it, a newer version of it. Passing it over would start
    the partition afresh and lose what it learned."""
    payload = bytearray(partition_payload(5, 2))
    model_at = bytes(payload).index(b"NBSNAP\x00")
    payload[model_at + len(b"NBSNAP\x00")] = 99  # the snapshot's format version
    states = group(FakeFollower(write_records(state_name(0), bytes(payload)).records))
    with pytest.raises(ConfigError, match="snapshot format version 99; .* A newer nbstream wrote this group's"):
        states.assign([0], {0: 5}, wait_s=0, strict=True)


NEWER = STATE_FORMAT + 1


def test_a_state_of_a_newer_state_format_version_ends_the_start_before_anything_is_taken():
    """A replica of this version on a group a newer one serves: its states are not passed over (the
    partition would start afresh from earliest, predicting again, then replace the newer state)."""
    follower = FakeFollower(stored(0, next_offset=40, rows=3) + with_format(stored(0, next_offset=80), NEWER)
                            + stored(1, next_offset=7))
    states = group(follower)
    with pytest.raises(NewerStateFormat) as refused:
        states.assign([0, 1], {0: 80, 1: 7}, wait_s=0, strict=True)
    assert isinstance(refused.value, ConfigError) and "\n" not in str(refused.value)
    assert str(refused.value) == (f"state topic state, partition-0: state format version {NEWER}; this nbstream "
                                  "reads version 1. A newer nbstream wrote this group's states: serve the group with "
                                  "that version or a newer one, or use a new --group.")
    assert states.owned == {} and states.latest == {}  # nothing taken from the read


def test_a_state_of_a_newer_format_arriving_while_following_ends_the_service():
    follower = FakeFollower(stored(0, next_offset=40, rows=3))
    states = group(follower)
    states.assign([1], {}, wait_s=0, strict=True)
    follower.put(with_format(stored(0, next_offset=90), NEWER))
    with pytest.raises(NewerStateFormat, match=f"partition-0: state format version {NEWER}"):
        states.take_updates(follower.poll())
    assert states.latest[0].next_offset == 40  # nothing of that poll was taken


def test_a_newer_state_a_later_one_of_this_version_replaces_is_no_matter():
    follower = FakeFollower(with_format(stored(0, next_offset=40), NEWER) + stored(0, next_offset=41, rows=2))
    states = group(follower)
    assert states.assign([0], {0: 41}, wait_s=0, strict=True) == {0: 41}


def test_an_unreadable_state_of_a_partition_the_group_committed_is_not_started_afresh(caplog):
    """A state whose payload another version wrote (here: a header field of the wrong type) and the
    group's committed offset: starting afresh would predict from earliest again, then replace it."""
    states = group(FakeFollower(forged_state("partition-0", {"next_offset": "abc"})))
    started = time.monotonic()
    with pytest.raises(ConfigError) as refused:  # at once: a state that does not read is no state to wait for
        states.assign([0], {0: 200}, wait_s=30, strict=True)
    assert time.monotonic() - started < 5
    message = str(refused.value)
    assert message.startswith("state topic state, partition-0: the group committed offset 200 of partition 0, but "
                              "its state does not read (next_offset must be an integer"), message
    assert message.endswith("; starting the partition afresh would replace that state, and predict its messages "
                            "again from the earliest. Serve the group with the nbstream version that wrote it, or "
                            "use a new --group."), message
    lenient = group(FakeFollower(forged_state("partition-0", {"next_offset": "abc"})))
    with pytest.raises(ConfigError, match="its state does not read"):
        lenient.assign([0], {0: 200}, wait_s=0, strict=False)
    # without a committed offset nothing was predicted: it starts afresh, as before
    fresh = group(FakeFollower(forged_state("partition-0", {"next_offset": "abc"})))
    assert fresh.assign([0], {0: None}, wait_s=0, strict=True) == {0: "earliest"}


def test_a_foreign_record_or_a_deleted_state_is_no_unreadable_state(caplog):
    """Garbage under a partition's name (not a manifest) is skipped as before; a state deleted since is gone."""
    garbage = group(FakeFollower([(b"partition-0", b"not json")]))
    with caplog.at_level("WARNING", logger="worker.service.group_state"):
        assert garbage.assign([0], {0: 200}, wait_s=0, strict=True) == {0: "earliest"}
    assert "may be predicted again" in caplog.text
    forged = forged_state("partition-0", {"next_offset": "abc"})
    deleted = [(key, None) for key, _ in forged]
    states = group(FakeFollower(forged + deleted))
    assert states.assign([0], {0: 200}, wait_s=0, strict=True) == {0: "earliest"}
