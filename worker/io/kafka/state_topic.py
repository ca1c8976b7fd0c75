"""The state topic: each input partition's state as compacted records that any model size fits.

A state is an opaque payload of bytes. It is compressed and cut into chunks no larger than
``CHUNK_BYTES``, so it fits a topic's default record limit whatever the size of the model::

    key "partition-3#<generation>#0" .. "#<n-1>"   the chunks (the generation is new for every write)
    key "partition-3"                               the manifest: {"generation", "chunks", "bytes", "sha256",
                                                                  "codec", "size"}

The payload is compressed with zstd (a 2^20-feature model, mostly zeros, in about 7 ms where
zlib took 44); a manifest without "codec" (an older writer's) holds zlib.

The manifest is written after its chunks, and the chunk keys of the generation it replaces
get tombstones (null values) so that compaction reclaims them. A reader assembles a state
only from a manifest whose chunks it has all read and whose digest matches: within a Kafka
transaction the whole set becomes visible at once; without one, a state whose manifest was
never written stays invisible.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

CHUNK_BYTES = 512 * 1024  # below every common broker default (1 MiB), with room for the batch overhead
TOPIC_CONFIG = {"cleanup.policy": "compact", "max.message.bytes": str(2 * CHUNK_BYTES),
                "min.cleanable.dirty.ratio": "0.1", "segment.ms": str(60 * 60 * 1000)}
_SEPARATOR = "#"


def state_topic_name(group: str, input_topic: str) -> str:
    """The default state topic of a group reading a topic (Kafka allows [a-zA-Z0-9._-], 249 characters)."""
    return re.sub(r"[^a-zA-Z0-9._-]", "_", f"{input_topic}.{group}.nbstream-state")[:249]


@dataclass(frozen=True)
class StateWrite:
    """The records that write one state, in order, and the chunk keys the next write will replace."""
    records: list[tuple[bytes, bytes | None]]  # (key, value); value None is a tombstone
    chunk_keys: frozenset[bytes]
    payload_bytes: int  # compressed


def write_records(name: str, payload: bytes, replaced: Iterable[bytes] = ()) -> StateWrite:
    """Chunks, then the manifest, then tombstones for ``replaced`` chunk keys."""
    packed = pa.compress(payload, codec="zstd", asbytes=True)
    generation = uuid.uuid4().hex[:12]
    chunks = [packed[i:i + CHUNK_BYTES] for i in range(0, len(packed), CHUNK_BYTES)] or [b""]
    keys = [f"{name}{_SEPARATOR}{generation}{_SEPARATOR}{i}".encode() for i in range(len(chunks))]
    manifest = {"generation": generation, "chunks": len(chunks), "bytes": len(packed),
                "sha256": hashlib.sha256(packed).hexdigest(), "codec": "zstd", "size": len(payload)}
    records = list(zip(keys, chunks)) + [(name.encode(), json.dumps(manifest).encode())]
    records += [(key, None) for key in sorted(set(replaced) - set(keys))]
    return StateWrite(records, frozenset(keys), len(packed))


class StateAssembler:
    """Follows state-topic records in offset order and hands out each name's newest complete state.

    Payloads are put together only when taken, so a state nobody asks for (this replica's own,
    read back) costs no decompression; chunks of a generation older than the newest manifest
    are dropped as soon as it arrives.
    """

    def __init__(self):
        self._chunks: dict[bytes, bytes] = {}
        self._keys: dict[str, set[bytes]] = {}  # every live chunk key of each name
        self._manifests: dict[str, dict] = {}  # newest manifest of each name not taken yet

    def add(self, key: bytes | None, value: bytes | None) -> str | None:
        """Take one record; returns the name whose newest state was just announced, if any."""
        if key is None:
            return None
        text = key.decode("utf-8", "replace")
        name, separator, rest = text.partition(_SEPARATOR)
        if separator:  # a chunk, or its tombstone
            if value is None:
                self._chunks.pop(key, None)
                self._keys.get(name, set()).discard(key)
            else:
                self._chunks[key] = value
                self._keys.setdefault(name, set()).add(key)
            return None
        if value is None:  # the whole state was deleted
            self._manifests.pop(name, None)
            return None
        try:
            manifest = json.loads(value)
            generation = str(manifest["generation"])
        except (ValueError, KeyError, TypeError, RecursionError):  # not a manifest: written by something else
            return None
        for stale in [k for k in self._chunks if k.startswith(f"{name}{_SEPARATOR}".encode())
                      and not k.startswith(f"{name}{_SEPARATOR}{generation}{_SEPARATOR}".encode())]:
            del self._chunks[stale]  # an older generation's bytes: the newest manifest replaces them
        self._manifests[name] = manifest
        return name

    def take(self, name: str) -> bytes | None:
        """The newest complete payload of ``name`` not taken yet (then forgotten here); None when
        its chunks are not all read or do not match the manifest's digest."""
        manifest = self._manifests.pop(name, None)
        if manifest is None:
            return None
        try:
            count = int(manifest["chunks"])
        except (ValueError, KeyError, TypeError, OverflowError):
            return None
        if not 0 < count <= len(self._keys.get(name, ())):  # more chunks than were read: not complete yet
            return None
        keys = [f"{name}{_SEPARATOR}{manifest['generation']}{_SEPARATOR}{i}".encode() for i in range(count)]
        if any(key not in self._chunks for key in keys):
            return None
        packed = b"".join(self._chunks.pop(key) for key in keys)  # keep the keys (to tombstone later), not the bytes
        if hashlib.sha256(packed).hexdigest() != manifest.get("sha256"):
            return None
        try:
            if manifest.get("codec") == "zstd":
                return pa.decompress(packed, decompressed_size=int(manifest["size"]), codec="zstd", asbytes=True)
            return zlib.decompress(packed)
        except (zlib.error, pa.ArrowException, ValueError, KeyError, TypeError):
            return None

    def chunk_keys(self, name: str) -> frozenset[bytes]:
        """Every chunk key of ``name`` still in the topic as far as read (the next write tombstones them)."""
        return frozenset(self._keys.get(name, ()))
