"""Challenger models on one stream, on an in-memory cluster: every model learns the same examples
in the same commits, each is judged test-then-train by its own predictions, the served one's are
sent naming it, and the partition states keep them all."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import nbstream
from worker.errors import ConfigError
from worker.io.kafka.state_topic import StateAssembler
from worker.service.follower import state_name
from worker.service.models.config import parse_challengers
from worker.service.partition.record import PartitionRecord
from worker.service.telemetry.metrics import ServiceMetrics

from .....helpers.fake_kafka import FakeKafka
from ..test_session import STATES, open_session, polls, settings
from ..test_session import states_in as every_state

COMPLEMENT = "cnb=model=complement,alpha=0.5"
FORGETTING = "forget=half_life=20"


def stream(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """n examples of 4 count features, one of which is frequent in each class (a, b or c): the
    others are rarely 0, so that a Bernoulli model, which sees only whether a count is 0, tells
    the classes apart much worse than a multinomial one."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(["a", "b", "c"], size=n)
    rates = 3 + 12 * (np.searchsorted(["a", "b", "c"], labels)[:, None] == np.arange(4))
    return rng.poisson(rates), labels


def cluster(X: np.ndarray, labels, partitions: int = 1) -> FakeKafka:
    kafka = FakeKafka()
    kafka.create("in", partitions)
    for i, (x, label) in enumerate(zip(X, labels, strict=True)):
        message = {"id": i, "features": x.tolist()} | ({} if label is None else {"label": label})
        kafka.append("in", json.dumps(message).encode(), key=str(i).encode(), partition=i % partitions)
    return kafka


def challengers(*specs: str, **options):
    return settings(challenger=parse_challengers(list(specs)), checkpoint_every=40, **options)


def states_in(kafka: FakeKafka) -> dict[str, PartitionRecord]:
    """The partition states the state topic holds, by name."""
    return {name: state for name, state in every_state(kafka, skip=["served-model"]).items()}


def header_of(kafka: FakeKafka, name: str) -> dict:
    """The JSON header of the newest state ``name`` in the state topic."""
    assembler = StateAssembler()
    for record in kafka.topics[STATES].log[0]:
        assembler.add(record.key, record.value)
    payload = assembler.take(name)
    length = int.from_bytes(payload[4:8], "little")
    return json.loads(payload[8:8 + length])


def served(kafka: FakeKafka) -> list[dict]:
    """The predictions sent, in offset order."""
    return sorted(map(json.loads, kafka.topics["out"].values()), key=lambda p: p["offset"])


def test_every_challenger_learns_exactly_the_served_models_examples_in_the_same_state_records():
    X, y = stream(300)
    kafka = cluster(X, y)
    session = open_session(kafka, challengers(COMPLEMENT, FORGETTING))
    session.run(polls(12))
    state = states_in(kafka)[state_name(0)]
    assert state.names == ["main", "cnb", "forget"]
    offline = {"main": nbstream.MultinomialNB(), "cnb": nbstream.ComplementNB(alpha=0.5),
               "forget": nbstream.MultinomialNB(half_life=20.0)}
    for name, model in offline.items():
        learned = state.statistics(name).model
        model.partial_fit(X, y)  # classes in order of first appearance, as the stream brings them
        assert repr(learned) == repr(model) and learned.n_examples_seen_ == 300
        np.testing.assert_allclose(learned.feature_count_, model.feature_count_, rtol=1e-12)
        np.testing.assert_allclose(learned.class_count_, model.class_count_, rtol=1e-12)
    judged = {name: state.quality_of(name).report()["all"]["judged"] for name in offline}
    assert judged == {"main": 299, "cnb": 299, "forget": 299}  # the first message of each had nothing to say


def test_each_model_is_judged_by_its_own_test_then_train_predictions():
    X, y = stream(200)
    kafka = cluster(X, y)
    session = open_session(kafka, challengers(COMPLEMENT, output_challengers=True))
    session.run(polls(8))
    predictions = served(kafka)
    assert {p["model"] for p in predictions} == {"main"} and len(predictions) == 200
    for name, model in (("main", nbstream.MultinomialNB()), ("cnb", nbstream.ComplementNB(alpha=0.5))):
        scores = model.predict_proba_prequential(X, y)
        classes, offline = scores.classes, scores.proba
        shown = [p if name == "main" else p["challengers"][name] for p in predictions]
        assert [s["prediction"] for s in shown[1:]] == classes[np.argmax(offline[1:], axis=1)].tolist()
        np.testing.assert_allclose([[s["probabilities"].get(c, 0.0) for c in classes] for s in shown[1:]],
                                   offline[1:], rtol=1e-9)
        assert shown[0]["prediction"] is None and [s["model_version"] for s in shown] == list(range(200))
        right = (classes[np.argmax(offline[1:], axis=1)] == y[1:]).mean()
        report = states_in(kafka)[state_name(0)].quality_of(name).report()["all"]
        assert report["accuracy"] == pytest.approx(right, abs=1e-12)


def test_without_shadow_mode_predictions_name_their_model_and_no_challenger():
    X, y = stream(20)
    kafka = cluster(X, y)
    open_session(kafka, challengers(COMPLEMENT)).run(polls(2))
    assert all(set(p) == {"id", "prediction", "probabilities", "model_version", "topic", "partition", "offset",
                          "model"} and p["model"] == "main" for p in served(kafka))


def test_without_challengers_predictions_and_states_are_what_they_were():
    X, y = stream(20)
    kafka = cluster(X, y)
    open_session(kafka, settings()).run(polls(2))
    assert all("model" not in p for p in served(kafka))
    header = header_of(kafka, state_name(0))
    assert "models" not in header and "model_name" not in header


def test_a_named_model_is_named_in_its_predictions_and_state():
    X, y = stream(20)
    kafka = cluster(X, y)
    open_session(kafka, settings(model_name="mnb")).run(polls(2))
    assert {p["model"] for p in served(kafka)} == {"mnb"}
    state = states_in(kafka)[state_name(0)]
    assert state.name == "mnb" and state.others == {}


def test_a_state_with_challengers_keeps_the_first_model_where_a_reader_of_one_model_finds_it():
    X, y = stream(50)
    kafka = cluster(X, y)
    open_session(kafka, challengers(COMPLEMENT)).run(polls(3))
    header = header_of(kafka, state_name(0))
    assert set(header["models"]) == {"cnb"} and header["models"]["cnb"]["fitted"] is True
    assert header["quality"]["all"]["judged"] == 49 and "model_name" not in header
    state = states_in(kafka)[state_name(0)]
    assert state.model.n_examples_seen_ == 50 and isinstance(state.model, nbstream.MultinomialNB)
    assert isinstance(state.others["cnb"].model, nbstream.ComplementNB)


def test_a_restart_with_another_lineup_starts_new_models_empty_and_drops_removed_ones(caplog):
    X, y = stream(120)
    kafka = cluster(X[:60], y[:60])
    session = open_session(kafka, challengers(COMPLEMENT, FORGETTING))
    session.run(polls(3))
    session.close()
    for i in range(60, 120):
        kafka.append("in", json.dumps({"id": i, "features": X[i].tolist(), "label": y[i]}).encode())
    with caplog.at_level(logging.INFO):
        again = open_session(kafka, challengers(COMPLEMENT, "late=model=bernoulli"))
        again.run(polls(3))
    lines = [(r.getMessage(), r.model) for r in caplog.records if hasattr(r, "model")]
    assert lines.count(("a model starts empty: the group's states hold none of its name", "late")) == 1
    assert lines.count(("a model the group learned is no longer given: dropped", "forget")) == 1
    state = states_in(kafka)[state_name(0)]
    assert state.names == ["main", "cnb", "late"]
    assert state.statistics("cnb").model.n_examples_seen_ == 120
    assert state.statistics("late").model.n_examples_seen_ == 60  # from the restart on


def test_a_model_whose_settings_changed_under_its_name_is_refused_in_one_line():
    X, y = stream(30)
    kafka = cluster(X, y)
    session = open_session(kafka, challengers(COMPLEMENT))
    session.run(polls(2))
    session.close()
    with pytest.raises(ConfigError) as refused:
        open_session(kafka, challengers("cnb=model=complement,alpha=0.7"))
    message = str(refused.value)
    assert "holds the model cnb as ComplementNB(alpha=0.5); this service is configured for ComplementNB(alpha=0.7)" \
        in message and "\n" not in message


def test_the_served_models_name_may_change_and_its_statistics_stay_under_their_name():
    """A state whose first model is main, read by a service whose first model is cnb and main a
    challenger: each keeps its own statistics."""
    X, y = stream(40)
    kafka = cluster(X, y)
    session = open_session(kafka, challengers(COMPLEMENT))
    session.run(polls(2))
    session.close()
    again = open_session(kafka, settings(model="complement", parameters={"alpha": 0.5}, model_name="cnb",
                                         challenger=parse_challengers(["main=model=multinomial"]),
                                         checkpoint_every=40))
    again.run(polls(1))
    again.commit()
    assert again.group.owned[0].statistics("main").model.n_examples_seen_ == 40
    assert again.group.owned[0].statistics("cnb").model.n_examples_seen_ == 40
    assert again.group.owned[0].record().name == "cnb"


def test_the_group_metrics_have_a_series_per_model():
    X, y = stream(60)
    kafka = cluster(X, y)
    metrics = ServiceMetrics()
    open_session(kafka, challengers(COMPLEMENT), metrics).run(polls(3))
    group, owned = metrics.quality.reports()
    assert set(group) == {"main", "cnb"} and set(owned["cnb"]) == {0}
    assert group["cnb"]["all"]["judged"] == group["main"]["all"]["judged"] == 59


def test_a_state_record_with_challengers_reads_back_whole():
    main, other = nbstream.MultinomialNB().fit([[1, 0], [0, 1]], ["a", "b"]), nbstream.ComplementNB()
    from nbstream.arrow import FeatureSpec
    from worker.service.partition.record import ModelState

    record = PartitionRecord(main, next_offset=2, name="mnb", others={"cnb": ModelState(other)})
    read, _ = PartitionRecord.from_payload(record.to_payload(FeatureSpec.vector("f").encoder()),
                                           nbstream.MultinomialNB(), "p")
    assert read.name == "mnb" and read.names == ["mnb", "cnb"] and not read.others["cnb"].model.is_fitted
    np.testing.assert_array_equal(read.model.feature_count_, main.feature_count_)


@pytest.mark.parametrize("models, reason", [
    ({"cnb": {"fitted": True, "quality": {}, "snapshot": None}}, "snapshot must be base64 text"),
    ({"cnb": {"fitted": False}}, "must be an object of fitted, quality and snapshot"),
    ({"c b": {"fitted": False, "quality": None, "snapshot": None}}, "a model's name is"),
    ({"cnb": {"fitted": True, "quality": None, "snapshot": "%%%"}}, "must be base64"),
    ([], "models must be a JSON object"),
])
def test_a_state_whose_other_models_do_not_read_is_unreadable(models, reason):
    from nbstream.arrow import FeatureSpec
    from worker.service.partition.record import UnreadableState

    payload = PartitionRecord(nbstream.MultinomialNB()).to_payload(FeatureSpec.vector("f").encoder())
    header = json.loads(payload[8:])
    header["models"] = models
    forged = json.dumps(header).encode()
    with pytest.raises(UnreadableState, match=reason):
        PartitionRecord.from_payload(b"NBPS" + len(forged).to_bytes(4, "little") + forged, nbstream.MultinomialNB(),
                                     "p")


# ---- labels that come later ------------------------------------------------------------------
def test_delayed_labels_teach_every_model_and_judge_each_by_what_it_predicted():
    from ..test_delayed_labels import FEATURES, LABELS, cluster, offline, send_features, send_labels, states_in

    kafka = cluster()
    session = open_session(kafka, settings(labels_topic="labels", challenger=parse_challengers([COMPLEMENT]),
                                           output_challengers=True))
    send_features(kafka, ["m0", "m1"])
    send_labels(kafka, ["m0", "m1"])
    session.run(polls(1))  # both learned: every model knows a and b
    send_features(kafka, ["m2", "m3"])
    session.run(polls(1))
    send_labels(kafka, ["m2", "m3"])
    session.run(polls(1))
    sent = {p["id"]: p for p in map(json.loads, kafka.topics["out"].values())}
    state = states_in(kafka)[state_name(0)]
    for name in ("main", "cnb"):
        predicted = [sent[key]["prediction"] if name == "main" else sent[key]["challengers"][name]["prediction"]
                     for key in ("m2", "m3")]
        report = state.quality_of(name).report()["all"]
        assert report["judged"] == 2  # m0, m1: predicted before any class was known
        right = [guess == LABELS[key] for guess, key in zip(predicted, ["m2", "m3"], strict=True)]
        assert report["accuracy"] == np.mean(right)
    expected = offline(["m0", "m1", "m2", "m3"])
    np.testing.assert_array_equal(state.model.feature_count_, expected.feature_count_)
    complement = nbstream.ComplementNB(alpha=0.5).partial_fit(np.array([FEATURES[k] for k in ["m0", "m1", "m2", "m3"]]),
                                                              [LABELS[k] for k in ["m0", "m1", "m2", "m3"]])
    np.testing.assert_array_equal(state.statistics("cnb").model.feature_count_, complement.feature_count_)


def test_examples_kept_before_a_challenger_came_teach_it_without_judging_it():
    from ..test_delayed_labels import cluster, send_features, send_labels, states_in

    kafka = cluster()
    session = open_session(kafka, settings(labels_topic="labels"))
    send_features(kafka, ["m0", "m1"])
    send_labels(kafka, ["m0", "m1"])
    session.run(polls(1))
    send_features(kafka, ["m2"])  # kept with what main served
    session.run(polls(1))
    session.close()
    send_labels(kafka, ["m2"])
    again = open_session(kafka, settings(labels_topic="labels", challenger=parse_challengers([COMPLEMENT])))
    again.run(polls(2))
    state = states_in(kafka)[state_name(0)]
    assert state.statistics("cnb").model.n_examples_seen_ == 1  # m2: learned when its label came
    assert state.quality_of("cnb").report()["all"]["judged"] == 0  # it served m2 nothing
    assert state.quality_of("main").report()["all"]["judged"] == 1


# ---- promotion -------------------------------------------------------------------------------
def promoting(window: int = 100, **options):
    """Bernoulli served (it sees only whether a count is 0), a multinomial challenger, --promote auto."""
    return settings(**{"model": "bernoulli", "challenger": parse_challengers(["mnb=model=multinomial"]),
                       "promote": "auto", "promote_window": window, "max_poll_records": 25, "checkpoint_every": 50}
                    | options)


def test_a_challenger_that_does_better_is_promoted_with_one_line_of_figures_and_serves_from_the_next_message(caplog):
    X, y = stream(600)
    kafka = cluster(X, y)
    metrics = ServiceMetrics()
    session = open_session(kafka, promoting(output_challengers=True), metrics)
    with caplog.at_level(logging.INFO):
        session.run(polls(30))
    lines = [r for r in caplog.records if r.getMessage().startswith("promoted mnb to serve in place of main")]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    line = lines[0]
    assert (line.from_model, line.to_model, line.window, line.margin) == ("main", "mnb", 100, 0.05)
    assert line.challenger_log_loss <= line.served_log_loss * 0.95 and line.lower_by >= 0.05
    switch = line.next_offsets["0"]
    # Message 0 is predicted before any class is known: messages 1-100 are the first 100 judged
    # by both, and the challenger serves from the next message on, inside the poll of 100-124.
    assert switch == 101
    predictions = served(kafka)
    assert {p["model"] for p in predictions[:switch]} == {"main"} and {p["model"] for p in predictions[switch:]} == {
        "mnb"}
    assert set(predictions[-1]["challengers"]) == {"main"}  # the former served model stays on as a challenger
    assert metrics.promotions.labels("main", "mnb")._value.get() == 1
    state = states_in(kafka)[state_name(0)]
    assert state.statistics("main").model.n_examples_seen_ == state.statistics("mnb").model.n_examples_seen_ == 600


def served_by_sequence(X: np.ndarray, y: np.ndarray, poll_size: int, **options) -> list[str]:
    """Which model served each message, with --promote auto and polls of ``poll_size`` messages."""
    kafka = cluster(X, y)
    session = open_session(kafka, promoting(**{"max_poll_records": poll_size, "checkpoint_every": 1_000} | options))
    session.run(polls(len(y) // poll_size + 2))
    predictions = served(kafka)
    assert [p["offset"] for p in predictions] == list(range(len(y)))
    return [p["model"] for p in predictions]


def test_which_model_served_each_message_is_the_same_whatever_the_poll_size():
    """Labels that lean on a class the challenger tells apart only later, so that promotions come
    inside polls: the served-by sequence of polls of 1, 100 and 10,000 messages is one."""
    X, y = stream(700)
    sequences = {size: served_by_sequence(X, y, size) for size in (1, 100, 10_000)}
    assert sequences[1] == sequences[100] == sequences[10_000]
    switch = sequences[1].index("mnb")
    assert switch == 101 and set(sequences[1][switch:]) == {"mnb"}


def test_a_tie_never_promotes_even_with_no_margin():
    """A challenger identical to the served model has the same log-loss on every window: with
    --promote-margin 0 it is never promoted."""
    X, y = stream(1_500)
    for size in (7, 1_500):
        sequence = served_by_sequence(X, y, size, challenger=parse_challengers(["twin=model=bernoulli"]),
                                      promote_margin=0.0)
        assert set(sequence) == {"main"}


def test_the_choice_is_written_in_the_commit_after_the_promotion_and_a_restart_serves_the_promoted_model():
    X, y = stream(600)
    kafka = cluster(X[:300], y[:300])
    session = open_session(kafka, promoting())
    session.run(polls(12))
    session.close()
    assert [r.key for r in kafka.topics[STATES].log[0]].count(b"served-model") == 1  # once, in one commit
    assembler = StateAssembler()
    for record in kafka.topics[STATES].log[0]:
        assembler.add(record.key, record.value)
    choice = json.loads(assembler.take("served-model"))
    assert choice["served"] == "mnb" and choice["promotion"]["from_model"] == "main"
    assert choice["promotion"]["offsets"]["0"] == 101 and choice["promotion"]["window"] == 100
    for i in range(300, 600):
        kafka.append("in", json.dumps({"id": i, "features": X[i].tolist(), "label": y[i]}).encode())
    again = open_session(kafka, promoting())
    assert again.group.models.served == "mnb"  # read with the group's states, before any message
    again.run(polls(12))
    assert {p["model"] for p in served(kafka)[300:]} == {"mnb"}


def test_every_replica_serves_the_model_the_group_chose():
    from nbstream.arrow import FeatureSpec
    from worker.service.group_state import GroupState
    from worker.service.session import lineup

    from .....helpers.fakes import FakeFollower

    X, y = stream(300)
    kafka = cluster(X, y)
    open_session(kafka, promoting()).run(polls(12))
    other = GroupState(nbstream.BernoulliNB, FeatureSpec.vector("features").encoder(), FakeFollower(),
                       lineup=lineup(promoting()))
    assert other.models.served == "main"
    other.follower.put([(r.key, r.value) for r in kafka.topics[STATES].log[0]])
    other.take_updates(other.follower.poll())
    assert other.models.served == "mnb"


def test_a_promotion_that_did_not_commit_is_not_the_groups_choice():
    X, y = stream(300)
    kafka = cluster(X, y)
    session = open_session(kafka, promoting(checkpoint_every=100_000, checkpoint_interval=3600.0))
    for _ in range(12):
        session.loop.process(session.consumer.poll(0.0, 25))  # promoted, never committed
    assert session.group.models.served == "mnb" and len(kafka.topics["out"].values()) == 0
    session.close()  # the open transaction is aborted
    assert open_session(kafka, promoting()).group.models.served == "main"


def test_without_promote_auto_the_served_model_stays_whatever_the_challengers_do():
    X, y = stream(300)
    kafka = cluster(X, y)
    session = open_session(kafka, settings(model="bernoulli", challenger=parse_challengers(["mnb=model=multinomial"]),
                                           max_poll_records=25))
    session.run(polls(12))
    assert {p["model"] for p in served(kafka)} == {"main"}
    assert not any(r.key == b"served-model" for r in kafka.topics[STATES].log[0])


def test_metrics_list_every_model_its_role_and_the_promotions_window():
    X, y = stream(300)
    kafka = cluster(X, y)
    metrics = ServiceMetrics()
    open_session(kafka, promoting(), metrics).run(polls(12))
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    assert 'nbstream_model_info{model="mnb",role="served",settings="MultinomialNB()"} 1.0' in text
    assert 'nbstream_model_info{model="main",role="challenger",settings="BernoulliNB()"} 1.0' in text
    assert 'nbstream_promotions_total{from_model="main",to_model="mnb"} 1.0' in text
    assert 'nbstream_promotion_log_loss{model="mnb"}' in text
