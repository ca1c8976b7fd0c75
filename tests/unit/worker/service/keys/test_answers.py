"""A key's model for the inference API beside ``worker serve --model-key key``: a key not looked
up yet is asked of the next publication (503 past timeout_ms), one held is its model backed off
to the published group's, one that may be another replica's is a 404 naming the partitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import MultinomialNB as SkMultinomialNB

import nbstream
from nbstream.arrow import FeatureSpec, Pipeline
from nbstream.stats.keyed_counts import KeyedCounts
from tests.helpers.inference import call, infer_body, published, running_api
from worker.inference.answering import AnsweringModel
from worker.service.keys.answers import CommittedKeys, KeyLookup

ROWS = np.array([[3, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0], [0, 0, 2, 2], [2, 0, 0, 1]])
LABELS = np.array(["spam", "ham", "spam", "ham", "ham"])
USERS = ["ann", "ann", "bob", "bob", "bob"]


def _model(lookups: dict) -> AnsweringModel:
    group = nbstream.MultinomialNB().fit(ROWS, LABELS)
    encoder = FeatureSpec.vector("pixels").encoder()
    encoder.width = 4
    return AnsweringModel("main", Pipeline(group, encoder), "5", {"t:0": 5},
                          CommittedKeys(group, 0.0, 2, lookups))


def _found(key: str) -> KeyLookup:
    counts = KeyedCounts(4)
    counts.update(ROWS.astype(float), LABELS, None, USERS)
    return KeyLookup(counts.examples(key), counts.cells_of([key], np.array(["ham", "spam"])))


def _ask(server, key, timeout_ms: int = 200) -> tuple[int, dict]:
    return call(server, "POST", "/v2/models/main/infer", infer_body("pixels", "INT64", ROWS[:2], key=key,
                                                                      timeout_ms=timeout_ms))


def test_a_held_key_is_its_own_model_and_one_not_looked_up_is_asked_of_the_next_publication():
    board = published(_model({"bob": _found("bob")}))
    with running_api(board) as server:
        status, answer = _ask(server, "bob")
        assert status == 200 and answer["parameters"]["key"] == "bob" and answer["parameters"]["key_examples"] == 3
        alone = SkMultinomialNB().fit(ROWS[2:], LABELS[2:])  # prior weight 0: bob's rows alone
        np.testing.assert_allclose(np.reshape(answer["outputs"][1]["data"], (2, 2)), alone.predict_proba(ROWS[:2]),
                                   rtol=1e-9)
        status, answer = _ask(server, "ann")
        assert status == 503 and answer["error"] == "the key 'ann' of model 'main' was not looked up within 200 ms " \
                                                    "(it is, at the service's next commit)."
        assert board.take_keys() == {"ann"}


def test_a_key_held_nowhere_here_is_a_404_naming_the_partitions_or_the_groups_model_when_all_are_here():
    board = published(_model({"zoe": KeyLookup(elsewhere=(1, 2), owned=(0,)), "nobody": KeyLookup()}))
    with running_api(board) as server:
        status, answer = _ask(server, "zoe")
        assert status == 404 and answer["error"] == "the key 'zoe' is in none of the partitions this replica owns " \
                                                    "([0]); partitions [1, 2] are other replicas': ask the replica " \
                                                    "that owns the key's partition."
        status, answer = _ask(server, "nobody")
        group = board.models()["main"].pipeline.model.predict_proba(ROWS[:2])
        assert status == 200 and answer["parameters"]["key_examples"] == 0
        np.testing.assert_allclose(np.reshape(answer["outputs"][1]["data"], (2, 2)), group, rtol=1e-12)


@pytest.mark.parametrize(("key", "words"), [(7, "its keys are record keys, strings; got the integer 7"),
                                            ("", "an empty key"), (None, None)])
def test_a_key_that_is_no_record_key_is_refused_alone(key, words):
    board = published(_model({}))
    with running_api(board) as server:
        status, answer = _ask(server, key)
        if words is None:  # no key: the group's model answers
            assert status == 200 and "key" not in answer["parameters"]
        else:
            assert status == 400 and words in answer["error"], answer
            assert board.take_keys() == set()  # nothing asked of the loop


def test_the_metadata_says_how_many_keys_the_replica_holds():
    with running_api(published(_model({}))) as server:
        status, metadata = call(server, "GET", "/v2/models/main")
        assert status == 200 and metadata["parameters"]["keyed"] == {"keys": 2, "prior_weight": 0.0}
