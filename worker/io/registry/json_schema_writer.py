"""Arrow rows as JSON Schema records in the Confluent wire format (``worker produce --format
json-schema``): each row a JSON object after the frame, by a JSON Schema derived from the columns'
Arrow types and registered under TOPIC-value.

An integer column is an ``integer``, a floating-point one a ``number``, then ``boolean``,
``string``, ``array`` (lists) and ``object`` (structs, with their properties); a nullable column
also takes ``null``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pyarrow as pa

from ...errors import ConfigError
from .client import RegistryClient, schema_to_write
from .wire import frame

TITLE = "Example"


def json_type(arrow_type: pa.DataType, name: str) -> dict[str, Any]:
    """The JSON Schema of an Arrow type (``name``: the column's, for the error)."""
    if pa.types.is_boolean(arrow_type):
        return {"type": "boolean"}
    if pa.types.is_integer(arrow_type):
        return {"type": "integer"}
    if pa.types.is_floating(arrow_type):
        return {"type": "number"}
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return {"type": "string"}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return {"type": "array", "items": json_type(arrow_type.value_type, name)}
    if pa.types.is_struct(arrow_type):
        return object_schema([arrow_type.field(i) for i in range(arrow_type.num_fields)])
    raise ConfigError(f"column {name!r} is of Arrow type {arrow_type}, which has no JSON Schema type here")


def _property(field: pa.Field) -> dict[str, Any]:
    schema = json_type(field.type, field.name)
    return {**schema, "type": [schema["type"], "null"]} if field.nullable else schema


def object_schema(fields: list[pa.Field]) -> dict[str, Any]:
    return {"type": "object", "properties": {f.name: _property(f) for f in fields}}


def json_schema(schema: pa.Schema) -> dict[str, Any]:
    """The JSON Schema of rows with these columns."""
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": TITLE, **object_schema(list(schema))}


class JsonSchemaWriter:
    """Rows to framed JSON objects, by the schema ``schema_id`` names in the registry."""

    def __init__(self, schema_id: int):
        self.schema_id = schema_id

    @classmethod
    def registered(cls, client: RegistryClient, subject: str, columns: pa.Schema) -> JsonSchemaWriter:
        """A writer by the schema derived from ``columns``, registered under ``subject`` (or found there)."""
        return cls(client.register(subject, json.dumps(json_schema(columns)), schema_type="JSON"))

    @classmethod
    def of_id(cls, client: RegistryClient, schema_id: int) -> JsonSchemaWriter:
        """A writer by the registry's JSON Schema ``schema_id``, taken as it is (rows are not validated)."""
        schema_to_write(client, schema_id, "JSON")
        return cls(schema_id)

    def values(self, table: pa.Table) -> list[bytes]:
        """Each row as a framed record."""
        return [frame(self.schema_id, orjson.dumps(row)) for row in table.to_pylist()]
