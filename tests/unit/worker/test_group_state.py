"""Taking partitions over from the state topic: restore, start positions, and the exactly-once check."""

from __future__ import annotations

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from worker.errors import ConfigError
from worker.io.kafka.client import KafkaFailure
from worker.io.kafka.state_topic import write_records
from worker.service.global_model import GlobalModel
from worker.service.partition_state import PartitionState
from worker.service.group_state import GroupState, state_name

from .fakes import FakeFollower


def stored(partition, next_offset, rows=1, model=None):
    """The state-topic records of a partition state that learned ``rows`` examples."""
    model = model or nbstream.MultinomialNB().partial_fit(np.ones((rows, 2)), ["a"] * rows)
    encoder = FeatureSpec.vector("features").encoder()
    encoder.width = 2
    payload = PartitionState(model, next_offset=next_offset).to_payload(encoder)
    return write_records(state_name(partition), payload).records


def group(follower):
    fresh = nbstream.MultinomialNB
    return GroupState(fresh, GlobalModel(fresh, FeatureSpec.vector("features").encoder()), follower)


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
    from worker.service.partition_state import PartitionState

    payload = b"NBPS" + struct.pack("<I", len(header)) + header
    with pytest.raises(nbstream.SnapshotError, match="unreadable partition state"):
        PartitionState.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
