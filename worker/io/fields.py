"""How messages are written: the format's name, the field names, and the size above which one is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

FORMATS = ("json", "arrow", "avro", "json-schema", "protobuf")
# records in the Confluent wire format, their schemas in a Schema Registry
REGISTRY_FORMATS = ("avro", "json-schema", "protobuf")

# The labels' column in a decoded batch, beside the feature columns. No option can name a column
# so (command lines and environment variables cannot hold a NUL), so a feature named "label" and
# the labels of --label-field never take each other's place.
LABEL_COLUMN = "\x00label"
ID_COLUMN = "\x00id"  # the same for the ids of an Arrow message


@dataclass
class MessageFields:
    """How messages are written (``format``: "json", one example per message; "arrow", an Arrow
    IPC stream of many; "avro", "json-schema" or "protobuf", one record per message in the
    Confluent wire format), their
    field names, and the size above which one is refused."""
    format: str = "json"
    id: str = "id"
    features: str = "features"
    text: str = "text"
    label: str = "label"
    feature_names: list[str] = field(default_factory=list)  # keys of a features object
    max_bytes: int = 1_048_576
