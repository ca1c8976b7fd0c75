"""A poll's message values to records (objects, as JSON messages are), each problem named.

Every value is unframed (``wire``), its writer schema found by id (``schemas``, fetched once) and
its record decoded by that schema. A value with a problem gives None and the problem, which makes
it a dead letter: not in the wire format, a schema id the registry does not know, a schema that is
not of the format or lacks the field the features come from, a record that does not decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureSpec
from nbstream.utils.ndarrays import IntArray

from ..fields import MessageFields
from ..json_vectors import Vectors
from ..messages import all_present, value_problem
from . import require_package
from .client import RegistryClient
from .decoder import RecordDecoder, WriterSchema
from .schemas import SchemaCache
from .wire import HEADER_BYTES, unframe

PLAIN_IDS = (str, int, float, bool, type(None))  # what a JSON prediction can carry as the id, as it came


class RegistryRecords:
    """Records of one schema format, whose writer schemas ``client`` fetches (each id once)."""

    def __init__(self, client: RegistryClient, decoder: RecordDecoder):
        self.decoder = decoder
        self.cache: SchemaCache[WriterSchema] = SchemaCache(client, decoder.parse)
        self._lacking: dict[tuple[int, str], str | None] = {}  # (schema id, needed field) -> its problem

    def poll(self) -> AbstractContextManager[None]:
        """The scope of one poll's reading: its registry lookups are bounded (``SchemaCache.poll``)."""
        return self.cache.poll()

    def vectors(self, values: Sequence[bytes | None], fields: MessageFields) -> Vectors | None:
        """The fast path of a poll whose records all have a features list: None unless every value
        is a framed record of a known schema that can take it (then ``read`` names each problem).
        Raises RegistryUnavailable as ``read`` does."""
        framed = self._framed(values, fields, fields.features)
        return None if framed is None else self.decoder.vectors(*framed, fields)

    def table(self, values: Sequence[bytes | None], fields: MessageFields) -> pa.Table | None:
        """The fast path of a poll whose records all have a text field: their text, label and id
        columns (a row per record), or None as ``vectors``."""
        framed = self._framed(values, fields, fields.text)
        return None if framed is None else self.decoder.table(*framed, fields)

    def _framed(self, values: Sequence[bytes | None], fields: MessageFields, needed: str
                ) -> tuple[bytes, IntArray, IntArray, list[WriterSchema]] | None:
        """(the values joined, where each record begins and ends after its frame, its writer
        schema), or None unless every value is a framed record of a known schema with the field
        ``needed``. Raises RegistryUnavailable as ``read`` does."""
        if not all_present(values):
            return None
        sizes = np.fromiter(map(len, values), np.int64, len(values))
        if sizes.min() < HEADER_BYTES or sizes.max() > fields.max_bytes:
            return None
        buffer = b"".join(values)
        data = np.frombuffer(buffer, dtype=np.uint8)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        if data[starts].any():  # a first byte that is not the wire format's zero
            return None
        ids = (data[starts + 1].astype(np.int64) << 24 | data[starts + 2].astype(np.int64) << 16 |
               data[starts + 3].astype(np.int64) << 8 | data[starts + 4]).tolist()
        found = self.cache.resolve(ids)
        if any(isinstance(schema, str) or self._lacks(schema, needed) for schema in found.values()):
            return None
        return buffer, starts + HEADER_BYTES, ends, [found[schema_id] for schema_id in ids]  # type: ignore[misc]

    def read(self, values: Sequence[bytes | None], spec: FeatureSpec, fields: MessageFields
             ) -> tuple[list[dict[str, Any] | None], list[str | None]]:
        """(records, problems), one of each per value: a record, or None and its problem. Raises
        RegistryUnavailable, before reading any, when a schema cannot be fetched now."""
        n = len(values)
        records: list[dict[str, Any] | None] = [None] * n
        problems: list[str | None] = [None] * n
        framed: list[tuple[int, bytes] | None] = [None] * n
        for i, value in enumerate(values):
            problem = value_problem(value, fields.max_bytes)
            unframed = unframe(value) if value is not None and problem is None else problem
            if isinstance(unframed, tuple):
                framed[i] = unframed
            else:
                problems[i] = unframed
        schemas = self.cache.resolve([f[0] for f in framed if f is not None])
        needed = fields.text if spec.kind == "text" else fields.features
        for i, found in enumerate(framed):
            if found is None:
                continue
            schema = schemas[found[0]]
            if isinstance(schema, str):
                problems[i] = schema
                continue
            record, problem = None, self._lacks(schema, needed)
            if problem is None:
                record, problem = self.decoder.read(schema, found[1])
            if record is not None and not isinstance(record.get(fields.id), PLAIN_IDS):
                record, problem = None, f"field {fields.id!r} must be a string or a number"
            records[i], problems[i] = record, problem
        return records, problems

    def _lacks(self, schema: WriterSchema, needed: str) -> str | None:
        """What keeps a writer schema's records from giving the features (checked once per schema)."""
        key = (schema.schema_id, needed)
        if key not in self._lacking:
            self._lacking[key] = None if needed in schema.field_names else \
                f"schema {schema.schema_id} has no field {needed!r}, where the features are"
        return self._lacking[key]


def registry_records(fields: MessageFields, client: RegistryClient) -> RegistryRecords:
    """The records of ``fields.format`` (one of REGISTRY_FORMATS), read with schemas from ``client``."""
    require_package(fields.format)
    if fields.format == "json-schema":
        from .json_schema import JsonSchemaDecoder

        return RegistryRecords(client, JsonSchemaDecoder(fields))
    if fields.format == "protobuf":
        from .protobuf import ProtobufDecoder  # optional: the registry extra

        return RegistryRecords(client, ProtobufDecoder(fields))
    assert fields.format == "avro", f"no decoder for {fields.format!r}"
    from .avro import AvroDecoder  # optional: the registry extra

    return RegistryRecords(client, AvroDecoder())
