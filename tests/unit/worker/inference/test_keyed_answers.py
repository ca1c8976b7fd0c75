"""The inference API over a snapshot of a model per key (``worker train --model-key``): the
parameter "key" picks the key's model, backed off to the group's; the answer names the key and
its examples; every key that names none is refused alone, in one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from tests.helpers.inference import call, infer_body, running_api
from worker.batch.train import train
from worker.config import FeatureOptions, ModelOptions, TrainConfig
from worker.inference.snapshot_file import SnapshotModel

TEXTS = ["win a free prize now", "lunch at noon?", "free cash prize", "see you at six", "claim your prize",
         "meeting at noon", "free tickets now", "call me later"]
LABELS = ["spam", "ham", "spam", "ham", "spam", "ham", "spam", "ham"]
USERS = ["ann", "ann", "bob", "bob", "ann", "bob", "cy", "cy"]
ASKED = ["free prize at noon", "see you later"]


def _trained(tmp_path, users: list | pa.Array = USERS, name: str = "k.nbs", weight: float = 2.0):
    pq.write_table(pa.table({"text": TEXTS * 3, "label": LABELS * 3, "user": users * 3 if isinstance(users, list)
                             else pa.concat_arrays([users] * 3)}), tmp_path / "rows.parquet")
    train(TrainConfig(paths=[str(tmp_path / "rows.parquet")], label="label", out=tmp_path / name,
                      model=ModelOptions(kind="multinomial"), features=FeatureOptions(text="text", hash_bits=12),
                      model_key="user", key_prior_weight=weight))
    return tmp_path / name


@pytest.fixture(scope="module")
def keyed_api(tmp_path_factory):
    path = _trained(tmp_path_factory.mktemp("keyed"))
    with running_api(SnapshotModel(path, "spam", reload=False)) as server:
        server.keyed = nbstream.load_keyed(path)
        server.pipeline = nbstream.arrow.load_pipeline(path)
        yield server


def _answer(server, **parameters):
    status, answer = call(server, "POST", "/v2/models/spam/infer", infer_body("text", "BYTES", ASKED, **parameters))
    return status, answer


def _proba(answer) -> np.ndarray:
    outputs = {output["name"]: output for output in answer["outputs"]}
    return np.reshape(outputs["probabilities"]["data"], outputs["probabilities"]["shape"])


@pytest.mark.parametrize("key", ["ann", "bob", "cy"])
def test_a_key_is_answered_by_its_own_model_and_named_with_its_examples(keyed_api, key):
    status, answer = _answer(keyed_api, key=key)
    assert status == 200, answer
    X = keyed_api.pipeline.transform(ASKED)
    np.testing.assert_allclose(_proba(answer), keyed_api.keyed.predict_proba(X, keys=[key, key]), rtol=1e-12)
    np.testing.assert_allclose(_proba(answer), keyed_api.keyed.key_model(key).predict_proba(X), rtol=1e-9)
    examples = {"ann": 9, "bob": 9, "cy": 6}[key]
    assert answer["parameters"]["key"] == key and answer["parameters"]["key_examples"] == examples


def test_without_a_key_the_group_answers_and_a_key_never_seen_gets_the_groups_model(keyed_api):
    X = keyed_api.pipeline.transform(ASKED)
    group = keyed_api.keyed.group_model_.predict_proba(X)
    status, plain = _answer(keyed_api)
    assert status == 200 and "key" not in plain["parameters"]
    np.testing.assert_allclose(_proba(plain), group, rtol=1e-12)
    status, unseen = _answer(keyed_api, key="zoé")
    assert status == 200 and unseen["parameters"]["key_examples"] == 0
    np.testing.assert_allclose(_proba(unseen), group, rtol=1e-12)
    assert not np.allclose(_proba(_answer(keyed_api, key="cy")[1]), group)  # a key's model is its own


def test_a_keys_explanation_is_that_of_its_model(keyed_api):
    status, answer = _answer(keyed_api, key="cy", explain=3)
    assert status == 200, answer
    outputs = {output["name"]: output for output in answer["outputs"]}
    rows = [json.loads(row) for row in outputs["explanation"]["data"]]
    assert [row["class"] for row in rows] == outputs["label"]["data"]
    X = keyed_api.pipeline.transform(ASKED)
    expected = keyed_api.keyed.key_model("cy").explain(X, 3)
    assert [row["log_odds"] for row in rows] == pytest.approx(expected.log_odds.tolist(), rel=1e-9)


def test_the_metadata_says_the_model_keeps_a_model_per_key(keyed_api):
    status, metadata = call(keyed_api, "GET", "/v2/models/spam")
    assert status == 200 and metadata["parameters"]["keyed"] == {"keys": 3, "prior_weight": 2.0}


@pytest.mark.parametrize(("key", "words"), [
    ("", "an empty key"), ("k" * 1025, "a key of 1,025 bytes, over the 1,024"), (1.5, "not float"),
    (True, "a string or an integer"), (["ann"], "not list"), ({"k": 1}, "not dict"), (2**63, "beyond 64 bits")],
    ids=["empty", "too long", "float", "bool", "list", "object", "huge integer"])
def test_each_key_that_names_no_key_is_refused_alone_in_one_line(keyed_api, key, words):
    status, answer = _answer(keyed_api, key=key)
    assert status == 400, answer
    assert answer["error"].startswith("the parameter \"key\" must name a key: ") and words in answer["error"]
    assert "\n" not in answer["error"]


def test_an_integer_key_of_a_model_of_text_keys_is_refused(keyed_api):
    status, answer = _answer(keyed_api, key=7)
    assert status == 400 and answer["error"] == "the parameter \"key\" names no key of this model: this model's " \
                                             "keys are strs; got the int key 7."


def test_a_model_of_integer_keys_answers_integer_keys(tmp_path):
    path = _trained(tmp_path, users=pa.array([1, 1, 2, 2, 1, 2, 3, 3], pa.int64()), weight=0.0)
    keyed = nbstream.load_keyed(path)
    with running_api(SnapshotModel(path, "spam", reload=False)) as server:
        status, answer = _answer(server, key=3)
        assert status == 200 and answer["parameters"] == {**answer["parameters"], "key": 3, "key_examples": 6}
        X = nbstream.arrow.load_pipeline(path).transform(ASKED)
        np.testing.assert_allclose(_proba(answer), keyed.predict_proba(X, keys=[3, 3]), rtol=1e-12)
        assert _answer(server, key="3")[0] == 400


def test_a_key_asked_of_a_model_without_keys_is_refused(tmp_path):
    path = _trained(tmp_path)
    plain = tmp_path / "plain.nbs"
    nbstream.arrow.load_pipeline(path).save(plain)  # the group's model alone
    with running_api(SnapshotModel(plain, "spam", reload=False)) as server:
        status, answer = _answer(server, key="ann")
        assert status == 400
        assert answer["error"] == "model 'spam' keeps no model per key (it was not trained or served with " \
                                  "--model-key); " \
                                  "drop the parameter \"key\"."


def test_a_replacement_without_keys_is_refused_while_the_keyed_model_answers(tmp_path, caplog):
    path = _trained(tmp_path)
    source = SnapshotModel(path, "spam", reload=True)
    keyed_version = source.models()["spam"].version
    nbstream.arrow.load_pipeline(path).save(tmp_path / "plain.nbs")
    os.replace(tmp_path / "plain.nbs", path)
    assert source.models()["spam"].version == keyed_version
    assert source.models()["spam"].keys is not None
    causes = [record.cause for record in caplog.records if hasattr(record, "cause")]
    assert causes == ["it holds no model per key where the served snapshot did (requests naming a key would fail)"]
