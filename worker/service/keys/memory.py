"""Which of a partition's keys are in memory (--max-keys), and where the others are.

A replica keeps at most --max-keys keys' counts in memory. After each commit, when every key's
counts are in the keys topic as they are in memory, the least recently used keys beyond the
bound leave memory: only where their newest record lies stays (its offsets in their partition of
the keys topic), with the examples and the time they hold. A message of a key out of memory
reads that record back first, so the key goes on exactly where it stopped.

The offsets of a key's newest record come from the records' delivery (``delivery``), taken as
the key's once the commit that wrote them succeeded (``confirm``), or from the records a
takeover read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

_NEVER = 2**63  # later than any time a key learned


@dataclass(frozen=True)
class Evicted:
    """A key out of memory: the offsets of its newest record's parts in its partition of the keys
    topic, the examples it learned and when it last learned (the partition's clock, ms)."""
    offsets: tuple[int, ...]
    examples: int
    seen: int


class KeyMemory:
    """The keys of one partition in memory by last use, those out of memory, and where the newest
    record of each is. ``ticks`` counts uses across the replica's partitions (shared)."""

    def __init__(self, ticks: Iterator[int], offsets: dict[str, tuple[int, ...]] | None = None):
        self._ticks = ticks
        self.used: OrderedDict[str, int] = OrderedDict()  # key in memory -> its last use, oldest first
        self.evicted: dict[str, Evicted] = {}
        self.evicted_examples = 0
        self.offsets = dict(offsets or {})  # key in memory -> its newest record's parts, as committed
        self._arrived: dict[str, dict[int, int]] = {}  # key -> part -> offset, of records not committed yet
        self._oldest = _NEVER  # no key out of memory last learned before this

    def touch(self, keys: Iterable[str]) -> None:
        """These keys, held in memory, were just used."""
        tick, used = next(self._ticks), self.used
        for key in keys:
            used[key] = tick
            used.move_to_end(key)

    def delivery(self, key: str, part: int) -> Callable[[int], None]:
        """What the producer calls with the offset of part ``part`` of the key's record."""
        def delivered(offset: int) -> None:
            self._arrived.setdefault(key, {})[part] = offset
        return delivered

    def confirm(self, parts_of: Callable[[str], int]) -> None:
        """The commit that wrote the records delivered since the last one succeeded: they are the
        keys' newest. parts_of(key) : how many parts the key's record has."""
        for key, parts in self._arrived.items():
            if len(parts) == parts_of(key):
                self.offsets[key] = tuple(parts[part] for part in range(len(parts)))
            else:  # (not every part reported: the key stays in memory until a commit reports them all)
                self.offsets.pop(key, None)
        self._arrived.clear()

    def oldest(self) -> Iterator[tuple[int, str]]:
        """(last use, key) of the keys that may leave memory (their newest record's place known), oldest first."""
        offsets = self.offsets
        return ((tick, key) for key, tick in self.used.items() if key in offsets)

    def leave(self, key: str, examples: int, seen: int) -> None:
        """The key leaves memory (its counts are dropped by the caller)."""
        self.evicted[key] = Evicted(self.offsets.pop(key), examples, seen)
        self.evicted_examples += examples
        self._oldest = min(self._oldest, seen)
        self.used.pop(key, None)

    def back(self, key: str) -> Evicted:
        """The key is in memory again (its counts read back by the caller)."""
        evicted = self.evicted.pop(key)
        self.evicted_examples -= evicted.examples
        self.offsets[key] = evicted.offsets
        return evicted

    def forget(self, keys: Iterable[str]) -> None:
        """These keys in memory were dropped (--key-ttl)."""
        for key in keys:
            self.used.pop(key, None)
            self.offsets.pop(key, None)

    def expire(self, before: int) -> list[str]:
        """Drop the keys out of memory that last learned before ``before``; which they were."""
        if before <= self._oldest:  # (none is that old: no walk over every key out of memory)
            return []
        old = [key for key, evicted in self.evicted.items() if evicted.seen < before]
        for key in old:
            self.evicted_examples -= self.evicted.pop(key).examples
        self._oldest = min((evicted.seen for evicted in self.evicted.values()), default=_NEVER)
        return old
