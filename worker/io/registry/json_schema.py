"""JSON Schema records (``--format json-schema``): the Confluent wire format around a JSON object.

After its 5-byte frame a record is a JSON object, read exactly as a plain JSON message is
(``messages.parse_object``: duplicate keys, NaN, a byte order mark refused; ids beyond 64 bits
kept), and a poll of records whose features are one list of numbers goes through the same bulk
reader (``json_vectors``). The writer schema is fetched once per id, like Avro's, and must be a
JSON Schema of an object with ``properties``: the fields the features come from are looked up
there. Records are not validated against the schema (a field of the wrong type is the record's
problem, as in a JSON message); a schema with references to others is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from nbstream.utils.ndarrays import IntArray

from ..fields import MessageFields
from ..json_vectors import Vectors, read_vectors
from ..messages import json_table, parse_object
from .client import RegisteredSchema
from .schemas import SchemaProblem

if TYPE_CHECKING:
    from .decoder import WriterSchema


@dataclass(frozen=True)
class JsonSchema:
    """A writer schema, parsed: a JSON Schema of an object."""
    schema_id: int
    field_names: frozenset[str]


class JsonSchemaDecoder:
    """JSON Schema records (a RecordDecoder)."""

    def __init__(self, fields: MessageFields):
        self.fields = fields

    def parse(self, registered: RegisteredSchema) -> JsonSchema:
        if registered.schema_type.upper() != "JSON":
            raise SchemaProblem(f"is a {registered.schema_type} schema; --format json-schema reads JSON Schemas")
        if registered.references:
            raise SchemaProblem("refers to other schemas (references), which --format json-schema does not read")
        try:
            schema = json.loads(registered.text)
        except (ValueError, RecursionError) as error:
            raise SchemaProblem(f"is not JSON: {str(error)[:200]}") from None
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            raise SchemaProblem("is not a JSON Schema of an object with properties: a message is one object "
                                "with named fields")
        return JsonSchema(registered.schema_id, frozenset(properties))

    def read(self, schema: WriterSchema, encoded: bytes) -> tuple[dict[str, Any] | None, str | None]:
        record, problem = parse_object(encoded, self.fields)
        if problem is not None:
            return None, f"record does not decode with its schema {schema.schema_id}: {problem}"
        return record, None

    def vectors(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
                fields: MessageFields) -> Vectors | None:
        """The bulk reader of plain JSON messages' lists, on the records after their frames."""
        return read_vectors(_payloads(buffer, begins, ends), fields.features, fields.label, fields.id)

    def table(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
              fields: MessageFields) -> pa.Table | None:
        """Arrow's JSON reader, as for plain JSON messages, on the records after their frames."""
        return json_table(_payloads(buffer, begins, ends))


def _payloads(buffer: bytes, begins: IntArray, ends: IntArray) -> list[bytes]:
    return [buffer[begin:end] for begin, end in zip(begins.tolist(), ends.tolist(), strict=True)]
