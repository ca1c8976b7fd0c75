"""Labels that come later, on a topic of their own (``worker serve --labels-topic``): the pieces the
loop joins them with.

A message with an id and no label is served a prediction at once and kept *pending* in its
partition's state (``pending.py``): its encoded features and what it was served. A label event
``{"id": ..., "label": ...}`` on the labels topic, in the partition of the same number (keyed
like the message), meets it there: the example is learned, and the prediction that was served is
judged. A label that comes first waits for its message. Time is event time, by partition: each
poll moves a partition's clock to the newest timestamp it brought (of messages or labels), and
what is older than ``--label-ttl`` by that clock is dropped; a waiting label dropped so never met
its message (*unmatched*: counted, and with ``--dlq-unmatched-labels`` sent to the dead-letter
topic, rebuilt as ``{"id": ..., "label": ...}`` with where the label was).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbstream.arrow import RowProblems
from nbstream.utils.ndarrays import AnyArray, BoolArray, FloatArray

from ...errors import ConfigError
from ...io.messages import id_problem
from ...io.records import Polled
from ...setting import Checked, parse_duration, setting
from .keyed_log import Taken
from .store import LONGEST_TTL_SECONDS, MOST_PENDING

UNMATCHED = "unmatched label: no message with its id came within --label-ttl"


@dataclass(frozen=True)
class LabelsConfig(Checked):
    """Labels that come later, on a topic of their own (None in ServeConfig: no --labels-topic)."""
    topic: str | None = setting(None, "--labels-topic",
                         help="Topic of labels that come later: JSON objects with --id-field and --label-field, "
                              "keyed like the message they label (same partition count as --input). A message "
                              "with an id and no label waits for its label, then is learned and its served "
                              "prediction judged.")
    ttl: float = setting(7 * 86_400.0, "--label-ttl", low=0, high=LONGEST_TTL_SECONDS, shown="7d",
                         parse=lambda text: parse_duration(text, "--label-ttl"),
                         help="How long a message waits for its label, by its event time (90s, 15m, 36h, 7d).")
    max_pending: int = setting(100_000, "--max-pending", low=1, high=MOST_PENDING,
                               help="Messages waiting for their label per partition at most (the oldest give way; "
                                    "as many labels waiting for their message).")
    dlq_unmatched: bool = setting(False, "--dlq-unmatched-labels",
                                  help="Send a label whose message never came within --label-ttl (never seen, or "
                                       "expired) to the dead-letter topic; otherwise it is only counted.")

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    @classmethod
    def given(cls, **settings: Any) -> LabelsConfig | None:
        """The labels settings, None without a labels topic (where --dlq-unmatched-labels means nothing)."""
        config = cls(**settings)  # the ranges are checked, topic or not
        if config.topic is not None:
            return config
        if config.dlq_unmatched:
            raise ConfigError("--dlq-unmatched-labels needs --labels-topic: without it no label is unmatched.")
        return None



def with_id(ids: list[Any]) -> BoolArray:
    """(n,) which ids can name a pending message: strings and integers (not booleans) of
    MOST_ID_CHARACTERS at most (a longer one is served, not kept)."""
    return np.fromiter((id_problem(key, "id") is None for key in ids), dtype=bool, count=len(ids))


def served(best: AnyArray | None, proba: FloatArray | None, scored: BoolArray, rows: BoolArray
           ) -> tuple[AnyArray, FloatArray]:
    """What the predictions of ``rows`` served, as pending examples keep it: the column of the
    class ((k,) int32, -1 where the model knew no class) and the probabilities ((k, C), zeros there).

    best, proba : (n,), (n, C) of n scored-or-not predictions (None: the model knew no class);
    scored, rows : (n,) bool."""
    k = int(rows.sum())
    if best is None or proba is None:
        return np.full(k, -1, dtype=np.int32), np.zeros((k, 0))
    kept_best, kept_proba = best[rows].astype(np.int32), proba[rows]
    unscored = ~scored[rows]
    if unscored.any():
        kept_best[unscored] = -1
        kept_proba = np.where(unscored[:, None], 0.0, kept_proba)
    return kept_best, kept_proba


def widened(proba: FloatArray, n_classes: int) -> FloatArray | None:
    """(k, n_classes): served probabilities of a class set that grew since, with zero columns for
    the classes added (classes are appended, never reordered); None when they were served by a
    model that knew more classes than this replica's does yet (its partition moved here before
    another partition's state that brought a class): then they are not judged."""
    missing = n_classes - proba.shape[1]
    if missing < 0:
        return None
    return proba if missing == 0 else np.pad(proba, ((0, 0), (0, missing)))


def unmatched_letters(topic: str, partition: int, taken: Taken) -> tuple[Polled, RowProblems]:
    """Waiting labels that never met their message, as dead letters: each rebuilt as a label event
    keyed by its id, from where it was in the labels topic (offset -1 where not known)."""
    labels = np.asarray(taken.columns["label"])
    values = [json.dumps({"id": key, "label": label}).encode()  # ids beyond 64 bits too
              for key, label in zip(taken.ids, labels.tolist(), strict=True)]
    keys = [str(key).encode() for key in taken.ids]
    n = len(values)
    letters = Polled(topic, values, keys, np.full(n, partition, dtype=np.int64),
                     np.asarray(taken.columns["offset"], dtype=np.int64), np.asarray(taken.times, dtype=np.int64))
    problems = RowProblems(n)
    problems.flag(np.ones(n, dtype=bool), "label", UNMATCHED)
    return letters, problems
