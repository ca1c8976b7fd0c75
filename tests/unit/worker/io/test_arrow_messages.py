"""Arrow batch messages: many rows per message, problems per row or per message, predictions back per message."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pytest

from nbstream.arrow import FeatureSpec
from worker.io.arrow_ipc_size import decompressed_size
from worker.io.arrow_messages import decode_arrow, encode_predictions, prediction_origin, read_stream, write_stream
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.kafka.dead_letters import error_headers, reason_of
from worker.io.records import Polled


def _stream(**columns) -> bytes:
    return write_stream(pa.table(columns))


def _polled(values) -> Polled:
    n = len(values)
    return Polled("in", values, [None] * n, np.zeros(n, np.int64), np.arange(10, 10 + n, dtype=np.int64),
                  np.zeros(n, np.int64))


SPEC = FeatureSpec.vector("features")


def test_rows_of_every_message_come_out_in_order_with_their_message_and_row():
    values = [_stream(features=[[1, 0], [0, 1]], label=[1, 2], id=["a", "b"]),
              _stream(features=[[1.5, 2.0]], label=[3])]
    decoded = decode_arrow(values, SPEC, MessageFields())
    assert decoded.batch.column("features").to_pylist() == [[1, 0], [0, 1], [1.5, 2.0]]
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == [1, 2, 3]
    assert decoded.ids == ["a", "b", None]
    assert decoded.message_of.tolist() == [0, 0, 1] and decoded.row_in_message.tolist() == [0, 1, 0]
    assert not decoded.problems.any() and decoded.label_kind == "number"


@pytest.mark.parametrize("value, problem", [
    (None, "empty message (null value)"),
    (b"", "empty message"),
    (b"{\"features\": [1, 2]}", "not an Arrow IPC stream"),
    (_stream(pixels=[[1, 2]]), "column 'features' not found"),
    (_stream(features=["a"]), "column 'features' has type string"),
    (_stream(features=[[1]], label=[[1]]), "label column 'label' has type list"),
    (_stream(features=[[1]]) [:-9], "not an Arrow IPC stream"),
])
def test_a_message_that_cannot_be_read_alone_is_one_row_with_its_problem(value, problem):
    decoded = decode_arrow([value], SPEC, MessageFields())
    assert decoded.batch.num_rows == 1 and decoded.row_in_message.tolist() == [-1]
    assert decoded.problems.message[0].startswith(problem)
    assert decoded.row_values[0] == value  # dead-lettered unchanged


def test_a_message_over_the_size_limit_is_refused_before_it_is_read():
    value = _stream(features=[[1.0] * 100])
    decoded = decode_arrow([value], SPEC, MessageFields(max_bytes=100))
    assert decoded.problems.message[0].startswith(f"message of {len(value)} bytes exceeds the limit of 100")


def test_bad_rows_are_problems_of_their_own_and_dead_letter_alone_with_their_row():
    values = [_stream(features=[[1, 0], None, [0, 1]], label=[1, 2, 3])]
    decoded = decode_arrow(values, SPEC, MessageFields())
    polled = _polled(values)
    rows = polled.expand(decoded.message_of, decoded.row_in_message, decoded.row_values)
    _, problems = SPEC.encoder().encode(decoded.batch, learn=True, problems=decoded.problems)
    assert problems.bad.tolist() == [False, True, False]
    record = rows.record(1)
    assert (record.offset, record.row) == (10, 1)
    assert read_stream(record.value).to_pydict() == {"features": [None], "label": [2]}
    assert ("source.row", b"1") in error_headers(record, "null value", "features")


def test_labels_of_another_kind_than_the_models_are_problems_of_the_labeled_rows():
    values = [_stream(features=[[1], [2]], label=["spam", None]), _stream(features=[[3]], label=[1])]
    decoded = decode_arrow(values, SPEC, MessageFields(), label_kind="number")
    assert decoded.problems.bad.tolist() == [True, False, False]
    assert "labels of this message are strings" in decoded.problems.message[0]


def test_messages_whose_columns_differ_in_type_are_combined():
    values = [_stream(features=pa.array([[1, 2]], pa.list_(pa.uint8()))), _stream(features=[[0.5, 1.5]])]
    decoded = decode_arrow(values, SPEC, MessageFields())
    assert decoded.batch.column("features").to_pylist() == [[1.0, 2.0], [0.5, 1.5]]


def test_every_message_bad_still_gives_a_typed_batch():
    decoded = decode_arrow([b"x", None], FeatureSpec.text("text"), MessageFields())
    assert decoded.batch.schema.field("text").type == pa.string()
    assert decoded.problems.bad.tolist() == [True, True]


def test_predictions_come_back_as_one_stream_per_message_with_id_row_and_origin():
    values = [_stream(features=[[1], [2], [3]], id=["a", "b", "c"]), _stream(features=[[4]], id=["d"])]
    decoded = decode_arrow(values, SPEC, MessageFields())
    polled = _polled(values)
    good = np.array([0, 2, 3])  # row 1 was bad
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    messages, outputs = encode_predictions(polled, decoded, good, np.array(["x", "y", "x"]), proba,
                                           np.array(["x", "y"]), 7)
    assert messages == [0, 1]
    first = read_stream(outputs[0])
    assert first.column("id").to_pylist() == ["a", "c"] and first.column("row").to_pylist() == [0, 2]
    assert first.column("prediction").to_pylist() == ["x", "y"]
    assert first.column("probabilities").to_pylist() == [[0.9, 0.1], [0.2, 0.8]]
    assert first.column("offset").to_pylist() == [10, 10] and first.column("model_version").to_pylist() == [7, 7]
    assert orjson.loads(first.schema.metadata[b"classes"]) == ["x", "y"]
    assert prediction_origin(outputs[1]) == ("in", 0, 11)


def test_no_truncation_or_flipped_byte_of_a_message_raises():
    value = _stream(features=[[1, 2], [3, 4]], label=["a", "b"], id=[1, 2])
    spec, fields = SPEC, MessageFields()
    mutants = [value[:cut] for cut in range(len(value))]
    mutants += [value[:i] + bytes([value[i] ^ 0xFF]) + value[i + 1:] for i in range(len(value))]
    for mutant in mutants:
        decoded = decode_arrow([mutant], spec, fields)  # a cut after the schema is a valid message of no rows
        assert len(decoded.message_of) == decoded.batch.num_rows <= 2
        if decoded.batch.num_rows and decoded.row_in_message[0] == -1:
            assert decoded.problems.bad.all()
        spec.encoder().encode(decoded.batch, learn=True, problems=decoded.problems)


def test_compressed_streams_are_smaller_and_read_back_the_same():
    pixels = np.zeros((200, 784), dtype=np.uint8)
    pixels[:, 300:400] = np.arange(100, dtype=np.uint8)
    table = pa.table({"features": pa.FixedSizeListArray.from_arrays(pa.array(pixels.reshape(-1)), 784),
                      "label": np.arange(200) % 10})
    plain, packed = write_stream(table), write_stream(table, compression="lz4")
    assert len(packed) * 3 < len(plain)
    assert read_stream(packed).equals(read_stream(plain)) and read_stream(plain).equals(table)


def _zero_pixels(rows: int) -> pa.Table:
    return pa.table({"features": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(rows * 784, np.uint8)), 784)})


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_a_message_that_inflates_past_the_limit_is_refused_before_it_is_decompressed(compression, monkeypatch):
    value = write_stream(_zero_pixels(20_000), compression=compression)  # 15.7 MB of zeros in a small message
    assert len(value) < 1 << 20
    monkeypatch.setattr(pa.ipc, "open_stream", _must_not_be_called)
    decoded = decode_arrow([value], SPEC, MessageFields(max_bytes=1 << 20))
    assert decoded.row_in_message.tolist() == [-1]
    assert decoded.problems.message[0].startswith(f"message of {len(value)} bytes holds 156")
    assert "more than the limit of 1048576" in decoded.problems.message[0]
    assert reason_of(decoded.problems.message[0]) == "too_large"


def _must_not_be_called(*args, **kwargs):
    raise AssertionError("the stream was read")


def test_a_message_within_the_limit_once_decompressed_is_read():
    value = write_stream(_zero_pixels(1_000), compression="zstd")  # 788 KB once decompressed
    decoded = decode_arrow([value], SPEC, MessageFields(max_bytes=1 << 20))
    assert decoded.batch.num_rows == 1_000 and not decoded.problems.any()


def test_a_dictionary_of_long_strings_that_decodes_past_the_limit_is_refused():
    repeated = pa.array(["x" * 10_000] * 1_000).dictionary_encode()  # 10 MB decoded, 10 KB sent
    value = write_stream(pa.table({"colour": repeated}), compression="zstd")
    spec = FeatureSpec.categorical(["colour"])
    decoded = decode_arrow([value, _stream(colour=["red"])], spec, MessageFields(max_bytes=1 << 20))
    assert decoded.problems.message[0].startswith(f"message of {len(value)} bytes holds ")
    assert decoded.batch.column("colour").to_pylist()[1] == "red" and not decoded.problems.bad[1]


def test_a_dictionary_column_within_the_limit_is_read_and_combined_with_plain_strings():
    value = write_stream(pa.table({"colour": pa.array(["red", "blue", "red"]).dictionary_encode()}))
    spec = FeatureSpec.categorical(["colour"])
    decoded = decode_arrow([value, _stream(colour=["green"])], spec, MessageFields())
    assert decoded.batch.column("colour").to_pylist() == ["red", "blue", "red", "green"]


@pytest.mark.parametrize("ids, accepted", [
    (pa.array(["a"]), True), (pa.array([7]), True),
    (pa.array([[1, 2]]), False), (pa.array(["a"]).dictionary_encode(), False), (pa.array([1.5]), False),
])
def test_ids_are_strings_or_integers(ids, accepted):
    decoded = decode_arrow([write_stream(pa.table({"features": [[1.0]], "id": ids}))], SPEC, MessageFields())
    if accepted:
        assert decoded.ids == ids.to_pylist() and not decoded.problems.any()
    else:
        assert decoded.problems.message[0].startswith("id column 'id' has type")


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_the_declared_size_is_what_arrow_reads(compression):
    table = pa.table({"features": [[1, 2, 3]] * 500, "label": ["spam", "ham"] * 250,
                      "colour": pa.array(["red", "blue"] * 250).dictionary_encode()})
    value = write_stream(table, compression=compression)
    read = read_stream(value)
    buffers = sum(b.size for column in read.columns for chunk in column.chunks for b in chunk.buffers() if b)
    buffers += sum(b.size for chunk in read.column("colour").chunks for b in chunk.dictionary.buffers() if b)
    assert buffers <= decompressed_size(value) <= buffers + 8 * 64  # plus each buffer's padding


def test_the_size_reader_never_raises_on_a_damaged_stream():
    value = write_stream(pa.table({"features": [[1, 2], [3, 4]], "label": ["a", "b"]}), compression="zstd")
    mutants = [value[:cut] for cut in range(len(value))]
    mutants += [value[:i] + bytes([byte]) + value[i + 1:] for i in range(len(value)) for byte in (0, 0x7F, 0xFF)]
    sizes = [decompressed_size(mutant) for mutant in mutants]
    assert all(size is None or 0 <= size < 1 << 63 for size in sizes)
    assert decompressed_size(b"not arrow") is None


# ---- one poison message alone must not take the service down ---------------------------------------------------

def _problems(decoded) -> list[tuple[int, str, str]]:
    return [(row, column, message) for row, column, message in decoded.problems]


@pytest.mark.parametrize("labels", [pa.array([2**62, 7], pa.int64()), pa.array([2**64 - 1, 7], pa.uint64()),
                                    pa.array([-(2**53) - 1, 7], pa.int64()), pa.array([1e20, 7.0])])
def test_number_labels_beyond_2_53_are_bad_rows_of_their_own_as_in_json(labels):
    """Within ±2**53 every integer is exact whether a poll's labels are integers or doubles,
    so a label means the same whatever else is in its poll."""
    big = labels[0].as_py()
    for values in ([write_stream(pa.table({"features": [[1.0], [2.0]], "label": labels}))],
                   [write_stream(pa.table({"features": [[1.0], [2.0]], "label": labels})),
                    write_stream(pa.table({"features": [[3.0]], "label": [0.5]}))]):
        decoded = decode_arrow(values, SPEC, MessageFields())
        assert _problems(decoded) == [(0, "label", f"label {big!r} is beyond ±2**53, where numbers are not all exact")]
        assert decoded.batch.column(LABEL_COLUMN).to_pylist()[:2] == [None, 7]


def test_labels_at_2_53_are_exact_as_integers():
    labels = pa.array([2**53, 2**53 - 1], pa.int64())
    decoded = decode_arrow([write_stream(pa.table({"features": [[1.0], [2.0]], "label": labels}))], SPEC,
                           MessageFields())
    assert not decoded.problems.any() and decoded.batch.column(LABEL_COLUMN).to_pylist() == [2**53, 2**53 - 1]


@pytest.mark.parametrize("names", [["features", "features"], ["features", "label", "label"], ["features", "x", "x"]])
def test_a_message_with_a_repeated_column_name_is_one_bad_message(names):
    arrays = [pa.array([[1.0]]) if name == "features" else pa.array(["a"]) for name in names]
    value = write_stream(pa.Table.from_arrays(arrays, names=names))
    decoded = decode_arrow([value, _stream(features=[[2.0]], label=["b"])], SPEC, MessageFields())
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert _problems(decoded) == [(0, "message", f"column names appear more than once: {repeated}")]
    assert decoded.row_values[0] == value and decoded.batch.column(LABEL_COLUMN).to_pylist() == [None, "b"]


def test_a_feature_column_named_label_is_read_beside_another_label_field():
    spec = FeatureSpec.numeric_columns(["a", "label"])
    value = _stream(a=[1.0], label=[7.0], y=["p"], id=["m"])
    decoded = decode_arrow([value], spec, MessageFields(label="y", feature_names=["a", "label"]))
    assert decoded.batch.column("label").to_pylist() == [7.0]  # the feature
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == ["p"]  # the label
    assert decoded.ids == ["m"]


def test_a_bad_row_goes_to_the_dead_letter_topic_with_the_columns_it_was_sent_with():
    value = _stream(features=[[1.0], [float("nan")]], y=["a", "b"], key=["k1", "k2"])
    decoded = decode_arrow([value], SPEC, MessageFields(label="y", id="key"))
    row = read_stream(decoded.row_values[1])
    assert row.column_names == ["features", "y", "key"] and row.column("key").to_pylist() == ["k2"]


def test_predictions_of_a_named_model_name_it_in_a_last_column():
    values = [_stream(features=[[1], [2]], id=["a", "b"])]
    decoded = decode_arrow(values, SPEC, MessageFields())
    proba = np.array([[0.9, 0.1], [0.2, 0.8]])
    _, outputs = encode_predictions(_polled(values), decoded, np.array([0, 1]), np.array(["x", "y"]), proba,
                                    np.array(["x", "y"]), 3, model="cnb")
    table = read_stream(outputs[0])
    assert table.column_names[-1] == "model" and table.column("model").to_pylist() == ["cnb", "cnb"]
    _, unnamed = encode_predictions(_polled(values), decoded, np.array([0, 1]), np.array(["x", "y"]), proba,
                                    np.array(["x", "y"]), 3)
    assert "model" not in read_stream(unnamed[0]).column_names
