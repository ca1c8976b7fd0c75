"""Protobuf records by their writer schema (``--format protobuf``): each record as the object a JSON
message would be.

After its 5-byte frame a record starts with its message indexes (which message of the schema's
file it is: a zigzag varint count, then that many zigzag varints; a lone 0 means the first message),
then the message itself. The schema's file is built at run time from what the registry holds:
either a base64 FileDescriptorProto (what confluent-kafka's Python serializer registers) or .proto
text (what most others register), compiled with protoc from the grpcio-tools package. No generated
code is needed, and every version of a subject decodes by its own file, fields read by name.

A field without presence (a proto3 scalar not marked ``optional``) reads as its default when it is
not set, as protobuf defines: an unset ``string label`` is "" (a label), so a topic with unlabeled
examples declares the label ``optional`` (unset: None) or a wrapper (``google.protobuf.StringValue``).
A wrapper reads as its value, an enum as its name, a map or an inner message as an object, bytes
as bytes. Imports of Google's well-known types are known; any other reference is refused. Only
the fields the options name are read, in bulk or one record at a time alike: a field the worker
does not use (an ``Any`` of a type the file does not hold) cannot make a record a dead letter.
"""

from __future__ import annotations

import base64
import binascii
import operator
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from nbstream.utils.ndarrays import IntArray

from ...errors import UserError
from ..excerpts import excerpt
from ..fields import MessageFields
from ..json_vectors import Vectors
from .client import RegisteredSchema
from .schemas import SchemaProblem

if TYPE_CHECKING:
    from .decoder import WriterSchema

WELL_KNOWN = "google/protobuf/"
WRAPPERS = frozenset(f"google.protobuf.{name}Value" for name in
                     ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"))
NUMBERS = frozenset({FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_INT64,
                     FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32,
                     FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED32,
                     FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64})
MOST_INDEXES = 64  # message indexes are a path into nested messages: deeper than this is garbage
PROTOC_SECONDS = 60.0


@dataclass
class ProtobufSchema:
    """A writer schema, parsed: a .proto file with at least one message."""
    schema_id: int
    file: descriptor_pb2.FileDescriptorProto
    messages: tuple[Descriptor, ...]  # the file's top-level messages, in order
    field_names: frozenset[str]  # every message's fields (a record may be any of them)
    classes: dict[tuple[int, ...], type[Message]] = field(default_factory=dict)  # found by indexes so far

    def message_class(self, indexes: tuple[int, ...]) -> type[Message] | str:
        """The class of the message ``indexes`` name (a path: top-level message, nested ones), or why
        there is none."""
        if indexes in self.classes:
            return self.classes[indexes]
        found = _message_class(self.messages, indexes)
        if not isinstance(found, str):  # kept: as many as the file has messages, whatever records name
            self.classes[indexes] = found
        return found


def _message_class(messages: tuple[Descriptor, ...], indexes: tuple[int, ...]) -> type[Message] | str:
    choices: Sequence[Descriptor] = messages
    descriptor = None
    for index in indexes:
        if not 0 <= index < len(choices):
            return f"message indexes {list(indexes)} name no message of the schema"
        descriptor = choices[index]
        choices = descriptor.nested_types
    assert descriptor is not None, "a record names at least one index"
    return message_factory.GetMessageClass(descriptor)  # type: ignore[no-any-return]  # protobuf is untyped


class ProtobufDecoder:
    """Protobuf records (a RecordDecoder): of each, only the fields ``fields`` names are read, as
    on the bulk paths (a field the worker does not use cannot make a record a dead letter)."""

    def __init__(self, fields: MessageFields):
        self.names = (fields.features, fields.text, fields.label, fields.id)
        self._readers: dict[tuple[type[Message], tuple[str, ...]], _FieldReader | None] = {}

    def parse(self, registered: RegisteredSchema) -> ProtobufSchema:
        return parse_protobuf(registered)

    def read(self, schema: WriterSchema, encoded: bytes) -> tuple[dict[str, Any] | None, str | None]:
        assert isinstance(schema, ProtobufSchema), "a Protobuf record is read by a Protobuf schema"
        message, problem = _message(schema, encoded)
        if message is None:
            return None, problem
        try:
            return record_of(message, self.names), None
        except UnreadableField as error:
            return None, f"record does not decode with its schema {schema.schema_id}: {error}"

    def vectors(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
                fields: MessageFields) -> Vectors | None:
        """Each record parsed (upb, compiled) and its features copied into one float buffer,
        with no dict made per record; None when any record is not so simple."""
        read = self._scalars(buffer, begins, ends, schemas, (fields.features, fields.label, fields.id), VECTOR)
        if read is None:
            return None
        rows = [np.array(features, dtype=np.float64) for features, _, _ in read]
        ids = [id_ for _, _, id_ in read]
        if any(isinstance(id_, bytes) for id_ in ids):
            return None
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(row) for row in rows], out=offsets[1:])
        if offsets[-1] >= 2**31:
            return None
        values = np.concatenate(rows) if rows else np.zeros(0)
        return Vectors(offsets.astype(np.int32), values, [label for _, label, _ in read], ids)

    def table(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
              fields: MessageFields) -> pa.Table | None:
        """Each record parsed (upb) and only its text, label and id fields taken; None when any
        record does not parse or one of those is not a scalar."""
        names = (fields.text, fields.label, fields.id)
        read = self._scalars(buffer, begins, ends, schemas, names)
        return None if read is None else _table(dict(zip(names, zip(*read, strict=True), strict=True)))

    def _scalars(self, buffer: bytes, begins: IntArray, ends: IntArray, schemas: list[WriterSchema],
                 names: tuple[str, ...], first: int | None = None) -> list[tuple[Any, ...]] | None:
        """The values of ``names`` in each record (the first a ``first`` kind of field, if given,
        the others scalars), or None when a record does not parse or a field is of another kind."""
        read = []
        for schema, begin, end in zip(schemas, begins.tolist(), ends.tolist(), strict=True):
            assert isinstance(schema, ProtobufSchema), "a Protobuf record is read by a Protobuf schema"
            message, _ = _message(schema, buffer[begin:end])
            if message is None:
                return None
            key = (type(message), names)
            if key not in self._readers:
                kinds = tuple(_kind(message.DESCRIPTOR, name) for name in names)
                plain = NOT_PLAIN not in kinds[first is not None:] and (first is None or kinds[0] == first)
                self._readers[key] = _FieldReader(names, kinds) if plain else None
            reader = self._readers[key]
            if reader is None:
                return None
            read.append(reader(message))
        return read


def _table(columns: dict[str, tuple[Any, ...]]) -> pa.Table | None:
    """The columns that hold a value (for ``messages.decode_table``), or None where one would mix
    types, or hold bytes or a list."""
    arrays = {}
    for name, values in columns.items():
        if any(value is not None for value in values):
            try:
                array = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return None
            if pa.types.is_binary(array.type) or pa.types.is_nested(array.type):
                return None
            arrays[name] = array
    return pa.table(arrays) if arrays else None


class _FieldReader:
    """Reads the fields ``names`` of one message type, of ``kinds`` (none NOT_PLAIN): their values
    in one C call (attrgetter), then None put where a field with presence is unset."""

    def __init__(self, names: tuple[str, ...], kinds: tuple[int, ...]):
        present = [name for name, kind in zip(names, kinds, strict=True) if kind != ABSENT]
        getter = operator.attrgetter(*present) if present else (lambda message: ())
        self.get = getter if len(present) != 1 else (lambda message: (getter(message),))
        self.places = [present.index(name) if kind != ABSENT else None for name, kind in zip(names, kinds, strict=True)]
        self.unset = [(present.index(name), name, kind) for name, kind in zip(names, kinds, strict=True)
                      if kind in (OPTIONAL, WRAPPER)]

    def __call__(self, message: Message) -> tuple[Any, ...]:
        values = list(self.get(message))
        for at, name, kind in self.unset:
            if kind == WRAPPER:
                values[at] = values[at].value if message.HasField(name) else None
            elif not values[at] and not message.HasField(name):  # a set field may hold its default too
                values[at] = None
        if len(values) == len(self.places):  # every field present, in order
            return tuple(values)
        return tuple(None if at is None else values[at] for at in self.places)


ABSENT, PLAIN, OPTIONAL, WRAPPER, VECTOR, NOT_PLAIN = range(6)  # kinds of field, as a record is read


def _kind(message: Descriptor, name: str) -> int:
    """How the field ``name`` of a message type is read (VECTOR: repeated numbers)."""
    descriptor = message.fields_by_name.get(name)
    if descriptor is None:
        return ABSENT
    if descriptor.is_repeated:
        return VECTOR if descriptor.type in NUMBERS else NOT_PLAIN
    if descriptor.type == FieldDescriptor.TYPE_ENUM:
        return NOT_PLAIN
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        return WRAPPER if descriptor.message_type.full_name in WRAPPERS else NOT_PLAIN
    return OPTIONAL if descriptor.has_presence else PLAIN


def _value(message: Message, name: str, kind: int) -> Any:
    """The value of a field of that kind: None when absent, unset with presence, or an unset wrapper."""
    if kind == PLAIN or kind == VECTOR:
        return getattr(message, name)
    if kind == ABSENT or (kind != NOT_PLAIN and not message.HasField(name)):
        return None
    return getattr(message, name).value if kind == WRAPPER else getattr(message, name)


def record_of(message: Message, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The message as an object: the fields ``names`` (None: every field) that its type has, by
    name (see the module's docstring). Raises UnreadableField."""
    record: dict[str, Any] = {}
    as_json = None  # the whole message as JSON objects, made once, for what has no plain value
    fields = message.DESCRIPTOR.fields_by_name
    for descriptor in (fields[name] for name in names if name in fields) if names else message.DESCRIPTOR.fields:
        kind = _kind(message.DESCRIPTOR, descriptor.name)
        if kind == VECTOR or (kind == NOT_PLAIN and descriptor.is_repeated and descriptor.type in (
                FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_BYTES)):
            record[descriptor.name] = list(getattr(message, descriptor.name))
        elif kind == NOT_PLAIN and descriptor.type == FieldDescriptor.TYPE_MESSAGE and not descriptor.is_repeated \
                and not descriptor.message_type.file.name.startswith(WELL_KNOWN):
            # an inner message by the same rules (as JSON, its 64-bit integers would be strings);
            # Google's well-known types (Struct, Value, Timestamp, ...) by their JSON mapping
            present = message.HasField(descriptor.name)
            record[descriptor.name] = record_of(getattr(message, descriptor.name)) if present else None
        elif kind == NOT_PLAIN:
            if as_json is None:
                as_json = _as_json(message if names is None else _only(message, names))
            record[descriptor.name] = as_json.get(descriptor.name)
        else:
            record[descriptor.name] = _value(message, descriptor.name, kind)
    return record


class UnreadableField(ValueError):
    """A field protobuf's JSON mapping refuses (an Any of a type the file does not hold, a Value of NaN)."""


def _only(message: Message, names: tuple[str, ...]) -> Message:
    """A copy of the message holding only the fields ``names`` (the others never read)."""
    copy = type(message)()
    copy.CopyFrom(message)
    for descriptor in message.DESCRIPTOR.fields:
        if descriptor.name not in names:
            copy.ClearField(descriptor.name)
    return copy


def _as_json(message: Message) -> dict[str, Any]:
    """The message by protobuf's JSON mapping (for enums, maps, repeated messages, well-known types)."""
    try:
        return json_format.MessageToDict(message, preserving_proto_field_name=True,  # type: ignore[no-any-return]
                                         always_print_fields_with_no_presence=True)
    except (json_format.Error, TypeError, ValueError) as error:  # what the mapping raises for what it refuses
        raise UnreadableField(str(error) or type(error).__name__) from None


def _message(schema: ProtobufSchema, encoded: bytes) -> tuple[Message | None, str | None]:
    """(the record's message, None), or (None, why it does not decode with its writer schema)."""
    where = f"record does not decode with its schema {schema.schema_id}"
    read = message_indexes(encoded)
    if isinstance(read, str):
        return None, f"{where}: {read}"
    indexes, start = read
    message_class = schema.message_class(indexes)
    if isinstance(message_class, str):
        return None, f"{where}: {message_class}"
    try:
        return message_class.FromString(encoded[start:]), None
    except (DecodeError, RuntimeError, ValueError) as error:
        return None, f"{where}: {error or type(error).__name__}"


def message_indexes(encoded: bytes) -> tuple[tuple[int, ...], int] | str:
    """(the message indexes at the start of a record, where its message begins), or what is wrong.

    >>> message_indexes(b"\\x00rest")
    ((0,), 1)
    >>> message_indexes(b"\\x04\\x02\\x00rest")
    ((1, 0), 3)
    """
    if encoded[:1] == b"\x00":  # the first message, as most records are
        return (0,), 1
    count, at = _zigzag(encoded, 0)
    if count is None or not 0 <= count <= MOST_INDEXES:
        return "its message indexes are not a count of zigzag varints"
    if count == 0:
        return (0,), at
    indexes = []
    for _ in range(count):
        index, at = _zigzag(encoded, at)
        if index is None:
            return "its message indexes run past its end"
        indexes.append(index)
    return tuple(indexes), at


def _zigzag(data: bytes, at: int) -> tuple[int | None, int]:
    """(the zigzag varint at ``at``, where the next begins); (None, at) past the end or too long."""
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
    return None, at


def parse_protobuf(registered: RegisteredSchema) -> ProtobufSchema:
    """The registered schema parsed for reading records (raises SchemaProblem)."""
    if registered.schema_type.upper() != "PROTOBUF":
        raise SchemaProblem(f"is a {registered.schema_type} schema; --format protobuf reads Protobuf schemas")
    others = [name for name in registered.references if not name.startswith(WELL_KNOWN)]
    if others:
        named = excerpt(", ".join(others[:3]), 300)
        raise SchemaProblem(f"refers to other schemas ({named}), which --format protobuf does not read: only "
                            f"Google's well-known types may be imported")
    file = file_descriptor(registered.text)
    pool = descriptor_pool.DescriptorPool()
    try:
        for dependency in file.dependency:
            _add_well_known(pool, dependency)
        added = pool.Add(file)
        messages = tuple(added.message_types_by_name.values())
        field_names = frozenset(_field_names(messages))
    except (TypeError, KeyError, ValueError) as error:
        raise SchemaProblem(f"is not a valid Protobuf file: {error}") from None
    except RecursionError:
        raise SchemaProblem("nests messages deeper than this worker reads") from None
    if not messages:
        raise SchemaProblem("has no message: a record is one message with named fields")
    return ProtobufSchema(registered.schema_id, file, messages, field_names)


def _field_names(messages: Iterable[Descriptor]) -> set[str]:
    names: set[str] = set()
    for message in messages:
        names.update(message.fields_by_name)
        names.update(_field_names(message.nested_types))
    return names


def _add_well_known(pool: descriptor_pool.DescriptorPool, name: str) -> None:
    if not name.startswith(WELL_KNOWN):
        raise SchemaProblem(f"imports {name}: only Google's well-known types may be imported")
    import google.protobuf.any_pb2  # noqa: E401, F401
    import google.protobuf.duration_pb2
    import google.protobuf.empty_pb2
    import google.protobuf.struct_pb2  # noqa: E401, F401

    try:
        known = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise SchemaProblem(f"imports {name}, which is not one of Google's well-known types") from None
    for dependency in known.dependencies:
        _add_well_known(pool, dependency.name)
    try:
        pool.FindFileByName(name)
    except KeyError:
        pool.AddSerializedFile(known.serialized_pb)


def file_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The file a registered Protobuf schema holds: a base64 FileDescriptorProto, or .proto text."""
    try:
        serialized = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # .proto text holds spaces, quotes and semicolons
        return compiled(text)
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(serialized)
    except DecodeError as error:
        raise SchemaProblem(f"is base64 that does not hold a FileDescriptorProto: {error}") from None
    file.name = file.name or "schema.proto"
    return file


def compiled(text: str) -> descriptor_pb2.FileDescriptorProto:
    """.proto text compiled by protoc (grpcio-tools), run apart so its messages can be told."""
    try:
        import grpc_tools  # noqa: F401  (only to know it is there)
    except ImportError:
        raise SchemaProblem("is .proto text, which needs protoc from the grpcio-tools package: "
                            "pip install 'nbstream[registry]'") from None
    try:
        return _compiled_in_a_temporary_folder(text)
    except OSError as error:  # no writable temporary folder: the machine's setup, not the schema's
        raise UserError(f"cannot compile a .proto schema: {error} (set TMPDIR to a writable folder)") from None


def _compiled_in_a_temporary_folder(text: str) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory(prefix="nbstream-proto-") as folder:
        source, out = Path(folder, "schema.proto"), Path(folder, "schema.desc")
        source.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", _protoc_include(),
                                   f"--descriptor_set_out={out}", source.name], capture_output=True, text=True,
                                  timeout=PROTOC_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise SchemaProblem(f"is .proto text that protoc did not compile in {PROTOC_SECONDS:.0f} s") from None
        if done.returncode != 0 or not out.exists():
            message = (done.stderr.strip().splitlines() or ["protoc failed"])[-1].replace(f"{folder}/", "")
            raise SchemaProblem(f"is not a valid Protobuf file: {message[:300]}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[-1]


def _protoc_include() -> str:
    """The folder of the well-known types' .proto files that grpcio-tools ships."""
    import grpc_tools

    return f"-I{Path(grpc_tools.__file__).parent / '_proto'}"
