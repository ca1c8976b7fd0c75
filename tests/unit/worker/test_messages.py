"""JSON message values to Arrow batches, with each message's problem named."""

from __future__ import annotations

import json

from nbstream.arrow import FeatureSpec
from worker.config import MessageFields
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
    assert decoded.batch.column("label").to_pylist() == ["yes", None, None, None]
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
    assert decoded.label_kind == "number" and decoded.batch.column("label").to_pylist() == [3.0, 1.5, None, 2.0]
    decoded = decode(values[:1] + values[3:], spec, MessageFields(), label_kind="string")
    assert decoded.problems.bad.tolist() == [True, True]
