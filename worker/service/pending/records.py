"""One partition's pending examples as records of the state topic, beside the partition's state.

``segments`` cuts a store into chunks, each written once, and a small directory of them.
Here each chunk becomes a state of the state topic of its own (``state_topic.write_records``:
compressed, cut under the broker's record limit, under a manifest that holds its digest), named
after its partition's state and its segment key (``<log>/<number>``)::

    partition-3/pending/examples/12                 the chunk's manifest (logs: examples, labels, joined)
    partition-3/pending/examples/12#<gen>#<i>       its pieces

The partition's own state (``partition/record.py``) holds, in its header's "pending" field, the
directory and the digest of the record of each chunk it names (``listing``): the state and its
directory are one record, written in the transaction that commits the offsets. A commit writes,
in order: the records of the chunks made since the last one (and tombstones for stale records);
the partition's state; tombstones for the chunks dropped. Tombstones come last so that a writer
without transactions that stops midway leaves a state whose chunks are all in the topic.

A state is taken only if every chunk its header lists is in the topic under that digest
(``follower.StateFollower``); its store is restored when its partition is taken over. Records
of a partition's pending examples that its state does not list (left by a writer that stopped
midway, or by a run that kept no pending examples) are *stale*: its next commit tombstones them.

The previous version of the service reads none of this: the names are none of its states', so
it passes each record over with a warning (counted in ``nbstream_state_records_skipped_total``),
and reads the partition's state without the header field it does not know.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbstream.utils.checked import shown

from ...io.kafka.state_topic import Record, delete_records, write_records
from .codec import LOGS, ModelsKept
from .segments import SegmentWriter, restore
from .store import PendingExamples

PENDING = "pending"
_NAME = re.compile(r"(?P<state>[^/#]+)/pending/(?P<segment>(?P<log>[a-z]+)/(0|[1-9][0-9]{0,12}))")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def pending_name(state: str, segment: str) -> str:
    """The state-topic name of the record of one chunk (``segment``: ``<log>/<number>``) of ``state``'s store."""
    return f"{state}/{PENDING}/{segment}"


def pending_of(name: str) -> tuple[str, str] | None:
    """(the partition state's name, the chunk's segment key) that a pending record's name gives, else None."""
    match = _NAME.fullmatch(name)
    if match is None or match["log"] not in LOGS:
        return None
    return match["state"], match["segment"]


@dataclass
class PendingWrite:
    """What one commit writes of a store: ``before`` the partition's state, and ``after`` it.
    payload_bytes : the compressed bytes of the chunks written."""
    before: list[Record] = field(default_factory=list)
    after: list[Record] = field(default_factory=list)
    payload_bytes: int = 0


class PendingRecords:
    """Where one partition's pending store is in the state topic, and what its next commit writes.

    directory : the directory last written or read (None: none yet)
    digests : segment key -> the digest of the record holding that chunk, for each chunk the directory names
    """

    def __init__(self, directory: bytes | None = None, digests: dict[str, str] | None = None):
        self.directory = directory
        self.digests = dict(digests or {})
        self.chunk_keys: dict[str, frozenset[bytes]] = {}  # segment -> its record's chunk keys, as far as known
        self.stale: dict[str, frozenset[bytes]] = {}  # segment -> chunk keys of records the directory does not name
        self._segments = SegmentWriter(set(self.digests))

    def listing(self) -> dict[str, Any] | None:
        """The partition state's header field: the directory (base64) and each chunk's record digest."""
        if self.directory is None:
            return None
        return {"directory": base64.b64encode(self.directory).decode(), "records": dict(sorted(self.digests.items()))}

    @classmethod
    def from_listing(cls, value: object) -> PendingRecords:
        """The records a header's field lists. Raises ValueError, one line, unless ``listing`` could have written it."""
        if not (isinstance(value, dict) and set(value) == {"directory", "records"}):
            raise ValueError(f"pending must be an object of directory and records; got {shown(value)}")
        try:
            directory = base64.b64decode(value["directory"], validate=True)
        except (TypeError, binascii.Error):
            raise ValueError(f"pending.directory must be base64; got {shown(value['directory'])}") from None
        records = value["records"]
        if not isinstance(records, dict):
            raise ValueError(f"pending.records must be an object; got {shown(records)}")
        for segment, digest in records.items():
            if pending_of(pending_name("state", segment)) is None:
                raise ValueError(f"pending.records names chunk {shown(segment)}; chunks are LOG/NUMBER of the logs "
                                 f"{', '.join(LOGS)}")
            if not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
                raise ValueError(f"pending.records[{segment}] must be 64 hexadecimal digits; got {shown(digest)}")
        return cls(directory, records)

    def found(self, in_topic: dict[str, frozenset[bytes]]) -> None:
        """Learn the partition's pending records in the topic as far as read (segment -> chunk keys):
        those of listed chunks are tombstoned with them; the others are stale."""
        for segment, keys in in_topic.items():
            if segment in self.digests:
                self.chunk_keys[segment] = self.chunk_keys.get(segment, frozenset()) | keys
            else:
                self.stale[segment] = self.stale.get(segment, frozenset()) | keys

    def restore(self, read: Callable[[str, str], bytes], max_pending: int,
                models: ModelsKept | None = None) -> PendingExamples:
        """The store the directory and its chunks' records describe. read(segment, digest) : the bytes
        of a chunk's record; models : whose served predictions its examples are to hold (None: as
        written). Raises ValueError, one line, for a record missing or forged."""
        if self.directory is None:
            raise ValueError("pending examples: no directory")
        segments = {}
        for segment, digest in self.digests.items():
            try:
                segments[segment] = read(segment, digest)
            except ValueError as error:
                raise ValueError(f"pending examples: the record of chunk {segment}: {error}") from None
        store, self._segments = restore(self.directory, segments, max_pending, models=models)
        unnamed = sorted(self.digests.keys() - self._segments.written)
        if unnamed:
            raise ValueError(f"pending examples: the header lists records of chunks {unnamed[:5]} the directory "
                             "does not name")
        return store

    def write(self, state: str, store: PendingExamples | None) -> PendingWrite:
        """The records of what changed in ``store`` since the last write, under ``state``'s name; with
        no store, the tombstones of every record. The writer counts them as written."""
        before: list[Record] = []
        after: list[Record] = []
        payload_bytes = 0
        if store is None:
            for segment in sorted(self.digests):
                after += delete_records(pending_name(state, segment), self.chunk_keys.pop(segment, ()))
            self.directory, self.digests, self._segments = None, {}, SegmentWriter()
        else:
            changes = self._segments.changes(store)
            for segment, data in changes.written.items():
                written = write_records(pending_name(state, segment), data, replaced=self.stale.pop(segment, ()))
                before += written.records
                payload_bytes += written.payload_bytes
                self.digests[segment], self.chunk_keys[segment] = written.digest, written.chunk_keys
            for segment in changes.dropped:
                del self.digests[segment]
                after += delete_records(pending_name(state, segment), self.chunk_keys.pop(segment, ()))
            self.directory = changes.directory
        for segment, keys in sorted(self.stale.items()):
            before += delete_records(pending_name(state, segment), keys)
        self.stale = {}
        return PendingWrite(before, after, payload_bytes)
