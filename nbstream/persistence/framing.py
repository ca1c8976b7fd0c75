"""Bytes with a strict header: the one framing of every format nbstream and its worker store.

A frame (integers little-endian)::

    magic, [uint8 version], uint32 or uint64 header length, the header (UTF-8 JSON object), the body,
    [the SHA-256 of everything before it]

Each format is a ``Framing``: its magic, the versions it reads (or none: no version byte), the
width of the header's length, and whether a checksum ends it. Snapshots (``snapshot.py``: a
version, 8-byte length, checksum), a partition's state (no version, 4-byte length) and a frame of
pending examples (a version, 4-byte length) are three. ``open`` checks, before the header is
parsed, the magic, the version, that the header lies inside the bytes, and the checksum; the
header must be a JSON object. Every failure is a ``FrameError`` of one line.

The stored bytes share two more steps, here too: zstd compression whose decompression never
makes more than a stated size (``compress``, ``decompress``), and cutting into chunks of at most
a size under one digest (``cut``, ``digest``). Compression needs pyarrow (the worker's), imported
where used; framing alone needs nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

CHECKSUM_BYTES = 32
CODECS = ("zstd", "zlib")  # zlib: what the oldest state-topic writer used
_PIECE = 1 << 20  # bytes decompressed at a time
_LENGTHS = {4: struct.Struct("<I"), 8: struct.Struct("<Q")}  # a header's length, by its width
Buffer = bytes | bytearray | memoryview


class FrameError(ValueError):
    """Bytes that are not a frame of the format read; ``problem`` says what is wrong (without the source)."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}" if source else problem)
        self.problem = problem


class NewerFrameError(FrameError):
    """A frame of a version newer than this nbstream reads: written by a newer nbstream."""


@dataclass(frozen=True)
class Opened:
    """A frame read: its version (None for a format without one), its header and its body."""
    version: int | None
    header: dict[str, Any]
    body: memoryview


@dataclass(frozen=True)
class OpenedFile:
    """A frame read from a file without holding its bytes: its version, its header, and where its
    body lies in the file (``body_start``, ``body_size`` bytes)."""
    version: int | None
    header: dict[str, Any]
    body_start: int
    body_size: int


@dataclass(frozen=True)
class Framing:
    """How one format frames its bytes.

    magic : the bytes it starts with; unknown : what bytes of another kind are called in errors
        ("not an nbstream snapshot"); name : the format in a version's error ("snapshot");
    versions : the versions it reads, the byte after the magic (None: no version byte);
    length_bytes : the width of the header's length, 4 or 8; checksum : a SHA-256 ends the frame.
    """
    magic: bytes
    unknown: str
    name: str
    versions: tuple[int, ...] | None = None
    length_bytes: int = 4
    checksum: bool = False

    @property
    def _length(self) -> struct.Struct:
        return _LENGTHS[self.length_bytes]

    @property
    def _prefix_bytes(self) -> int:
        return len(self.magic) + (self.versions is not None) + self.length_bytes

    def write(self, out: IO[bytes], header: bytes, body: Iterable[Buffer], version: int | None = None) -> None:
        """Write a frame of ``header`` (UTF-8 JSON) and the body's parts to ``out``, as they come."""
        digest = hashlib.sha256() if self.checksum else None

        def put(part: Buffer) -> None:
            if digest is not None:
                digest.update(part)
            out.write(part)

        put(self.magic + (bytes([self._version(version)]) if self.versions is not None else b""))
        put(self._length.pack(len(header)))
        put(header)
        for part in body:
            put(part)
        if digest is not None:
            out.write(digest.digest())

    def start(self, version: int | None = None) -> bytes:
        """What every frame of ``version`` starts with: the magic and the version byte. A frame without
        a checksum is this, the header's length (``length``), the header and the body, end to end."""
        return self.magic + (bytes([self._version(version)]) if self.versions is not None else b"")

    def length(self, header: bytes) -> bytes:
        """The header's length as a frame writes it."""
        return self._length.pack(len(header))

    def seal(self, header: dict[str, Any] | bytes, body: Iterable[Buffer] = (), version: int | None = None) -> bytes:
        """The frame of ``header`` (a JSON object, or its UTF-8 bytes) and the body's parts, as bytes."""
        text = header if isinstance(header, bytes) else json.dumps(header, allow_nan=False).encode()
        if self.checksum:
            out = io.BytesIO()
            self.write(out, text, body, version)
            return out.getvalue()
        return b"".join((self.start(version), self.length(text), text, *body))  # as ``write`` writes it

    def open(self, data: Buffer, source: str = "") -> Opened:
        """The version, header and body of a frame ``seal`` or ``write`` made; FrameError (one line,
        naming ``source``) for anything else, before the header is parsed where the bytes are wrong."""
        view = memoryview(data)
        trailer = CHECKSUM_BYTES if self.checksum else 0
        if len(view) < self._prefix_bytes + trailer or bytes(view[:len(self.magic)]) != self.magic:
            raise FrameError(source, self.unknown)
        at, version = len(self.magic), None
        if self.versions is not None:
            version = view[at]
            at += 1
            if version not in self.versions:
                error = NewerFrameError if version > max(self.versions) else FrameError
                raise error(source, f"{self.name} format version {version}; this nbstream reads versions "
                                    f"{', '.join(map(str, self.versions))}")
        if trailer:
            body_end = len(view) - trailer
            if hashlib.sha256(view[:body_end]).digest() != bytes(view[body_end:]):
                raise FrameError(source, "checksum mismatch: the bytes are truncated or were altered")
            view = view[:body_end]
        (length,) = self._length.unpack_from(view, at)
        at += self.length_bytes
        if length > len(view) - at:
            raise FrameError(source, f"a header of {length:,} bytes in {len(view):,} bytes")
        return Opened(version, _header(view[at:at + length], source), view[at + length:])

    def open_file(self, file: IO[bytes], size: int, source: str = "") -> OpenedFile:
        """``open`` for a frame of ``size`` bytes in a file read from its start, checked as ``open``
        checks bytes (the same FrameErrors) while holding no more than a piece of it: the checksum
        is computed a piece (``_PIECE``) at a time. The body is read afterwards, by offset."""
        trailer = CHECKSUM_BYTES if self.checksum else 0
        prefix = _read_exactly(file, min(size, self._prefix_bytes))
        if size < self._prefix_bytes + trailer or prefix[:len(self.magic)] != self.magic:
            raise FrameError(source, self.unknown)
        at, version = len(self.magic), None
        if self.versions is not None:
            version = prefix[at]
            at += 1
            if version not in self.versions:
                error = NewerFrameError if version > max(self.versions) else FrameError
                raise error(source, f"{self.name} format version {version}; this nbstream reads versions "
                                    f"{', '.join(map(str, self.versions))}")
        body_end = size - trailer
        if trailer:
            digest = hashlib.sha256(prefix)
            piece = bytearray(_PIECE)
            left = body_end - len(prefix)
            while left > 0:
                view = memoryview(piece)[:min(left, _PIECE)]
                read_into(file, view)
                digest.update(view)
                left -= len(view)
            if digest.digest() != _read_exactly(file, trailer):
                raise FrameError(source, "checksum mismatch: the bytes are truncated or were altered")
        (length,) = self._length.unpack_from(prefix, at)
        at += self.length_bytes
        if length > body_end - at:
            raise FrameError(source, f"a header of {length:,} bytes in {body_end:,} bytes")
        file.seek(at)
        header = _header(memoryview(_read_exactly(file, length)), source)
        return OpenedFile(version, header, at + length, body_end - at - length)

    def _version(self, version: int | None) -> int:
        assert self.versions is not None
        return max(self.versions) if version is None else version


def read_into(file: IO[bytes], view: memoryview) -> None:
    """Fill ``view`` from the file's position (FrameError at an end of file before it is full)."""
    filled = 0
    while filled < len(view):
        count = file.readinto(view[filled:])  # type: ignore[attr-defined]
        if not count:
            raise FrameError("", "the file ended early: it is truncated or was changed while read")
        filled += count


def _read_exactly(file: IO[bytes], size: int) -> bytes:
    buffer = bytearray(size)
    read_into(file, memoryview(buffer))
    return bytes(buffer)


def _header(text: memoryview, source: str) -> dict[str, Any]:
    try:
        header = json.loads(bytes(text))
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FrameError(source, f"the header is not JSON ({type(error).__name__}: {str(error)[:100]})") from None
    if not isinstance(header, dict):
        kind = type(header).__name__ if not isinstance(header, list) else "a list"
        raise FrameError(source, f"the header is not a JSON object but {kind}")
    return header


# ---- compression -------------------------------------------------------------------------------

def compress(raw: Buffer, level: int | None = None) -> bytes:
    """``raw`` as one zstd frame (``level``: zstd's, None for its default)."""
    import pyarrow as pa

    codec = pa.Codec("zstd", compression_level=level) if level is not None else pa.Codec("zstd")
    return codec.compress(raw, asbytes=True)  # type: ignore[no-any-return]


def decompress(packed: Buffer, limit: int, codec: str = "zstd", exact: int | None = None,
               what: str = "the data", stated_by: str = "its header") -> bytes:
    """What ``packed`` decompresses to, made a piece at a time from what the data hold, never from
    a size they declare: more than ``limit`` bytes (or, when given, other than ``exact``, the size
    ``stated_by`` says) is a FrameError, raised within a piece (1 MiB) of the limit.
    codec : "zstd" or "zlib"."""
    if codec not in CODECS:
        raise FrameError(what, f"codec must be one of {', '.join(CODECS)}; got {codec!r}")
    out = io.BytesIO()
    try:
        for piece in _zstd_pieces(packed) if codec == "zstd" else _zlib_pieces(packed):
            out.write(piece)
            if out.tell() > limit:
                break
    except (OSError, ValueError, zlib.error) as error:  # pyarrow's errors are OSErrors or ValueErrors
        raise FrameError(what, f"its {codec} data do not decompress ({str(error)[:200]})") from None
    if out.tell() > limit:
        raise FrameError(what, f"it decompresses to more than {limit:,} bytes")
    if exact is not None and out.tell() != exact:
        raise FrameError(what, f"it decompresses to {out.tell():,} bytes; {stated_by} says {exact:,}")
    return out.getvalue()  # the buffer itself, not a copy


def _zstd_pieces(packed: Buffer) -> Iterator[bytes]:
    import pyarrow as pa

    stream = pa.CompressedInputStream(pa.BufferReader(packed), "zstd")
    while piece := stream.read(_PIECE):
        yield piece


def _zlib_pieces(packed: Buffer) -> Iterator[bytes]:
    inflater = zlib.decompressobj()
    rest = bytes(packed)
    while not inflater.eof:
        piece = inflater.decompress(rest, _PIECE)
        rest = inflater.unconsumed_tail
        if not piece and not rest:
            raise zlib.error("the stream is truncated")
        yield piece


# ---- chunks ------------------------------------------------------------------------------------

def cut(packed: bytes, chunk_bytes: int) -> list[bytes]:
    """``packed`` in chunks of at most ``chunk_bytes`` (one empty chunk for no bytes)."""
    return [packed[i:i + chunk_bytes] for i in range(0, len(packed), chunk_bytes)] or [b""]


def digest(data: Buffer) -> str:
    """The SHA-256 of ``data``, in hexadecimal: what names a chunked whole."""
    return hashlib.sha256(data).hexdigest()
