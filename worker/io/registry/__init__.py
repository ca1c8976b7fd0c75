"""Records in the Confluent wire format, whose schemas a Schema Registry holds.

``wire`` reads the frame every such record has (a zero byte, a 4-byte big-endian schema id, the
encoded record); ``client`` asks any Confluent-compatible registry for a schema by id (and
registers one); ``schemas`` fetches each id once and keeps its parsed schema; ``records`` turns
a poll's values into records (objects, as JSON messages are), with each problem named. One
decoder per schema format reads a record by its writer schema: ``avro``, ``json_schema`` and
``protobuf``; one writer per format makes records of Parquet rows for ``worker produce``.
"""

from __future__ import annotations

import importlib.util

from ...errors import UserError

PACKAGES = {"avro": ("fastavro", "fastavro"), "protobuf": ("google.protobuf", "protobuf")}  # module, package


def require_package(message_format: str) -> None:
    """The package ``message_format`` is read and written with (the registry extra), or a one-line
    UserError where it is missing."""
    module, package = PACKAGES.get(message_format, (None, None))
    if module is not None and importlib.util.find_spec(module.split(".")[0]) is None:
        raise UserError(f"--format {message_format} needs the {package} package: pip install 'nbstream[registry]'.")
