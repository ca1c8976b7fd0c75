"""The state topic's records: chunks and a manifest written last; only complete, intact states come out."""

from __future__ import annotations

import os

from worker.io.kafka.state_topic import CHUNK_BYTES, StateAssembler, state_topic_name, write_records


def test_a_large_state_is_chunked_and_reassembled():
    payload = os.urandom(3 * CHUNK_BYTES)  # random: does not compress, so it takes several chunks
    write = write_records("partition-2", payload)
    *chunks, manifest = write.records
    assert len(chunks) == 4 and manifest[0] == b"partition-2"
    assert all(len(value) <= CHUNK_BYTES for _, value in chunks)
    assembler = StateAssembler()
    names = [assembler.add(key, value) for key, value in write.records]
    assert names[-1] == "partition-2" and assembler.take("partition-2") == payload
    assert assembler.take("partition-2") is None  # taken once


def test_a_state_missing_a_chunk_or_with_a_wrong_digest_is_not_handed_out():
    write = write_records("partition-0", os.urandom(2 * CHUNK_BYTES))
    assembler = StateAssembler()
    for key, value in write.records[1:]:
        assembler.add(key, value)
    assert assembler.take("partition-0") is None
    tampered = StateAssembler()
    (key, value), *rest = write.records
    tampered.add(key, bytes([value[0] ^ 1]) + value[1:])
    for key, value in rest:
        tampered.add(key, value)
    assert tampered.take("partition-0") is None


def test_a_new_write_tombstones_the_old_chunks_and_replaces_the_state():
    assembler = StateAssembler()
    for key, value in write_records("base", b"first").records:
        assembler.add(key, value)
    old_keys = assembler.chunk_keys("base")
    second = write_records("base", b"second", replaced=old_keys)
    assert [key for key, value in second.records if value is None] == sorted(old_keys)
    for key, value in second.records:
        assembler.add(key, value)
    assert assembler.take("base") == b"second" and assembler.chunk_keys("base") == second.chunk_keys


def test_state_topic_names_are_valid_kafka_topic_names():
    assert state_topic_name("my group/α", "sms") == "sms.my_group__.nbstream-state"
    assert len(state_topic_name("g" * 300, "t")) == 249


def test_states_are_zstd_and_an_older_writers_zlib_states_still_read():
    import hashlib
    import json
    import zlib

    payload = bytes(4_000_000) + os.urandom(1_000)  # a mostly-zero model, as text models are
    written = write_records("partition-1", payload)
    manifest = json.loads(written.records[-1][1])
    assert manifest["codec"] == "zstd" and manifest["size"] == len(payload) and written.payload_bytes < 50_000
    assembler = StateAssembler()
    for key, value in written.records:
        assembler.add(key, value)
    assert assembler.take("partition-1") == payload

    packed = zlib.compress(payload, 1)  # how states were written before zstd: no "codec" in the manifest
    older = {"generation": "g0", "chunks": 1, "bytes": len(packed), "sha256": hashlib.sha256(packed).hexdigest()}
    assembler.add(b"partition-2#g0#0", packed)
    assembler.add(b"partition-2", json.dumps(older).encode())
    assert assembler.take("partition-2") == payload


def test_records_that_are_not_this_writers_are_passed_over_without_cost():
    """Someone else's records on the state topic: nesting too deep for a JSON parser, a manifest
    announcing a trillion chunks (whose keys would be built before any check)."""
    import json

    assembler = StateAssembler()
    assert assembler.add(b"partition-0", b"[" * 100_000 + b"]" * 100_000) is None
    assert assembler.add(b"partition-0", b"17") is None
    huge = {"generation": "g", "chunks": 10 ** 12, "bytes": 1, "sha256": "0", "codec": "zstd", "size": 1}
    assert assembler.add(b"partition-0", json.dumps(huge).encode()) == "partition-0"
    assert assembler.take("partition-0") is None
    payload = os.urandom(100)
    write = write_records("partition-0", payload)  # the real writer still gets through
    for key, value in write.records:
        assembler.add(key, value)
    assert assembler.take("partition-0") == payload
