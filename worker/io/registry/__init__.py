"""Records in the Confluent wire format, whose schemas a Schema Registry holds.

``wire`` reads the frame every such record has (a zero byte, a 4-byte big-endian schema id, the
encoded record); ``client`` asks any Confluent-compatible registry for a schema by id (and
registers one); ``schemas`` fetches each id once and keeps its parsed schema; ``records`` turns
a poll's values into records (objects, as JSON messages are), with each problem named. One
decoder per schema format reads a record by its writer schema: ``avro`` and ``json_schema``
(Protobuf would be another behind the same frame and cache).
"""

from __future__ import annotations

import importlib.util

from ...errors import UserError


def require_fastavro() -> None:
    """Avro needs fastavro (the registry extra): a one-line UserError where it is missing."""
    if importlib.util.find_spec("fastavro") is None:
        raise UserError("--format avro needs the fastavro package: pip install 'nbstream[registry]'.")
