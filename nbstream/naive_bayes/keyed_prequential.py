"""Test-then-train of keyed models: each row scored by its key's counts as the rows before it left
them, then learned, backed off to a group's model fixed for the batch.

A batch is taken in rounds: round r holds the r-th row of each key, so no key appears twice in a
round; a round is scored at once (``keyed_scores``), then its labeled rows are learned into the
keys' counts, and the next round sees them. A batch of distinct keys is one round; a key that comes
k times costs k rounds. A MultinomialNB's batch where a key comes ``_MOST_ROUNDS`` times or more is
scored at once instead, however often a key comes (``_multinomial_in_bulk``: a little slower than
one round, far faster than many).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..stats.keyed_counts import Key, KeyCells, KeyedCounts
from ..utils.ndarrays import AnyArray, BoolArray, Features, FloatArray, IntArray
from ..utils.segment_sums import segment_sums_before
from ..utils.validation import check_X
from .discrete import FeatureCountsNB
from .keyed_scores import Backoff, keyed_joint_log_likelihood, row_nonzeros

_MOST_ROUNDS = 4  # a MultinomialNB batch of a key this often or more is scored in bulk


def occurrences(keys: Sequence[Key]) -> IntArray:
    """(n,) how many rows of the same key come before each row."""
    seen: dict[Key, int] = {}
    before = np.empty(len(keys), dtype=np.int64)
    for row, key in enumerate(keys):
        before[row] = seen.get(key, 0)
        seen[key] = before[row] + 1
    return before


def predict_then_learn_keys(group: FeatureCountsNB[Any], backoff: Backoff | None, store: KeyedCounts, X: Features,
                            keys: Sequence[Key], learned: BoolArray, labels: AnyArray, stamps: IntArray | None = None
                            ) -> tuple[FloatArray | None, IntArray]:
    """Each row of X (n, n_features) scored by its key's model, then the ``learned`` rows (n,) learned
    into the keys' counts ``store`` (labels (n,), checked, read where learned).

    A row's key's model is the key's counts in ``store`` plus its rows before it here that are
    learned, backed off to ``group`` (``backoff``: its shared tables). Returns log P(x, c) of each
    row (n, n_classes of group), a class the group does not know yet left out, or None while the
    group knows no class (``backoff`` None: the rows are only learned); and how many examples each
    row's key had learned before it (n,). stamps (n,) : when each row came, for ``seen_before``."""
    if group.is_fitted:
        X = group._prepared_for_prediction(X)
    else:
        X = group._prepare(check_X(X, n_features=None, accept_sparse=True, model=type(group).__name__))
    round_of = occurrences(keys)
    if group.kind == "multinomial" and backoff is not None and len(keys) and round_of.max() >= _MOST_ROUNDS:
        bulk, seen = _multinomial_in_bulk(group, backoff, store, X, keys, learned, labels)
        taught = np.flatnonzero(learned)
        if len(taught):
            store.update(X[taught], labels[taught], None, [keys[i] for i in taught.tolist()],
                         None if stamps is None else stamps[taught])
        return bulk, seen
    scores = np.empty((X.shape[0], len(group.classes_))) if backoff is not None else None
    examples = np.empty(X.shape[0], dtype=np.int64)
    for r in range(int(round_of.max()) + 1 if len(keys) else 0):
        members = np.flatnonzero(round_of == r)
        round_keys = [keys[i] for i in members.tolist()]
        examples[members] = store.examples_of(round_keys)
        if scores is not None and backoff is not None:
            _score_round(group, backoff, store, X, members, round_keys, examples[members] > 0, scores)
        taught = members[learned[members]]
        if len(taught):
            store.update(X[taught], labels[taught], None, [keys[i] for i in taught.tolist()],
                         None if stamps is None else stamps[taught])
    return scores, examples


def _multinomial_in_bulk(group: FeatureCountsNB[Any], backoff: Backoff, store: KeyedCounts, X: Features,
                         keys: Sequence[Key], learned: BoolArray, labels: AnyArray) -> tuple[FloatArray, IntArray]:
    """A MultinomialNB's keyed scores of a whole batch at once, however often a key comes: a row's
    score reads its key's counts only at the row's own words (and its class totals and counts), so
    each row is given a key of its own holding exactly those, as they stand before it — the store's
    plus what the key's learned rows before it add, summed by segments (``segment_sums_before``)."""
    classes = group.classes_
    n_rows, n_classes, n_features = X.shape[0], len(classes), X.shape[1]
    distinct = list(dict.fromkeys(keys))
    slot_of = {key: slot for slot, key in enumerate(distinct)}
    row_slot = np.fromiter((slot_of[key] for key in keys), np.int64, n_rows)
    known = [key for key in distinct if key in store]
    stored = store.cells_of(known, classes)
    place = np.full(len(distinct), -1, dtype=np.int64)  # a distinct key's place among the known ones
    place[[slot_of[key] for key in known]] = np.arange(len(known))
    position = {label: i for i, label in enumerate(classes.tolist())}
    column = np.array([position.get(label, -1) for label in labels.tolist()], dtype=np.int64)
    taught = learned & (column >= 0)  # a class new to the group is not scored until the group knows it
    before = _before_rows(row_slot, learned, taught, column, _row_totals(X), n_classes)
    examples = before.examples + _stored(store.examples_of(distinct), row_slot)
    class_count = before.class_count + _stored(stored.class_count, place[row_slot], n_classes)
    class_totals = before.class_totals + _stored(stored.class_totals, place[row_slot], n_classes)
    rows, features, values = row_nonzeros(X)
    query_rows, query_classes = np.repeat(rows, n_classes), np.tile(np.arange(n_classes), len(rows))
    query_features = np.repeat(features, n_classes)
    counts = _stored_counts(stored, place[row_slot][query_rows], query_classes, query_features, n_classes, n_features)
    by_row = taught[rows]  # the learned rows' own cells: what the rows after them see
    counts += _batch_counts_before((row_slot[query_rows] * n_classes + query_classes) * n_features + query_features,
                                   2 * query_rows,
                                   (row_slot[rows[by_row]] * n_classes + column[rows[by_row]]) * n_features
                                   + features[by_row], 2 * rows[by_row] + 1, values[by_row])
    kept = counts > 0
    cells = KeyCells(query_rows[kept].astype(np.intp), query_classes[kept].astype(np.intp),
                     query_features[kept].astype(np.intp), counts[kept], class_count, class_totals)
    scores = np.empty((n_rows, n_classes))
    fresh = examples == 0  # a key that learned nothing: the group's model
    if fresh.any():
        scores[fresh] = group._joint_log_likelihood(X[np.flatnonzero(fresh)])
    if (~fresh).any():
        scores[~fresh] = keyed_joint_log_likelihood(group, backoff, X, np.arange(n_rows), cells)[~fresh]
    return scores, examples


@dataclass(frozen=True)
class _Before:
    """What each row's key learned earlier in the batch: examples (n,), class_count and class_totals
    (n, n_classes) (the classes of the group)."""
    examples: IntArray
    class_count: FloatArray
    class_totals: FloatArray


def _before_rows(row_slot: IntArray, learned: BoolArray, taught: BoolArray, column: IntArray, totals: FloatArray,
                 n_classes: int) -> _Before:
    """Segmented sums, over each key's rows in order, of what its learned rows before each row add."""
    n = len(row_slot)
    order = np.argsort(row_slot, kind="stable")
    opens = np.flatnonzero(np.r_[True, row_slot[order][1:] != row_slot[order][:-1]]) if n else np.zeros(0, np.intp)
    amounts = np.zeros((n + 1, 1 + 2 * n_classes))
    amounts[1:, 0] = learned[order]
    rows = np.flatnonzero(taught[order])
    amounts[1 + rows, 1 + column[order][rows]] = 1.0
    amounts[1 + rows, 1 + n_classes + column[order][rows]] = totals[order][rows]
    summed = np.empty((n, 1 + 2 * n_classes))
    summed[order] = segment_sums_before(amounts, opens, axis=0) if n else summed[order]
    return _Before(summed[:, 0].astype(np.int64), summed[:, 1:1 + n_classes], summed[:, 1 + n_classes:])


def _stored(values: AnyArray, at: IntArray, width: int | None = None) -> AnyArray:
    """values[at], a row of zeros where ``at`` is -1 (a key the store does not hold)."""
    found = np.zeros((len(at), width) if width is not None else len(at), dtype=values.dtype)
    held = at >= 0
    found[held] = values[at[held]]
    return found


def _row_totals(X: Features) -> FloatArray:
    return np.asarray(X.sum(axis=1, dtype=np.float64)).reshape(-1)


def _stored_counts(stored: KeyCells, query_place: IntArray, classes: IntArray, features: IntArray, n_classes: int,
                   n_features: int) -> FloatArray:
    """The store's count at each (key's place among the known, class, feature) asked (0: none, or a key not held)."""
    ids = (stored.slot * n_classes + stored.classes) * n_features + stored.features
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    wanted = (query_place * n_classes + classes) * n_features + features
    at = np.searchsorted(ids, wanted)
    found = (query_place >= 0) & (at < len(ids))
    found[found] = ids[at[found]] == wanted[found]
    counts = np.zeros(len(wanted))
    counts[found] = stored.counts[order][at[found]]
    return counts


def _batch_counts_before(query_ids: IntArray, query_when: IntArray, taught_ids: IntArray, taught_when: IntArray,
                         taught_values: FloatArray) -> FloatArray:
    """At each query (its cell's id, its time): the sum of the values of the learned cells of the same
    id before that time. Ids: (the key's slot, class, feature); times: 2 row for a query, 2 row + 1
    for a learned cell, so that a row sees the rows before it, not itself."""
    ids = np.concatenate([query_ids, taught_ids])
    if not len(ids):
        return np.zeros(0)
    order = np.lexsort((np.concatenate([query_when, taught_when]), ids))
    amounts = np.zeros(len(ids) + 1)
    amounts[1 + len(query_ids):] = taught_values
    amounts[1:] = amounts[1:][order]
    sorted_ids = ids[order]
    opens = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    before = np.empty(len(ids))
    before[order] = segment_sums_before(amounts, opens, axis=0)
    return before[:len(query_ids)]


def _score_round(group: FeatureCountsNB[Any], backoff: Backoff, store: KeyedCounts, X: Features, members: IntArray,
                 round_keys: list[Key], known: BoolArray, scores: FloatArray) -> None:
    """Score one round's rows (``members``, of distinct keys; ``known``: those whose key learned
    before) into ``scores``."""
    if (~known).any():
        scores[members[~known]] = group._joint_log_likelihood(X[members[~known]])
    if known.any():
        at = members[known]
        cells = store.cells_of([key for key, seen in zip(round_keys, known.tolist(), strict=True) if seen],
                               group.classes_)
        scores[at] = keyed_joint_log_likelihood(group, backoff, X[at], np.arange(len(at)), cells)
