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
from ..utils.validation import check_X
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
    scores = np.empty((X.shape[0], len(group.classes_))) if backoff is not None else None
    examples = np.empty(X.shape[0], dtype=np.int64)
    round_of = occurrences(keys)
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
