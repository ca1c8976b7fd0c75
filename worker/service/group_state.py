"""The partition states of a group as this replica sees them: its own, live; the others', as committed.

The state topic is read from the beginning when a session starts and followed from then on
(``follower.py``). When partitions are assigned, each one's latest committed state is taken
over (or a fresh one made) as a live ``Partition``, and reading resumes at its next offset;
revoked partitions are committed by the caller first, then released. The base state, when
there is one, is a model the group started from (--init-model, or a snapshot folder of an
earlier version).

A state that reads but was learned with another model or other features is a ConfigError:
the service's options, not the record, are then in question. So is, when it is assigned, a
partition the group committed offsets for whose state is in the topic but does not read (its
payload, or its pending examples: a state another version wrote, say): it is not started afresh,
which would replace that state and, from earliest, predict its messages again. States of a newer
state format version end the service before that, when read (``follower.py``).

A partition's pending examples (delayed labels) are records of their own, named after its
state (``pending/records.py``); a state is taken only if every chunk record it lists is there,
and its store is restored from them when its partition is assigned.

The group's model of each name (``GlobalModels``: the served model and its challengers,
``Lineup``) is the merge of that model's statistics in ``states()``; ``version()`` tells them
when to merge again. Which one serves is the group's choice (``choice``, ``models/choice.py``):
this replica's promotions, written by the next commit, and the newest choice read from the
topic. A state that holds models of other names than this run's (challengers added or removed
since) is taken with one model per name of this run: a new one starts empty and a removed one
is dropped, each said once in a log line; a model whose kind or parameters changed under its
name is a ConfigError.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from nbstream.arrow import CategoricalEncoder, FeatureEncoder
from nbstream.metrics.quality import PredictionQuality
from nbstream.naive_bayes import NaiveBayes
from nbstream.stats.keyed_counts import KeyedCounts
from nbstream.utils.ndarrays import AnyArray

from ..errors import ConfigError
from ..io.kafka.client import KafkaFailure, Start
from .follower import StateFollower, partition_of, state_name
from .global_model import GlobalModel
from .keys.bound import KeyBound
from .keys.records import PartitionKeys, restore_keys
from .models.choice import SERVED_MODEL, GroupChoice
from .models.global_models import GlobalModels, HoldsModels
from .models.lineup import Lineup
from .models.promotion import PromotionWatch
from .partition.drift_watch import DriftConfig
from .partition.partition import Partition
from .partition.record import PartitionRecord
from .pending.codec import ModelsKept
from .pending.join import LabelsConfig
from .pending.records import PendingRecords
from .pending.store import PendingExamples

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionSettings:
    """What every owned partition is given.

    classes : a fixed class set (None: open); labels : labels that come later (None: no labels
        topic, and no pending examples: the pending records a partition has in the topic are then
        tombstoned at its next commit); drift : how errors are watched (None: not watched);
    key_prior_weight : the group keeps a model per key (--model-key), each partition its keys'
        counts, backed off by this weight (None: it keeps none); max_keys : the most keys whose
        counts the replica keeps in memory (--max-keys; None: every key)."""
    classes: AnyArray | list[Any] | None = None
    labels: LabelsConfig | None = None
    drift: DriftConfig | None = None
    key_prior_weight: float | None = None
    max_keys: int | None = None


class GroupState:
    """fresh() : an unfitted model with the configured parameters; encoder : the configured
    encoder; start : where a partition without state starts (earliest, latest); lineup : the
    models learned beside the one ``fresh`` makes (default: none); referee : told of every
    judgement of the owned partitions, to promote a challenger (None: none is)."""

    def __init__(self, fresh: Callable[[], NaiveBayes[Any, Any]], encoder: FeatureEncoder, follower: StateFollower,
                 start: str = "earliest", settings: PartitionSettings | None = None, lineup: Lineup | None = None,
                 referee: PromotionWatch | None = None):
        self.fresh, self.follower, self.start = fresh, follower, start
        self.settings = settings or PartitionSettings()
        self.lineup = lineup or Lineup()
        self.models = GlobalModels(self.lineup, fresh, encoder, self, self.settings.classes)
        self.choice = GroupChoice(self.models, referee)
        self._referee = referee
        self._said: set[str] = set()  # the models whose absence or removal was said
        self._encoder = encoder  # the configured one: a categorical partition's own starts from its spec
        self.owned: dict[int, Partition] = {}
        self.latest: dict[int, PartitionRecord] = {}  # newest committed state of partitions not owned
        self.key_bound = KeyBound(self.settings.max_keys, follower.fetch_key_records) \
            if self.settings.key_prior_weight is not None and self.settings.max_keys is not None else None
        self.base: PartitionRecord | None = None
        self._written: dict[str, frozenset[bytes]] = {}  # a state's name -> the keys of its records in the topic
        self._membership = 0  # grows whenever states() would give other states

    @property
    def global_model(self) -> GlobalModel:
        """The served model's global model: the one whose predictions are sent."""
        return self.models.served_model

    # ---- what the global models merge -------------------------------------------------------
    def states(self) -> list[HoldsModels]:
        """Every state the global models merge: the base, the others' committed ones, the owned ones."""
        others: list[HoldsModels] = [state for p, state in self.latest.items() if p not in self.owned]
        return ([self.base] if self.base else []) + others + list(self.owned.values())

    def version(self) -> Hashable:
        return self._membership, sum(partition.revision for partition in self.owned.values())

    # ---- reading ----------------------------------------------------------------------------
    def take_updates(self, names: list[str]) -> None:
        """Decode the newly completed states of partitions this replica does not own."""
        for name in dict.fromkeys(names):
            if name == SERVED_MODEL:
                self.choice.adopt(self.follower.take_choice())
                continue
            partition = partition_of(name)
            if partition is not None and partition in self.owned:
                self.follower.drop(name)  # its own state read back: the live one is newer
                continue
            taken = self.follower.take(name, self.fresh())
            if taken is None:
                continue
            state = self._adopt(name, *taken)
            if partition is None:
                self.base = state
            else:
                self.latest[partition] = state
            self._membership += 1

    def _adopt(self, name: str, state: PartitionRecord, encoder: FeatureEncoder) -> PartitionRecord:
        """A state read from the topic, once it is known to fit this service's configuration (a
        ConfigError when it was learned with another model or other features)."""
        source = f"state topic {self.follower.topic}, {name}"
        self._check_models(source, state)
        configured = self.global_model.group_encoder
        if isinstance(configured, CategoricalEncoder):
            return replace(state, encoder=encoder)
        if configured.n_features is None and encoder.n_features is not None:
            self.models.adopt_width(encoder)  # a list width learned by another replica
        elif not configured.same_layout(encoder) and encoder.n_features is not None:
            raise ConfigError(f"{source} was learned with features {encoder.describe()}; this service is configured "
                              f"for {configured.describe()}. Use the same feature options, or a new --group.")
        return state

    def _check_models(self, source: str, state: PartitionRecord) -> None:
        """A ConfigError when the state learned a model of this run's names with other settings; the
        first state without a model of this run, or with a model of no name of this run, says so."""
        differing = self.lineup.differing(state, self.fresh)
        if differing is not None:
            name, learned, configured = differing
            if not self.lineup.challengers and not state.others:
                raise ConfigError(f"{source} holds a {learned!r}; this service is configured for {configured!r}. "
                                  "Serve with the same model options, or use a new --group.")
            raise ConfigError(f"{source} holds the model {name} as {learned!r}; this service is configured for "
                              f"{configured!r} under that name. A model's settings do not change under its name: "
                              "give the new ones another name, or use a new --group.")
        for name in set(self.lineup.names).symmetric_difference(state.names) - self._said:
            self._said.add(name)
            if name in self.lineup.names:
                log.info("a model starts empty: the group's states hold none of its name", extra={"model": name})
            else:
                log.info("a model the group learned is no longer given: dropped", extra={"model": name})

    # ---- assignment -------------------------------------------------------------------------
    def assign(self, partitions: list[int], committed: dict[int, int | None], *, wait_s: float,
               strict: bool) -> dict[int, Start]:
        """Take over these partitions; returns where each starts reading.

        committed : the group's committed offsets. Under exactly-once they were committed in the
            same transaction as the state, so a state behind its committed offset, or missing, is
            one not visible yet: hidden by an open transaction on the state topic (a replica that
            died mid-commit; the broker aborts it within the transaction timeout), or committed a
            moment ago (the group's offsets can become visible before the state topic's commit
            marker is written). Wait up to ``wait_s`` for it.
        strict : never continue from a state behind its committed offset (exactly-once: that would
            repeat predictions); raise KafkaFailure instead, for a new session to try again. A
            partition with a committed offset and still no state at all starts afresh, with a
            warning (its state topic was deleted, say); one whose state is in the topic but does
            not read (its payload or pending examples) is a ConfigError, strict or not: starting
            it afresh would replace that state, and from earliest predict its messages again.
        """
        self.take_updates(self.follower.catch_up(timeout_s=max(wait_s, 30.0)))
        for partition in partitions:  # a state in the topic that does not read is not one to wait for
            offset = committed.get(partition)
            if partition not in self.latest and offset is not None:
                self._refuse_unreadable(partition, offset)
        deadline, waited = time.monotonic() + wait_s, False
        while any(self._behind(p, committed.get(p)) for p in partitions) and time.monotonic() < deadline:
            if not waited:
                log.info("waiting for an open transaction on the state topic to end: a replica that died "
                         "mid-commit; the broker aborts it within the transaction timeout",
                         extra={"partitions": [p for p in partitions if self._behind(p, committed.get(p))]})
                waited = True
            self.take_updates(self.follower.poll(0.5))
        behind = [p for p in partitions if self._behind(p, committed.get(p)) and p in self.latest]
        if behind and strict:
            raise KafkaFailure(f"the states of partitions {behind} are still behind their committed offsets after "
                               f"{wait_s:.0f}s (an open transaction on the state topic)")
        if self.settings.labels is not None:
            self.follower.fetch_pending([state_name(p) for p in partitions if p in self.latest], max(wait_s, 30.0))
        key_offsets: dict[int, dict[bytes, int]] = {}
        key_records = self._key_records(partitions, max(wait_s, 30.0), key_offsets)
        starts: dict[int, Start] = {}
        for partition in partitions:
            record = self._with_keys(self._taken_over(partition, committed.get(partition), partition in behind),
                                     key_records.get(state_name(partition), {}), strict)
            if self.key_bound is not None and record.keys is not None:
                self.key_bound.adopt(record.keys, state_name(partition), key_offsets.get(partition, {}))
            self.owned[partition] = owned = Partition(partition, self.lineup.aligned(record, self.fresh), self.models,
                                                      drift=self.settings.drift, labels=self.settings.labels,
                                                      referee=self._referee)
            name = state_name(partition)
            self._written[name] = self.follower.assembler.chunk_keys(name)
            starts[partition] = owned.next_offset if owned.next_offset is not None \
                else self._default_start(partition)
        self.follower.forget_fetched()
        self._membership += 1
        return starts

    def _taken_over(self, partition: int, committed: int | None, behind: bool) -> PartitionRecord:
        """The partition's newest state with its pending examples restored (or a new state)."""
        name = state_name(partition)
        record = self.latest.pop(partition, None)
        if record is not None:
            record = self._with_pending(name, record)
        if behind and record is not None:
            log.warning("a partition's state is behind its committed offset: continuing from the state, so "
                        "some predictions may repeat", extra={"partition": partition, "committed": committed,
                                                              "state_offset": record.next_offset})
        if record is None:
            if committed is not None:
                self._refuse_unreadable(partition, committed)
                log.warning("a partition has a committed offset but no state: starting it afresh, so the messages "
                            "before its committed offset may be predicted again",
                            extra={"partition": partition, "committed": committed,
                                   "start": self._default_start(partition)})
            record = self._with_pending(name, PartitionRecord(self.fresh(), self._own_encoder()))
            assert record is not None, "a new state has no pending records to fail to restore"
        return record

    def keys_held(self) -> int:
        """Keys whose counts the owned partitions hold in memory (--model-key)."""
        return sum(len(partition.keys.counts) for partition in self.owned.values() if partition.keys is not None)

    def keys_evicted(self) -> int:
        """Keys of the owned partitions out of memory (--max-keys): their counts are in the keys topic."""
        return sum(len(partition.keys.memory.evicted) for partition in self.owned.values()
                   if partition.keys is not None and partition.keys.memory is not None)

    def keys_committed(self) -> int:
        """After a commit that succeeded: the keys beyond --max-keys leave memory; how many."""
        if self.key_bound is None:
            return 0
        return self.key_bound.after_commit({number: partition.keys for number, partition in self.owned.items()
                                            if partition.keys is not None})

    def keys_in_memory(self, partition: int, keys: list[str]) -> None:
        """Read back those of these keys of an owned partition that are out of memory (--max-keys)."""
        owned = self.owned[partition].keys
        if self.key_bound is None or owned is None:
            return
        wanted = owned.out_of_memory(keys)
        if wanted:
            self.key_bound.read_back(partition, owned, wanted)

    def keys_used(self, partition: int, keys: list[str]) -> None:
        """These keys of an owned partition were just used (--max-keys: the most recently)."""
        owned = self.owned[partition].keys
        if owned is not None:
            owned.touch(keys)

    def keys_dropped(self) -> int:
        """Keys the owned partitions dropped (--key-ttl) since they were taken over."""
        return sum(partition.keys.drops for partition in self.owned.values() if partition.keys is not None)

    def _key_records(self, partitions: list[int], timeout_s: float,
                     offsets: dict[int, dict[bytes, int]]) -> dict[str, dict[bytes, bytes]]:
        """The key records of the partitions taken over whose states list keys, read from the keys
        topic; ``offsets`` is given where each is."""
        listing = [p for p in partitions if p in self.latest and self.latest[p].keys is None
                   and self.latest[p].keys_header is not None]
        keyed = self.settings.key_prior_weight is not None
        return self.follower.fetch_keys(listing, timeout_s, offsets) if keyed and listing else {}

    def _with_keys(self, record: PartitionRecord, records: dict[bytes, bytes], strict: bool) -> PartitionRecord:
        """The record with its keys as the group keeps them: restored from their records, kept (a
        live state this replica released), new, or none (the group keeps no model per key). A
        ConfigError when they do not restore: starting them afresh would lose what they learned.
        strict : keys that do not add up to the state are refused (exactly-once), else taken."""
        weight = self.settings.key_prior_weight
        if weight is None:
            return replace(record, keys=None)
        if record.keys is not None:
            record.keys.prior_weight = weight
            return record
        n_features = record.model.n_features_in_ if record.model.is_fitted else 0
        if record.keys_header is None:
            return replace(record, keys=PartitionKeys(KeyedCounts(n_features), weight))
        try:
            return replace(record, keys=restore_keys(records, record.keys_header, n_features, weight, strict))
        except ValueError as error:
            raise ConfigError(f"state topic {self.follower.topic}: the keys of a partition's state do not restore "
                              f"({str(error)[:300]}). Serve the group with the nbstream version that wrote them, "
                              "or use a new --group.") from None

    def _refuse_unreadable(self, partition: int, committed: int) -> None:
        """A ConfigError when the partition, which the group committed offsets for, has a state in the
        topic that does not read (its payload or its pending examples): starting it afresh would
        replace that state at the next commit, and from earliest, predict its messages again."""
        name = state_name(partition)
        reason = self.follower.unreadable_states.get(name)
        if reason is None:
            return
        start = self._default_start(partition)
        again = ", and predict its messages again from the earliest" if start == "earliest" else ""
        raise ConfigError(f"state topic {self.follower.topic}, {name}: the group committed offset {committed:,} of "
                          f"partition {partition}, but its state does not read ({reason}); starting the partition "
                          f"afresh would replace that state{again}. Serve the group with the nbstream version that "
                          "wrote it, or use a new --group.")

    def _with_pending(self, name: str, record: PartitionRecord) -> PartitionRecord | None:
        """The record with its pending examples as the service keeps them: restored from their
        records, kept (a live state this replica released), a new store, or none. None when they
        do not restore: the state is then unreadable, reported as one skipped."""
        records = record.pending_records or PendingRecords()
        pending = record.pending
        max_pending = None if self.settings.labels is None else self.settings.labels.max_pending
        if max_pending is None:
            pending, records = None, PendingRecords()  # it lists nothing: every record is stale
        elif pending is None and record.pending_records is None:
            pending = PendingExamples(max_pending)
        elif pending is None:
            try:
                kept = ModelsKept(record.name, self.lineup.primary, tuple(self.lineup.challengers))
                pending = records.restore(partial(self.follower.read_pending, name), max_pending, kept)
            except ValueError as error:  # ForeignRecord too: a record missing or forged
                self.follower.unreadable_state(name, str(error)[:300])
                return None
        records.found(self.follower.pending_in_topic(name))
        return replace(record, pending=pending,
                       pending_records=records if pending is not None or records.stale else None)

    def _behind(self, partition: int, committed: int | None) -> bool:
        """Whether the partition has a committed offset its known state (if any) has not reached."""
        state = self.latest.get(partition)
        offset = None if state is None else state.next_offset
        return committed is not None and (offset is None or offset < committed)

    def _default_start(self, partition: int) -> Start:
        if self.base is not None and partition in self.base.starts:
            return self.base.starts[partition]
        return self.start

    def _own_encoder(self) -> FeatureEncoder | None:
        encoder = self._encoder
        return encoder.spec.encoder() if isinstance(encoder, CategoricalEncoder) else None

    def start_from(self, base: PartitionRecord) -> None:
        """A new group's starting model, once it is committed to the state topic."""
        self.base = base
        self._membership += 1

    def release(self, partitions: list[int]) -> None:
        """Stop owning these partitions (after committing them); their states become the latest known."""
        for partition in partitions:
            owned = self.owned.pop(partition, None)
            if owned is not None:
                self.latest[partition] = owned.record()
        self._membership += 1

    # ---- what the checkpoint writes ---------------------------------------------------------
    def written(self, name: str) -> frozenset[bytes]:
        """The keys of the records the state ``name`` has in the topic (its pieces), as last written or read."""
        return self._written.get(name, frozenset())

    def wrote(self, name: str, keys: frozenset[bytes]) -> None:
        """Record the keys the state ``name`` was just written under."""
        self._written[name] = keys

    def offsets(self) -> dict[int, int]:
        """The next offset of every owned partition that has processed something."""
        return {p: s.next_offset for p, s in self.owned.items() if s.next_offset is not None}

    def label_offsets(self) -> dict[int, int]:
        """The next labels-topic offset of every owned partition that has read a label."""
        return {p: s.labels_next_offset for p, s in self.owned.items() if s.labels_next_offset is not None}

    def label_starts(self, partitions: list[int]) -> dict[int, Start]:
        """Where each of these owned partitions starts reading the labels topic (after ``assign``):
        where its state stopped there, else where a partition without state starts."""
        starts: dict[int, Start] = {}
        for partition in partitions:
            offset = self.owned[partition].labels_next_offset
            starts[partition] = self.start if offset is None else offset
        return starts

    # ---- what the metrics show --------------------------------------------------------------
    def pending_examples(self) -> int:
        """Messages of the owned partitions waiting for their label."""
        return sum(partition.pending_examples for partition in self.owned.values())

    def quality_reports(self) -> Callable[[], tuple[dict[str, dict[str, Any]], dict[str, dict[int, dict[str, Any]]]]]:
        """Each model's prequential quality in the group (over every state known) and in each owned
        partition, by model name, as reports made when called (from the metrics server's thread:
        the qualities it reads are taken now, and allow being judged meanwhile)."""
        owned = {p: partition.qualities for p, partition in sorted(self.owned.items())}
        known = ([self.base] if self.base is not None else []) + \
            [state for p, state in self.latest.items() if p not in self.owned]

        group = {name: [found for found in (state.quality_of(name) for state in known) if found is not None]
                 + [qualities[name] for qualities in owned.values()] for name in self.lineup.names}

        def reports() -> tuple[dict[str, dict[str, Any]], dict[str, dict[int, dict[str, Any]]]]:
            return ({name: PredictionQuality.merged(qualities).report() for name, qualities in group.items()},
                    {name: {p: qualities[name].report() for p, qualities in owned.items()} for name in group})
        return reports
