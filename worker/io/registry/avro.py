"""Avro records by their writer schema (fastavro): each record as the object a JSON message would be.

A record is read with the schema it was written with, whatever version of its subject that is: the
worker reads fields by name, so a field added with a default in a later version is there in the
records written with it and absent (as from a JSON object) in the older ones. A record's union
branch comes as its value, an enum as its symbol, a map or an inner record as an object.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import fastavro
import pyarrow as pa
from fastavro.schema import SchemaParseException, UnknownType

from nbstream.utils.ndarrays import IntArray

from ..fields import MessageFields
from ..json_vectors import Vectors
from .avro_columns import read_columns, read_vector_columns
from .avro_vectors import FieldReaders, VectorPlan, scalar_plan, vector_plan
from .client import RegisteredSchema
from .schemas import SchemaProblem

if TYPE_CHECKING:
    from .decoder import WriterSchema

# What fastavro raises on bytes that are not a record of the schema (cut short, or garbage): a
# varint or a length past the end, a union branch or enum symbol out of range, bad UTF-8, a date
# out of range, a schema nested deeper than Python's stack.
DEEPEST_SCHEMA = 200  # objects and lists nested in a schema: far beyond any record's, and within any stack
UNREADABLE = (EOFError, IndexError, UnicodeDecodeError, ValueError, OverflowError, RecursionError)


@dataclass(frozen=True)
class AvroSchema:
    """A writer schema, parsed: an Avro record."""
    schema_id: int
    parsed: dict[str, Any]
    field_names: frozenset[str]


class AvroDecoder:
    """Avro records (a RecordDecoder)."""

    def __init__(self) -> None:
        # (schema id, features field, or None for scalar records) -> the plan of its records
        self._plans: dict[tuple[int, str | None], VectorPlan | FieldReaders | None] = {}

    def parse(self, registered: RegisteredSchema) -> AvroSchema:
        return parse_avro(registered)

    def vectors(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
                fields: MessageFields) -> Vectors | None:
        """The fast path for records whose features are one array of numbers, all of one writer
        schema (``avro_columns``); a poll of records of several versions goes the general way."""
        plan = self._plan(schemas, (schemas[0].schema_id, fields.features), partial(vector_plan,
                                                                                    features=fields.features))
        assert plan is None or isinstance(plan, VectorPlan), "a features field's plan is a VectorPlan"
        return None if plan is None else read_vector_columns(buffer, begins, ends, plan, fields.label, fields.id)

    def table(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
              fields: MessageFields) -> pa.Table | None:
        """The fast path for records of scalar fields (text, label, id), all of one writer schema
        (``avro_columns``); a poll of records of several versions goes the general way."""
        plan = self._plan(schemas, (schemas[0].schema_id, None), scalar_plan)
        assert plan is None or isinstance(plan, tuple), "a scalar record's plan is its fields' readers"
        columns = None if plan is None else read_columns(buffer, begins, ends, plan,
                                                         (fields.text, fields.label, fields.id))
        return None if columns is None else pa.table(columns)

    def _plan(self, schemas: list[WriterSchema], key: tuple[int, str | None],
              make: Callable[[dict[str, Any]], VectorPlan | FieldReaders | None]) -> VectorPlan | FieldReaders | None:
        """The plan (made once per key) of a poll's records when they share one writer schema, else None."""
        if any(schema.schema_id != schemas[0].schema_id for schema in schemas):
            return None
        if key not in self._plans:
            assert isinstance(schemas[0], AvroSchema), "an Avro record is read by an Avro schema"
            self._plans[key] = make(schemas[0].parsed)
        return self._plans[key]

    def read(self, schema: WriterSchema, encoded: bytes) -> tuple[dict[str, Any] | None, str | None]:
        assert isinstance(schema, AvroSchema), "an Avro record is read by an Avro schema"
        return read_avro(schema, encoded)


def parse_avro(registered: RegisteredSchema) -> AvroSchema:
    """The registered schema parsed for reading records (raises SchemaProblem)."""
    if registered.schema_type.upper() != "AVRO":
        raise SchemaProblem(f"is a {registered.schema_type} schema; --format avro reads Avro schemas")
    if registered.references:
        raise SchemaProblem("refers to other schemas (references), which --format avro does not read")
    try:
        document = json.loads(registered.text)
        if _nesting(document) > DEEPEST_SCHEMA:  # (before fastavro recurses into it)
            raise RecursionError
        parsed = fastavro.parse_schema(document)
    except (ValueError, SchemaParseException, UnknownType) as error:  # JSONDecodeError is a ValueError
        raise SchemaProblem(f"is not a valid Avro schema: {error}") from None
    except RecursionError:
        raise SchemaProblem("nests deeper than this worker reads") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaProblem("is not an Avro record: a message is one record with named fields")
    return AvroSchema(registered.schema_id, parsed, frozenset(f["name"] for f in parsed["fields"]))


def _nesting(document: object) -> int:
    """How deep JSON objects and lists nest in a parsed document (0 for a plain value), found
    without recursion."""
    deepest, pending = 0, [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth + 1)
            pending.extend((item, depth + 1) for item in value)
    return deepest


def read_avro(schema: AvroSchema, encoded: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the record, None), or (None, why it does not decode with its writer schema)."""
    stream = io.BytesIO(encoded)
    try:
        record = fastavro.schemaless_reader(stream, schema.parsed, None)
    except UNREADABLE as error:
        detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return None, f"record does not decode with its schema {schema.schema_id}: {detail}"
    left = len(encoded) - stream.tell()
    if left:
        return None, (f"record does not decode with its schema {schema.schema_id}: {left} bytes are left over "
                      f"after its last field")
    return cast(dict[str, Any], record), None  # a record schema's datum is a dict
