"""A key's model for the inference API (``"parameters": {"key": K}``), as the last commit left it.

The keys' counts live in the Kafka loop's partitions and change with every poll, so a request
never reads them: it asks for its key (``PublishedModels.ask_key``) and waits for the next
publication, which the loop makes right after a commit, when every owned partition's keys are
exactly as committed. There the loop copies the asked keys' counts (``looked_up``) beside the
group's model it publishes; the request's thread builds the key's model from them (backed off by
--key-prior-weight, as the loop predicts a key's next message).

A replica holds the keys of the partitions it owns. A key in none of them is a key never seen
(answered by the group's model, with 0 examples) when this replica owns every partition the group
has a state of; else the key may be another replica's, and the request is told so (404).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.backoff import PseudoCounts, key_model, pseudo_counts
from nbstream.naive_bayes.discrete import FeatureCountsNB
from nbstream.stats.keyed_counts import KeyCells

from ...inference.errors import NotFound, NotReady, RequestError
from ...io.kafka.client import KafkaFailure
from ..group_state import GroupState

log = logging.getLogger(__name__)
MOST_READ_BACK = 1_000  # keys read back for the inference API at one publication, at most


@dataclass(frozen=True)
class KeyLookup:
    """One key as the committed state holds it: its examples and counts (cells None: a key never
    seen), or the partitions of other replicas that may hold it (``elsewhere``)."""
    examples: int = 0
    cells: KeyCells | None = None
    elsewhere: tuple[int, ...] = ()
    owned: tuple[int, ...] = ()
    failure: str | None = None  # why its counts could not be read back (--max-keys)


def looked_up(group: GroupState, keys: Iterable[str | int], classes: Any) -> dict[str | int, KeyLookup]:
    """Each asked key as the owned partitions hold it now (call it when they are as committed);
    classes : the labels of the group model's classes, in its order (the cells' class rows). Keys
    out of memory (--max-keys) are read back first, at most MOST_READ_BACK a publication (the rest
    are left for the next one); those that cannot be read back are answered by why."""
    owned = tuple(sorted(group.owned))
    elsewhere = tuple(sorted(p for p in group.latest if p not in group.owned))  # (their keys may be anywhere
    # now: a state just released, or one another replica committed, that this one has not read yet)
    asked = [key for key in keys if isinstance(key, str)]
    answers: dict[str | int, KeyLookup] = {}
    for number, partition in group.owned.items():
        out = [] if partition.keys is None else partition.keys.out_of_memory(asked)[:MOST_READ_BACK]
        try:
            group.keys_in_memory(number, out)  # one read of the partition's records for all of them
        except (KafkaFailure, ValueError) as error:
            log.error("keys asked of the inference API could not be read back", extra={
                "partition": number, "keys": len(out), "cause": str(error)[:300]})
            answers.update((key, KeyLookup(failure=str(error)[:300])) for key in out)
    for key in keys:
        if key in answers:
            continue
        holder = next((partition.keys for partition in group.owned.values()
                       if partition.keys is not None and key in partition.keys.counts), None)
        if holder is None and any(partition.keys is not None and partition.keys.out_of_memory([str(key)])
                                  for partition in group.owned.values()):
            continue  # (beyond this publication's read-backs: asked again, looked up at the next)
        if holder is not None:
            answers[key] = KeyLookup(holder.counts.examples(key), holder.counts.cells_of([key], classes))
        else:
            answers[key] = KeyLookup(elsewhere=elsewhere, owned=owned)
    return answers


class CommittedKeys:
    """The keys of ``worker serve --model-key key`` at one publication: those looked up for it,
    over the group's model published with them (used by the API's thread alone)."""

    def __init__(self, group: NaiveBayes[Any, Any], prior_weight: float, held: int,
                 lookups: dict[str | int, KeyLookup]):
        self.group, self.prior_weight, self.held, self.lookups = group, prior_weight, held, lookups
        self._pseudo: PseudoCounts | None = None

    def described(self) -> dict[str, Any]:
        return {"keys": self.held, "prior_weight": self.prior_weight}

    def model_of(self, key: str | int) -> tuple[NaiveBayes[Any, Any], int] | None:
        if not isinstance(key, str):
            raise RequestError(f"the parameter \"key\" names no key of this model: its keys are record keys, "
                               f"strings; got the integer {key}.")
        lookup = self.lookups.get(key)
        if lookup is None:
            return None
        if lookup.failure is not None:
            raise NotReady(f"the key {key[:80]!r} could not be read back from the keys topic ({lookup.failure}).")
        if lookup.cells is not None:
            family = cast(FeatureCountsNB[Any], self.group)
            if self._pseudo is None:
                self._pseudo = pseudo_counts(family, self.prior_weight)
            return key_model(family, lookup.cells, lookup.examples, self._pseudo), lookup.examples
        if lookup.elsewhere:
            raise NotFound(f"the key {key[:80]!r} is in none of the partitions this replica owns "
                           f"({list(lookup.owned)}); partitions {list(lookup.elsewhere)} are other replicas': ask "
                           f"the replica that owns the key's partition.")
        return self.group, 0

    def answering(self, lookups: dict[str | int, KeyLookup]) -> CommittedKeys:
        """These keys with more looked up at a later publication of the same state."""
        return CommittedKeys(self.group, self.prior_weight, self.held, {**self.lookups, **lookups})
