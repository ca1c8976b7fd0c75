"""One partition's keys as records of the keys topic: a record per key, written when the key changed.

The keys topic (``keys_topic_name``: the state topic's name and "-keys") is compacted and
partitioned as the input is: a partition's keys go to its own partition there, so a takeover
reads only those. A commit writes the keys learned since the last one, each as one record under
its own name, in the same transaction as the partition's state; a key that did not change is not
written again, so a commit costs what changed, not how many keys there are. Compaction keeps
each key's newest record::

    partition-3/keys/<32 hex digits>        a key's counts (the digits: of the BLAKE2b digest of the key)
    partition-3/keys/<32 hex digits>/<i>    part i of a key too large for one record (counts only grow)

Each record is a frame (``nbstream.persistence.framing``, b"NBKY", version 1) whose JSON header names
the key, its examples, its parts, the partition's commit that wrote it, its classes and pairs, and
whose body holds the key's class counts (float64), then its pairs' features (int32), classes
(int32) and counts (float64), with no compression of its own: a commit writes thousands of small
records. The partition's state lists the labels of the keys' class rows and how many keys and
examples they hold (``PartitionKeys.header``); a takeover reads the records of its
partition again (``StateFollower.fetch_keys``) and checks they add up to that.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import orjson

from nbstream.persistence.framing import FrameError, Framing
from nbstream.stats.keyed_counts import KeyCells, KeyedCounts
from nbstream.utils.checked import INT32_MAX, INT64_MAX, integer, number, shown
from nbstream.utils.ndarrays import AnyArray

from ...io.kafka.state_topic import Record
from .memory import KeyMemory

log = logging.getLogger(__name__)
KEYS = "keys"
CLOCK_AHEAD_MS = 3_600_000  # how far past the wall clock a message's time moves a partition's key clock
MOST_PART_PAIRS = 1 << 15  # pairs in one record: 16 bytes each, well under the state topic's record limit
_NAME = re.compile(r"(?P<state>[^/#]+)/keys/(?P<digest>[0-9a-f]{32})(?:/(?P<part>[1-9][0-9]{0,8}))?")
_VERSION = 1
KEY_RECORD = Framing(b"NBKY", "not a key's record", "key record", versions=(_VERSION,))


def keys_topic_name(state_topic: str) -> str:
    """The keys topic of a group whose state topic is ``state_topic``."""
    return f"{state_topic}-keys"


def key_digest(key: str) -> str:
    """32 hex digits of the key's BLAKE2b digest: what names its record."""
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def key_record_name(state: str, key: str, part: int = 0) -> str:
    """The state-topic name of part ``part`` of the record of ``key`` in the partition state ``state``."""
    name = f"{state}/{KEYS}/{key_digest(key)}"
    return name if part == 0 else f"{name}/{part}"


def keys_of(name: str) -> tuple[str, str, int] | None:
    """(the partition state's name, the key's digest, the part) that a key record's name gives, else None."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return match["state"], match["digest"], int(match["part"] or 0)


class PartitionKeys:
    """One partition's keys: their counts, which of them changed since its last commit, and the parts
    of those written in more than one record; with a bound on the keys in memory (``bound``), which
    are in memory and where the others' records are (``memory``)."""

    def __init__(self, counts: KeyedCounts, prior_weight: float, parts: dict[str, int] | None = None):
        self.counts, self.prior_weight = counts, prior_weight
        self.changed: set[str] = set()
        self.dropped: set[str] = set()  # keys dropped since the last write: their records get tombstones
        self.clock = 0  # the newest message time it saw (ms), at most CLOCK_AHEAD_MS past the wall clock
        self._parts = dict(parts or {})  # key -> parts, for the keys of more than one
        self._sent: dict[bytes, tuple[str, int]] = {}  # record name -> (key, part), of the last write
        self.memory: KeyMemory | None = None
        self.drops = 0  # keys dropped (--key-ttl) since it was made

    def bound(self, ticks: Iterator[int], state: str, offsets: Mapping[bytes, int]) -> None:
        """Track which keys are in memory (--max-keys), its keys' records being at ``offsets``
        (record name -> offset, as read from its partition of the keys topic; a takeover's) and
        ``state`` its partition state's name; the keys that learned last are the most recent."""
        if self.memory is not None:
            return
        keys = [str(key) for key in self.counts.keys()]  # (the record keys are text)
        names = {key: [key_record_name(state, key, part).encode() for part in range(self.parts(key))] for key in keys}
        self.memory = KeyMemory(ticks, {key: tuple(offsets[name] for name in names[key]) for key in keys
                                        if all(name in offsets for name in names[key])})
        for at in np.argsort(self.counts.seen_of(keys), kind="stable").tolist():
            self.memory.touch([keys[at]])

    def parts(self, key: str) -> int:
        """How many parts the key's newest record has."""
        return self._parts.get(key, 1)

    def learned(self, keys: list[str]) -> None:
        self.changed.update(keys)

    def delivery(self, record_name: bytes) -> Callable[[int], None] | None:
        """What the producer calls with the offset of the record of this name (with a bound on the
        keys in memory; None else, and for tombstones)."""
        if self.memory is None:
            return None
        sent = self._sent.get(record_name)
        return None if sent is None else self.memory.delivery(*sent)

    def committed(self) -> None:
        """The commit that wrote its records succeeded: their offsets are the keys' newest."""
        if self.memory is not None:
            self.memory.confirm(self.parts)

    def touch(self, keys: list[str]) -> None:
        """These keys were just used: those held in memory count as the most recently used."""
        if self.memory is not None:
            counts = self.counts
            self.memory.touch(key for key in keys if key in counts)

    def out_of_memory(self, keys: list[str]) -> list[str]:
        """Those of ``keys`` out of memory (once each)."""
        if self.memory is None or not self.memory.evicted:
            return []
        evicted = self.memory.evicted
        return [key for key in dict.fromkeys(keys) if key in evicted]

    def evict(self, keys: list[str]) -> None:
        """These keys, each in memory with its newest record committed, leave memory."""
        assert self.memory is not None, "keys leave memory only under a bound"
        examples, seen = self.counts.examples_of(keys).tolist(), self.counts.seen_of(keys).tolist()
        for key, learned, last in zip(keys, examples, seen, strict=True):
            self.memory.leave(key, learned, last)
        self.counts.drop(keys)

    def take_back(self, wanted: list[str], records: Mapping[bytes, bytes]) -> None:
        """The ``wanted`` keys out of memory in memory again, from their newest records (by name):
        ValueError, one line, unless those are every wanted key's and each holds what the key held
        when it left."""
        assert self.memory is not None, "keys come back only under a bound"
        evicted = self.memory.evicted
        header = {"classes": self.counts.classes.labels.tolist(), "n_keys": 0, "examples": 0}
        back, _, _, _ = keys_from_records(records, header, self.counts.n_features)
        if sorted(map(str, back.keys())) != sorted(wanted):
            raise ValueError(f"the records read back hold the keys {sorted(map(str, back.keys()))[:5]}, not "
                             f"{sorted(wanted)[:5]}")
        for key in back.keys():
            left = evicted.get(str(key))
            if left is None or back.examples(key) != left.examples:
                raise ValueError(f"the record read back for the key {shown(key)} holds {back.examples(key):,} "
                                 f"examples; it left memory with {'none' if left is None else left.examples}")
        self.counts.merge(back)
        for key in back.keys():
            self.memory.back(str(key))

    def expire(self, newest_ms: int, ttl_ms: int) -> int:
        """Move the clock to ``newest_ms`` (clamped) and drop the keys that last learned longer than
        ``ttl_ms`` before it; how many were dropped."""
        self.clock = max(self.clock, min(newest_ms, int(time.time() * 1000) + CLOCK_AHEAD_MS))
        old = [str(key) for key in self.counts.seen_before(self.clock - ttl_ms)]  # the record keys are text
        evicted = [] if self.memory is None else self.memory.expire(self.clock - ttl_ms)
        if old:
            self.counts.drop(old)
            self.changed.difference_update(old)
            if self.memory is not None:
                self.memory.forget(old)
        self.dropped.update(old + evicted)
        self.drops += len(old) + len(evicted)
        return len(old) + len(evicted)

    def header(self) -> dict[str, object]:
        """What the partition's state says of its keys: the labels of their classes, how many keys
        and examples, and the prior weight their models are backed off by."""
        evicted = (0, 0) if self.memory is None else (len(self.memory.evicted), self.memory.evicted_examples)
        return {"classes": self.counts.classes.labels.tolist(), "n_keys": len(self.counts) + evicted[0],
                "examples": self.counts.total_examples() + evicted[1], "prior_weight": self.prior_weight}

    def write(self, state: str, commit: int) -> list[Record]:
        """The records of the keys changed since the last write (``commit`` names this one)."""
        changed, dropped = sorted(self.changed), sorted(self.dropped)
        self.changed.clear()
        self.dropped.clear()
        self._sent = {}
        records: list[Record] = [(key_record_name(state, key, part).encode(), None)
                                 for key in dropped for part in range(self._parts.pop(key, 1))]
        if not changed:
            return records
        cells = _Laid(self.counts.cells_of(changed, self.counts.classes.labels))
        seen, examples = self.counts.seen_of(changed).tolist(), self.counts.examples_of(changed).tolist()
        ends = np.searchsorted(cells.slot, np.arange(len(changed)), side="right").tolist()
        start, tracked = 0, self.memory is not None
        frame, length, header = KEY_RECORD.start(_VERSION), KEY_RECORD.length, orjson.dumps
        n_classes, row = cells.n_classes, 8 * cells.n_classes
        prefix = f"{state}/{KEYS}/"
        for slot, key in enumerate(changed):
            end = ends[slot]
            if end - start > MOST_PART_PAIRS:
                records += self._parts_of(state, key, (examples[slot], seen[slot]), cells, slot, start, end, commit)
                start = end
                continue
            # one record, the usual case (written out here: a commit writes thousands)
            text = header({"key": key, "examples": examples[slot], "seen": seen[slot], "parts": 1, "part": 0,
                           "commit": commit, "classes": n_classes, "pairs": end - start})
            name = (prefix + key_digest(key)).encode()
            records.append((name, b"".join((frame, length(text), text, cells.class_count[row * slot:row * (slot + 1)],
                                            cells.features[4 * start:4 * end], cells.classes[4 * start:4 * end],
                                            cells.counts[8 * start:8 * end]))))
            if tracked:
                self._sent[name] = (key, 0)
            start = end
        return records

    def _parts_of(self, state: str, key: str, learned: tuple[int, int], cells: _Laid, slot: int, start: int,
                  end: int, commit: int) -> list[Record]:
        """The records of a key of more pairs than one record holds: learned (its examples, when it
        last learned), its cells' slot and span."""
        examples, seen = learned
        parts = -(-(end - start) // MOST_PART_PAIRS)
        self._parts[key] = parts
        records: list[Record] = []
        for part in range(parts):
            first, last = start + part * MOST_PART_PAIRS, min(end, start + (part + 1) * MOST_PART_PAIRS)
            header = orjson.dumps({"key": key, "examples": examples, "seen": seen, "parts": parts, "part": part,
                                   "commit": commit, "classes": cells.n_classes, "pairs": last - first})
            body = (cells.class_count[8 * cells.n_classes * slot:8 * cells.n_classes * (slot + 1)],
                    cells.features[4 * first:4 * last], cells.classes[4 * first:4 * last],
                    cells.counts[8 * first:8 * last])
            name = key_record_name(state, key, part).encode()
            self._sent[name] = (key, part)
            records.append((name, KEY_RECORD.seal(header, body, _VERSION)))
        return records


class _Laid:
    """Cells of keys as the bytes their records hold (little-endian), to slice by key: slot (n_cells,),
    and the bytes of class_count (float64, n_keys x n_classes), features, classes (int32) and counts
    (float64)."""

    def __init__(self, cells: KeyCells):
        self.slot, self.n_classes = cells.slot, cells.class_count.shape[1]
        self.class_count = memoryview(np.ascontiguousarray(cells.class_count, "<f8").tobytes())
        self.features = memoryview(cells.features.astype("<i4").tobytes())
        self.classes = memoryview(cells.classes.astype("<i4").tobytes())
        self.counts = memoryview(cells.counts.astype("<f8").tobytes())


@dataclass(frozen=True)
class _Part:
    key: str
    examples: int
    seen: int
    parts: int
    commit: int
    arrays: dict[str, AnyArray]


def restore_keys(records: Mapping[bytes, bytes], header: object, n_features: int, prior_weight: float,
                 strict: bool = True) -> PartitionKeys:
    """A partition's keys from the values of its key records by record key (each key's newest) and
    what its state says of them (``PartitionKeys.header``): ValueError, one line, unless they read and,
    when ``strict`` (exactly-once: the records commit with the state), add up to it. Otherwise keys
    written by a commit whose state never came (a replica stopped between the two, at least once) are
    taken as they are, with a warning: the messages after the state are learned again.
    prior_weight : what the keys are backed off by from now on."""
    counts, n_keys, examples, parts = keys_from_records(records, header, n_features)
    if len(counts) != n_keys or counts.total_examples() != examples:
        problem = (f"its keys' records hold {len(counts):,} keys and {counts.total_examples():,} examples; "
                   f"its state says {n_keys:,} and {examples:,}")
        if strict:
            raise ValueError(problem)
        log.warning("a partition's keys are ahead of its state (at least once: a commit stopped between them); "
                    "continuing with the keys as written, so some of their examples may count twice",
                    extra={"problem": problem})
    return PartitionKeys(counts, prior_weight, parts)


def keys_from_records(records: Mapping[bytes, bytes], header: object, n_features: int
                      ) -> tuple[KeyedCounts, int, int, dict[str, int]]:
    """The keys some of a partition's key records hold (ValueError, one line, unless they read), with
    how many keys and examples its state says it has, and the parts of those written in several."""
    if not isinstance(header, dict) or not isinstance(header.get("classes"), list):
        raise ValueError(f"its keys are described by {shown(header)}, not by their classes and counts")
    n_keys = integer(header.get("n_keys"), "n_keys", 0, INT64_MAX)
    examples = integer(header.get("examples"), "examples", 0, INT64_MAX)
    classes = np.array(header["classes"]) if header["classes"] else np.array([])
    by_key: dict[str, dict[int, _Part]] = {}
    for record_key, value in records.items():
        name = record_key.decode("utf-8", "replace")
        place = keys_of(name)
        if place is None:
            raise ValueError(f"a record of the keys topic is named {shown(name)}, which names no key")
        part = _read_part(value, name)
        if key_digest(part.key) != place[1] or part.arrays["pair_count"].ndim != 1:
            raise ValueError(f"{name} holds the key {shown(part.key)}, whose record is named otherwise")
        by_key.setdefault(part.key, {})[place[2]] = part
    keys, arrays = _joined(by_key, len(classes))
    counts = KeyedCounts.from_arrays(keys, classes, arrays, n_features)
    return counts, n_keys, examples, {key: len(parts) for key, parts in by_key.items() if len(parts) > 1}


def header_prior_weight(header: object) -> float:
    """The prior weight a partition's keys were backed off by, as its state says (ValueError otherwise)."""
    value = header.get("prior_weight") if isinstance(header, dict) else None
    return number(value, "prior_weight")


def _read_part(value: bytes, name: str) -> _Part:
    """One record's part of a key (ValueError, one line, unless it is what ``_records_of`` writes)."""
    try:
        opened = KEY_RECORD.open(value, name)
    except FrameError as error:
        raise ValueError(str(error)) from None
    meta, body = opened.header, opened.body
    key = meta.get("key")
    if not isinstance(key, str):
        raise ValueError(f"{name}: a key record names no key")
    parts = integer(meta.get("parts"), "parts", 1, INT32_MAX)
    integer(meta.get("part"), "part", 0, parts - 1)
    n_classes = integer(meta.get("classes"), "classes", 0, INT32_MAX)
    n_pairs = integer(meta.get("pairs"), "pairs", 0, INT32_MAX)
    if len(body) != 8 * n_classes + 16 * n_pairs:
        raise ValueError(f"{name}: a key record of {n_classes:,} classes and {n_pairs:,} pairs holds {len(body):,} "
                         "bytes")
    ends = np.cumsum([8 * n_classes, 4 * n_pairs, 4 * n_pairs, 8 * n_pairs])
    arrays = {"class_count": np.frombuffer(body[:ends[0]], "<f8"),
              "pair_feature": np.frombuffer(body[ends[0]:ends[1]], "<i4"),
              "pair_class": np.frombuffer(body[ends[1]:ends[2]], "<i4"),
              "pair_count": np.frombuffer(body[ends[2]:ends[3]], "<f8")}
    return _Part(key, integer(meta.get("examples"), "examples", 0, INT64_MAX),
                 integer(meta.get("seen", 0), "seen", -INT64_MAX, INT64_MAX), parts,
                 integer(meta.get("commit"), "commit", 0, INT64_MAX), arrays)


def _joined(by_key: dict[str, dict[int, _Part]], n_classes: int) -> tuple[list[str], dict[str, AnyArray]]:
    """The keys and their counts end to end, as ``KeyedCounts.from_arrays`` takes them, each key's
    class counts widened to n_classes (a key written before a class came has fewer)."""
    keys, class_counts, examples, seen, ends = [], [], [], [], []
    pairs: dict[str, list[AnyArray]] = {"pair_feature": [], "pair_class": [], "pair_count": []}
    total = 0
    for key, parts in by_key.items():
        first = parts.get(0)
        if first is None or sorted(parts) != list(range(first.parts)) \
                or any(part.commit != first.commit or part.parts != first.parts for part in parts.values()):
            raise ValueError(f"the records of the key {shown(key)} are not all of one commit")
        keys.append(key)
        counts = first.arrays["class_count"]
        if counts.ndim != 1 or len(counts) > n_classes:
            raise ValueError(f"the key {shown(key)} has counts of {counts.shape} classes; its partition knows "
                             f"{n_classes}")
        class_counts.append(np.pad(counts.astype(np.float64), (0, n_classes - len(counts))))
        examples.append(first.examples)
        seen.append(first.seen)
        for index in range(first.parts):
            for name in pairs:
                pairs[name].append(parts[index].arrays[name])
            total += len(parts[index].arrays["pair_count"])
        ends.append(total)
    return keys, {"examples": np.array(examples, dtype=np.int64), "seen": np.array(seen, dtype=np.int64),
                  "class_count": np.vstack(class_counts) if class_counts else np.zeros((0, n_classes)),
                  "pair_end": np.array(ends, dtype=np.int64),
                  **{name: np.concatenate(parts) if parts else np.zeros(0, np.int32 if name != "pair_count" else float)
                     for name, parts in pairs.items()}}
