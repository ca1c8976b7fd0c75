"""Each message predicted by its key's model, test-then-train, and its key learning as it goes.

A message's key is its Kafka record key, as UTF-8 text: a message without one, or with one that is
not UTF-8, is a dead letter. A key's model is its counts in its partition's state plus the key's
labeled messages before it in the poll, exactly, backed off (--key-prior-weight) to the group's
model as it was before the poll (``nbstream.naive_bayes.keyed_prequential``); a key never seen is
predicted by the group's model. The keys learn their labeled messages here, as they are
predicted; the partitions' models learn them next, as without keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.keyed_prequential import predict_then_learn_keys
from nbstream.naive_bayes.keyed_scores import Backoff, backoff_of
from nbstream.utils.blocked import normalized_exp
from nbstream.utils.ndarrays import AnyArray, BoolArray, Features, IntArray

from ...io.json_predictions import KeyAnswers
from ...key_names import MOST_KEY_BYTES
from ..global_model import Predictions
from .records import PartitionKeys

log = logging.getLogger(__name__)


def record_keys(keys: Sequence[bytes | None]) -> tuple[list[str], list[str | None]]:
    """Each record key as text ("" where it names none), and the problem of those that name none."""
    texts: list[str] = []
    problems: list[str | None] = []
    for key in keys:
        if key is None or not key:
            texts.append("")
            problems.append("no record key: --model-key key reads each message's key from it")
            continue
        if len(key) > MOST_KEY_BYTES:
            texts.append("")
            problems.append(f"a record key of {len(key):,} bytes: --model-key takes keys of at most {MOST_KEY_BYTES:,}")
            continue
        try:
            texts.append(key.decode("utf-8"))
            problems.append(None)
        except UnicodeDecodeError:
            texts.append("")
            problems.append("the record key is not UTF-8 text")
    return texts, problems


class KeyedServing:
    """What --model-key adds to the loop: prior_weight, the tables the keys share, kept while the
    group's model stays as it is; ttl_ms : keys unseen this long are dropped (--key-ttl; None: kept),
    counted in ``dropped`` and logged at most once a minute."""

    def __init__(self, prior_weight: float, ttl_ms: int | None = None):
        self.prior_weight, self.ttl_ms = prior_weight, ttl_ms
        self.dropped = 0  # keys dropped since the start
        self._shared: tuple[int, int, Backoff] | None = None  # (the model's id, its examples, its tables)
        self._unlogged, self._logged_at = 0, time.monotonic()

    def predict_then_learn(self, group: NaiveBayes[Any, Any], version: int, X: Features, y: AnyArray,
                           learned: BoolArray, keys: list[str], partitions: list[tuple[PartitionKeys, BoolArray]],
                           stamps: IntArray) -> Predictions:
        """The predictions of a poll's good rows (X (n, d), y (n,) read where ``learned``), each by its
        key's model (``keys`` (n,)); ``partitions``: each partition's keys with its rows (n,) bool.
        ``version`` : the examples the group's model learned; stamps (n,) : the rows' times (ms)."""
        backoff = self._backoff(group) if group.is_fitted else None
        n = X.shape[0]
        proba = None if backoff is None else np.empty((n, len(group.classes_)))
        examples = np.empty(n, dtype=np.int64)
        versions = np.empty(n, dtype=np.int64)
        for owned, rows in partitions:
            at = np.flatnonzero(rows)
            mine = [keys[i] for i in at.tolist()]
            scores, examples[at] = predict_then_learn_keys(group, backoff, owned.counts, X[at], mine,  # type: ignore[arg-type]
                                                           learned[at], y[at], stamps[at])
            owned.learned([key for key, taught in zip(mine, learned[at].tolist(), strict=True) if taught])
            if self.ttl_ms is not None:
                self._expired(owned.expire(int(stamps[at].max()), self.ttl_ms))
            if proba is not None and scores is not None:
                proba[at] = normalized_exp(scores)
            versions[at] = version + np.cumsum(learned[at]) - learned[at]
        answers = KeyAnswers(keys, examples)
        if proba is None:
            return Predictions(None, None, None, versions, keys=answers)
        return Predictions(group.classes_, np.argmax(proba, axis=1), proba, versions, keys=answers)

    def _expired(self, dropped: int) -> None:
        """Count keys dropped for --key-ttl; one log line a minute at most says how many."""
        self.dropped += dropped
        self._unlogged += dropped
        if self._unlogged and time.monotonic() - self._logged_at >= 60:
            log.info("dropped keys unseen for --key-ttl", extra={"keys": self._unlogged, "since_start": self.dropped})
            self._unlogged, self._logged_at = 0, time.monotonic()

    def _backoff(self, group: NaiveBayes[Any, Any]) -> Backoff:
        shared = self._shared
        if shared is None or shared[0] != id(group) or shared[1] != group.n_examples_seen_:
            shared = self._shared = (id(group), group.n_examples_seen_, backoff_of(group, self.prior_weight))  # type: ignore[arg-type]
        return shared[2]
