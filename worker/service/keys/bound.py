"""--max-keys: at most N keys' counts in a replica's memory, the least recently used beyond it read
back from the keys topic on their next message (``memory.py`` says how a partition tracks them)."""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Mapping

from ...io.records import RecordLike
from .records import PartitionKeys

log = logging.getLogger(__name__)
READ_BACK_TIMEOUT_S = 60.0  # a committed record not read within this is a failure of the session
Fetch = Callable[[int, list[int], float], dict[int, RecordLike]]  # (partition, offsets, timeout) -> records


class KeyBound:
    """The bound over the partitions a replica owns: ``fetch`` reads records of the keys topic by
    offset (``StateFollower.fetch_key_records``)."""

    def __init__(self, max_keys: int, fetch: Fetch):
        self.max_keys, self._fetch = max_keys, fetch
        self.ticks = itertools.count()  # uses, across the partitions: which key was used least recently
        self.read_back_total = 0  # keys read back since the start
        self._unlogged, self._logged_at = [0, 0], time.monotonic()  # (left, read back) since the last log line

    def adopt(self, keys: PartitionKeys, state: str, offsets: Mapping[bytes, int]) -> None:
        """A partition taken over: its keys' records are at ``offsets`` (record name -> offset)."""
        keys.bound(self.ticks, state, offsets)

    def after_commit(self, owned: Mapping[int, PartitionKeys]) -> int:
        """Once a commit succeeded: the least recently used keys beyond the bound leave memory; how many."""
        for keys in owned.values():
            keys.committed()
        excess = sum(len(keys.counts) for keys in owned.values()) - self.max_keys
        if excess <= 0:
            return 0
        oldest = heapq.merge(*(_by_use(partition, keys) for partition, keys in owned.items()))
        leaving: dict[int, list[str]] = {}
        for _, partition, key in itertools.islice(oldest, excess):
            leaving.setdefault(partition, []).append(key)
        for partition, gone in leaving.items():
            owned[partition].evict(gone)
        left = sum(len(gone) for gone in leaving.values())
        self._said(left, 0)
        return left

    def read_back(self, partition: int, keys: PartitionKeys, wanted: list[str]) -> None:
        """These keys of the partition, out of memory, read back from their newest records (KafkaFailure
        when those cannot be read; ValueError, one line, when they hold other counts)."""
        assert keys.memory is not None
        places = {key: keys.memory.evicted[key].offsets for key in wanted}
        found = self._fetch(partition, sorted({offset for offsets in places.values() for offset in offsets}),
                            READ_BACK_TIMEOUT_S)
        records = {found[offset].key: found[offset].value for offsets in places.values() for offset in offsets}
        keys.take_back(wanted, {name: value for name, value in records.items()
                                if name is not None and value is not None})
        self.read_back_total += len(wanted)
        self._said(0, len(wanted))

    def _said(self, left: int, back: int) -> None:
        """One log line a minute at most says how many keys left memory and came back."""
        self._unlogged[0] += left
        self._unlogged[1] += back
        if any(self._unlogged) and time.monotonic() - self._logged_at >= 60:
            log.info("keys beyond --max-keys left memory, and keys came back", extra={
                "left": self._unlogged[0], "read_back": self._unlogged[1], "max_keys": self.max_keys})
            self._unlogged, self._logged_at = [0, 0], time.monotonic()


def _by_use(partition: int, keys: PartitionKeys) -> Iterator[tuple[int, int, str]]:
    """(last use, partition, key) of the partition's keys that may leave memory, least recently used first."""
    if keys.memory is not None:
        for tick, key in keys.memory.oldest():
            yield tick, partition, key
