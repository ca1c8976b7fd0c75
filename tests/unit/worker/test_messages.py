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
    assert decoded.batch.column("label").to_pylist() == ["yes", None, None, "1"]  # mixed: compared as text


def test_text_messages_and_size_limits():
    spec = FeatureSpec.text("body", hash_bits=8)
    fmt = MessageFields(text="body", max_bytes=40)
    values = [b'{"body": "hello there"}', b'{"body": 42}', b'{"body": "' + b"x" * 50 + b'"}']
    decoded = decode(values, spec, fmt)
    assert decoded.problems.bad.tolist() == [False, True, True]
    assert decoded.problems.message[1] == "field 'body' must be a string"
    assert decoded.problems.message[2].startswith("message of 62 bytes exceeds the limit of 40")
