"""What each schema format's decoder is (Avro, JSON Schema, Protobuf): the schema it parses
(``WriterSchema``) and how it reads records written with it (``RecordDecoder``)."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from nbstream.utils.ndarrays import IntArray

from ..fields import MessageFields
from ..json_vectors import Vectors
from .client import RegisteredSchema


class WriterSchema(Protocol):
    """A schema records were written with, parsed by its format's decoder."""

    @property
    def schema_id(self) -> int: ...

    @property
    def field_names(self) -> frozenset[str]:
        """The top-level fields its records have."""


class RecordDecoder(Protocol):
    """One schema format (Avro, JSON Schema, Protobuf)."""

    def parse(self, registered: RegisteredSchema) -> WriterSchema:
        """The schema parsed for reading records (raises SchemaProblem)."""

    def read(self, schema: WriterSchema, encoded: bytes) -> tuple[dict[str, Any] | None, str | None]:
        """(the record, None), or (None, why it does not decode with its writer schema)."""

    def vectors(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
                fields: MessageFields) -> Vectors | None:
        """The features, labels and ids of the records at buffer[begins[i]:ends[i]] (record i
        written with schemas[i]) whose features are one list of numbers, read in bulk; None to
        read them one by one (any doubt included)."""

    def table(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
              fields: MessageFields) -> pa.Table | None:
        """The text, label and id columns of such records whose text is one string, read in bulk
        (a column only where the schemas have the field); None to read them one by one (any doubt
        included)."""
