"""State-topic records as `worker serve` writes them, and records it never writes, to see what it does with them."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pyarrow as pa

import nbstream
from nbstream.arrow import FeatureSpec
from worker.io.kafka.state_topic import write_records
from worker.service.partition.record import PartitionRecord

GENERATION = "f0f0f0f0f0f0"  # of the forged manifests
DROP = object()  # a manifest field left out


def partition_payload(next_offset: int | None, rows: int = 1, starts: dict | None = None, model=None) -> bytes:
    """A partition state's payload: ``model``, or a MultinomialNB that learned ``rows`` examples of two
    features (over a list column "features")."""
    if model is None:
        model = nbstream.MultinomialNB()
        if rows:
            model.partial_fit(np.ones((rows, 2)), ["a"] * rows)
    encoder = FeatureSpec.vector("features").encoder()
    encoder.width = 2
    return PartitionRecord(model, next_offset=next_offset, starts=starts or {}).to_payload(encoder)


def forged_state(name: str, header_changes: dict | None = None, features_changes: dict | None = None,
                 model_bytes: bytes | None = None) -> list[tuple[bytes, bytes | None]]:
    """The records of a state written as the service writes one, but for the header fields, the
    feature fields and the model bytes given (a field changed to None is left out)."""
    payload = partition_payload(next_offset=7)
    (length,) = struct.unpack_from("<I", payload, 4)
    header, model = json.loads(payload[8:8 + length]), payload[8 + length:]
    header.update(header_changes or {})
    header["features"].update(features_changes or {})
    header = {key: value for key, value in header.items() if value is not None}
    header["features"] = {key: value for key, value in header["features"].items() if value is not None}
    header_bytes = json.dumps(header).encode()
    model = model if model_bytes is None else model_bytes
    return write_records(name, b"NBPS" + struct.pack("<I", len(header_bytes)) + header_bytes + model).records


def forged_manifest(packed: bytes, name: str = "partition-0", **fields) -> list[tuple[bytes, bytes]]:
    """One chunk of ``packed`` and a manifest of it: a well-formed zstd one of ten bytes, but for
    ``fields`` (a field changed to DROP is left out)."""
    manifest = {"generation": GENERATION, "chunks": 1, "bytes": len(packed),
                "sha256": hashlib.sha256(packed).hexdigest(), "codec": "zstd", "size": 10} | fields
    manifest = {key: value for key, value in manifest.items() if value is not DROP}
    return [(f"{name}#{GENERATION}#0".encode(), packed), (name.encode(), json.dumps(manifest).encode())]


def zstd(data: bytes) -> bytes:
    return pa.compress(data, codec="zstd", asbytes=True)


def with_format(records: list[tuple[bytes, bytes | None]], version: int) -> list[tuple[bytes, bytes | None]]:
    """The records of a state as the service writes them, its manifest rewritten to carry the state
    format version ``version`` (the manifest's digest is of the chunks, which stay as they are)."""
    rewritten = []
    for key, value in records:
        if b"#" not in key and value is not None:
            manifest = json.loads(value)
            assert "format" in manifest, manifest  # the service writes it
            value = json.dumps(manifest | {"format": version}).encode()
        rewritten.append((key, value))
    return rewritten
