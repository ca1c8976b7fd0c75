"""Pending examples written by chunk: at each commit, only what changed since the last one.

A store of many pending examples is large as one frame (``to_bytes``); a commit every half
second cannot rewrite it whole. Each chunk of the store's logs (``keyed_log``) never
changes once made but for its mask of live rows, so the partition's state can hold the store
as records of its own, in the same transaction as the rest of the state:

- one record per chunk, under the key ``<log>/<number>`` (which the caller puts under the
  partition's own), written once, in the commit after the chunk is made, as a frame of its rows
  (``codec.encode_rows``, dead rows included); when tidying drops the chunk, its key gets
  a tombstone (a null value), and the state topic's compaction forgets it;
- the directory, written at every commit: for each log, its chunks in
  order (number, rows) with their masks of live rows (one bit a row),
  and the number its next chunk will get.

What a commit writes is then the rows that came since the last one, the chunks tidying rewrote
(small ones merged, and those whose dead rows came to outweigh the live ones), and the directory:
a fraction of the whole store (docs/performance.md, ``scripts/bench_pending.py``). Restoring reads
the directory and the chunks it names; a chunk record it does not name (dropped, its tombstone
to come) is ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbstream.utils.checked import integer, shown
from nbstream.utils.ndarrays import AnyArray

from .codec import LOGS, ModelsKept, decode_rows, encode_rows
from .frame import pack, unpack
from .keyed_log import Chunk, KeyedLog, Taken
from .rows import DenseRows, SparseRows
from .store import PendingExamples

MOST_CHUNK_ROWS = 1 << 40


def segment_key(log: str, number: int) -> str:
    return f"{log}/{number}"


@dataclass(frozen=True)
class Changes:
    """What a commit writes. directory : the directory's bytes; written : key -> bytes of each
    chunk made since the last commit; dropped : the keys of the chunks gone since then."""
    directory: bytes
    written: dict[str, bytes]
    dropped: list[str]


class SegmentWriter:
    """The chunks of one store already in the state topic, and what the next commit must write.

    written : the keys of the chunks written before (a store just restored: all of its chunks)."""

    def __init__(self, written: set[str] | None = None):
        self.written = set(written or ())

    def changes(self, store: PendingExamples) -> Changes:
        """What to write now, after which the writer counts it as written."""
        chunks = {segment_key(name, chunk.number): (name, chunk)
                  for name, log in store.logs().items() for chunk in log.chunks}
        new = {key: _chunk_bytes(name, chunk) for key, (name, chunk) in chunks.items() if key not in self.written}
        dropped = sorted(self.written - set(chunks))
        self.written = set(chunks)
        return Changes(_directory(store.logs()), new, dropped)


def restore(directory: bytes, segments: Mapping[str, bytes], max_pending: int = 100_000,
            what: str = "pending examples", models: ModelsKept | None = None) -> tuple[PendingExamples, SegmentWriter]:
    """The store a directory and its chunks' records describe, and the writer that knows them
    written (models : whose served predictions its examples are to hold, when the group learns
    several; None: as they were written). Raises ValueError, one line saying what is wrong, for a
    chunk missing, of another number of rows or layout than the directory says, or anything
    ``codec`` refuses."""
    meta, masks = unpack(directory, f"{what}: the directory")
    logs: dict[str, KeyedLog] = {}
    used: set[str] = set()
    layouts = set()
    for name, (chunks, next_number) in _listed(meta, what).items():
        restored = []
        for number, rows in chunks:
            key = segment_key(name, number)
            alive = _alive(masks, key, rows, what)
            if key not in segments:
                raise ValueError(f"{what}: the directory names chunk {key}, which is missing")
            taken = decode_rows(segments[key], (name,), f"{what}: chunk {key}")[name]
            if len(taken.ids) != rows:
                raise ValueError(f"{what}: chunk {key} holds {len(taken.ids):,} rows; the directory says {rows:,}")
            if "rows" in taken.columns:
                layouts.add(_layout(taken))
                if models is not None:
                    taken = Taken(taken.ids, taken.times, models.kept(taken.columns))
            restored.append((number, taken, alive))
            used.add(key)
        try:
            logs[name] = KeyedLog.restored(restored, next_number)
        except ValueError as error:
            raise ValueError(f"{what}: {name}: {error}") from None
    if len(layouts) > 1:
        raise ValueError(f"{what}: its chunks hold feature rows of {len(layouts)} layouts: {sorted(layouts)}")
    if set(masks) != used:
        raise ValueError(f"{what}: the directory holds masks {sorted(set(masks) - used)} of no chunk")
    return PendingExamples.of_logs(logs, max_pending), SegmentWriter(used)


def _chunk_bytes(name: str, chunk: Chunk) -> bytes:
    return encode_rows({name: Taken(chunk.ids, chunk.times, chunk.columns)})


def _directory(logs: dict[str, KeyedLog]) -> bytes:
    meta = {name: {"chunks": [[chunk.number, len(chunk.seqs)] for chunk in log.chunks], "next": log.next_number}
            for name, log in logs.items()}
    masks = {segment_key(name, chunk.number): np.packbits(chunk.alive)
             for name, log in logs.items() for chunk in log.chunks}
    return pack(meta, masks)


def _listed(meta: dict[str, Any], what: str) -> dict[str, tuple[list[tuple[int, int]], int]]:
    """name -> ([(number, rows) of each chunk], next number), checked."""
    if set(meta) != set(LOGS):
        raise ValueError(f"{what}: the directory must list the logs {sorted(LOGS)}; it lists {sorted(meta)}")
    listed = {}
    for name, entry in meta.items():
        if not (isinstance(entry, dict) and set(entry) == {"chunks", "next"} and isinstance(entry["chunks"], list)):
            raise ValueError(f"{what}: the directory's {name} must be an object of chunks and next; got {shown(entry)}")
        chunks = []
        for chunk in entry["chunks"]:
            if not (isinstance(chunk, list) and len(chunk) == 2):
                raise ValueError(f"{what}: each chunk of {name} must be [number, rows]; got {shown(chunk)}")
            chunks.append((integer(chunk[0], f"{what}: a chunk number of {name}", 0, MOST_CHUNK_ROWS),
                           integer(chunk[1], f"{what}: the rows of a chunk of {name}", 1, MOST_CHUNK_ROWS)))
        listed[name] = (chunks, integer(entry["next"], f"{what}: the next chunk number of {name}", 0, MOST_CHUNK_ROWS))
    return listed


def _alive(masks: dict[str, AnyArray], key: str, rows: int, what: str) -> AnyArray:
    mask = masks.get(key)
    if mask is None or mask.dtype != np.uint8 or mask.shape != (math.ceil(rows / 8),):
        raise ValueError(f"{what}: the mask of chunk {key} must be {math.ceil(rows / 8):,} bytes; got "
                         f"{'none' if mask is None else f'{mask.dtype} of shape {mask.shape}'}")
    return np.unpackbits(mask, count=rows).astype(bool)


def _layout(taken: Taken) -> tuple[str, int]:
    """The kind of a chunk's feature rows and their number of columns."""
    rows = taken.columns["rows"]
    if isinstance(rows, DenseRows):
        return "dense", rows.values.shape[1]
    assert isinstance(rows, SparseRows)  # the codec reads no other
    return "csr", rows.n_features
