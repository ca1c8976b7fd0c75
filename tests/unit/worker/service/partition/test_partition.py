"""A partition's steps on its own: it learns and judges, keeps and joins pending examples by event
time, advances its offsets, marks itself changed and gives its state record."""

from __future__ import annotations

import time

import numpy as np

import nbstream
from worker.service.partition.drift_watch import DriftConfig
from worker.service.partition.partition import CLOCK_AHEAD_MS, Judged, Partition
from worker.service.partition.record import PartitionRecord
from worker.service.pending.join import LabelsConfig
from worker.service.pending.store import PendingExamples

DAY_MS = 86_400_000


class Shared:
    """The group's model as a partition sees it: here it only records what it was told."""

    def __init__(self, classes=None):
        self.classes, self.learned, self.model = classes, [], nbstream.MultinomialNB()

    @property
    def known_classes(self):
        return self.model.classes_ if self.model.is_fitted else None

    def learn(self, X, y, batch=None):
        self.learned.append(len(y))
        self.model.partial_fit(X, y)


class SharedOne:
    """The group's models when there is one, named main: it serves."""

    def __init__(self, shared: Shared):
        self.shared, self.served = shared, "main"

    def __getitem__(self, name: str) -> Shared:
        assert name == "main"
        return self.shared


def partition(labels: bool = False, drift: DriftConfig | None = None, shared: Shared | None = None) -> Partition:
    pending = PendingExamples(100) if labels else None
    record = PartitionRecord(nbstream.MultinomialNB(window=40, window_buckets=4), pending=pending)
    return Partition(3, record, SharedOne(shared or Shared()), drift=drift,
                     labels=LabelsConfig("labels", ttl=7 * 86_400.0) if labels else None)


def served(n: int, classes: int = 2) -> dict:
    """What the one model, main, served each of n messages."""
    return {"main": (np.zeros(n, dtype=np.int32), np.full((n, classes), 1 / classes))}


def test_it_learns_its_rows_tells_the_group_and_judges_what_was_served():
    shared = Shared()
    part = partition(shared=shared)
    X, y = np.array([[3, 0], [0, 3], [2, 1]]), np.array(["a", "b", "a"])
    judged = Judged(np.array(["a", "b"]), np.array([[0.9, 0.1], [0.8, 0.2]]), np.array([False, True, True]))
    part.learn(X, y, None, {"main": judged})
    assert part.model.n_examples_seen_ == 3 and shared.learned == [3] and part.changed
    report = part.quality.report()["all"]
    assert (report["judged"], report["accuracy"]) == (2, 0.5)  # b served as a (wrong), a as a (right)


def test_offsets_only_move_forward_and_a_snapshot_clears_the_mark():
    part = partition()
    part.advance(10)
    record, _ = part.snapshot("partition-3")
    assert record.next_offset == 10 and not part.changed
    part.advance(7)  # an older offset (a message re-read): not a change
    assert part.next_offset == 10 and not part.changed
    part.advance(11)
    assert part.changed


def test_a_poll_older_than_the_ttl_by_its_own_newest_is_expired_at_once():
    part = partition(labels=True)
    now = int(time.time() * 1000)
    assert part.move_clock(now) is None  # nothing pending yet
    kept = part.keep_pending(["m0", "m1", "m2"], np.ones((3, 2)), served(3),
                             np.array([now, now, now - 8 * DAY_MS]), np.arange(3))
    assert kept.expired == 1 and kept.added.evicted == 0 and part.pending_examples == 2
    met = part.join_labels(["m2", "m0"], np.array(["a", "b"]), np.full(2, now), np.arange(2))
    assert len(met.joined) == 1 and part.pending.waiting_labels == 1 and part.model.n_examples_seen_ == 1


def test_the_clock_moves_at_most_an_hour_past_the_wall_clock():
    part = partition(labels=True)
    now = int(time.time() * 1000)
    part.keep_pending(["m0"], np.ones((1, 2)), served(1), np.array([now - DAY_MS]), np.arange(1))
    assert part.move_clock(now + 1000 * 365 * DAY_MS) is None  # a thousand years ahead: clamped, nothing expires
    assert part.pending_examples == 1
    expired = part.move_clock(now + CLOCK_AHEAD_MS + 8 * DAY_MS)  # still clamped, to now + 1 h: within the TTL
    assert expired is None and part.pending_examples == 1


def test_a_drift_reset_is_a_change_the_group_cannot_follow_row_by_row():
    part = partition(drift=DriftConfig("adwin", "reset-to-window"))
    rng = np.random.default_rng(3)
    classes = np.array(["a", "b"])
    for start in range(0, 3_000, 100):
        X = rng.poisson(2.0, (100, 2))
        y = np.where(X[:, 0] > X[:, 1], "a", "b") if start < 1_500 else np.where(X[:, 0] > X[:, 1], "b", "a")
        right = np.where(y == "a", 0, 1) if start < 1_500 else np.where(y == "a", 1, 0)
        proba = np.eye(2)[right]
        part.learn(X, y, None, {"main": Judged(classes, proba, np.ones(100, dtype=bool))})
    assert part.revision >= 1  # a detection kept only the examples since the change
    assert part.record().drift["detections"]
