"""How many bytes an Arrow IPC stream's record batches hold once decompressed, read from the
stream's metadata without decompressing anything.

A compressed IPC buffer starts with its uncompressed length (an int64), and Arrow's reader
allocates and fills that much; a message of a megabyte can declare gigabytes, and buffers of
zeros really do compress that well. Summing the declared lengths first lets a reader refuse
such a message before a byte is inflated.

The metadata of each IPC message is a FlatBuffer (``Message.fbs`` of the Arrow format); only the
few fields needed here are read, each read checked against the buffer's bounds.
"""

from __future__ import annotations

import struct

import pyarrow as pa

_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3  # MessageHeader union values
_UNCOMPRESSED = -1  # length prefix of a buffer a compressing writer left as it was


class _Malformed(Exception):
    """The metadata does not hold what the format says; Arrow's own reader will say why."""


def decompressed_size(value: bytes) -> int | None:
    """The bytes of every record and dictionary batch body of the stream once decompressed
    (the body's size for uncompressed batches); None when the stream is not readable as IPC,
    which Arrow's reader then reports in its own words."""
    try:
        total = 0
        for message in pa.ipc.MessageReader.open_stream(pa.py_buffer(value)):
            total += _body_size(memoryview(message.metadata), message.body)
        return total
    except (pa.ArrowException, OSError, ValueError, _Malformed):
        return None


def _body_size(metadata: memoryview, body: pa.Buffer | None) -> int:
    message = _Table.root(metadata)
    header_type = message.scalar(1, "<B", 0)
    header = message.table(2)
    if header is None or header_type not in (_DICTIONARY_BATCH, _RECORD_BATCH):
        return 0
    batch = header.table(1) if header_type == _DICTIONARY_BATCH else header
    if batch is None or body is None:
        return 0
    if batch.table(3) is None:  # no BodyCompression: the body is what is there
        return body.size  # type: ignore[no-any-return]  # pyarrow is untyped
    data = memoryview(body)
    total = 0
    for offset, length in batch.structs(2, "<qq"):  # Buffer {offset: long, length: long}
        if length == 0:
            continue
        if offset < 0 or length < 8 or offset + 8 > len(data):
            raise _Malformed
        (declared,) = struct.unpack_from("<q", data, offset)
        if declared == _UNCOMPRESSED:
            total += length - 8
        elif declared < 0:
            raise _Malformed
        else:
            total += declared
    return total


class _Table:
    """A FlatBuffer table inside ``data`` at ``position``."""

    def __init__(self, data: memoryview, position: int):
        self.data, self.position = data, position
        vtable = position - self._read("<i", position)
        self.vtable_size = self._read("<H", vtable)
        self.vtable = vtable

    @classmethod
    def root(cls, data: memoryview) -> _Table:
        return cls(data, cls._read_in(data, "<I", 0))

    def scalar(self, field: int, fmt: str, default: int) -> int:
        offset = self._field_offset(field)
        return default if offset == 0 else self._read(fmt, self.position + offset)

    def table(self, field: int) -> _Table | None:
        target = self._target(field)
        return None if target is None else _Table(self.data, target)

    def structs(self, field: int, fmt: str) -> list[tuple[int, ...]]:
        """The elements of a vector of structs (empty when the field is absent)."""
        target = self._target(field)
        if target is None:
            return []
        count, size = self._read("<I", target), struct.calcsize(fmt)
        start = target + 4
        if start + count * size > len(self.data):
            raise _Malformed
        return [struct.unpack_from(fmt, self.data, start + i * size) for i in range(count)]

    def _target(self, field: int) -> int | None:
        offset = self._field_offset(field)
        if offset == 0:
            return None
        at = self.position + offset
        return at + self._read("<I", at)

    def _field_offset(self, field: int) -> int:
        entry = 4 + 2 * field
        return 0 if entry + 2 > self.vtable_size else self._read("<H", self.vtable + entry)

    def _read(self, fmt: str, position: int) -> int:
        return self._read_in(self.data, fmt, position)

    @staticmethod
    def _read_in(data: memoryview, fmt: str, position: int) -> int:
        """The integer of format ``fmt`` at ``position``."""
        if position < 0 or position + struct.calcsize(fmt) > len(data):
            raise _Malformed
        return struct.unpack_from(fmt, data, position)[0]  # type: ignore[no-any-return]  # an integer format
