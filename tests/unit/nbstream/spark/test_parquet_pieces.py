"""How nbstream.spark.parquet_pieces cuts files into pieces and reads them (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from nbstream.spark import parquet_pieces
from nbstream.spark.parquet_pieces import LEAST_PIECE_BYTES, MOST_PIECE_BYTES, Piece, Span, _packed, _RowGroup


def groups(sizes: list[int], files: int = 1) -> list[_RowGroup]:
    """Row groups of these compressed sizes, spread in order over ``files`` files, 10 rows each."""
    per_file = -(-len(sizes) // files)
    return [_RowGroup(f"file:///f{index // per_file}", index % per_file, (index % per_file) * 10, size)
            for index, size in enumerate(sizes)]


def test_small_row_groups_are_packed_up_to_the_least_piece_size_in_order():
    pieces = _packed(groups([1 << 20] * 10, files=2), ("x",))
    assert [[(span.uri, span.row_groups, span.first_row) for span in piece.spans] for piece in pieces] == [
        [("file:///f0", (0, 1, 2, 3), 0)], [("file:///f0", (4,), 40), ("file:///f1", (0, 1, 2), 0)],
        [("file:///f1", (3, 4), 30)]]


def test_pieces_aim_at_a_64th_of_the_whole_within_their_bounds():
    assert len(_packed(groups([MOST_PIECE_BYTES // 8] * 1000), ("x",))) == 125  # the most: 8 groups a piece
    assert len(_packed(groups([LEAST_PIECE_BYTES] * 640), ("x",))) == 64  # 10 groups a piece
    assert len(_packed(groups([10 * MOST_PIECE_BYTES] * 3), ("x",))) == 3  # a group is never split


def test_a_piece_reads_its_row_groups_with_each_batchs_first_row_in_its_file(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": list(range(100)), "label": ["a"] * 100, "other": [0.5] * 100}), path,
                   row_group_size=30)
    piece = Piece((Span(path.as_uri(), (1, 2), 30),), ("label", "x"), batch_rows=25)
    read = list(piece.batches())
    assert [(batch.schema.names, uri, row, batch.num_rows) for batch, uri, row in read] == [
        (["label", "x"], path.as_uri(), row, rows) for row, rows in ((30, 25), (55, 25), (80, 10))]
    assert [value for batch, _, _ in read for value in batch.column("x").to_pylist()] == list(range(30, 90))
    assert parquet_pieces.local_path(path.as_uri()) == str(path)


def test_the_sessions_largest_partition_size_bounds_a_piece():
    assert [parquet_pieces._byte_size(setting) for setting in ("134217728b", "128MB", "512m", "1g", " 64 ", None,
                                                                "0", "lots", "1.5g")] == [
        128 << 20, 128 << 20, 512 << 20, 1 << 30, 64, None, None, None, None]
    assert len(_packed(groups([MOST_PIECE_BYTES // 8] * 1000), ("x",), most=MOST_PIECE_BYTES // 2)) == 250


def test_a_piece_reads_in_batches_of_the_sessions_arrow_batch_size(tmp_path):
    assert [parquet_pieces._positive(setting) for setting in ("5000", " 20 ", "0", "-1", None, "ten")] == [
        5000, 20, None, None, None, None]
    pieces = _packed(groups([1 << 20] * 3), ("x",), batch_rows=25)
    assert {piece.batch_rows for piece in pieces} == {25}
