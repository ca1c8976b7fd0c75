"""Pending examples of one input partition: messages served a prediction and waiting for their label.

When labels arrive later, on a label topic keyed like the input, by the message's id, `worker
serve` keeps each unlabeled message that has an id, with its encoded features and the prediction
it served, until its label comes (the two *join*: the example is learned, and the served
prediction judged), its time runs out (``expire``) or ``max_pending`` newer ones push it out.

The rules, by id (a string or an integer, as the message had it), ids compared by their
canonical text: 7 and "7" name the same message, as the bytes of a Kafka key would:

- features, then a label: they join; a second label for the id is a duplicate (the first won).
- a label, then features: the label waits (``max_pending`` of them at most, the oldest evicted
  first) and they join when the features come, with a negative delay.
- features for an id already pending: the newer message replaces the older (counted): a message
  sent again is served again, and the prediction to judge is the one served last.
- features for an id that joined already (a message replayed after its label came): not kept,
  counted. The store remembers joined ids for as long as it would have kept their example (the
  TTL, and ``max_pending`` of them at most), so that late repeats are told apart from early labels.
- within one call, the last row of an id counts for features and the first for labels.
- ``expire(now, ttl)`` drops examples whose input's event time, and waiting labels whose label
  time, is more than ``ttl`` before ``now`` (exactly ``ttl`` before is kept); the bound
  ``max_pending`` drops the examples that came first (not the oldest by event time: arrival
  order is the order a partition's offsets give).

Ids are looked up in a dict: faster than a sorted numpy array or pyarrow's ``index_in`` for the
polls the service meets (docs/performance.md, ``scripts/bench_pending.py``).

When the group learns several models (challengers), each example keeps what every model served
it: the first model's prediction as ``best`` and ``proba``, each other's under its name
(``codec.served_columns``), so that each is judged by its own prediction when the label comes.

As partition state, the store goes to bytes whole (``to_bytes``, ``from_bytes``: see
``codec``), or by chunk (``segments``): a small directory (which chunks, which of
their rows still live) at each commit, and each chunk once, under a key of its own, when it is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

from nbstream.utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray

from .codec import EXAMPLES, JOINED, LABELS, decode, encode, served_columns, served_names
from .keyed_log import Id, KeyedLog, Taken, id_key
from .rows import Column, Rows, rows_of, take

MOST_PENDING = 10_000_000  # --max-pending at most: each pending example is kept in memory (a few hundred bytes)
LONGEST_TTL_SECONDS = 3650 * 86_400  # --label-ttl at most: ten years, far inside what milliseconds in int64 hold
Served: TypeAlias = tuple[IntArray, FloatArray]  # what a model served: best (n,) int32 (-1: nothing), proba (n, C)


@dataclass(frozen=True)
class Joined:
    """Examples whose features and label met, in the order they met.

    ids : n ids; X : the features as added ((n, d) dense in the dtype they came in, or CSR),
        None when none met; labels : (n,); best : (n,) int32, the column of the served
        prediction's class; proba : (n, C) the served probabilities (a class set that grew
        since some were served: their missing columns are 0); delay_ms : (n,) int64, label time
        minus the input's event time (negative when the label came first); offsets, event_time_ms :
        (n,) int64, the input's; others : what each other model served them (best, proba), by name.
    """
    ids: list[Id]
    X: Features | None
    labels: AnyArray
    best: IntArray
    proba: FloatArray
    delay_ms: IntArray
    offsets: IntArray
    event_time_ms: IntArray
    others: dict[str, Served] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def none(cls) -> Joined:
        empty = np.zeros(0, dtype=np.int64)
        return cls([], None, np.zeros(0), np.zeros(0, dtype=np.int32), np.zeros((0, 0)), empty, empty, empty)


@dataclass(frozen=True)
class Added:
    """What ``add`` did. joined : the rows whose label had come first; replaced : rows that
    replaced a pending example of their id (or a row of theirs earlier in the call);
    already_joined : rows not kept, their id having joined; evicted : pending examples dropped
    for ``max_pending``."""
    joined: Joined
    replaced: int
    already_joined: int
    evicted: int


@dataclass(frozen=True)
class Labeled:
    """What ``add_labels`` did. joined : the examples the labels met; duplicates : labels not
    used, their id having a label already (joined, waiting, or earlier in the call); waiting :
    labels kept until their features come; evicted : waiting labels dropped for ``max_pending``."""
    joined: Joined
    duplicates: int
    waiting: int
    evicted: int


@dataclass(frozen=True)
class Expired:
    """What ``expire`` dropped: pending examples, and waiting labels (``unmatched``: their ids,
    label times (n,) int64 and columns "label" (n,) and "offset" (n,) int64, -1 where not known)."""
    examples: int
    labels: int
    unmatched: Taken | None = None


class PendingExamples:
    """The pending examples of one partition (see the module docstring for the rules).

    max_pending : the most examples kept; as many waiting labels, and joined ids, at most.
    """

    def __init__(self, max_pending: int = 100_000, logs: dict[str, KeyedLog] | None = None):
        """logs : the three logs to hold, by name (as ``logs()`` gives them; default: empty ones)."""
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1; got {max_pending}")
        self.max_pending = max_pending
        logs = logs or {EXAMPLES: KeyedLog(), LABELS: KeyedLog(), JOINED: KeyedLog()}
        self.examples = logs[EXAMPLES]  # time: the input's event time; rows, best, proba, offset
        self.labels = logs[LABELS]  # labels before their features; time: the label's; label
        self.joined = logs[JOINED]  # ids that joined; time: the input's event time
        self.changes = 0  # calls that may have changed the store: its owner writes it again when this moved

    def __len__(self) -> int:
        """Pending examples (waiting labels are not counted: see ``waiting_labels``)."""
        return len(self.examples)

    @property
    def waiting_labels(self) -> int:
        return len(self.labels)

    def add(self, ids: list[Id] | AnyArray, X: Features, best: AnyArray, proba: AnyArray,
            event_time_ms: AnyArray | int, offsets: AnyArray, others: Mapping[str, Served] | None = None) -> Added:
        """Keep served, unlabeled messages until their label comes.

        ids : n ids; X : (n, d) array or CSR matrix, as the encoder gave it; best : (n,) the
        column of the served class; proba : (n, C) the served probabilities (kept in their
        dtype); event_time_ms : (n,) or one for all; offsets : (n,) the input's offsets;
        others : what each other model served them, (best, proba) by name, as best and proba.
        """
        ids = _checked_ids(ids)
        self.changes += 1
        n = len(ids)
        rows = rows_of(X)
        if len(rows) != n:
            raise ValueError(f"add takes n ids, (n, d) rows and (n, C) probabilities; got {n:,} ids and "
                             f"{len(rows):,} rows")
        columns: dict[str, Column] = {"rows": rows, **_served(None, best, proba, n),
                                      "offset": _column(offsets, n, np.int64, "offsets")}
        for name, (other_best, other_proba) in (others or {}).items():
            columns.update(_served(name, other_best, other_proba, n))
        times = _times(event_time_ms, n)
        keep = _last_of_each(ids)
        kept = [ids[i] for i in keep.tolist()]
        done = self.joined.seqs(kept) >= 0
        label_seqs = self.labels.seqs(kept)
        meets = label_seqs >= 0
        joined = Joined.none()
        if meets.any():
            labels = self.labels.take(label_seqs[meets])
            self.labels.remove(label_seqs[meets])
            meeting = keep[meets]
            joined = _joined(labels.ids, _taken(columns, meeting), times[meeting], labels.columns["label"],
                             labels.times)
            self._append(self.joined, labels.ids, times[meeting], {})
        stale = self.examples.seqs(kept)
        stale = stale[stale >= 0]
        self.examples.remove(stale)
        new = keep[~done & ~meets]
        evicted = self._append(self.examples, [ids[i] for i in new.tolist()], times[new], _taken(columns, new, n))
        return Added(joined, replaced=n - len(keep) + len(stale), already_joined=int(done.sum()), evicted=evicted)

    def add_labels(self, ids: list[Id] | AnyArray, labels: AnyArray, label_time_ms: AnyArray | int,
                   offsets: AnyArray | None = None) -> Labeled:
        """Join labels with their pending examples; keep the others waiting for their features.

        ids : n ids; labels : (n,); label_time_ms : (n,) or one for all; offsets : (n,) where
        each label is in its topic (kept with a waiting label; None: not known, -1)."""
        ids = _checked_ids(ids)
        self.changes += 1
        n = len(ids)
        labels = _column(labels, n, None, "labels")
        label_offsets = np.full(n, -1, dtype=np.int64) if offsets is None else _column(offsets, n, np.int64,
                                                                                        "offsets")
        times = _times(label_time_ms, n)
        keep = _first_of_each(ids)
        kept = [ids[i] for i in keep.tolist()]
        pending = self.examples.seqs(kept)
        found = pending >= 0
        seen = ~found & ((self.joined.seqs(kept) >= 0) | (self.labels.seqs(kept) >= 0))
        joined = Joined.none()
        if found.any():
            examples = self.examples.take(pending[found])
            self.examples.remove(pending[found])
            rows = keep[found]
            joined = _joined(examples.ids, examples.columns, examples.times, labels[rows], times[rows])
            self._append(self.joined, examples.ids, examples.times, {})
        wait = keep[~found & ~seen]
        evicted = self._append(self.labels, [ids[i] for i in wait.tolist()], times[wait],
                               {"label": labels[wait], "offset": label_offsets[wait]})
        return Labeled(joined, duplicates=n - len(keep) + int(seen.sum()), waiting=len(wait), evicted=evicted)

    def expire(self, now_event_time_ms: int, ttl_ms: int) -> Expired:
        """Drop examples and waiting labels whose time is more than ``ttl_ms`` before ``now_event_time_ms``."""
        if ttl_ms < 0:
            raise ValueError(f"ttl_ms must be at least 0; got {ttl_ms}")
        cutoff = now_event_time_ms - ttl_ms
        dropped = []
        unmatched = None
        for log in (self.examples, self.labels, self.joined):
            old = log.older_than(cutoff)
            if log is self.labels and len(old):
                unmatched = log.take(old)
            log.remove(old)
            dropped.append(len(old))
        self.changes += any(dropped)
        return Expired(examples=dropped[0], labels=dropped[1], unmatched=unmatched)

    def logs(self) -> dict[str, KeyedLog]:
        """The store's three logs by name: what the codecs write."""
        return {EXAMPLES: self.examples, LABELS: self.labels, JOINED: self.joined}

    def to_bytes(self) -> bytes:
        """The store as bytes (``from_bytes`` reads them): its live rows, compacted."""
        return encode(self.logs())

    @classmethod
    def from_bytes(cls, data: bytes, max_pending: int = 100_000) -> PendingExamples:
        """The store ``to_bytes`` wrote. Raises ValueError, one line saying what is wrong, for
        anything else. The bound applies from the next ``add`` or ``add_labels`` on."""
        logs = {}
        for name, taken in decode(data).items():
            logs[name] = KeyedLog()
            logs[name].append(taken.ids, taken.times, taken.columns)
        return cls.of_logs(logs, max_pending)

    @classmethod
    def of_logs(cls, logs: dict[str, KeyedLog], max_pending: int = 100_000) -> PendingExamples:
        """The store of the three logs ``logs`` names (as ``logs()`` gives them)."""
        return cls(max_pending, logs)

    def _append(self, log: KeyedLog, ids: list[Id], times: IntArray, columns: dict[str, Column]) -> int:
        """Append rows to a log, dropping the rows that came first beyond ``max_pending``; how
        many were dropped. Those already held go before the new rows come, so that no chunk is
        merged only to lose its rows."""
        excess = len(log) + len(ids) - self.max_pending
        log.remove(log.oldest(excess))
        log.append(ids, times, columns)
        beyond = len(log) - self.max_pending  # new rows alone beyond the bound
        if beyond > 0:
            log.remove(log.oldest(beyond))
        return max(excess, 0)


def _joined(ids: list[Id], columns: dict[str, Any], event_times: IntArray, labels: Any,
            label_times: IntArray) -> Joined:
    rows: Rows = columns["rows"]
    others = {}
    for name in served_names(columns):
        best, proba = served_columns(name)
        others[name] = (columns[best], columns[proba])
    return Joined(ids, rows.features(), labels, columns["best"], columns["proba"], label_times - event_times,
                  columns["offset"], event_times, others)


def _served(name: str | None, best: AnyArray, proba: AnyArray, n: int) -> dict[str, Column]:
    """The columns of what a model served n examples (None: the first model), checked."""
    best_column, proba_column = served_columns(name)
    served = _column(proba, n, None, proba_column)
    if served.ndim != 2:
        raise ValueError(f"{proba_column} must be (n, C) probabilities; got shape {served.shape}")
    return {best_column: _column(best, n, np.int32, best_column), proba_column: served}


def _taken(columns: dict[str, Column], rows: IndexArray, n: int = -1) -> dict[str, Column]:
    """The entries at ``rows`` of each column (the columns themselves when ``rows`` is all n)."""
    if len(rows) == n:
        return columns
    return {name: take(column, rows) for name, column in columns.items()}


def _checked_ids(ids: list[Id] | AnyArray) -> list[Id]:
    keys = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    wrong = [key for key in keys if type(key) is not str and type(key) is not int][:1]
    if wrong:
        raise TypeError(f"message ids must be strings or integers; got {type(wrong[0]).__name__} {wrong[0]!r}")
    return keys


def _column(values: AnyArray, n: int, dtype: type | None, name: str) -> AnyArray:
    array = np.asarray(values, dtype=dtype)
    if array.ndim == 0 or len(array) != n:
        raise ValueError(f"{name} must hold one entry per id ({n:,}); got shape {array.shape}")
    return array


def _times(values: AnyArray | int, n: int) -> IntArray:
    times = np.asarray(values, dtype=np.int64)
    return np.full(n, times, dtype=np.int64) if times.ndim == 0 else _column(times, n, np.int64, "times")


def _last_of_each(ids: list[Id]) -> IndexArray:
    """Increasing positions of the last row of each distinct id."""
    last = {id_key(key): i for i, key in enumerate(ids)}
    return np.sort(np.fromiter(last.values(), dtype=np.intp, count=len(last)))


def _first_of_each(ids: list[Id]) -> IndexArray:
    """Increasing positions of the first row of each distinct id."""
    first = {id_key(key): i for i, key in reversed(list(enumerate(ids)))}
    return np.sort(np.fromiter(first.values(), dtype=np.intp, count=len(first)))
