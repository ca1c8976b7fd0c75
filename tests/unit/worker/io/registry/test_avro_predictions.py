"""Predictions as Avro records (`--output-format avro`): what fastavro reads back from them is what
the JSON prediction of the same rows says, ids and classes of every type included."""

from __future__ import annotations

import io
import json

import fastavro
import numpy as np
import pytest

from worker.io.json_predictions import prediction_values
from worker.io.registry.avro_predictions import SCHEMA, AvroPredictions
from worker.io.registry.wire import unframe

PARSED = fastavro.parse_schema(SCHEMA)


def read_back(values: list[bytes]) -> list[dict]:
    records = []
    for value in values:
        schema_id, body = unframe(value)
        assert schema_id == 42
        stream = io.BytesIO(body)
        records.append(fastavro.schemaless_reader(stream, PARSED, None))
        assert stream.tell() == len(body)  # nothing left over
    return records


def as_json(values: list[bytes]) -> list[dict]:
    return [json.loads(v) for v in values]


@pytest.mark.parametrize("classes", [np.array(["ham", "spam", "égg"]), np.array([3, 1, 7]), None])
def test_the_avro_record_says_what_the_json_prediction_says(classes):
    ids = ["m-1", 7, 2.5, True, None, 2**70]
    rng = np.random.default_rng(5)
    proba = rng.dirichlet(np.ones(3), size=len(ids)) if classes is not None else None
    if proba is not None:
        proba[1] = np.nan  # predicted before the model knew a class
    best = None if proba is None else np.nan_to_num(proba, nan=0).argmax(axis=1)
    arguments = (ids, classes, best, proba, np.arange(6) * 10, "in", [0, 1, 0, 1, 0, 1], list(range(6)))
    avro, plain = read_back(AvroPredictions(42).values(*arguments)), as_json(prediction_values(*arguments))
    for record, expected in zip(avro, plain, strict=True):
        expected_id = str(expected["id"]) if expected["id"] == 2**70 else expected["id"]
        assert record["id"] == expected_id and type(record["id"]) is type(expected_id)
        assert record["prediction"] == expected["prediction"]
        assert record["probabilities"] == pytest.approx(expected["probabilities"], abs=0, rel=0)
        assert {k: record[k] for k in ("model_version", "topic", "partition", "offset")} == \
            {k: expected[k] for k in ("model_version", "topic", "partition", "offset")}


def test_no_message_no_record():
    assert AvroPredictions(42).values([], None, None, None, 0, "in", [], []) == []
