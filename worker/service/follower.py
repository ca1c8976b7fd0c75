"""The state topic as a replica reads it: from its beginning when a session starts, then followed.

Every record is assembled into the newest state of its name (``state_topic.StateAssembler``):
the base (a model the group started from), a partition's state, a chunk of a partition's
pending examples (``pending/records.py``), or the group's choice of its served model
(``models/choice.py``). A record the service did not write, or cannot read,
is skipped with a warning and counted in ``nbstream_state_records_skipped_total``; its partition
keeps its last state that reads.

Two things are not skipped. A state of a newer state format version than this release reads
(``state_topic.STATE_FORMAT``) is the group's, written by a newer release: once a read (the
whole topic when catching up, a poll when following) ends with one, the follower raises
``NewerStateFormat`` (a ConfigError: `worker serve` and `worker export` end with one line and
exit status 2) before anything is taken from the read, let alone written. And a partition state
whose manifest and chunks read but whose payload or pending examples do not is remembered
(``unreadable_states``): the group refuses to start such a partition afresh when the group has
committed offsets for it (``group_state.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from nbstream.arrow import FeatureEncoder
from nbstream.naive_bayes import NaiveBayes

from ..io.kafka.client import KafkaFailure, Reader
from ..io.kafka.state_topic import ForeignRecord, NewerStateFormat, StateAssembler
from ..io.records import RecordLike
from .models.choice import SERVED_MODEL, ServedChoice
from .partition.record import PartitionRecord, UnreadableState, partition_number
from .pending.records import pending_name, pending_of
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
    """Whether the service writes states under this name: the base, a partition's, a chunk of a
    partition's pending examples, or the group's choice of its served model."""
    pending = pending_of(name)
    return name in (BASE, SERVED_MODEL) or partition_of(name if pending is None else pending[0]) is not None


class StateFollower:
    """Reads the state topic from its beginning and keeps following it.

    reopen() : a new reader of the topic, to read again the chunks of pending examples of the
        partitions being taken over: without it they are kept as read; with it only their sizes
        are, so that a replica's memory does not grow with the group's pending examples.
    keys_topic : where the partitions' keys are (--model-key; ``keys/records.py``), read from the
        partitions being taken over (``fetch_keys``), and a key's record read back by its offset
        (``fetch_key_records``, --max-keys)."""

    def __init__(self, reader: Reader, topic: str, reopen: Callable[[], Reader] | None = None,
                 keys_topic: str | None = None):
        self.reader, self.topic, self._reopen, self._keys_topic = reader, topic, reopen, keys_topic
        self._key_reader: Reader | None = None  # (kept open: keys are read back at every poll that needs them)
        self.assembler = StateAssembler(on_skip=self.skipped, is_name=is_state_name,
                                        holds_bytes=lambda name: reopen is None or pending_of(name) is None)
        self._fetched: StateAssembler | None = None  # pending chunks read again for a take-over
        self.bytes_read = 0
        # partition states whose manifest and chunks read but whose payload or pending examples did
        # not, with why: the newest of its name, when none that reads came after it
        self.unreadable_states: dict[str, str] = {}
        reader.assign(topic)

    def poll(self, timeout_s: float = 0.0) -> list[str]:
        """Names whose newest state became complete in what was read now (the base's and
        partitions'; the records of pending examples are kept until a partition is taken over).
        Raises NewerStateFormat when the newest state of a name is of a newer format version."""
        completed = self._read(timeout_s)
        self._refuse_newer()
        return completed

    def _refuse_newer(self) -> None:
        newer = self.assembler.newer()
        if newer:
            raise NewerStateFormat(self.topic, newer)

    def _read(self, timeout_s: float) -> list[str]:
        completed = []
        for record in self.reader.poll(timeout_s):
            self.bytes_read += len(record.value or b"")
            if record.value is None and record.key is not None:  # a state deleted is no longer unreadable
                self.unreadable_states.pop(record.key.decode("utf-8", "replace"), None)
            name = self.assembler.add(record.key, record.value)
            if name is not None and pending_of(name) is None:
                completed.append(name)
        return completed

    def catch_up(self, timeout_s: float) -> list[str]:
        """Read to the end of the topic (its last stable offset); names completed on the way.
        Raises NewerStateFormat when, at the end, the newest state of a name is of a newer format
        version (one a later record replaced is no matter)."""
        completed = _read_to_end(self.reader, self._read, self.topic, timeout_s)
        self._refuse_newer()
        return completed

    def fetch_pending(self, states: list[str], timeout_s: float) -> None:
        """Read again, from the topic, the chunks of pending examples of these states (of the
        partitions being taken over), until ``forget_fetched``."""
        wanted = {name for state in states for name in self.assembler.names(pending_name(state, ""))}
        if self._reopen is None or not wanted:
            return
        fetched = StateAssembler(is_name=wanted.__contains__)
        reader = self._reopen()
        try:
            reader.assign(self.topic)

            def poll(timeout: float) -> list[str]:
                for record in reader.poll(timeout):
                    fetched.add(record.key, record.value)
                return []
            _read_to_end(reader, poll, self.topic, timeout_s)
        finally:
            reader.close()
        self._fetched = fetched

    def fetch_keys(self, partitions: list[int], timeout_s: float,
                   offsets: dict[int, dict[bytes, int]] | None = None) -> dict[str, dict[bytes, bytes]]:
        """The records of the keys of these partitions (being taken over), read from their partitions of
        the keys topic: state name -> {record key: its newest value} (the names are read when the
        keys are restored: a partition of the keys topic holds its input partition's keys only);
        ``offsets`` is given the offset of each (partition -> {record key: offset})."""
        if not partitions:
            return {}
        if self._reopen is None or self._keys_topic is None:
            raise KafkaFailure("the keys of a partition are read from the keys topic by a reader of their own")
        found = newest_records(self._reopen(), self._keys_topic, timeout_s, partitions, offsets=offsets)
        return {state_name(p): found.get(p, {}) for p in partitions}

    def fetch_key_records(self, partition: int, offsets: list[int], timeout_s: float) -> dict[int, RecordLike]:
        """The records at these offsets of the keys topic's partition ``partition`` (keys read back
        into memory, --max-keys): offset -> record. KafkaFailure when one is not read within timeout_s."""
        if self._reopen is None or self._keys_topic is None:
            raise KafkaFailure("the keys of a partition are read from the keys topic by a reader of their own")
        if self._key_reader is None:
            self._key_reader = self._reopen()
        return records_at(self._key_reader, self._keys_topic, partition, offsets, timeout_s)

    def close(self) -> None:
        """Close its readers."""
        try:
            if self._key_reader is not None:
                self._key_reader.close()
                self._key_reader = None
        finally:
            self.reader.close()

    def forget_fetched(self) -> None:
        self._fetched = None

    def take(self, name: str,
             fresh_model: NaiveBayes[Any, Any]) -> tuple[PartitionRecord, FeatureEncoder] | None:
        """The newest state of ``name`` that reads, and the feature encoder it was learned with
        (``fresh_model`` is its model if it learned nothing); None when no state of ``name`` that
        reads came since the last take. Each newer one that does not is skipped."""

        def read(payload: bytes) -> tuple[PartitionRecord, FeatureEncoder]:
            try:
                state, encoder = PartitionRecord.from_payload(payload, fresh_model, name)
            except UnreadableState as error:
                self.unreadable_states[name] = error.reason
                raise ForeignRecord(unreadable(error.reason)) from None
            records = state.pending_records
            missing = [] if records is None else [segment for segment, digest in records.digests.items()
                                                   if not self.assembler.holds(pending_name(name, segment), digest)]
            if missing:
                reason = f"pending examples: the records of chunks {sorted(missing)[:5]} it lists are not in the topic"
                self.unreadable_states[name] = reason
                raise ForeignRecord(unreadable(reason))
            self.unreadable_states.pop(name, None)
            return state, encoder

        return self.assembler.take(name, read)

    def take_choice(self) -> ServedChoice | None:
        """The group's newest choice of its served model that reads, when one came since the last take."""

        def read(payload: bytes) -> ServedChoice:
            try:
                return ServedChoice.from_payload(payload)
            except ValueError as error:
                raise ForeignRecord(f"unreadable choice of the served model ({error})") from None

        return self.assembler.take(SERVED_MODEL, read)

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
        record = pending_name(name, segment)
        if self._fetched is not None and not self.assembler.holds_bytes_of(record, digest):
            return self._fetched.read(record, digest)
        return self.assembler.read(record, digest)

    def drop(self, name: str) -> None:
        """Forget the states of ``name`` read so far without reading them."""
        self.assembler.drop(name)

    def unreadable_state(self, name: str, reason: str) -> None:
        """Report the state ``name`` as one whose payload or pending examples do not read (skipped, and remembered)."""
        self.unreadable_states[name] = reason
        self.skipped(name, unreadable(reason))

    def skipped(self, key: str, problem: str) -> None:
        """Report a record passed over: one warning line, counted."""
        shown = key if len(key) <= _KEY_SHOWN else f"{key[:_KEY_SHOWN]}... ({len(key):,} characters)"
        log.warning("skipped a state-topic record the service did not write or cannot read",
                    extra={"topic": self.topic, "key": shown, "problem": problem})
        STATE_RECORDS_SKIPPED.inc()


def newest_records(reader: Reader, topic: str, timeout_s: float, partitions: list[int] | None = None,
                   wanted: Callable[[bytes], bool] | None = None, offsets: dict[int, dict[bytes, int]] | None = None
                   ) -> dict[int, dict[bytes, bytes]]:
    """The newest value of each record key of ``topic`` (of those ``partitions``, default all; of the
    keys ``wanted`` takes, default all) read to its end by ``reader``, which is closed after:
    partition -> {record key: value}; a tombstone deletes its key. ``offsets`` is given each
    value's offset (partition -> {record key: offset})."""
    found: dict[int, dict[bytes, bytes]] = {}
    where = {} if offsets is None else offsets
    try:
        reader.assign(topic, partitions=partitions)

        def poll(timeout: float) -> list[str]:
            for record in reader.poll(timeout):
                key = record.key
                if key is None or (wanted is not None and not wanted(key)):
                    continue
                kept = found.setdefault(record.partition, {})
                if record.value is None:
                    kept.pop(key, None)
                    where.get(record.partition, {}).pop(key, None)
                else:
                    kept[key] = record.value
                    where.setdefault(record.partition, {})[key] = record.offset
            return []
        _read_to_end(reader, poll, topic, timeout_s)
    finally:
        reader.close()
    return found


GAP_READ_THROUGH = 10_000  # offsets closer than this to the position are read through, not sought


def records_at(reader: Reader, topic: str, partition: int, offsets: list[int], timeout_s: float
               ) -> dict[int, RecordLike]:
    """The records at ``offsets`` of one partition of ``topic`` (read_committed: of committed
    transactions), read by ``reader`` from the first, seeking past wide gaps: offset -> record.
    KafkaFailure when one is not read within timeout_s (the topic has no record there)."""
    missing, found = sorted(set(offsets)), {}
    deadline = time.monotonic() + timeout_s
    position: int | None = None
    while missing:
        if position is None or missing[0] - position > GAP_READ_THROUGH or position > missing[0]:
            reader.assign_at(topic, {partition: missing[0]})  # (a record passed and not read: not committed)
            position = missing[0]
        wanted = set(missing)
        for record in reader.poll(0.2):
            position = record.offset + 1
            if record.offset in wanted and record.partition == partition:
                found[record.offset] = record
        missing = [offset for offset in missing if offset not in found]
        if missing and time.monotonic() > deadline:
            raise KafkaFailure(f"the keys topic {topic} has no record at offsets {missing[:5]} of partition "
                               f"{partition} (read within {timeout_s:.0f}s)")
    return found


def unreadable(reason: str) -> str:
    """The problem a skipped partition state is reported with."""
    return f"unreadable partition state ({reason})"


def _read_to_end(reader: Reader, poll: Callable[[float], list[str]], topic: str, timeout_s: float) -> list[str]:
    """Poll until the reader has read its topic to the end (its last stable offset)."""
    deadline = time.monotonic() + timeout_s
    completed = poll(0.2)
    while not reader.caught_up():
        if time.monotonic() > deadline:
            raise KafkaFailure(f"the state topic {topic} could not be read to its end within {timeout_s:.0f}s")
        completed += poll(0.2)
    return completed
