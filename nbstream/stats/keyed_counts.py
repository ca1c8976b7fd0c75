"""Each key's own counts: the (class, feature) pairs a key's examples brought, and how many
examples it learned; memory grows with what the keys saw, not with the feature space.

Every key's class rows are those of one open class set, so the keys' counts add up, pair by
pair, to the counts of a model learned from every key's examples; a model of other class rows
reads them by label (``cells_of``).

All keys' pairs are held together, column by column, as ``PairCounts`` holds one model's: each
key has a slot, and a pair is ``(slot * n_features + feature, class)`` with its count. Each learned
batch becomes a run of its own, sorted and summed, and runs are joined as a log-structured merge
does (``_append``): learning a batch costs what the batch holds (times the logarithm of all pairs,
spread over time), not what the keys hold; a read searches each of the few runs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..utils.class_set import ClassSet
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from .sparse_counts import nonzero_cells

Key = str | int  # what names a key: a message field's text, a record key, an integer id


def grouped(keys: Sequence[Hashable]) -> dict[Hashable, IndexArray]:
    """The rows of each distinct key, in order of first appearance: {key: rows (n_rows_of_key,)}."""
    rows: dict[Hashable, list[int]] = {}
    for row, key in enumerate(keys):
        rows.setdefault(key, []).append(row)
    return {key: np.asarray(at, dtype=np.intp) for key, at in rows.items()}


@dataclass(frozen=True)
class KeyCells:
    """The pairs of some keys, end to end: slot (n_cells,) each pair's key's place among those keys,
    classes, features (n_cells,) intp, counts (n_cells,); class_count (n_keys, n_classes) the keys'
    class counts, class_totals (n_keys, n_classes) their pairs' counts summed by class."""

    slot: IndexArray
    classes: IndexArray
    features: IndexArray
    counts: FloatArray
    class_count: FloatArray
    class_totals: FloatArray


class _Pairs:
    """Pairs sorted by (place, class), place = slot * n_features + feature, with their counts."""

    def __init__(self, places: IntArray, classes: IntArray, counts: FloatArray):
        self.places, self.classes, self.counts = places, classes, counts

    @classmethod
    def summed(cls, places: IntArray, classes: IntArray, counts: FloatArray) -> _Pairs:
        """Pairs given in any order, repeats summed. One stable sort of one key where place and class
        fit in 63 bits (timsort: runs already sorted, as runs joined are, cost little), else two."""
        if not len(places):
            return cls(places, classes, counts)
        width = int(classes.max()) + 1
        if int(places.max()) < (1 << 62) // width:
            order = np.argsort(places * width + classes, kind="stable")
        else:
            order = np.lexsort((classes, places))
        places, classes, counts = places[order], classes[order], counts[order]
        first = np.ones(len(places), dtype=bool)
        first[1:] = (places[1:] != places[:-1]) | (classes[1:] != classes[:-1])
        if first.all():
            return cls(places, classes, counts)
        starts = np.flatnonzero(first)
        return cls(places[starts], classes[starts], np.add.reduceat(counts, starts))

    def of_slots(self, slots: IntArray, n_features: int) -> tuple[IndexArray, IndexArray]:
        """The pairs of the given slots: for each pair found, the slot's place in ``slots``, and its index."""
        begin = np.searchsorted(self.places, slots * n_features)
        end = np.searchsorted(self.places, (slots + 1) * n_features)
        found = end - begin
        which = np.repeat(np.arange(len(slots)), found)
        at = np.arange(len(which)) + np.repeat(begin - (np.cumsum(found) - found), found)
        return which, at


class KeyedCounts:
    """The pair counts, class counts and examples learned of every key seen."""

    def __init__(self, n_features: int, classes: ClassSet | None = None) -> None:
        self.n_features = n_features  # 0: taken from the first batch
        self.classes = ClassSet.open() if classes is None else classes  # the labels of the class rows
        self._slots: dict[Key, int] = {}  # a key's slot: its row below, ascending (renumbered after many drops)
        self._examples = np.zeros(0, dtype=np.int64)
        self._class_count = np.zeros((0, 0))
        self._seen = np.zeros(0, dtype=np.int64)  # when each key last learned (the caller's clock; 0: never said)
        self._runs: list[_Pairs] = []  # sorted and summed, each more than twice the size of the next

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def keys(self) -> list[Key]:
        """The keys, in order of first appearance."""
        return list(self._slots)

    def key_type(self) -> type | None:
        """str or int: the type of every key; None before any."""
        return type(next(iter(self._slots))) if self._slots else None

    def examples(self, key: Key) -> int:
        """Examples the key learned (0 for a key never seen)."""
        slot = self._slots.get(key)
        return 0 if slot is None else int(self._examples[slot])

    def examples_of(self, keys: Sequence[Key]) -> IntArray:
        """Examples each key learned (0 for a key never seen), shape (n_keys,)."""
        slots = self._slots
        at = np.fromiter((slots.get(key, -1) for key in keys), np.int64, len(keys))
        known = at >= 0
        found = np.zeros(len(keys), dtype=np.int64)
        found[known] = self._examples[at[known]]
        return found

    def seen_of(self, keys: Sequence[Key]) -> IntArray:
        """When each key (each one held) last learned, shape (n_keys,)."""
        return self._seen[np.fromiter((self._slots[key] for key in keys), np.int64, len(keys))]

    def total_examples(self) -> int:
        """Examples all keys learned."""
        return int(self._examples[self._live_slots()].sum())

    def _live_slots(self) -> IntArray:
        """The slots of the keys held, in ``keys()`` order."""
        return np.fromiter(self._slots.values(), np.int64, len(self._slots))

    def seen_before(self, stamp: int) -> list[Key]:
        """The keys that last learned before ``stamp`` (of the clock ``update`` was given)."""
        slots = self._live_slots()
        old = np.flatnonzero(self._seen[slots] < stamp)
        if not len(old):
            return []
        keys = self.keys()
        return [keys[i] for i in old.tolist()]

    def drop(self, keys: Sequence[Key]) -> None:
        """Forget these keys (those held) and all they learned."""
        slots = [self._slots.pop(key) for key in keys if key in self._slots]
        if not slots:
            return
        gone = np.zeros(len(self._examples), dtype=bool)
        gone[slots] = True
        self._examples[gone], self._class_count[gone] = 0, 0.0
        self._runs = [_Pairs(run.places[keep], run.classes[keep], run.counts[keep]) for run in self._runs
                      for keep in [~gone[run.places // max(self.n_features, 1)]]]
        if len(self._examples) > 2 * len(self._slots) + 1024:
            self._renumber()

    def _renumber(self) -> None:
        """Give the keys held the slots 0, 1, ... in their order (the slots of keys dropped are not
        given again, so keys that come and go would grow the rows without end)."""
        live = self._live_slots()  # ascending: a key's slot is larger than any given before it
        new = np.full(len(self._examples), -1, dtype=np.int64)
        new[live] = np.arange(len(live))
        width = max(self.n_features, 1)
        self._runs = [_Pairs(new[slot] * width + feature, run.classes, run.counts) for run in self._runs
                      for slot, feature in [np.divmod(run.places, width)]]  # (order kept: the map is increasing)
        self._examples, self._class_count, self._seen = self._examples[live], self._class_count[live], self._seen[live]
        self._slots = dict(zip(self._slots, range(len(live)), strict=True))

    def n_pairs(self) -> int:
        """Pairs held (a pair in the pending run and among those kept counts twice)."""
        return sum(len(run.places) for run in self._runs)

    # ---- learning -------------------------------------------------------------------------
    def _slots_of(self, keys: Sequence[Key]) -> IntArray:
        """Each key's slot, (n_keys,), new keys given new slots."""
        slots, before = self._slots, len(self._slots)
        given = len(self._examples)  # the next new slot
        at = np.fromiter((slots.setdefault(key, given + len(slots) - before) for key in keys), np.int64, len(keys))
        grown = len(slots) - before
        if grown:
            self._examples = np.concatenate([self._examples, np.zeros(grown, np.int64)])
            self._class_count = np.vstack([self._class_count, np.zeros((grown, self._class_count.shape[1]))])
            self._seen = np.concatenate([self._seen, np.zeros(grown, np.int64)])
        return at

    def _grow(self, n_classes: int) -> None:
        if self._class_count.shape[1] < n_classes:
            self._class_count = np.pad(self._class_count, ((0, 0), (0, n_classes - self._class_count.shape[1])))

    def update(self, X: Features, labels: AnyArray, weights: FloatArray | None, keys: Sequence[Key],
               stamps: IntArray | None = None) -> None:
        """Add a batch: X (n_samples, n_features) dense or CSR, prepared as the model learns it;
        labels (n_samples,), checked; weights (n_samples,) or None; keys (n_samples,) each sample's key;
        stamps (n_samples,) when each sample came, by the caller's clock (``seen_before``), or None."""
        if not self.n_features:  # made before the features' width was known
            self.n_features = X.shape[1]
        elif X.shape[1] != self.n_features:
            raise ValueError(f"the keys' counts are of {self.n_features} features; a batch has {X.shape[1]}")
        rows = self.classes.index(labels)
        slots = self._slots_of(keys)
        self._grow(len(self.classes))
        np.add.at(self._examples, slots, 1)
        if stamps is not None:
            np.maximum.at(self._seen, slots, stamps)
        np.add.at(self._class_count, (slots, rows), 1.0 if weights is None else weights)
        for first, cell_rows, columns, values in nonzero_cells(X):
            sample = cell_rows + first if first else cell_rows
            if weights is not None:
                values = values * weights[sample]
            self._append(slots[sample] * self.n_features + columns, rows[sample].astype(np.int64), values)

    def _append(self, places: IntArray, classes: IntArray, counts: FloatArray) -> None:
        """A batch's pairs become a run; a run no more than twice the size of the one after it is
        joined with it, so that there are at most log2 of the pairs runs, and a pair is joined
        again only as often."""
        runs = self._runs
        runs.append(_Pairs.summed(places, classes, counts))
        while len(runs) > 1 and len(runs[-2].places) <= 2 * len(runs[-1].places):
            last = runs.pop()
            runs[-1] = _joined_runs([runs[-1], last])

    def _kept(self) -> _Pairs:
        """Every pair in one run."""
        if len(self._runs) > 1:
            self._runs = [_joined_runs(self._runs)]
        return self._runs[0] if self._runs else _Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))

    def merge(self, other: KeyedCounts) -> None:
        """Add another's keys (their classes by label)."""
        rows = self.classes.rows_for(other.classes.labels)
        theirs = other._live_slots()
        slots = self._slots_of(other.keys())
        self._grow(len(self.classes))
        self._examples[slots] += other._examples[theirs]
        self._class_count[np.ix_(slots, rows)] += other._class_count[theirs][:, :len(rows)]
        self._seen[slots] = np.maximum(self._seen[slots], other._seen[theirs])
        ours = np.full(len(other._examples), -1, dtype=np.int64)
        ours[theirs] = slots
        pairs = other._kept()
        their_slots, features = np.divmod(pairs.places, other.n_features)
        self._append(ours[their_slots] * self.n_features + features, rows[pairs.classes].astype(np.int64),
                     pairs.counts.copy())

    # ---- reading ----------------------------------------------------------------------------
    def cells_of(self, keys: Sequence[Key], labels: AnyArray) -> KeyCells:
        """The pairs of these keys (each one seen), their slots being their places in ``keys``, in
        the columns of ``labels`` (n_classes,) (a model's classes): a class they do not name is
        left out."""
        place = {label: i for i, label in enumerate(labels.tolist())}
        columns = np.array([place.get(label, -1) for label in self.classes.labels.tolist()], dtype=np.intp)
        n_classes = len(labels)
        slots = np.fromiter((self._slots[key] for key in keys), np.int64, len(keys))
        runs = [run for run in self._runs if len(run.places)]
        found = [(which, run, at) for run in runs for which, at in [run.of_slots(slots, self.n_features)]]
        which = np.concatenate([which for which, _, _ in found]) if found else np.zeros(0, np.intp)
        features = np.concatenate([run.places[at] % self.n_features for _, run, at in found]) if found \
            else np.zeros(0, np.int64)
        classes = np.concatenate([run.classes[at] for _, run, at in found]) if found else np.zeros(0, np.int64)
        counts = np.concatenate([run.counts[at] for _, run, at in found]) if found else np.zeros(0)
        if len(found) > 1:  # a pair in several runs: one cell of their sum
            summed = _Pairs.summed(which * self.n_features + features, classes, counts)
            which, features = np.divmod(summed.places, self.n_features)
            classes, counts = summed.classes, summed.counts
        width = self._class_count.shape[1]
        columns = columns[:width]
        kept = columns >= 0
        class_count = np.zeros((len(keys), n_classes))
        class_count[:, columns[kept]] = self._class_count[slots][:, :len(columns)][:, kept]
        classes = columns[classes] if len(classes) else classes
        if not kept.all():
            present = classes >= 0
            which, classes, features, counts = which[present], classes[present], features[present], counts[present]
        totals = np.bincount(which * n_classes + classes, weights=counts,
                             minlength=class_count.size).astype(np.float64).reshape(class_count.shape)
        return KeyCells(which.astype(np.intp), classes.astype(np.intp), features.astype(np.intp), counts,
                        class_count, totals)

    # ---- as named arrays ----------------------------------------------------------------------
    def arrays(self) -> dict[str, AnyArray]:
        """The keys' counts, in ``keys()`` order: examples (n_keys,) int64, class_count (n_keys,
        n_classes), seen (n_keys,) int64 when each last learned, pair_end (n_keys,) int64 where each
        key's pairs end, and pair_feature, pair_class (int32) and pair_count of all pairs, each key's
        sorted by feature then class. The keys themselves are the caller's to store."""
        kept = self._kept()
        live = self._live_slots()
        rank = np.full(len(self._examples), -1, dtype=np.int64)
        rank[live] = np.arange(len(live))  # a key's place in keys() order
        slots, features = np.divmod(kept.places, max(self.n_features, 1))
        ranks = rank[slots]  # rising with the slots: keys() lists the keys in the order their slots were given
        return {"examples": self._examples[live], "class_count": self._class_count[live], "seen": self._seen[live],
                "pair_end": np.searchsorted(ranks, np.arange(len(live)), side="right").astype(np.int64),
                "pair_feature": features.astype(np.int32), "pair_class": kept.classes.astype(np.int32),
                "pair_count": kept.counts}

    @classmethod
    def from_arrays(cls, keys: Sequence[Key], classes: AnyArray, arrays: Mapping[str, AnyArray],
                    n_features: int) -> KeyedCounts:
        """The counts ``arrays`` gives for these keys and the labels of their class rows; ValueError
        unless they are what learning gives: distinct keys and labels, shapes that fit, counts finite
        and >= 0, pairs inside the classes and features, each key's pairs distinct and sorted."""
        class_set = ClassSet.restored(classes, fixed=False) if len(classes) else ClassSet.open()
        n_classes = len(class_set)
        examples, class_count, ends = arrays["examples"], arrays["class_count"], arrays["pair_end"]
        features, classes, pair_count = arrays["pair_feature"], arrays["pair_class"], arrays["pair_count"]
        n_keys, n_pairs = len(keys), len(pair_count)
        _require(len(set(keys)) == n_keys, "the keys must be distinct")
        _require(examples.shape == (n_keys,) and examples.dtype.kind in "iu" and not (examples < 0).any(),
                 f"examples must be {n_keys} counts")
        _require(class_count.shape == (n_keys, n_classes), f"class_count must have shape ({n_keys}, {n_classes})")
        _require(ends.shape == (n_keys,) and ends.dtype.kind in "iu", f"pair_end must be {n_keys} integers")
        _require(features.shape == classes.shape == (n_pairs,) and pair_count.ndim == 1
                 and features.dtype.kind in "iu" and classes.dtype.kind in "iu",
                 "pair_feature, pair_class and pair_count must have one integer, integer and value per pair")
        _require(not n_keys or bool((np.diff(ends, prepend=0) >= 0).all()) and int(ends[-1]) == n_pairs,
                 "pair_end must increase to the number of pairs")
        for name, values in (("class_count", class_count), ("pair_count", pair_count)):
            _require(bool(np.isfinite(values).all()) and not (values < 0).any(), f"{name} must be finite and >= 0")
        _require(not n_pairs or 0 <= int(features.min()) and int(features.max()) < n_features
                 and 0 <= int(classes.min()) and int(classes.max()) < n_classes,
                 "pairs must lie inside the model's features and classes")
        slots = np.repeat(np.arange(n_keys, dtype=np.int64), np.diff(ends, prepend=0))
        places = slots * n_features + features
        _require(n_pairs < 2 or bool(((places[1:] > places[:-1]) | (places[1:] == places[:-1])
                                      & (classes[1:] > classes[:-1])).all()),
                 "each key's pairs must be distinct and sorted by feature, then class")
        made = cls(n_features, class_set)
        made._slots = {key: slot for slot, key in enumerate(keys)}
        made._examples = examples.astype(np.int64)
        made._class_count = class_count.astype(np.float64)
        seen = arrays.get("seen")
        made._seen = np.zeros(n_keys, np.int64) if seen is None else np.asarray(seen, dtype=np.int64)
        _require(made._seen.shape == (n_keys,), f"seen must be {n_keys} times")
        made._runs = [_Pairs(places, classes.astype(np.int64), pair_count.astype(np.float64))]
        return made


def _joined_runs(runs: list[_Pairs]) -> _Pairs:
    """Runs of pairs as one, repeats summed."""
    return _Pairs.summed(np.concatenate([run.places for run in runs]), np.concatenate([run.classes for run in runs]),
                         np.concatenate([run.counts for run in runs]))


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise ValueError(problem)
