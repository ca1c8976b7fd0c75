"""The prequential loop on in-memory fakes: predict, then learn; bad messages rejected; a final checkpoint."""

from __future__ import annotations

import numpy as np

import nbstream
from nbstream.arrow import FeatureSpec
from worker.checkpoint import Checkpointer, CheckpointPolicy
from worker.config import MessageFields
from worker.service.loop import PrequentialLoop
from worker.service.observability import ServiceMetrics

from .fakes import FakeSink, FakeSource, FakeState, Journal, records


def make_loop(batches, classes=None, model=None):
    journal = Journal()
    source, sink = FakeSource(journal, batches), FakeSink(journal)
    checkpointer = Checkpointer(CheckpointPolicy(every_rows=10_000), [sink], FakeState(journal), upstream=source)
    loop = PrequentialLoop(model or nbstream.MultinomialNB(), FeatureSpec.vector("features").encoder(),
                           MessageFields(), source, predictions=sink, rejects=sink, checkpointer=checkpointer,
                           metrics=ServiceMetrics(), classes=classes)
    return loop, sink, journal


def run_until_drained(loop):
    loop.run(should_stop=lambda: not loop.source.batches, poll_timeout_ms=0)


def test_each_batch_is_predicted_with_the_model_before_it_then_learned():
    first = records([{"features": [3, 0], "label": "a"}, {"features": [0, 3], "label": "b"}])
    second = records([{"features": [4, 0], "id": "x"}, {"features": [0, 5], "label": "b"}], first_offset=2)
    loop, sink, _ = make_loop([first, second])
    run_until_drained(loop)
    assert [p["prediction"] for p in sink.predictions] == [None, None, "a", "b"]
    assert [p["model_version"] for p in sink.predictions] == [0, 0, 2, 2]
    assert sink.predictions[2]["id"] == "x" and sink.predictions[3]["offset"] == 3
    assert loop.model.n_examples_seen_ == 3  # the unlabeled message is predicted, not learned
    assert loop.model.class_count_.tolist() == [1.0, 2.0]


def test_bad_messages_are_rejected_and_the_good_ones_go_on():
    batch = records([b"{oops", {"features": [1, 2], "label": "a"}, {"features": [1], "label": "a"},
                     {"features": [1, -2], "label": "b"}, {"features": [2, 2], "label": "b"}])
    loop, sink, _ = make_loop([batch])
    run_until_drained(loop)
    assert [(offset, message.split(":")[0]) for offset, _, message in sink.rejected] == [
        (0, "malformed JSON"), (2, "list has 1 values; expected 2"), (3, "negative value (this model needs counts)")]
    assert [p["offset"] for p in sink.predictions] == [1, 4]
    assert loop.model.n_examples_seen_ == 2


def test_a_fixed_class_set_rejects_other_labels():
    batch = records([{"features": [1, 0], "label": "ham"}, {"features": [0, 1], "label": "eggs"}])
    loop, sink, _ = make_loop([batch], classes=["ham", "spam"])
    run_until_drained(loop)
    assert sink.rejected == [(1, "label", "label not among the classes ['ham', 'spam']")]
    assert loop.model.classes_.tolist() == ["ham", "spam"]
    np.testing.assert_array_equal(loop.model.class_count_, [1.0, 0.0])


def test_stopping_writes_a_final_checkpoint_in_the_commit_order():
    loop, _, journal = make_loop([records([{"features": [1, 1], "label": "a"}])])
    run_until_drained(loop)
    assert journal == ["flush", "write", "acknowledge"]
