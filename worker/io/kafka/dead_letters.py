"""What a dead letter is: its input message as it came — key, value, headers and timestamp — with
headers of ours saying why it could not be used and where it came from.

Ours come after the input's own headers, as Kafka Connect and Kafka Streams order them: a reader
that takes the last header of a name (Java's ``Headers.lastHeader``, or ``dict(headers)`` in
Python) gets ours even when the input carried a header of the same name (a dead letter sent back
through the service, say). They are given twice, in our names and in Kafka Connect's (KIP-298),
which dead-letter browsers and replay tools read:

- ``error``: the problem, cut to ``MAX_ERROR_CHARACTERS``; ``error.field``: the field it is in
  (``message`` when it is the whole message);
- ``source.topic``, ``source.partition``, ``source.offset``: where the input is; ``source.row``:
  its row inside an Arrow batch message;
- ``__connect.errors.topic``, ``__connect.errors.partition``, ``__connect.errors.offset``: the same;
- ``__connect.errors.exception.class.name``: ``nbstream.REASON``, the kind of problem, as
  ``nbstream_dead_letters_total`` counts it; ``__connect.errors.exception.message``: as ``error``.
"""

from __future__ import annotations

from ..excerpts import excerpt
from ..records import Header, Record
from .client import record_bytes

MAX_ERROR_CHARACTERS = 1_000
CUT_HEADERS_BYTES = 96  # room kept for the headers a cut adds (names and decimal sizes)
CONNECT = "__connect.errors."

# The start of a dead letter's error, and the kind of problem it is (its reason).
REASONS = (
    ("empty message", "empty"), ("message of ", "too_large"), ("malformed JSON", "malformed"),
    ("expected a JSON object", "malformed"), ("field ", "malformed"), ("features ", "malformed"),
    ("list has ", "wrong_length"), ("non-numeric value", "wrong_type"), ("not a string", "wrong_type"),
    ("null", "missing_value"), ("NaN", "not_finite"), ("negative value", "negative"), ("label", "label"),
    ("prediction of ", "output_too_large"), ("the broker refused", "output_refused"),
    ("duplicate key", "malformed"), ("not an Arrow IPC stream", "malformed"),
    ("column names appear more than once", "malformed"),
    ("not in the Confluent wire format", "not_wire_format"), ("unknown schema id", "unknown_schema"),
    ("schema ", "schema"), ("record does not decode", "undecodable"), ("unmatched label", "unmatched_label"),
)


def reason_of(error: str) -> str:
    """The kind of problem a dead letter's error names.

    >>> reason_of("list has 3 values; expected 6"), reason_of("malformed JSON: ..."), reason_of("?")
    ('wrong_length', 'malformed', 'other')
    """
    return next((reason for start, reason in REASONS if error.startswith(start)), "other")


def error_headers(record: Record, error: str, field: str) -> list[Header]:
    """Why ``record`` is a dead letter and where it came from, in our names and in Kafka Connect's."""
    text = excerpt(error, MAX_ERROR_CHARACTERS).encode("utf-8", "replace")  # errors quote the value, maybe huge
    topic, partition, offset = record.topic.encode(), str(record.partition).encode(), str(record.offset).encode()
    headers: list[Header] = [("error", text), ("error.field", field.encode("utf-8", "replace")),
               ("source.topic", topic), ("source.partition", partition), ("source.offset", offset)]
    if record.row is not None and record.row >= 0:
        headers.append(("source.row", str(record.row).encode()))
    return headers + [(CONNECT + "topic", topic), (CONNECT + "partition", partition), (CONNECT + "offset", offset),
                      (CONNECT + "exception.class.name", f"nbstream.{reason_of(error)}".encode()),
                      (CONNECT + "exception.message", text)]


def dead_letter_record(record: Record, error: str, field: str,
                       limit: int) -> tuple[bytes | None, bytes | None, list[Header]]:
    """(key, value, headers) of the dead letter of ``record``, within ``limit`` bytes: the input's
    headers then ours; the input's are left out (their count in ``headers.dropped``) when they
    alone leave no room, and the value (then the key) is cut as ``cut_to_fit`` says."""
    ours = error_headers(record, error, field)
    theirs = record.headers
    if theirs and record_bytes(None, None, theirs + ours) + CUT_HEADERS_BYTES > limit:
        ours.append(("headers.dropped", str(len(theirs)).encode()))
        theirs = []
    headers = theirs + ours
    key, value = cut_to_fit(record.key, record.value, headers, limit)
    return key, value, headers


def cut_to_fit(key: bytes | None, value: bytes | None, headers: list[Header],
               limit: int) -> tuple[bytes | None, bytes | None]:
    """(key, value) of a dead letter cut so the record fits ``limit`` bytes: the value first, the key
    too when it alone is too large; each cut adds a header with the original size."""
    room = limit - record_bytes(None, None, headers) - CUT_HEADERS_BYTES
    if key is not None and len(key) > room:
        headers.append(("key.truncated.from", str(len(key)).encode()))
        key = key[:max(0, room)]
    room -= len(key or b"")
    if value is not None and len(value) > room:
        headers.append(("value.truncated.from", str(len(value)).encode()))
        value = value[:max(0, room)]
    return key, value
