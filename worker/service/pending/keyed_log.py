"""Rows keyed by id in the order they came: append, look up, take, remove, the oldest first.

Each append is a chunk of its own: the rows' ids, times (int64 ms) and named columns (numpy
arrays or feature blocks, see ``rows``), one entry per row. A row lives in its chunk
until it is removed, which only marks it dead; a sequence number, increasing in the order rows
came, names it meanwhile. Chunks are tidied after every change, so that their number stays
logarithmic in the rows held and dead rows never outweigh live ones:

1. a chunk without live rows is dropped;
2. a chunk with more dead rows than live ones is rewritten with its live rows alone;
3. the last chunk is merged into the one before it while that one holds no more live rows, and
   fewer than ``SMALL_CHUNK`` (the counter of a binary number, for chunks too small to be worth
   their own arrays: each row is copied at most log2(SMALL_CHUNK / rows per append) times, and
   rows that come in polls of ``SMALL_CHUNK`` or more never).

A chunk, once made, is never changed but for its mask of live rows: the unit the pending store
can write once and then refer to (see ``pending.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import InitVar, dataclass, field

import numpy as np

from nbstream.utils.ndarrays import BoolArray, IndexArray, IntArray

from .rows import Column, concatenate, take

Id = str | int  # a message id as its message had it
SMALL_CHUNK = 8_192  # live rows


@dataclass
class Chunk:
    """seqs (n,) int64 increasing; ids, times (n,) int64 ms and columns of one entry per row;
    alive (n,) bool. ``number`` names the chunk for as long as it exists."""
    number: int
    seqs: IntArray
    ids: list[Id]
    times: IntArray
    columns: dict[str, Column]
    live_rows: InitVar[BoolArray | None] = None  # which rows live (None: every one)
    alive: BoolArray = field(init=False)
    live: int = field(init=False)

    def __post_init__(self, live_rows: BoolArray | None) -> None:
        self.alive = np.ones(len(self.seqs), dtype=bool) if live_rows is None else live_rows.copy()
        self.live = int(self.alive.sum())

    def remove(self, positions: IndexArray) -> None:
        """Mark the rows at ``positions`` dead."""
        self.alive[positions] = False
        self.live -= len(positions)

    def kept(self, positions: IndexArray, number: int) -> Chunk:
        """A new chunk of the rows at ``positions`` (increasing)."""
        return Chunk(number, self.seqs[positions], [self.ids[i] for i in positions.tolist()], self.times[positions],
                     {name: take(column, positions) for name, column in self.columns.items()})


@dataclass(frozen=True)
class Taken:
    """Rows as taken from a log: ids, times (n,) int64 and columns, in the order asked for."""
    ids: list[Id]
    times: IntArray
    columns: dict[str, Column]


def id_key(key: Id) -> str:
    """What ids are compared by: their canonical text (an integer's decimal digits), so that a
    message keyed 5 and a label of id "5" name the same message, as Kafka's keys (bytes) would."""
    return str(key) if type(key) is int else key  # type: ignore[return-value]


class KeyedLog:
    """Rows keyed by distinct ids (see the module docstring)."""

    def __init__(self) -> None:
        self._seq_of: dict[str, int] = {}  # by id_key
        self.chunks: list[Chunk] = []
        self._next_seq = 0
        self.next_number = 0  # of the next chunk made
        self._firsts: IntArray | None = None  # each chunk's first seq, made again after a change

    @classmethod
    def restored(cls, chunks: list[tuple[int, Taken, BoolArray]], next_number: int) -> KeyedLog:
        """The log whose chunks, oldest first, were (number, rows, mask of live rows), as stored.
        Raises ValueError when an id lives twice, or the numbers are not distinct and below
        ``next_number`` (a chunk rewritten keeps its place and takes a new number)."""
        log = cls()
        log._restore(chunks, next_number)
        return log

    def _restore(self, chunks: list[tuple[int, Taken, BoolArray]], next_number: int) -> None:
        numbers = [number for number, _, _ in chunks]
        if len(set(numbers)) != len(numbers) or max(numbers, default=-1) >= next_number:
            raise ValueError(f"the chunk numbers {numbers[:10]} must be distinct and below the next one, "
                             f"{next_number}")
        for number, taken, alive in chunks:
            chunk = Chunk(number, np.arange(self._next_seq, self._next_seq + len(alive), dtype=np.int64), taken.ids,
                          taken.times, taken.columns, alive)
            expected = len(self) + chunk.live
            self._seq_of.update(zip([id_key(taken.ids[i]) for i in np.flatnonzero(alive).tolist()],
                                    chunk.seqs[alive].tolist(), strict=True))
            if len(self) != expected:
                raise ValueError(f"an id of chunk {number} lives in another chunk too")
            self.chunks.append(chunk)
            self._next_seq += len(alive)
        self.next_number = next_number

    def __len__(self) -> int:
        return len(self._seq_of)

    def __contains__(self, key: Id) -> bool:
        return id_key(key) in self._seq_of

    def seqs(self, ids: list[Id]) -> IntArray:
        """(n,) the seq of each id, -1 where the log holds none."""
        seq_of = self._seq_of
        return np.fromiter((seq_of.get(id_key(key), -1) for key in ids), dtype=np.int64, count=len(ids))

    def append(self, ids: list[Id], times: IntArray, columns: dict[str, Column]) -> None:
        """Add rows whose ids are distinct and not in the log: ids, times (n,) and columns of n entries."""
        if not ids:
            return
        seqs = np.arange(self._next_seq, self._next_seq + len(ids), dtype=np.int64)
        expected = len(self._seq_of) + len(ids)
        self._seq_of.update(zip(map(id_key, ids), seqs.tolist(), strict=True))
        if len(self._seq_of) != expected:
            raise AssertionError("ids appended to a pending log must be distinct and new")
        self._next_seq += len(ids)
        self.chunks.append(Chunk(self._number(), seqs, list(ids), np.asarray(times, dtype=np.int64), columns))
        self._tidy()

    def take(self, seqs: IntArray) -> Taken:
        """The live rows ``seqs`` name ((k,) int64), in that order."""
        parts, order = [], []
        for chunk, positions, where in self._located(seqs):
            parts.append(chunk.kept(positions, -1))
            order.append(where)
        if not parts:
            return Taken([], np.zeros(0, dtype=np.int64), {})
        merged = _merged(parts, -1)
        back = np.argsort(np.concatenate(order), kind="stable")  # from chunk order to the order asked for
        if (back[1:] > back[:-1]).all():
            return Taken(merged.ids, merged.times, merged.columns)
        return Taken([merged.ids[i] for i in back.tolist()], merged.times[back],
                     {name: take(column, back) for name, column in merged.columns.items()})

    def remove(self, seqs: IntArray) -> None:
        """Remove the live rows ``seqs`` name ((k,) int64, distinct)."""
        for chunk, positions, _ in self._located(seqs):
            chunk.remove(positions)
            for i in positions.tolist():
                del self._seq_of[id_key(chunk.ids[i])]
        self._tidy()

    def oldest(self, n: int) -> IntArray:
        """The seqs of the ``n`` live rows that came first, oldest first."""
        found: list[IntArray] = []
        for chunk in self.chunks:
            if n <= 0:
                break
            seqs = chunk.seqs[chunk.alive][:n]
            found.append(seqs)
            n -= len(seqs)
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def older_than(self, cutoff_ms: int) -> IntArray:
        """The seqs of the live rows whose time is before ``cutoff_ms``, oldest first."""
        found = [chunk.seqs[chunk.alive & (chunk.times < cutoff_ms)] for chunk in self.chunks]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def live_seqs(self) -> IntArray:
        """The seqs of all live rows, oldest first."""
        found = [chunk.seqs[chunk.alive] for chunk in self.chunks]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def _located(self, seqs: IntArray) -> Iterator[tuple[Chunk, IndexArray, IndexArray]]:
        """For each chunk holding some of ``seqs``: (chunk, their positions in it, increasing;
        where they are in ``seqs``)."""
        if not len(seqs) or not self.chunks:
            return
        if self._firsts is None:
            self._firsts = np.array([chunk.seqs[0] for chunk in self.chunks], dtype=np.int64)
        owner = np.searchsorted(self._firsts, seqs, side="right") - 1
        by_owner = np.argsort(owner, kind="stable")
        owners, starts = np.unique(owner[by_owner], return_index=True)
        for number, where in zip(owners.tolist(), np.split(by_owner, starts[1:]), strict=True):
            chunk = self.chunks[number]
            positions = np.searchsorted(chunk.seqs, seqs[where])
            if (positions >= len(chunk.seqs)).any() or not chunk.alive[positions].all() \
                    or (chunk.seqs[positions] != seqs[where]).any():
                raise AssertionError("a seq named a row the pending log does not hold")
            in_order = np.argsort(positions, kind="stable")
            yield chunk, positions[in_order], where[in_order]

    def _number(self) -> int:
        self.next_number += 1
        return self.next_number - 1

    def _tidy(self) -> None:
        chunks = [chunk for chunk in self.chunks if chunk.live]
        chunks = [chunk.kept(np.flatnonzero(chunk.alive), self._number()) if chunk.live * 2 < len(chunk.seqs)
                  else chunk for chunk in chunks]
        while len(chunks) >= 2 and chunks[-2].live <= chunks[-1].live and chunks[-2].live < SMALL_CHUNK:
            last = chunks.pop()
            chunks[-1] = _merged([_live_part(chunks[-1]), _live_part(last)], self._number())
        self.chunks = chunks
        self._firsts = None


def _live_part(chunk: Chunk) -> Chunk:
    return chunk if chunk.live == len(chunk.seqs) else chunk.kept(np.flatnonzero(chunk.alive), -1)


def _merged(parts: list[Chunk], number: int) -> Chunk:
    """One chunk of every row of ``parts``, in their order."""
    if len(parts) == 1:
        only = parts[0]
        return Chunk(number, only.seqs, only.ids, only.times, only.columns)
    return Chunk(number, np.concatenate([part.seqs for part in parts]), [key for part in parts for key in part.ids],
                 np.concatenate([part.times for part in parts]),
                 {name: concatenate([part.columns[name] for part in parts]) for name in parts[0].columns})
