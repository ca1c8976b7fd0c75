"""The prequential loop on in-memory fakes: predict with the group's model, then learn into partition states."""

from __future__ import annotations

import json
import logging

import numpy as np

import nbstream
from nbstream.arrow import FeatureSpec
from worker.io.fields import MessageFields
from worker.io.formats import message_format
from worker.io.kafka.state_topic import write_records
from worker.io.records import Polled
from worker.service.follower import state_name
from worker.service.group_state import GroupState, PartitionSettings
from worker.service.loop import LoopOutputs, LoopSettings, PrequentialLoop
from worker.service.partition.drift_watch import DriftConfig, DriftWatch
from worker.service.partition.record import PartitionRecord
from worker.service.telemetry.metrics import ServiceMetrics

from ....helpers.fakes import FakeFollower, FakeRecord, FakeSink, Journal, records


def make_loop(classes=None, partitions=(0,), learn=True, spec=None, model=nbstream.MultinomialNB, drift=None,
              follower=None):
    encoder = (spec or FeatureSpec.vector("features")).encoder()
    group = GroupState(model, encoder, follower or FakeFollower(), settings=PartitionSettings(classes, drift=drift))
    group.assign(list(partitions), {}, wait_s=0, strict=True)
    sink = FakeSink(Journal())
    return PrequentialLoop(message_format(MessageFields(feature_names=["colour"])), group, LoopOutputs(sink, sink),
                           ServiceMetrics(), settings=LoopSettings(learn=learn)), sink


def test_each_message_is_predicted_by_the_model_that_learned_every_earlier_one():
    loop, sink = make_loop()
    loop.process(records([{"features": [3, 0], "label": "a"}, {"features": [0, 3], "label": "b"}]))
    loop.process(records([{"features": [4, 0], "id": "x"}, {"features": [0, 5], "label": "b"}], first_offset=2))
    assert [p["prediction"] for p in sink.predictions] == [None, "a", "a", "b"]  # the second knew "a" alone
    assert [p["model_version"] for p in sink.predictions] == [0, 1, 2, 2]
    assert sink.predictions[2]["id"] == "x" and sink.predictions[3]["offset"] == 3
    state = loop.group.owned[0]
    assert state.model.n_examples_seen_ == 3  # the unlabeled message is predicted, not learned
    assert state.model.class_count_.tolist() == [1.0, 2.0] and state.next_offset == 4
    quality = state.quality.report()["all"]
    assert (quality["judged"], quality["accuracy"]) == (2, 0.5)  # the first had no prediction to judge
    assert quality["recall"] == {"b": 0.5}


def test_a_backlog_in_one_poll_is_predicted_message_by_message():
    rng = np.random.default_rng(0)
    X, y = rng.poisson(1.0, size=(200, 2)), rng.choice(["a", "b", "c"], size=200)
    loop, sink = make_loop()
    loop.process(records([{"features": x.tolist(), "label": label} for x, label in zip(X, y, strict=True)]))
    reference = nbstream.MultinomialNB()
    for i, (x, label) in enumerate(zip(X, y, strict=True)):
        expected = reference.predict_proba(x[None])[0] if reference.is_fitted else None
        served = sink.predictions[i]
        if expected is None:
            assert served["prediction"] is None
        else:
            got = [served["probabilities"].get(str(c), 0.0) for c in reference.classes_.tolist()]
            np.testing.assert_allclose(got, expected, rtol=1e-9)
            assert served["prediction"] == reference.classes_[np.argmax(expected)]
        assert served["model_version"] == i
        reference.partial_fit(x[None], [label])


def test_partitions_of_one_poll_do_not_see_each_others_messages():
    loop, sink = make_loop(partitions=(0, 1))
    loop.process(Polled.of("in", [FakeRecord(json.dumps({"features": [3, 0], "label": label}).encode(), offset=0,
                                             partition=partition) for partition, label in ((0, "a"), (1, "b"))]))
    assert [p["prediction"] for p in sink.predictions] == [None, None]
    loop.process(Polled.of("in", [FakeRecord(json.dumps({"features": [3, 0]}).encode(), offset=1, partition=1)]))
    assert sink.predictions[-1]["probabilities"] == {"a": 0.5, "b": 0.5}


def test_bad_messages_are_rejected_and_the_good_ones_go_on():
    loop, sink = make_loop()
    loop.process(records([b"{oops", {"features": [1, 2], "label": "a"}, {"features": [1], "label": "a"},
                          {"features": [1, -2], "label": "b"}, {"features": [2, 2], "label": "b"}]))
    assert [(offset, message.split(":")[0]) for offset, _, message in sink.rejected] == [
        (0, "malformed JSON"), (2, "list has 1 values; expected 2"), (3, "negative value (this model needs counts)")]
    assert [p["offset"] for p in sink.predictions] == [1, 4]
    assert loop.group.owned[0].model.n_examples_seen_ == 2


def test_a_lone_bad_message_is_rejected_and_its_offset_passed():
    for bad in (b"{oops", None, b"", {"features": [1, 2], "label": {"nested": [1]}}):
        loop, sink = make_loop()
        loop.process(records([bad]))
        assert len(sink.rejected) == 1 and sink.predictions == []
        assert loop.group.owned[0].next_offset == 1 and loop.group.owned[0].changed


def test_labels_of_the_other_kind_are_rejected_once_the_kind_is_known():
    loop, sink = make_loop()
    loop.process(records([{"features": [1, 0], "label": 1}, {"features": [0, 1], "label": "two"}]))
    loop.process(records([{"features": [1, 0], "label": "three"}], first_offset=2))
    assert [(offset, message) for offset, _, message in sink.rejected] == [
        (1, "label 'two' is a string; the model's labels are numbers"),
        (2, "label 'three' is a string; the model's labels are numbers")]
    assert loop.group.owned[0].model.classes_.tolist() == [1]


def test_a_fixed_class_set_rejects_other_labels():
    loop, sink = make_loop(classes=["ham", "spam"])
    loop.process(records([{"features": [1, 0], "label": "ham"}, {"features": [0, 1], "label": "eggs"}]))
    assert sink.rejected == [(1, "label", "label not among the classes ['ham', 'spam']")]
    model = loop.group.owned[0].model
    assert model.classes_.tolist() == ["ham", "spam"]
    np.testing.assert_array_equal(model.class_count_, [1.0, 0.0])


def test_predict_only_ignores_labels_but_passes_offsets():
    loop, sink = make_loop(learn=False)
    loop.process(records([{"features": [1, 0], "label": "a"}]))
    assert sink.predictions[0]["prediction"] is None and not loop.group.owned[0].model.is_fitted
    assert loop.group.owned[0].next_offset == 1


def test_partitions_learn_apart_and_the_global_model_is_their_merge():
    loop, sink = make_loop(partitions=(0, 1))
    batch = records([{"features": [3, 0], "label": "a"}, {"features": [0, 3], "label": "b"},
                     {"features": [2, 1], "label": "a"}])
    batch.partitions[1] = 1
    loop.process(batch)
    owned = loop.group.owned
    assert owned[0].model.n_examples_seen_ == 2 and owned[1].model.n_examples_seen_ == 1
    merged = loop.group.global_model.model
    offline = nbstream.MultinomialNB().fit([[3, 0], [0, 3], [2, 1]], ["a", "b", "a"])
    order = np.argsort(merged.classes_)
    np.testing.assert_array_equal(merged.feature_count_[order], offline.feature_count_)
    assert (owned[0].next_offset, owned[1].next_offset) == (3, 2)


def test_categorical_codes_are_learned_per_partition_and_aligned_in_the_global_model():
    loop, sink = make_loop(partitions=(0, 1), spec=FeatureSpec.categorical(["colour"]), model=nbstream.CategoricalNB)
    batch = records([{"features": {"colour": "red"}, "label": "x"}, {"features": {"colour": "blue"}, "label": "y"},
                     {"features": {"colour": "blue"}, "label": "y"}])
    batch.partitions[1] = batch.partitions[2] = 1
    loop.process(batch)
    owned = loop.group.owned
    assert owned[0].encoder.categories == [{"red": 0}] and owned[1].encoder.categories == [{"blue": 0}]
    assert loop.group.global_model.model.predict([[loop.group.global_model.encoder.categories[0]["blue"]]]) == ["y"]


def test_messages_of_a_partition_revoked_during_their_poll_are_left_to_its_new_owner():
    """kafka-python may return records fetched before a rebalance that, inside the same poll,
    moved their partition away: processing them would learn into a state this replica gave up."""
    loop, sink = make_loop(partitions=(1,))
    polled = records([{"features": [3, 0], "label": "a"}, {"features": [0, 3], "label": "b"}])
    polled.partitions[:] = [0, 1]
    loop.process(polled)
    assert [p["partition"] for p in sink.predictions] == [1] and sink.rejected == []
    assert 0 not in loop.group.owned and loop.group.owned[1].model.n_examples_seen_ == 1


def _swapping_stream(n, swap_at, rng):
    """Messages whose label is the larger feature's class, and the other one from ``swap_at`` on."""
    X = rng.poisson(2.0, size=(n, 2)) + np.array([[4, 0]]) * rng.integers(0, 2, size=(n, 1))
    labels = np.where(X[:, 0] > X[:, 1], "a", "b")
    labels[swap_at:] = np.where(labels[swap_at:] == "a", "b", "a")
    return [{"features": x.tolist(), "label": label} for x, label in zip(X, labels, strict=True)]


def _served_after_drift(messages, on_drift_reset):
    def windowed():
        return nbstream.MultinomialNB(window=2_000, window_buckets=10)
    on_drift = "reset-to-window" if on_drift_reset else "report"
    loop, sink = make_loop(model=windowed, drift=DriftConfig("adwin", on_drift))
    for start in range(0, len(messages), 500):
        loop.process(records(messages[start:start + 500], first_offset=start))
    served = [(p["prediction"], m["label"]) for p, m in zip(sink.predictions, messages, strict=True)]
    return loop, np.array([guess != label for guess, label in served if guess is not None])


def test_a_drift_is_detected_logged_counted_and_kept_in_the_state(caplog):
    messages = _swapping_stream(6_000, 3_000, np.random.default_rng(1))
    with caplog.at_level(logging.WARNING):
        loop, errors = _served_after_drift(messages, on_drift_reset=False)
    state = loop.group.owned[0]
    detections = state.record().drift["detections"]
    assert detections and 3_000 <= detections[0]["examples"] < 3_500 and detections[0]["error_before"] < 0.2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "drift" in r.getMessage()]
    assert len(warnings) == len(detections) and warnings[0].partition == 0
    assert len(errors) == len(messages) - 1  # every message but the first was judged
    assert [d.examples for d in DriftWatch("adwin", 0).observe(errors)] == [d["examples"] for d in detections]
    restored, _ = PartitionRecord.from_payload(state.record().to_payload(loop.group.global_model.encoder),
                                               nbstream.MultinomialNB(window=2_000, window_buckets=10), "p")
    assert restored.drift == state.record().drift


def test_reset_to_window_recovers_sooner_than_the_window_alone():
    messages = _swapping_stream(6_000, 3_000, np.random.default_rng(1))
    _, reported = _served_after_drift(messages, on_drift_reset=False)
    loop, reset = _served_after_drift(messages, on_drift_reset=True)
    after = slice(3_000, 4_500)  # the 1,500 messages after the change
    assert reset[after].mean() < reported[after].mean() - 0.1
    assert loop.group.owned[0].record().drift["detections"]


def test_a_forged_drift_watch_in_a_state_is_replaced_with_a_warning(caplog):
    forged = PartitionRecord(nbstream.MultinomialNB(), drift={"detector": "adwin", "judged": -5})
    payload = forged.to_payload(FeatureSpec.vector("features").encoder())
    loop, _ = make_loop(drift=DriftConfig("adwin"),
                        follower=FakeFollower(write_records(state_name(0), payload).records))
    with caplog.at_level(logging.WARNING):
        loop.process(records([{"features": [1, 0], "label": "a"}, {"features": [0, 1], "label": "b"}]))
    assert any("drift watch could not be restored" in r.getMessage() for r in caplog.records)
    assert loop.group.owned[0].record().drift["judged"] == 1



def test_every_served_prediction_counts_in_the_predicted_class_share_labeled_or_not():
    loop, _ = make_loop()
    loop.process(records([{"features": [3, 0], "label": "a"}, {"features": [0, 3], "label": "b"},
                          {"features": [0, 4]}, {"features": [0, 5]}, {"features": [5, 0]}]))
    report = loop.group.owned[0].quality.report()["all"]
    assert report["served"] == 4  # the first had no prediction
    assert report["predicted_share"] == {"a": 0.5, "b": 0.5}
