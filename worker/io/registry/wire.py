"""The Confluent wire format: byte 0 is zero, bytes 1-4 the schema id (big-endian), then the record.

>>> frame(7, b"record")
b'\\x00\\x00\\x00\\x00\\x07record'
>>> unframe(frame(7, b"record"))
(7, b'record')
>>> unframe(b'{"features": [1]}')
'not in the Confluent wire format: the first byte is 0x7b, not 0x00'
"""

from __future__ import annotations

MAGIC = 0
HEADER_BYTES = 5  # the magic byte and the schema id
NOT_WIRE_FORMAT = "not in the Confluent wire format"


def frame(schema_id: int, record: bytes) -> bytes:
    """A record in the wire format (``schema_id`` within 0 .. 2**32 - 1)."""
    return bytes((MAGIC,)) + schema_id.to_bytes(4, "big") + record


def unframe(value: bytes) -> tuple[int, bytes] | str:
    """(schema id, the encoded record), or what keeps ``value`` from being a framed record."""
    if len(value) < HEADER_BYTES:
        return f"{NOT_WIRE_FORMAT}: {len(value)} bytes, fewer than the {HEADER_BYTES} of its header"
    if value[0] != MAGIC:
        return f"{NOT_WIRE_FORMAT}: the first byte is 0x{value[0]:02x}, not 0x00"
    return int.from_bytes(value[1:HEADER_BYTES], "big"), value[HEADER_BYTES:]
