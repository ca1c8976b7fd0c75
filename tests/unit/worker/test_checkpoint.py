"""When a checkpoint is due, and the order in which it happens."""

from __future__ import annotations

import time

import pytest

from worker.checkpoint import Checkpointer, CheckpointPolicy

from ...helpers.fakes import FakeSink, FakeState, FakeUpstream, Journal


def test_checkpoint_policy_counts_rows_or_time():
    by_rows = CheckpointPolicy(every_rows=100)
    assert not by_rows.record(60) and by_rows.record(40)
    by_rows.reset()
    assert not by_rows.record(99)
    by_time = CheckpointPolicy(every_seconds=0.05)
    assert not by_time.record(1)
    time.sleep(0.06)
    assert by_time.record(0)


def test_a_checkpoint_flushes_outputs_then_writes_state_then_acknowledges():
    journal = Journal()
    checkpointer = Checkpointer(CheckpointPolicy(every_rows=3), [FakeSink(journal), FakeSink(journal)],
                                FakeState(journal), upstream=FakeUpstream(journal))
    assert not checkpointer.record(2) and journal == []
    assert checkpointer.record(1)
    assert journal == ["flush", "flush", "write", "acknowledge"]
    assert not checkpointer.record(2)  # the count starts again after a checkpoint


def test_nothing_is_acknowledged_when_there_was_no_state_to_write():
    journal = Journal()
    checkpointer = Checkpointer(CheckpointPolicy(every_rows=1), [FakeSink(journal)],
                                FakeState(journal, written=False), upstream=FakeUpstream(journal))
    assert not checkpointer.commit()
    assert journal == ["flush", "write"]


def test_a_failed_flush_stops_the_checkpoint_before_the_state():
    class FailingOutput:
        def flush(self):
            raise OSError("the broker refused a record")

    journal = Journal()
    checkpointer = Checkpointer(CheckpointPolicy(every_rows=1), [FailingOutput()], FakeState(journal),
                                upstream=FakeUpstream(journal))
    with pytest.raises(OSError, match="refused"):
        checkpointer.commit()
    assert journal == []
