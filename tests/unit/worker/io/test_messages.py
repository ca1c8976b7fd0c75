"""JSON message values to Arrow batches, with each message's problem named."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.arrow import FeatureSpec
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.json_exact import write_exactly
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
             b'{"features": [1, 2], "label": 18446744073709551615}':
                 "label 18446744073709551615 is beyond ±2**53, where numbers are not all exact",
             b'{"features": [1, 2], "label": 1, "label": 2}': "duplicate key 'label'",
             b"\xef\xbb\xbf" + b'{"features": [1, 2]}': "malformed JSON: UTF-8 byte order mark"}
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
    message = st.builds(lambda f, y, i: json.dumps({field: f, "label": y, "id": i}).encode(), features, label, id_)
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


@pytest.mark.parametrize("lists, dtype", [
    ([[0, 255, 7], [3, 0, 1]], "uint8"),  # pixels: one byte each, as a Parquet column of uint8 would give
    ([[0, 256, 7], [3, 0, 1]], "double"),
    ([[0, 1.5, 7], [3, 0, 1]], "double"),
    ([[0, -1, 7], [3, 0, 1]], "double"),
    ([[0, 1e300, 7], [3, 0, 1]], "double"),
])
def test_lists_of_whole_numbers_from_0_to_255_are_read_as_single_bytes_and_others_as_they_are(lists, dtype):
    values = [json.dumps({"features": numbers, "label": 1}).encode() for numbers in lists]
    decoded = decode(values, FeatureSpec.vector("features"), MessageFields())
    column = decoded.batch.column("features")
    assert str(column.type.value_type) == dtype
    assert column.to_pylist() == lists and not decoded.problems.any()


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
    third = b'{"id": "x", %s, "label": 1}' if spec.kind == "text" else b'{"id": 8, %s, "label": 1}'
    values = [b'{"id": %s, %s, "label": 1}' % (odd_id, features), b'{"id": 7, %s, "label": 1}' % features,
              third % features]
    ids = decode(values, spec, MessageFields()).ids
    assert ids[1] == 7 and type(ids[1]) is int
    assert ids[2] in ("x", 8) and type(ids[2]) in (str, int)


# One meaning per message: each case alone, and inside a poll the bulk readers would take whole.

SPECS = {"vector": (FeatureSpec.vector("features"), MessageFields(max_bytes=60_000)),
         "text": (FeatureSpec.text("text"), MessageFields(max_bytes=60_000)),
         "columns": (FeatureSpec.numeric_columns(["a", "b"]),
                     MessageFields(feature_names=["a", "b"], max_bytes=60_000))}
FEATURE_JSON = {"vector": b'"features": [%s, 2, 3]', "text": b'"text": "a b c"',
                "columns": b'"features": {"a": %s, "b": 2}'}
BOM = b"\xef\xbb\xbf"


def message(kind: str, id_=b"7", feature=b"1", label=b'"ham"', extra=b"", before=b"") -> bytes:
    features = FEATURE_JSON[kind] % feature if b"%s" in FEATURE_JSON[kind] else FEATURE_JSON[kind]
    return before + b'{"id": %s, %s, "label": %s%s}' % (id_, features, label, extra)


def nested(depth: int) -> bytes:
    return b', "x": ' + b"[" * depth + b"]" * depth


# name: (the message's parts, the label kind of its poll, what it must read as: a problem's start or values)
CASES = {
    "byte order mark": (dict(before=BOM), "string", "malformed JSON: UTF-8 byte order mark"),
    "leading space": (dict(before=b" "), "string", {"id": 7}),
    "label twice": (dict(extra=b', "label": "spam"'), "string", "duplicate key 'label'"),
    "id twice": (dict(extra=b', "id": 8'), "string", "duplicate key 'id'"),
    "label twice, once escaped": (dict(extra=b', "\\u006cabel": "spam"'), "string", "duplicate key 'label'"),
    "a key twice in an unused object": (dict(extra=b', "meta": {"k": 1, "k": 2}'), "string", "duplicate key 'k'"),
    "a colon inside the id": (dict(id_=b'"urn:x:7"'), "string", {"id": "urn:x:7"}),
    "feature 2**63": (dict(feature=b"9223372036854775808"), "string", {"feature": 2.0**63}),
    "feature 2**64 + 1": (dict(feature=b"18446744073709551617"), "string", {"feature": 2.0**64}),
    "feature -2**63 - 1": (dict(feature=b"-9223372036854775809"), "string", {"feature": -2.0**63}),
    "feature 10**30": (dict(feature=b"1" + b"0" * 30), "string", {"feature": 1e30}),
    "label 2**53": (dict(label=b"9007199254740992"), "number", {"label": 2**53}),
    "label 2**53 + 1": (dict(label=b"9007199254740993"), "number", "label 9007199254740993 is beyond ±2**53"),
    "label 2**63": (dict(label=b"9223372036854775808"), "number", "label 9223372036854775808 is beyond ±2**53"),
    "label 2**64": (dict(label=b"18446744073709551616"), "number", "label 1.8446744073709552e+19 is beyond ±2**53"),
    "label -2**63 - 1": (dict(label=b"-9223372036854775809"), "number", "label -9.223372036854776e+18 is beyond"),
    "label 1e19": (dict(label=b"1e19"), "number", "label 1e+19 is beyond ±2**53"),
    "label 2.5": (dict(label=b"2.5"), "number", {"label": 2.5}),
    "id 2**70": (dict(id_=b"1180591620717411303424"), "string", {"id": 2**70}),
    "id -2**70": (dict(id_=b"-1180591620717411303424"), "string", {"id": -2**70}),
    "id 2**64 - 1": (dict(id_=b"18446744073709551615"), "string", {"id": 2**64 - 1}),
    "id 2**63": (dict(id_=b"9223372036854775808"), "string", {"id": 2**63}),
    "id [2**70]": (dict(id_=b"[1180591620717411303424]"), "string", {"id": [2**70]}),
    "id 1e30": (dict(id_=b"1e30"), "string", {"id": 1e30}),
    "id 1.5": (dict(id_=b"1.5"), "string", {"id": 1.5}),
    "NaN in an unused field": (dict(extra=b', "x": NaN'), "string", "malformed JSON"),
    "Infinity in an unused field": (dict(extra=b', "x": [-Infinity]'), "string", "malformed JSON"),
    "1e999 in an unused field": (dict(extra=b', "x": 1e999'), "string", "malformed JSON: number is infinity"),
    "a 400-digit integer in an unused field": (dict(extra=b', "x": 1' + b"0" * 400), "string", "malformed JSON"),
    "nested 1023 deep": (dict(extra=nested(1022)), "string", {"id": 7}),
    "nested 1025 deep": (dict(extra=nested(1024)), "string", "malformed JSON"),
    "nested 20000 deep": (dict(extra=nested(20_000)), "string", "malformed JSON"),
    "invalid UTF-8 in a key": (dict(extra=b', "\xff": 1'), "string", "malformed JSON"),
    "a lone surrogate": (dict(extra=b', "x": "\\ud800"'), "string", "malformed JSON"),
    "over the size limit": (dict(extra=b', "x": "' + b"y" * 60_000 + b'"'), "string", "message of 600"),
}
WHOLE = {"null": b"null", "true": b"true", "a string": b'"x"', "a list": b"[1]", "empty": b"", "absent": None}


def outcome(decoded, i: int) -> tuple:
    """What message i reads as: its problem, its id exactly (7 and 7.0 differ), its features as
    numbers, its label."""
    def number(value):
        if isinstance(value, list):
            return [number(v) for v in value]
        return value if value is None or isinstance(value, str) else float(value)

    values = {name: decoded.batch.column(name)[i].as_py() for name in decoded.batch.schema.names}
    label = values.pop(LABEL_COLUMN)
    features = {name: number(value) for name, value in values.items()}
    problem = decoded.problems.message[i] if decoded.problems.bad[i] else None
    return problem, write_exactly(decoded.ids[i]), features, label


def goods(kind: str, label_kind: str, n: int = 6) -> list[bytes]:
    labels = [b'"ham"', b'"spam"'] if label_kind == "string" else [b"1", b"2"]
    return [message(kind, id_=b"%d" % i, feature=b"%d" % i, label=labels[i % 2]) for i in range(n)]


def test_the_polls_of_good_messages_the_cases_are_put_in_go_the_bulk_ways():
    """Else the cases inside a poll would be read message by message, as alone, and prove nothing."""
    from worker.io.messages import _bulk, _bulk_vectors

    for kind, (spec, fields) in SPECS.items():
        for label_kind in ("string", "number"):
            assert _bulk(goods(kind, label_kind), spec, fields, label_kind) is not None
            if kind == "vector":
                assert _bulk_vectors(goods(kind, label_kind), spec, fields, label_kind) is not None


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("case", sorted(CASES) + sorted(WHOLE))
def test_each_case_reads_the_same_alone_and_inside_a_poll_of_good_messages(kind, case):
    spec, fields = SPECS[kind]
    if case in WHOLE:
        value, label_kind, expected = WHOLE[case], "string", "e"  # a problem of its own, named below
    else:
        parts, label_kind, expected = CASES[case]
        if "feature" in parts and kind == "text":
            pytest.skip("text has no number to write")
        value = message(kind, **parts)
    others = goods(kind, label_kind)
    alone = outcome(decode([value], spec, fields, label_kind), 0)
    for place in (0, 3, len(others)):
        poll = others[:place] + [value] + others[place:]
        assert outcome(decode(poll, spec, fields, label_kind), place) == alone, place
    problem, id_json, features, label = alone
    if isinstance(expected, str):
        assert problem is not None and str(problem).startswith(expected), problem
        return
    assert problem is None
    assert id_json == write_exactly(expected.get("id", 7))
    if "feature" in expected:
        assert next(iter(features.values())) in (expected["feature"], [expected["feature"], 2.0, 3.0])
    if "label" in expected:
        assert label == expected["label"] and type(label) is type(expected["label"])


CASE_NAMES = st.sampled_from(sorted(CASES))


@pytest.mark.parametrize("kind", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_mixture_of_messages_reads_as_each_would_alone(kind, data):
    spec, fields = SPECS[kind]
    label_kind = data.draw(st.sampled_from(["string", "number"]))
    pool = goods(kind, label_kind, n=3)
    cases = [message(kind, **CASES[name][0]) for name in data.draw(st.lists(CASE_NAMES, max_size=3))]
    poll = data.draw(st.permutations(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5)) + cases))
    together = decode(poll, spec, fields, label_kind)
    for i, value in enumerate(poll):
        assert outcome(together, i) == outcome(decode([value], spec, fields, label_kind), 0), value[:80]


def test_a_message_above_the_size_limit_is_refused_before_it_is_read():
    spec, fields = FeatureSpec.text("text"), MessageFields(max_bytes=100)
    too_large = b"{oops" + b" " * 200  # malformed too: the size is named, so it was never parsed
    for poll in ([too_large], [b'{"text": "a"}', too_large, b'{"text": "b"}']):
        problems = decode(poll, spec, fields).problems
        assert [m for m, bad in zip(problems.message, problems.bad, strict=True) if bad] == \
            ["message of 205 bytes exceeds the limit of 100"]
