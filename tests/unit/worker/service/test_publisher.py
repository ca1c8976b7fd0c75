"""The models handed to the inference API: every model of the lineup, as the last commit left them,
with the position their state includes; later learning never reaches a published copy."""

from __future__ import annotations

import numpy as np

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.fakes import FakeFollower, FakeSink, Journal, records
from worker.inference.sources import PublishedModels
from worker.io.fields import MessageFields
from worker.io.formats import message_format
from worker.service.group_state import GroupState, PartitionSettings
from worker.service.loop import LoopOutputs, LoopSettings, PrequentialLoop
from worker.service.models.lineup import Lineup
from worker.service.publisher import ModelPublisher
from worker.service.telemetry.metrics import ServiceMetrics


def _group():
    lineup = Lineup("main", {"cnb": nbstream.ComplementNB}, named=True)
    group = GroupState(nbstream.MultinomialNB, FeatureSpec.vector("features").encoder(), FakeFollower(),
                       settings=PartitionSettings(None), lineup=lineup)
    group.assign([0], {}, wait_s=0, strict=True)
    sink = FakeSink(Journal())
    loop = PrequentialLoop(message_format(MessageFields()), group, LoopOutputs(sink, sink), ServiceMetrics(),
                           settings=LoopSettings())
    return group, loop


def _messages(n, first=0):
    rng = np.random.default_rng(first)
    return records([{"features": rng.poisson(2, 4).tolist(), "label": str(rng.integers(2))} for _ in range(n)],
                   first_offset=first)


def test_every_model_is_published_with_its_position_and_version():
    group, loop = _group()
    board = PublishedModels(["main", "cnb"])
    publisher = ModelPublisher(board, group, "in", "label")
    loop.process(_messages(30))
    publisher.publish()
    published = board.models()
    assert sorted(published) == ["cnb", "main"]
    for name, model in published.items():
        assert model.position == {"in:0": 30} and model.version == "30"
        X = np.arange(8).reshape(2, 4)
        np.testing.assert_array_equal(model.pipeline.model.predict_proba(X), group.models[name].model.predict_proba(X))
        assert model.pipeline.model.kind == ("complement" if name == "cnb" else "multinomial")
    assert board.ready()


def test_a_published_copy_does_not_learn_what_comes_after():
    group, loop = _group()
    board = PublishedModels(["main", "cnb"])
    publisher = ModelPublisher(board, group, "in", "label")
    loop.process(_messages(20))
    publisher.publish()
    before = board.models()["main"]
    loop.process(_messages(20, first=20))
    assert before.pipeline.model.n_examples_seen_ == 20 and board.models()["main"] is before
    publisher.publish()
    after = board.models()["main"]
    assert after is not before and after.position == {"in:0": 40} and after.version == "40"
    publisher.publish()
    assert board.models()["main"] is after  # nothing changed: nothing copied again


def test_a_position_that_moved_without_learning_reuses_the_copies():
    group, loop = _group()
    board = PublishedModels(["main", "cnb"])
    publisher = ModelPublisher(board, group, "in", "label")
    loop.process(_messages(10))
    publisher.publish()
    before = board.models()["main"]
    loop.process(records([{"features": [1, 0, 0, 2]}], first_offset=10))  # unlabeled: nothing learned
    publisher.publish()
    after = board.models()["main"]
    assert after.position == {"in:0": 11} and after.pipeline is before.pipeline
