"""Test-then-train of keyed models: each row scored by its key's counts as the rows before it left
them, then learned, backed off to a group's model fixed for the batch.

A batch is taken in rounds: round r holds the r-th row of each key, so no key appears twice in a
round. A round is scored at once (``keyed_scores``), then its labeled rows are learned into the
keys' counts, and the next round sees them. A batch of distinct keys is one round; a key that
comes k times costs k rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..stats.keyed_counts import Key, KeyedCounts
from ..utils.ndarrays import AnyArray, BoolArray, Features, FloatArray, IntArray
from .discrete import FeatureCountsNB
from .keyed_scores import Backoff, keyed_joint_log_likelihood


def occurrences(keys: Sequence[Key]) -> IntArray:
    """(n,) how many rows of the same key come before each row."""
    seen: dict[Key, int] = {}
    before = np.empty(len(keys), dtype=np.int64)
    for row, key in enumerate(keys):
        before[row] = seen.get(key, 0)
        seen[key] = before[row] + 1
    return before


def predict_then_learn_keys(group: FeatureCountsNB[Any], backoff: Backoff, store: KeyedCounts, X: Features,
                            keys: Sequence[Key], learned: BoolArray, labels: AnyArray) -> FloatArray:
    """log P(x, c) of each row of X (n, n_features), prepared as ``group`` learns it, under its key's
    model: the key's counts in ``store`` plus its rows before it here that are ``learned`` (n,),
    backed off to ``group`` (whose ``backoff`` tables are given), shape (n, n_classes of group): a
    class the group does not know yet is left out. The learned rows are learned into ``store``
    (labels (n,), checked, read where learned)."""
    classes = group.classes_
    scores = np.empty((X.shape[0], len(classes)))
    round_of = occurrences(keys)
    for r in range(int(round_of.max()) + 1 if len(keys) else 0):
        members = np.flatnonzero(round_of == r)
        round_keys = [keys[i] for i in members.tolist()]
        known = np.array([key in store for key in round_keys], dtype=bool)
        if (~known).any():
            scores[members[~known]] = group._joint_log_likelihood(X[members[~known]])
        if known.any():
            at = members[known]
            cells = store.cells_of([key for key, seen in zip(round_keys, known.tolist(), strict=True) if seen],
                                   classes)
            scores[at] = keyed_joint_log_likelihood(group, backoff, X[at], np.arange(len(at)), cells)
        taught = members[learned[members]]
        if len(taught):
            store.update(X[taught], labels[taught], None, [keys[i] for i in taught.tolist()])
    return scores
