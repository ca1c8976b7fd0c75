"""JSON message values to Arrow batches, with each message's problem named."""

from __future__ import annotations

import json

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.arrow import FeatureSpec
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.messages import decode


def test_json_messages_decode_into_the_specs_columns_with_problems_named():
    spec = FeatureSpec.numeric_columns(["age", "income"])
    values = [json.dumps({"id": 1, "features": {"age": 30, "income": 2.5}, "label": "yes"}).encode(),
              json.dumps({"id": 2, "features": {"age": 41}}).encode(),
              json.dumps({"features": {"age": "old", "income": 1}}).encode(),
              json.dumps({"features": {"age": 50, "income": 3.0}, "label": 1}).encode()]
    decoded = decode(values, spec, MessageFields())
    assert decoded.ids == [1, 2, None, None]
    assert decoded.problems.message[1] == "features ['income'] missing"
    assert decoded.problems.message[2] == "non-numeric value"
    assert decoded.batch.column("age").to_pylist()[0] == 30.0
    # The first label decides the kind: a number after a string is that message's problem, not a conversion.
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == ["yes", None, None, None]
    assert decoded.problems.message[3] == "label 1 is a number; the model's labels are strings"


def test_text_messages_and_size_limits():
    spec = FeatureSpec.text("body", hash_bits=8)
    fmt = MessageFields(text="body", max_bytes=40)
    values = [b'{"body": "hello there"}', b'{"body": 42}', b'{"body": "' + b"x" * 50 + b'"}']
    decoded = decode(values, spec, fmt)
    assert decoded.problems.bad.tolist() == [False, True, True]
    assert decoded.problems.message[1] == "field 'body' must be a string"
    assert decoded.problems.message[2].startswith("message of 62 bytes exceeds the limit of 40")


def test_every_unusable_message_alone_is_a_problem_of_its_own():
    spec = FeatureSpec.vector("features")
    cases = {None: "empty message (null value)", b"": "empty message", b"{oops": "malformed JSON",
             b"[1]": "expected a JSON object; got list", b'{"features": "1,2"}': "field 'features' must be a list",
             b'{"features": [[1], [2]]}': "non-numeric value",
             b'{"features": [1, 2], "label": true}': "label must be a string or a number; got a boolean",
             b'{"features": [1, 2], "label": {"a": 1}}': "label must be a string or a number; got an object",
             b'{"features": [1, 2], "label": ' + b"[" * 1000 + b"]" * 1000 + b"}":
                 "label must be a string or a number; got a list",
             b'{"features": [1, 2], "label": ' + b"[" * 2000 + b"]" * 2000 + b"}": "malformed JSON",
             b'{"features": [1, 2], "label": 18446744073709551615}': "label is an integer beyond 64 bits"}
    for value, expected in cases.items():
        decoded = decode([value], spec, MessageFields())
        assert decoded.batch.num_rows == 1 and decoded.problems.bad.tolist() == [True], value
        assert str(decoded.problems.message[0]).startswith(expected), (value, decoded.problems.message[0])


def test_labels_are_typed_by_kind():
    spec = FeatureSpec.vector("features")
    values = [json.dumps({"features": [1], "label": label}).encode() for label in (3, 1.5, None, 2)]
    decoded = decode(values, spec, MessageFields())
    assert decoded.label_kind == "number" and decoded.batch.column(LABEL_COLUMN).to_pylist() == [3.0, 1.5, None, 2.0]
    decoded = decode(values[:1] + values[3:], spec, MessageFields(), label_kind="string")
    assert decoded.problems.bad.tolist() == [True, True]


FEATURES = {  # per spec: a way every message of a batch may hold its features
    "vector": [st.lists(st.integers(-5, 300), min_size=3, max_size=3),
               st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=3),
               st.lists(st.integers(0, 9), max_size=4)],
    "text": [st.text(max_size=20)],
    "columns": [st.fixed_dictionaries({"a": st.floats(-10, 10), "b": st.integers(0, 5)})],
}
LABELS = [st.none(), st.sampled_from(["ham", "spam"]), st.integers(0, 3), st.floats(0, 3)]
IDS = [st.none(), st.integers(0, 10**6), st.text(max_size=5), st.just("[")]
ODD = st.sampled_from([b"{oops", b"[1]", b"", b'{"text": 1}', b'{"features": "1,2,3"}', b'{"label": true}',
                       b'{"id": {"k": 1}}', b'{"features": [[1]], "text": null}', b'{"features": [1, [2], 3]}',
                       b'{"features": [1, null, 3]}', b'{"features": [1], "label": 18446744073709551616}',
                       b'{"features": [1], "label": "\xff"}', b'{"features": [1e999]}'])


@pytest.mark.parametrize("reader", ["arrow", "simdjson"])
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(FEATURES)), st.data())
def test_the_bulk_readers_decode_exactly_as_message_by_message(reader, kind, data):
    from worker.io.messages import _bulk, _bulk_vectors, _one_by_one

    if reader == "simdjson" and kind != "vector":
        return  # simdjson reads lists of numbers only
    spec = {"vector": FeatureSpec.vector("features"), "text": FeatureSpec.text("text"),
            "columns": FeatureSpec.numeric_columns(["a", "b"])}[kind]
    fields = MessageFields(feature_names=["a", "b"] if kind == "columns" else [])
    field = "text" if kind == "text" else "features"
    features, label, id_ = (data.draw(st.sampled_from(options)) for options in (FEATURES[kind], LABELS, IDS))
    message = st.builds(lambda f, l, i: json.dumps({field: f, "label": l, "id": i}).encode(), features, label, id_)
    messages = data.draw(st.lists(st.one_of(*[message] * 12, ODD), min_size=2, max_size=8))
    label_kind = data.draw(st.sampled_from([None, "string", "number"]))
    bulk = (_bulk if reader == "arrow" else _bulk_vectors)(messages, spec, fields, label_kind)
    if bulk is None:
        return  # left to the message-by-message path: nothing to compare
    slow = _one_by_one(messages, spec, fields, label_kind)
    assert not slow.problems.any() and not bulk.problems.any()
    assert bulk.ids == slow.ids and bulk.label_kind == slow.label_kind
    for name in slow.batch.schema.names:
        assert bulk.batch.column(name).to_pylist() == slow.batch.column(name).to_pylist(), name


def test_lists_nested_inside_the_features_are_refused_not_flattened():
    from worker.io.json_vectors import read_vectors

    values = [b'{"features": [1, [2], 3], "label": 1}', b'{"features": [1, 2, 3], "label": 1}']
    assert read_vectors(values, "features", "label", "id") is None
    decoded = decode(values, FeatureSpec.vector("features"), MessageFields())
    assert decoded.problems.bad.tolist() == [True, False]
    assert decoded.batch.column("features").to_pylist()[1] == [1, 2, 3]


def test_the_fast_list_reader_keeps_every_message_s_numbers_labels_and_ids():
    from worker.io.json_vectors import read_vectors

    values = [b'{"id": "a", "features": [0, 255, 1.5e300], "label": "x"}', b'{"features": [], "label": null}',
              b'{"features": [-0.0, 7], "id": 3, "label": 2.5}']
    read = read_vectors(values, "features", "label", "id")
    assert read.offsets.tolist() == [0, 3, 3, 5]
    assert read.values.tolist() == [0.0, 255.0, 1.5e300, -0.0, 7.0]
    assert read.labels == ["x", None, 2.5] and read.ids == ["a", None, 3]
    assert read_vectors([b'{"features": [1], "id": "[1]"}'], "features", "label", "id") is None  # a second "["


@pytest.mark.parametrize("spec, bad", [
    (FeatureSpec.text("text"), b'{"text": "caf\xe9", "label": "ham"}'),
    (FeatureSpec.text("text"), b'{"text": "ok", "label": "sp\xffam"}'),
    (FeatureSpec.vector("features"), b'{"features": [1, 2], "label": "\xff"}'),
])
def test_invalid_utf8_inside_a_batch_is_that_message_s_problem(spec, bad):
    good = b'{"text": "fine", "features": [3, 4], "label": "ham"}'
    decoded = decode([good, bad, good], spec, MessageFields())
    assert decoded.problems.bad.tolist() == [False, True, False]
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == ["ham", None, "ham"]


@pytest.mark.parametrize("spec, features", [(FeatureSpec.vector("features"), b'"features": [1, 2, 3]'),
                                            (FeatureSpec.text("text"), b'"text": "a b"')])
@pytest.mark.parametrize("odd_id", [b"1.5", b"18446744073709551616"])
def test_an_integer_id_comes_back_as_sent_whatever_the_other_ids_of_its_batch(spec, features, odd_id):
    """Read in bulk, one fractional (or beyond 64 bits) id would turn every integer id of the batch
    into a float, and the predictions would answer 7 as 7.0."""
    values = [b'{"id": %s, %s, "label": 1}' % (odd_id, features), b'{"id": 7, %s, "label": 1}' % features,
              b'{"id": "x", %s, "label": 1}' % features if spec.kind == "text" else b'{"id": 8, %s, "label": 1}' % features]
    ids = decode(values, spec, MessageFields()).ids
    assert ids[1] == 7 and type(ids[1]) is int
    assert ids[2] in ("x", 8) and type(ids[2]) in (str, int)
