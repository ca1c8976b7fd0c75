"""How messages are written: the format's name, the field names, and the size above which one is refused."""

from __future__ import annotations

from dataclasses import dataclass

from ..setting import check_settings, names, setting

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
    Confluent wire format), their field names, and the size above which one is refused."""
    format: str = setting("json", "--format", choices=FORMATS,
                          help="json: one example per message (a JSON object); arrow: an Arrow IPC stream of many "
                               "rows per message (columns as in Parquet), answered by one Arrow stream of "
                               "predictions per message; avro, json-schema, protobuf: one Avro record, JSON object "
                               "or Protobuf message per message in the Confluent wire format, its schema in "
                               "--schema-registry (fields as in JSON), answered in JSON.")
    id: str = setting("id", "--id-field")
    features: str = setting("features", "--features-field")
    text: str = setting("text", "--text-field")
    label: str = setting("label", "--label-field")
    feature_names: list[str] = setting(default_factory=list, flag="--feature-names", parse=names,
                                       help="Keys of a features object, comma-separated (default: features is a "
                                            "list of numbers).")
    max_bytes: int = setting(1_048_576, "--max-message-bytes", low=1,
                             help="Larger messages go to the dead-letter topic; so do Arrow messages that hold more "
                                  "once decompressed.")

    def __post_init__(self) -> None:
        check_settings(self)
