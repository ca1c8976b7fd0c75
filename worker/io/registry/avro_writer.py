"""Arrow rows as Avro records in the Confluent wire format: the schema derived from the columns'
Arrow types, or one the registry already holds.

An Arrow column becomes a field of the same name: integers of up to 32 bits (and unsigned ones of
up to 16) an ``int``, other integers a ``long``, ``float``/``double``, ``boolean``, ``string``,
``bytes``, lists an ``array``, structs a ``record``; a nullable column is a union with ``null``
(default null), as a label column is where some rows are unlabeled.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa

from ...errors import ConfigError
from .client import RegistryClient, schema_to_write
from .wire import frame

RECORD_NAME = "Example"
NAMESPACE = "nbstream"


def avro_type(arrow_type: pa.DataType, name: str) -> str | dict[str, Any]:
    """The Avro type of an Arrow type (``name``: the field's, which names an inner record)."""
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_integer(arrow_type):
        small = arrow_type.bit_width <= 32 if pa.types.is_signed_integer(arrow_type) else arrow_type.bit_width <= 16
        return "int" if small else "long"
    if pa.types.is_float16(arrow_type) or pa.types.is_float32(arrow_type):
        return "float"
    if pa.types.is_float64(arrow_type):
        return "double"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "bytes"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return {"type": "array", "items": avro_type(arrow_type.value_type, name)}
    if pa.types.is_struct(arrow_type):
        return {"type": "record", "name": f"{name.capitalize()}Fields",
                "fields": [_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)]}
    raise ConfigError(f"column {name!r} is of Arrow type {arrow_type}, which has no Avro type here")


def _field(field: pa.Field) -> dict[str, Any]:
    kind = avro_type(field.type, field.name)
    return {"name": field.name, "type": ["null", kind], "default": None} if field.nullable else \
        {"name": field.name, "type": kind}


def avro_schema(schema: pa.Schema) -> dict[str, Any]:
    """The Avro record schema of rows with these columns."""
    return {"type": "record", "name": RECORD_NAME, "namespace": NAMESPACE, "fields": [_field(f) for f in schema]}


class AvroWriter:
    """Rows to framed Avro records, by the schema ``schema_id`` names in the registry."""

    def __init__(self, schema_id: int, schema: dict[str, Any]):
        self.schema_id = schema_id
        self.parsed = fastavro.parse_schema(schema)

    @classmethod
    def registered(cls, client: RegistryClient, subject: str, columns: pa.Schema) -> AvroWriter:
        """A writer by the schema derived from ``columns``, registered under ``subject`` (or found there)."""
        schema = avro_schema(columns)
        return cls(client.register(subject, json.dumps(schema)), schema)

    @classmethod
    def of_id(cls, client: RegistryClient, schema_id: int) -> AvroWriter:
        """A writer by the registry's schema ``schema_id``, taken as it is."""
        return cls(schema_id, json.loads(schema_to_write(client, schema_id, "AVRO").text))

    def values(self, table: pa.Table) -> list[bytes]:
        """Each row as a framed record (a row that does not fit the schema is a ConfigError)."""
        out, values = io.BytesIO(), []
        for row in table.to_pylist():
            out.seek(0)
            out.truncate()
            try:
                fastavro.schemaless_writer(out, self.parsed, row)
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                raise ConfigError(f"a row does not fit Avro schema {self.schema_id}: {error}") from None
            values.append(frame(self.schema_id, out.getvalue()))
        return values
