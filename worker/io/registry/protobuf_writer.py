"""Arrow rows as Protobuf records in the Confluent wire format (``worker produce --format protobuf``):
the message type derived from the columns' Arrow types, or the first message of a schema the
registry already holds.

A column becomes a proto3 field of the same name, numbered in column order: integers of up to 32
bits ``int32`` (unsigned ``uint32``), wider ones ``int64``/``uint64``, ``float``/``double``,
``bool``, ``string``, ``bytes``, and a list of those a ``repeated`` field. A nullable scalar column
is ``optional`` (a null is left unset and reads back as None, as an unlabeled row's label must);
a null list is written as an empty one. The derived file is registered as a base64
FileDescriptorProto, as confluent-kafka's own Python serializer registers it.
"""

from __future__ import annotations

import base64
from typing import Protocol

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import EncodeError, Message

from ...errors import ConfigError
from .client import RegistryClient, schema_to_write
from .protobuf import parse_protobuf
from .schemas import SchemaProblem
from .wire import frame


class _FieldNumbers(Protocol):
    """The numbers of FieldDescriptorProto used here (protobuf's classes are untyped)."""
    TYPE_BOOL: int
    TYPE_INT32: int
    TYPE_INT64: int
    TYPE_UINT32: int
    TYPE_UINT64: int
    TYPE_FLOAT: int
    TYPE_DOUBLE: int
    TYPE_STRING: int
    TYPE_BYTES: int
    LABEL_OPTIONAL: int
    LABEL_REPEATED: int


FIELD: _FieldNumbers = descriptor_pb2.FieldDescriptorProto
MESSAGE_NAME = "Example"
PACKAGE = "nbstream"
FIRST_MESSAGE = b"\x00"  # the message indexes of a file's first message


def protobuf_type(arrow_type: pa.DataType, name: str) -> int:
    """The proto3 scalar type of an Arrow type (``name``: the column's, for the error)."""
    if pa.types.is_boolean(arrow_type):
        return FIELD.TYPE_BOOL
    if pa.types.is_integer(arrow_type):
        wide = arrow_type.bit_width > 32
        if pa.types.is_signed_integer(arrow_type):
            return FIELD.TYPE_INT64 if wide else FIELD.TYPE_INT32
        return FIELD.TYPE_UINT64 if wide else FIELD.TYPE_UINT32
    if pa.types.is_float16(arrow_type) or pa.types.is_float32(arrow_type):
        return FIELD.TYPE_FLOAT
    if pa.types.is_float64(arrow_type):
        return FIELD.TYPE_DOUBLE
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return FIELD.TYPE_STRING
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return FIELD.TYPE_BYTES
    raise ConfigError(f"column {name!r} is of Arrow type {arrow_type}, which has no Protobuf scalar type here")


def protobuf_file(columns: pa.Schema) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file of one message, ``Example``, with a field per column."""
    file = descriptor_pb2.FileDescriptorProto(name="nbstream_example.proto", package=PACKAGE, syntax="proto3")
    message = file.message_type.add(name=MESSAGE_NAME)
    for number, column in enumerate(columns, start=1):
        kind = column.type
        listed = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
        field = message.field.add(name=column.name, number=number,
                                  type=protobuf_type(kind.value_type if listed else kind, column.name),
                                  label=FIELD.LABEL_REPEATED if listed else FIELD.LABEL_OPTIONAL)
        if column.nullable and not listed:  # proto3 `optional`: a synthetic oneof gives the field presence
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{column.name}")
    return file


class ProtobufWriter:
    """Rows to framed Protobuf records of ``message_class``, by the schema ``schema_id`` names."""

    def __init__(self, schema_id: int, message_class: type[Message]):
        self.schema_id, self.message_class = schema_id, message_class

    @classmethod
    def registered(cls, client: RegistryClient, subject: str, columns: pa.Schema) -> ProtobufWriter:
        """A writer by the file derived from ``columns``, registered under ``subject`` (or found there)."""
        file = protobuf_file(columns)
        schema_id = client.register(subject, base64.b64encode(file.SerializeToString()).decode("ascii"),
                                    schema_type="PROTOBUF")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        return cls(schema_id, message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{MESSAGE_NAME}")))

    @classmethod
    def of_id(cls, client: RegistryClient, schema_id: int) -> ProtobufWriter:
        """A writer of the first message of the registry's schema ``schema_id``."""
        try:
            parsed = parse_protobuf(schema_to_write(client, schema_id, "PROTOBUF"))
        except SchemaProblem as problem:
            raise ConfigError(f"--schema-id {schema_id} {problem}.") from None
        return cls(schema_id, parsed.message_class((0,)))  # type: ignore[arg-type]  # a file has a first message

    def values(self, table: pa.Table) -> list[bytes]:
        """Each row as a framed record (a row that does not fit the message is a ConfigError)."""
        values = []
        for row in table.to_pylist():
            try:
                message = self.message_class(**{name: value for name, value in row.items() if value is not None})
                encoded = message.SerializeToString()
            except (ValueError, TypeError, AttributeError, EncodeError) as error:
                raise ConfigError(f"a row does not fit Protobuf schema {self.schema_id}: {error}") from None
            values.append(frame(self.schema_id, FIRST_MESSAGE + encoded))
        return values
