"""The state topic: each input partition's state as compacted records that any model size fits.

A state is an opaque payload of bytes. It is compressed and cut into chunks no larger than
``CHUNK_BYTES``, so it fits a topic's default record limit whatever the size of the model::

    key "partition-3#<generation>#0" .. "#<n-1>"   the chunks (the generation is new for every write)
    key "partition-3"                               the manifest: {"format", "generation", "chunks", "bytes",
                                                                  "sha256", "codec", "size"}

Every manifest carries the state format version of its state (``STATE_FORMAT``): what a reader
must know to read it. A manifest without "format" (written before the field existed) is of
version 1. A manifest of a version newer than this module reads is no foreign record to pass
over: it is the group's state, written by a newer release, and a reader that passed it over would
start its partition afresh (predicting its messages again, then replacing the newer state). The
assembler keeps the newest such version of each name (``newer``) until a manifest it reads or a
tombstone replaces it, and its reader refuses to go on (``NewerStateFormat``). The version is
read before any other field, so a newer format may change them all. A release whose states an
earlier one would misread, or could not read, writes the next version; one that only adds what
earlier readers may ignore (a header field, a state of a name they pass over) does not.

The payload is compressed with zstd (a mostly-zero model of 2^20 features compresses several
times faster than with zlib); a manifest without "codec" (an older writer's) holds zlib.

The manifest is written after its chunks, and the chunk keys of the generation it replaces
get tombstones (null values) so that compaction reclaims them. A reader assembles a state
only from a manifest whose chunks it has all read and whose digest matches: within a Kafka
transaction the whole set becomes visible at once; without one, a state whose manifest was
never written stays invisible.

Anyone allowed to write the topic can put records there that no writer of this module wrote.
Each record is checked before anything is allocated from it: its key, a chunk's size, every
field of a manifest (sizes at most ``MAX_STATE_BYTES``), then, when the state is taken, its
chunks, digest and decompressed size (the decompressor stops at the size declared: it never
allocates what a manifest claims). A record that fails is reported to the assembler's
``on_skip`` and passed over; the state of its name stays the newest one that reads. (A manifest
of a newer format version is not passed over: see above.)

A state is taken once (``take``: the newest that reads, then forgotten), or read by its
manifest's digest as often as needed (``read``: it stays until tombstones delete it), which is
how another state's payload can name it: each chunk of a partition's pending examples is such
a state (``worker/service/pending/records.py``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from nbstream.persistence.framing import CODECS, FrameError, compress, cut, decompress, digest
from nbstream.utils.checked import integer, required, shown

from ...errors import ConfigError

CHUNK_BYTES = 512 * 1024  # below every common broker default (1 MiB), with room for the batch overhead
TOPIC_CONFIG = {"cleanup.policy": "compact", "max.message.bytes": str(2 * CHUNK_BYTES),
                "min.cleanable.dirty.ratio": "0.1", "segment.ms": str(60 * 60 * 1000)}
# The state format version this release writes in every manifest, and the newest it reads (1: the
# records of every release before the field existed, which read as this one's).
STATE_FORMAT = 1
# The largest state, compressed or not: what one manifest can make a reader hold in memory.
MAX_STATE_BYTES = 1 << 30
MAX_CHUNKS = -(-MAX_STATE_BYTES // CHUNK_BYTES)
_SEPARATOR = "#"
_GENERATION = re.compile(r"[0-9a-f]{12}")
_CHUNK_INDEX = re.compile(r"0|[1-9][0-9]{0,9}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
T = TypeVar("T")
Record = tuple[bytes, bytes | None]  # (key, value); value None is a tombstone


class ForeignRecord(ValueError):
    """A state-topic record that no writer of this module wrote (or whose state cannot be read); the
    message says what is wrong."""


class NewerStateFormat(ConfigError):
    """States of the topic of a state format version newer than this release reads: a newer release
    wrote them. newer : each such state's name -> its version."""

    def __init__(self, topic: str, newer: dict[str, int]):
        name, version = max(newer.items(), key=lambda item: (item[1], item[0]))
        others = f" (and {len(newer) - 1:,} other states)" if len(newer) > 1 else ""
        reads = "version 1" if STATE_FORMAT == 1 else f"versions 1 to {STATE_FORMAT}"
        super().__init__(f"state topic {topic}, {name}{others}: state format version {version}; this nbstream reads "
                         f"{reads}. A newer nbstream wrote this group's states: serve the group with that version "
                         "or a newer one, or use a new --group.")
        self.newer = dict(newer)


def state_topic_name(group: str, input_topic: str) -> str:
    """The default state topic of a group reading a topic (Kafka allows [a-zA-Z0-9._-], 249 characters)."""
    return re.sub(r"[^a-zA-Z0-9._-]", "_", f"{input_topic}.{group}.nbstream-state")[:249]


def chunk_key(name: str, generation: str, index: int) -> bytes:
    return f"{name}{_SEPARATOR}{generation}{_SEPARATOR}{index}".encode()


@dataclass(frozen=True)
class Manifest:
    """What one state's chunks hold. size : the decompressed bytes (None in an older writer's zlib
    manifest); format : the state format version of its payload (1 in a manifest without one)."""
    generation: str
    chunks: int
    packed_bytes: int
    sha256: str
    codec: str = "zstd"
    size: int | None = None
    format: int = STATE_FORMAT

    def to_json(self) -> bytes:
        return json.dumps({"format": self.format, "generation": self.generation, "chunks": self.chunks,
                           "bytes": self.packed_bytes, "sha256": self.sha256, "codec": self.codec,
                           "size": self.size}).encode()

    @classmethod
    def from_json(cls, value: bytes) -> Manifest:
        """Raises ForeignRecord unless every field is one a writer of this module (or an older one)
        writes: a manifest of a newer format version among them (see ``newer_format``)."""
        data = _loaded(value)
        if not isinstance(data, dict):
            raise ForeignRecord(f"manifest: not a JSON object but {shown(data)}")
        try:
            version = integer(data.get("format", 1), "format", 1, STATE_FORMAT)
            codec = data.get("codec", "zlib")
            if codec not in CODECS:
                raise ValueError(f"codec must be one of {', '.join(CODECS)}; got {shown(codec)}")
            generation = required(data, "generation")
            if not isinstance(generation, str) or not _GENERATION.fullmatch(generation):
                raise ValueError(f"generation must be 12 hexadecimal digits; got {shown(generation)}")
            chunks = integer(required(data, "chunks"), "chunks", 1, MAX_CHUNKS)
            packed_bytes = integer(required(data, "bytes"), "bytes", 0, MAX_STATE_BYTES)
            sha256 = required(data, "sha256")
            if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
                raise ValueError(f"sha256 must be 64 hexadecimal digits; got {shown(sha256)}")
            size = data.get("size")
            if codec == "zstd" or size is not None:
                size = integer(size, "size", 0, MAX_STATE_BYTES)
            return cls(generation, chunks, packed_bytes, sha256, codec, size, version)
        except ValueError as error:
            raise ForeignRecord(f"manifest: {error}") from None


def newer_format(value: bytes) -> int | None:
    """The state format version of a manifest when it is newer than this module reads, else None: a
    JSON object whose "format" is a whole number above ``STATE_FORMAT``, whatever its other fields
    (a newer format may change them)."""
    try:
        data = _loaded(value)
    except ForeignRecord:
        return None
    version = data.get("format") if isinstance(data, dict) else None
    return version if type(version) is int and version > STATE_FORMAT else None


def _loaded(value: bytes) -> object:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise ForeignRecord("manifest: not JSON") from None


@dataclass(frozen=True)
class StateWrite:
    """The records that write one state, in order, and the chunk keys the next write will replace."""
    records: list[Record]
    chunk_keys: frozenset[bytes]
    payload_bytes: int  # compressed
    digest: str = ""  # its manifest's sha256: names this very write among the states of its name


def write_records(name: str, payload: bytes, replaced: Iterable[bytes] = ()) -> StateWrite:
    """Chunks, then the manifest, then tombstones for ``replaced`` chunk keys. A state larger than
    readers take (``MAX_STATE_BYTES``) is a ConfigError: readers would pass it over."""
    packed = compress(payload)
    if max(len(payload), len(packed)) > MAX_STATE_BYTES:
        raise ConfigError(f"the state {name} is {len(payload):,} bytes; a state topic holds states of at most "
                          f"{MAX_STATE_BYTES:,}. Use fewer features (--hash-bits) or classes (--max-classes).")
    generation = uuid.uuid4().hex[:12]
    chunks = cut(packed, CHUNK_BYTES)
    keys = [chunk_key(name, generation, i) for i in range(len(chunks))]
    manifest = Manifest(generation, len(chunks), len(packed), digest(packed), "zstd", len(payload))
    records: list[Record] = [*zip(keys, chunks, strict=True), (name.encode(), manifest.to_json())]
    records += [(key, None) for key in sorted(set(replaced) - set(keys))]
    return StateWrite(records, frozenset(keys), len(packed), manifest.sha256)


def delete_records(name: str, chunk_keys: Iterable[bytes]) -> list[Record]:
    """The tombstones that delete a state: its chunks' keys, then its manifest's."""
    keys = [*sorted(chunk_keys), name.encode()]
    return [(key, None) for key in keys]


def _any_name(name: str) -> bool:
    return True


def _ignore(key: str, problem: str) -> None:
    pass


def _as_is(payload: bytes) -> bytes:
    return payload


class StateAssembler:
    """Follows state-topic records in offset order and hands out each name's newest state that reads.

    on_skip(key, problem) : told of every record passed over, and why
    is_name(name) : whether a writer of the topic uses this name (a chunk or manifest of another is passed over)

    Payloads are put together only when taken, so a state nobody asks for (this replica's own,
    read back, is dropped) costs no decompression. A name's older manifests are kept until it is
    taken, while their chunks are in the topic, so that a newer one that does not read leaves
    the newest one that does. A manifest of a newer state format version is not kept, and not
    passed over either: its name is in ``newer`` until a manifest that reads, or a tombstone,
    replaces it.
    """

    def __init__(self, on_skip: Callable[[str, str], None] = _ignore, is_name: Callable[[str], bool] = _any_name,
                 holds_bytes: Callable[[str], bool] = _any_name):
        """holds_bytes(name) : whether the chunks of ``name`` are kept, or only their sizes (they are
        then read from the topic again when needed, so that what a replica holds does not grow with
        what it does not own)."""
        self._on_skip, self._is_name, self._holds_bytes = on_skip, is_name, holds_bytes
        self._chunks: dict[bytes, bytes] = {}  # chunk bytes not taken yet
        self._sizes: dict[bytes, int] = {}  # the sizes of the chunks whose bytes are not kept
        self._keys: dict[str, set[bytes]] = {}  # every live chunk key of each name
        self._manifests: dict[str, list[Manifest]] = {}  # each name's manifests not taken yet, oldest first
        self._newer: dict[str, int] = {}  # names whose newest manifest is of a newer format -> its version

    def add(self, key: bytes | None, value: bytes | None) -> str | None:
        """Take one record; returns the name whose newest state was just announced, if any."""
        if value is None:
            self._delete(key)
            return None
        try:
            return self._add(key, value)
        except ForeignRecord as problem:
            self._on_skip("" if key is None else key.decode("utf-8", "replace"), str(problem))
            return None

    def _add(self, key: bytes | None, value: bytes) -> str | None:
        if key is None:
            raise ForeignRecord("no key")
        try:
            text = key.decode()
        except UnicodeDecodeError:
            raise ForeignRecord("the key is not UTF-8") from None
        name, separator, rest = text.partition(_SEPARATOR)
        if not separator:
            version = newer_format(value)
            if version is not None:  # whatever its name: a newer release may write states of new names
                self._newer[name] = version
                return None
        if not self._is_name(name):
            raise ForeignRecord("the key names no state")
        if not separator:
            self._manifests.setdefault(name, []).append(Manifest.from_json(value))
            self._newer.pop(name, None)
            return name
        generation, separator, index = rest.partition(_SEPARATOR)
        if not (_GENERATION.fullmatch(generation) and separator and _CHUNK_INDEX.fullmatch(index)
                and int(index) < MAX_CHUNKS):
            raise ForeignRecord(f"chunk key: not NAME{_SEPARATOR}GENERATION{_SEPARATOR}INDEX "
                                f"(12 hexadecimal digits, an index below {MAX_CHUNKS:,})")
        if len(value) > CHUNK_BYTES:
            raise ForeignRecord(f"chunk of {len(value):,} bytes; chunks hold at most {CHUNK_BYTES:,}")
        if self._holds_bytes(name):
            self._chunks[key] = value
        else:
            self._sizes[key] = len(value)
        self._keys.setdefault(name, set()).add(key)
        return None

    def _delete(self, key: bytes | None) -> None:
        """A tombstone: its chunk, or its name's whole state, is gone (one naming nothing deletes nothing)."""
        if key is None:
            return
        name, separator, rest = key.decode("utf-8", "replace").partition(_SEPARATOR)
        if not separator:
            self.drop(name)
            self._newer.pop(name, None)
            return
        self._chunks.pop(key, None)
        self._sizes.pop(key, None)
        keys = self._keys.get(name, set())
        keys.discard(key)
        if not keys:
            self._keys.pop(name, None)
        generation = rest.partition(_SEPARATOR)[0]
        if name in self._manifests:  # a state that lost a chunk can no longer be put together
            self._manifests[name] = [m for m in self._manifests[name] if m.generation != generation]

    @overload
    def take(self, name: str) -> bytes | None: ...

    @overload
    def take(self, name: str, read: Callable[[bytes], T]) -> T | None: ...

    def take(self, name: str, read: Callable[[bytes], Any] = _as_is) -> Any:
        """``read`` of the newest payload of ``name`` that reads (the payload itself by default);
        None when none does. A newer state that does not (its chunks, digest or size do not match
        its manifest, or ``read`` raises ForeignRecord) is reported and passed over. Every state of
        ``name`` read so far is then forgotten here (its chunk keys are kept, for the next write
        to tombstone)."""
        manifests = self._manifests.pop(name, [])
        try:
            for manifest in reversed(manifests):
                try:
                    return read(self._payload(name, manifest))
                except ForeignRecord as problem:
                    self._on_skip(name, str(problem))
            return None
        finally:
            self._release(name, manifests)

    def drop(self, name: str) -> None:
        """Forget the states of ``name`` read so far, unread (this replica's own, read back)."""
        self._release(name, self._manifests.pop(name, []))

    def newer(self) -> dict[str, int]:
        """The names whose newest manifest, as far as read, is of a state format version newer than
        ``STATE_FORMAT``, with that version (a reader is to refuse the topic: ``NewerStateFormat``)."""
        return dict(self._newer)

    def chunk_keys(self, name: str) -> frozenset[bytes]:
        """Every chunk key of ``name`` still in the topic as far as read (the next write tombstones them)."""
        return frozenset(self._keys.get(name, ()))

    def names(self, prefix: str) -> list[str]:
        """The names starting with ``prefix`` that have a chunk or a manifest in the topic, as far as read."""
        return sorted(name for name in self._keys.keys() | self._manifests.keys() if name.startswith(prefix))

    def holds(self, name: str, digest: str) -> bool:
        """Whether the state of ``name`` whose manifest's digest is ``digest`` has all its chunks here,
        of the bytes its manifest says (their digest is checked when it is read)."""
        return any(self._complete(name, manifest) for manifest in self._manifests.get(name, ())
                   if manifest.sha256 == digest)

    def read(self, name: str, digest: str) -> bytes:
        """The payload of the state of ``name`` whose manifest's digest is ``digest``, which stays here
        (to be read again) until tombstones delete it. Raises ForeignRecord when it is not here or
        does not read."""
        for manifest in reversed(self._manifests.get(name, [])):
            if manifest.sha256 == digest:
                return self._payload(name, manifest)
        raise ForeignRecord(f"no record of digest {digest[:12]}... in the topic")

    def holds_bytes_of(self, name: str, digest: str) -> bool:
        """Whether the bytes of that state are here to be read (not only known to be in the topic)."""
        return any(all(key in self._chunks for key in self._chunk_keys(name, manifest))
                   for manifest in self._manifests.get(name, ()) if manifest.sha256 == digest)

    def _complete(self, name: str, manifest: Manifest) -> bool:
        sizes = [len(self._chunks[key]) if key in self._chunks else self._sizes.get(key)
                 for key in self._chunk_keys(name, manifest)]
        return None not in sizes and sum(sizes) == manifest.packed_bytes  # type: ignore[arg-type]

    @staticmethod
    def _chunk_keys(name: str, manifest: Manifest) -> list[bytes]:
        return [chunk_key(name, manifest.generation, index) for index in range(manifest.chunks)]

    def _release(self, name: str, manifests: list[Manifest]) -> None:
        for manifest in manifests:
            for key in self._chunk_keys(name, manifest):
                self._chunks.pop(key, None)
                self._sizes.pop(key, None)

    def _payload(self, name: str, manifest: Manifest) -> bytes:
        keys = [chunk_key(name, manifest.generation, index) for index in range(manifest.chunks)]
        missing = sum(key not in self._chunks for key in keys)
        if missing:
            raise ForeignRecord(f"{missing:,} of its {manifest.chunks:,} chunks are not in the topic")
        held = sum(len(self._chunks[key]) for key in keys)
        if held != manifest.packed_bytes:
            raise ForeignRecord(f"its chunks hold {held:,} bytes; its manifest says {manifest.packed_bytes:,}")
        packed = b"".join(self._chunks[key] for key in keys)
        if digest(packed) != manifest.sha256:
            raise ForeignRecord("its manifest's digest does not match its chunks")
        return _decompressed(packed, manifest)


def _decompressed(packed: bytes, manifest: Manifest) -> bytes:
    """The payload, exactly ``manifest.size`` bytes (at most MAX_STATE_BYTES when the size is not recorded)."""
    limit = MAX_STATE_BYTES if manifest.size is None else manifest.size
    try:
        return decompress(packed, limit, manifest.codec, exact=manifest.size, stated_by="its manifest")
    except FrameError as error:
        raise ForeignRecord(error.problem) from None
