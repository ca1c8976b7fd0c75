"""The partition states of a group as this replica sees them: its own, live; the others', as committed.

The state topic is read from the beginning when a session starts and followed from then on
(read_committed). When partitions are assigned, each one's latest committed state is taken
over (or a fresh one made) and reading resumes at its next offset; revoked partitions are
committed by the caller first, then released. The base state, when there is one, is a model
the group started from (--init-model, or a snapshot folder of an earlier version).

A record of the state topic the service did not write, or cannot read, is skipped with a
warning (and counted in ``nbstream_state_records_skipped_total``); its partition keeps its
last state that reads. A state that reads but was learned with another model or other
features is a ConfigError: the service's options, not the record, are then in question.

A partition's pending examples (delayed labels) are records of their own, named after its
state (``pending_records.py``). They are kept as read, compressed, until tombstones delete
them, since any replica may take the partition over; a state is taken only if every chunk
record it lists is there, and its store is restored from them when its partition is assigned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

import nbstream
from nbstream.arrow import CategoricalEncoder, FeatureEncoder

from ..errors import ConfigError
from ..io.kafka.client import KafkaFailure, Reader, Start
from ..io.kafka.state_topic import ForeignRecord, StateAssembler
from .global_model import GlobalModel
from .partition.record import PartitionState, UnreadableState, partition_number
from .pending.records import PendingRecords, pending_name, pending_of
from .pending.store import PendingExamples
from .telemetry.metrics import STATE_RECORDS_SKIPPED

log = logging.getLogger(__name__)
BASE = "base"
_KEY_SHOWN = 100  # characters of a skipped record's key in its log line


def state_name(partition: int) -> str:
    return f"partition-{partition}"


def partition_of(name: str) -> int | None:
    prefix, separator, number = name.partition("-")
    return partition_number(number) if prefix == "partition" and separator else None


def is_state_name(name: str) -> bool:
    """Whether the service writes states under this name: the base, a partition's, or a chunk of a
    partition's pending examples."""
    pending = pending_of(name)
    return name == BASE or partition_of(name if pending is None else pending[0]) is not None


class StateFollower:
    """Reads the state topic from its beginning and keeps following it."""

    def __init__(self, reader: Reader, topic: str):
        self.reader, self.topic = reader, topic
        self.assembler = StateAssembler(on_skip=self.skipped, is_name=is_state_name)
        self.bytes_read = 0
        reader.assign(topic)

    def poll(self, timeout_s: float = 0.0) -> list[str]:
        """Names whose newest state became complete in what was read now (the base's and
        partitions'; the records of pending examples are kept until a partition is taken over)."""
        completed = []
        for record in self.reader.poll(timeout_s):
            self.bytes_read += len(record.value or b"")
            name = self.assembler.add(record.key, record.value)
            if name is not None and pending_of(name) is None:
                completed.append(name)
        return completed

    def catch_up(self, timeout_s: float) -> list[str]:
        """Read to the end of the topic (its last stable offset); names completed on the way."""
        deadline = time.monotonic() + timeout_s
        completed = self.poll(0.2)
        while not self.reader.caught_up():
            if time.monotonic() > deadline:
                raise KafkaFailure(f"the state topic {self.topic} could not be read to its end within {timeout_s:.0f}s")
            completed += self.poll(0.2)
        return completed

    def take(self, name: str, fresh_model: nbstream.base.NaiveBayes) -> tuple[PartitionState, FeatureEncoder] | None:
        """The newest state of ``name`` that reads, and the feature encoder it was learned with
        (``fresh_model`` is its model if it learned nothing); None when no state of ``name`` that
        reads came since the last take. Each newer one that does not is skipped."""

        def read(payload: bytes) -> tuple[PartitionState, FeatureEncoder]:
            try:
                state, encoder = PartitionState.from_payload(payload, fresh_model, name)
            except UnreadableState as error:
                raise ForeignRecord(unreadable(error.reason)) from None
            records = state.pending_records
            missing = [] if records is None else [segment for segment, digest in records.digests.items()
                                                   if not self.assembler.holds(pending_name(name, segment), digest)]
            if missing:
                raise ForeignRecord(unreadable(f"pending examples: the records of chunks {sorted(missing)[:5]} "
                                               "it lists are not in the topic"))
            return state, encoder

        return self.assembler.take(name, read)

    def pending_in_topic(self, name: str) -> dict[str, frozenset[bytes]]:
        """The records of the pending examples of the state ``name`` read so far: segment -> chunk keys."""
        found = {}
        for record_name in self.assembler.names(pending_name(name, "")):
            pending = pending_of(record_name)
            if pending is not None and pending[0] == name:
                found[pending[1]] = self.assembler.chunk_keys(record_name)
        return found

    def read_pending(self, name: str, segment: str, digest: str) -> bytes:
        """The bytes of one chunk of the pending examples of the state ``name``, from its record of
        that digest (which stays, for another take-over). Raises ForeignRecord when it is not there
        or does not read."""
        return self.assembler.read(pending_name(name, segment), digest)

    def drop(self, name: str) -> None:
        """Forget the states of ``name`` read so far without reading them."""
        self.assembler.drop(name)

    def skipped(self, key: str, problem: str) -> None:
        """Report a record passed over: one warning line, counted."""
        shown = key if len(key) <= _KEY_SHOWN else f"{key[:_KEY_SHOWN]}... ({len(key):,} characters)"
        log.warning("skipped a state-topic record the service did not write or cannot read",
                    extra={"topic": self.topic, "key": shown, "problem": problem})
        STATE_RECORDS_SKIPPED.inc()


def unreadable(reason: str) -> str:
    """The problem a skipped partition state is reported with."""
    return f"unreadable partition state ({reason})"


class GroupState:
    """fresh() : an unfitted model with the configured parameters; encoder : the configured encoder;
    max_pending : the most pending examples each owned partition keeps (delayed labels), None
        when the service keeps none (the pending records a partition has in the topic are then
        tombstoned at its next commit)."""

    def __init__(self, fresh: Callable[[], nbstream.base.NaiveBayes], global_model: GlobalModel,
                 follower: StateFollower, start: str = "earliest", max_pending: int | None = None):
        self.fresh, self.global_model, self.follower, self.start = fresh, global_model, follower, start
        self.max_pending = max_pending
        self.owned: dict[int, PartitionState] = {}
        self.latest: dict[int, PartitionState] = {}  # newest committed state of partitions not owned
        self.base: PartitionState | None = None
        self.chunk_keys: dict[str, frozenset[bytes]] = {}

    # ---- reading ----------------------------------------------------------------------------
    def take_updates(self, names: list[str]) -> None:
        """Decode the newly completed states of partitions this replica does not own."""
        for name in dict.fromkeys(names):
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
            self.global_model.invalidate()

    def _adopt(self, name: str, state: PartitionState, encoder: FeatureEncoder) -> PartitionState:
        """A state read from the topic, once it is known to fit this service's configuration (a
        ConfigError when it was learned with another model or other features)."""
        source = f"state topic {self.follower.topic}, {name}"
        fresh = self.fresh()
        if state.model.is_fitted and (type(state.model) is not type(fresh) or state.model.differing_params(fresh)):
            raise ConfigError(f"{source} holds a {state.model!r}; this service is configured for {fresh!r}. "
                              "Serve with the same model options, or use a new --group.")
        configured = self.global_model.encoder
        if isinstance(configured, CategoricalEncoder):
            state.encoder = encoder
        elif configured.n_features is None and encoder.n_features is not None:
            self.global_model.encoder = encoder  # a list width learned by another replica
        elif not configured.same_layout(encoder) and encoder.n_features is not None:
            raise ConfigError(f"{source} was learned with features {encoder.describe()}; this service is configured "
                              f"for {configured.describe()}. Use the same feature options, or a new --group.")
        return state

    def states(self) -> list[PartitionState]:
        """Every state the global model merges: the base, the others' committed ones, the owned ones."""
        others = [state for p, state in self.latest.items() if p not in self.owned]
        return ([self.base] if self.base else []) + others + list(self.owned.values())

    # ---- assignment -----------------------------------------------------------------------
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
            warning (its state topic was deleted, say).
        """
        self.take_updates(self.follower.catch_up(timeout_s=max(wait_s, 30.0)))
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
        starts: dict[int, Start] = {}
        for partition in partitions:
            state = self.latest.pop(partition, None)
            if state is not None:
                state = self._with_pending(state_name(partition), state)
            if partition in behind and state is not None:
                log.warning("a partition's state is behind its committed offset: continuing from the state, so "
                            "some predictions may repeat", extra={"partition": partition, "committed":
                                                                  committed.get(partition),
                                                                  "state_offset": state and state.next_offset})
            if state is None:
                state = PartitionState(self.fresh(), self._own_encoder())
                if committed.get(partition) is not None:
                    log.warning("a partition has a committed offset but no state: starting it afresh",
                                extra={"partition": partition, "committed": committed[partition],
                                       "start": self._default_start(partition)})
                self._with_pending(state_name(partition), state)
            self.chunk_keys[state_name(partition)] = self.follower.assembler.chunk_keys(state_name(partition))
            self.owned[partition] = state
            starts[partition] = state.next_offset if state.next_offset is not None else self._default_start(partition)
        self.global_model.invalidate()
        return starts

    def _with_pending(self, name: str, state: PartitionState) -> PartitionState | None:
        """The state with its pending examples as the service keeps them: restored from their
        records, kept (a live state this replica released), a new store, or none. None when they
        do not restore: the state is then unreadable, reported as one skipped."""
        records = state.pending_records or PendingRecords()
        if self.max_pending is None:
            state.pending, records = None, PendingRecords()  # it lists nothing: every record is stale
        elif state.pending is None and state.pending_records is None:
            state.pending = PendingExamples(self.max_pending)
        elif state.pending is None:
            try:
                state.pending = records.restore(partial(self.follower.read_pending, name), self.max_pending)
            except ValueError as error:  # ForeignRecord too: a record missing or forged
                self.follower.skipped(name, unreadable(str(error)[:300]))
                return None
        records.found(self.follower.pending_in_topic(name))
        state.pending_records = records if state.pending is not None or records.stale else None
        return state

    def _behind(self, partition: int, committed: int | None) -> bool:
        """Whether the partition has a committed offset its known state (if any) has not reached."""
        state = self.latest.get(partition)
        offset = None if state is None else state.next_offset
        return committed is not None and (offset is None or offset < committed)

    def _default_start(self, partition: int):
        if self.base is not None and partition in self.base.starts:
            return self.base.starts[partition]
        return self.start

    def _own_encoder(self) -> FeatureEncoder | None:
        encoder = self.global_model.encoder
        return encoder.spec.encoder() if isinstance(encoder, CategoricalEncoder) else None

    def start_from(self, base: PartitionState) -> None:
        """A new group's starting model, once it is committed to the state topic."""
        self.base = base
        self.global_model.invalidate()

    def release(self, partitions: list[int]) -> None:
        """Stop owning these partitions (after committing them); their states become the latest known."""
        for partition in partitions:
            state = self.owned.pop(partition, None)
            if state is not None:
                self.latest[partition] = state
        self.global_model.invalidate()

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
