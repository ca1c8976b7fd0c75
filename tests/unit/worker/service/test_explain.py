"""--explain: every JSON prediction carries the explanation of the model that made it, test-then-train,
exactly as the library's explain of an offline model that learned the same messages before it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from tests.helpers.fakes import FakeFollower, FakeRecord, FakeSink, Journal, records
from tests.helpers.serve_config import serve_config
from worker.errors import ConfigError
from worker.io.fields import MessageFields
from worker.io.formats import message_format
from worker.io.records import Polled
from worker.service.group_state import GroupState, PartitionSettings
from worker.service.loop import LoopOutputs, LoopSettings, PrequentialLoop
from worker.service.telemetry.metrics import ServiceMetrics


def make_loop(spec, model=nbstream.MultinomialNB, partitions=(0,), top=3):
    group = GroupState(model, spec.encoder(), FakeFollower(), settings=PartitionSettings(None))
    group.assign(list(partitions), {}, wait_s=0, strict=True)
    sink = FakeSink(Journal())
    return PrequentialLoop(message_format(MessageFields()), group, LoopOutputs(sink, sink), ServiceMetrics(),
                           settings=LoopSettings(explain=top)), sink


def test_each_labeled_message_is_explained_by_the_model_of_the_messages_before_it():
    rng = np.random.default_rng(1)
    X, y = rng.poisson(1.5, size=(120, 5)), rng.choice(["a", "b", "c"], size=120)
    labeled = rng.random(120) < 0.7
    messages = [{"features": x.tolist(), **({"label": label} if keep else {})}
                for x, label, keep in zip(X, y, labeled, strict=True)]
    loop, sink = make_loop(FeatureSpec.vector("features"))
    loop.process(records(messages[:50]))
    loop.process(records(messages[50:], first_offset=50))
    reference = nbstream.MultinomialNB()
    for i, served in enumerate(sink.predictions):
        if not reference.is_fitted:
            assert served["prediction"] is None and served["explanation"] == []
        else:
            expected = reference.explain(X[i:i + 1], top=3).rows(lambda f: f"features[{f}]")[0]
            assert served["prediction"] == expected["class"]
            assert [f["feature"] for f in served["explanation"]] == [f["feature"] for f in expected["features"]]
            np.testing.assert_allclose([f["contribution"] for f in served["explanation"]],
                                       [f["contribution"] for f in expected["features"]], rtol=1e-9)
        if labeled[i]:
            reference.partial_fit(X[i:i + 1], [y[i]])


def test_text_predictions_are_explained_by_the_words_of_their_message():
    loop, sink = make_loop(FeatureSpec.text("text", hash_bits=12), top=2)
    loop.process(records([{"text": "win a free prize", "label": "spam"}, {"text": "lunch at noon", "label": "ham"},
                          {"text": "claim your free prize now"}, {"text": "see you at lunch"}]))
    explained = sink.predictions[2:]
    assert [p["prediction"] for p in explained] == ["spam", "ham"]
    assert {f["feature"] for f in explained[0]["explanation"]} <= {"free", "prize", "claim", "your", "now"}
    assert {f["feature"] for f in explained[1]["explanation"]} <= {"see", "you", "at", "lunch"}
    assert all(len(p["explanation"]) == 2 for p in explained)


def test_partitions_of_one_poll_are_explained_by_their_own_earlier_messages():
    loop, sink = make_loop(FeatureSpec.vector("features"), partitions=(0, 1))
    loop.process(Polled.of("in", [FakeRecord(json.dumps(m).encode(), offset=o, partition=p) for p, o, m in (
        (0, 0, {"features": [3, 0], "label": "a"}), (1, 0, {"features": [0, 3], "label": "b"}),
        (0, 1, {"features": [2, 1]}), (1, 1, {"features": [2, 1]}))]))
    by_partition = {p["partition"]: p for p in sink.predictions[2:]}
    assert by_partition[0]["prediction"] == "a" and by_partition[0]["explanation"] == []  # one class: nothing to weigh
    assert by_partition[1]["prediction"] == "b" and by_partition[1]["explanation"] == []


@pytest.mark.parametrize("options, words", [({"output_format": "avro"}, "--output-format avro"),
                                            ({"format": "arrow"}, "--format arrow")])
def test_formats_that_cannot_carry_an_explanation_refuse_it(options, words):
    with pytest.raises(ConfigError, match=f"--explain needs JSON predictions: {words}"):
        serve_config(explain=3, **options)


@pytest.mark.parametrize("parameters, words", [({"half_life": 100.0}, "--half-life"), ({"window": 100}, "--window")])
def test_models_that_forget_refuse_explain(parameters, words):
    with pytest.raises(ConfigError, match=f"--explain does not take {words}"):
        serve_config(explain=3, parameters=parameters)
