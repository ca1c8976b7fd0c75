"""The state topic's records: chunks and a manifest written last; only complete, intact states come out."""

from __future__ import annotations

import json
import os
import zlib

import pytest

from tests.helpers.state_records import DROP, GENERATION, forged_manifest, with_format, zstd
from worker.io.kafka.state_topic import (
    CHUNK_BYTES,
    STATE_FORMAT,
    StateAssembler,
    delete_records,
    state_topic_name,
    write_records,
)


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

    payload = bytes(4_000_000) + os.urandom(1_000)  # a mostly-zero model, as text models are
    written = write_records("partition-1", payload)
    manifest = json.loads(written.records[-1][1])
    assert manifest["codec"] == "zstd" and manifest["size"] == len(payload) and written.payload_bytes < 50_000
    assembler = StateAssembler()
    for key, value in written.records:
        assembler.add(key, value)
    assert assembler.take("partition-1") == payload

    packed = zlib.compress(payload, 1)  # how states were written before zstd: no "codec" in the manifest
    older = {"generation": "0123456789ab", "chunks": 1, "bytes": len(packed),
             "sha256": hashlib.sha256(packed).hexdigest()}
    assembler.add(b"partition-2#0123456789ab#0", packed)
    assembler.add(b"partition-2", json.dumps(older).encode())
    assert assembler.take("partition-2") == payload


# ---- records no writer of this module wrote ---------------------------------------------------

TEN = zstd(b"0123456789")  # ten bytes, as the default manifest says

FORGED = {  # records that come after a valid state, and the start of what is wrong
    "manifest zstd size 2^40": (forged_manifest(TEN, size=2 ** 40), "manifest: size must be an integer from 0 to"),
    "manifest size -1": (forged_manifest(TEN, size=-1), "manifest: size must be an integer"),
    "manifest size 1.5": (forged_manifest(TEN, size=1.5), "manifest: size must be an integer"),
    "zstd manifest without size": (forged_manifest(TEN, size=DROP), "manifest: size must be an integer"),
    "manifest generation x": ([(b"partition-0", b'{"generation": "x"}')], "manifest: generation must be 12 hex"),
    "manifest generation a number": (forged_manifest(TEN, generation=7), "manifest: generation must be 12 hex"),
    "manifest without sha256": (forged_manifest(TEN, sha256=DROP), "manifest: no 'sha256' field"),
    "manifest sha256 not hex": (forged_manifest(TEN, sha256="z" * 64), "manifest: sha256 must be 64 hex"),
    "manifest codec lz4": (forged_manifest(TEN, codec="lz4"), "manifest: codec must be one of zstd, zlib; got 'lz4'"),
    "manifest codec a list": (forged_manifest(TEN, codec=["zstd"]), "manifest: codec must be one of"),
    "manifest of a trillion chunks": (forged_manifest(TEN, chunks=10 ** 12), "manifest: chunks must be an integer"),
    "manifest chunks true": (forged_manifest(TEN, chunks=True), "manifest: chunks must be an integer"),
    "manifest bytes -5": (forged_manifest(TEN, bytes=-5), "manifest: bytes must be an integer"),
    "manifest not JSON": ([(b"partition-0", b"{oops")], "manifest: not JSON"),
    "manifest nested too deep": ([(b"partition-0", b"[" * 100_000 + b"]" * 100_000)], "manifest: not JSON"),
    "manifest a number": ([(b"partition-0", b"17")], "manifest: not a JSON object but 17"),
    "manifest without its chunks": (forged_manifest(TEN)[-1:], "1 of its 1 chunks are not in the topic"),
    "chunks of fewer bytes than declared": (forged_manifest(TEN, bytes=len(TEN) + 1), "its chunks hold"),
    "digest of other bytes": (forged_manifest(TEN, sha256="0" * 64), "its manifest's digest does not match its chunks"),
    "zstd data that are not zstd": (forged_manifest(b"not zstd at all"), "its zstd data do not decompress"),
    "zstd data larger than declared": (forged_manifest(TEN, size=9), "it decompresses to more than 9 bytes"),
    "zstd data smaller than declared": (forged_manifest(TEN, size=11),
                                        "it decompresses to 10 bytes; its manifest says 11"),
    "zlib data truncated": (forged_manifest(zlib.compress(b"x" * 1000)[:-8], codec=DROP, size=DROP),
                            "its zlib data do not decompress"),
    "chunk key with another generation form": ([(b"partition-0#zz#0", b"x")], "chunk key: not NAME#GENERATION#INDEX"),
    "chunk key with a leading zero": ([(b"partition-0#0123456789ab#01", b"x")], "chunk key: not NAME"),
    "chunk key beyond the chunk bound": ([(b"partition-0#0123456789ab#99999", b"x")], "chunk key: not NAME"),
    "chunk larger than a writer cuts": ([(b"partition-0#0123456789ab#0", bytes(CHUNK_BYTES + 1))], "chunk of 524,289"),
    "key that is not UTF-8": ([(b"partition-0\xff", b"{}")], "the key is not UTF-8"),
    "key naming no state": ([(b"partition-x", b"{}")], "the key names no state"),
    "format that is no whole number": (forged_manifest(TEN, format="2"), "manifest: format must be an integer"),
    "format below 1": (forged_manifest(TEN, format=0), "manifest: format must be an integer"),
    "format that is a float": (forged_manifest(TEN, format=float(STATE_FORMAT + 1)), "manifest: format must be"),
}


@pytest.mark.parametrize("records, problem", FORGED.values(), ids=FORGED.keys())
def test_a_forged_record_alone_is_reported_and_the_last_valid_state_stays(records, problem):
    payload = os.urandom(2_000)
    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append((key, why)),
                               is_name=lambda name: name == "partition-0")
    for key, value in write_records("partition-0", payload).records + records:
        assembler.add(key, value)
    assert assembler.take("partition-0") == payload
    assert len(reported) == 1 and reported[0][1].startswith(problem), reported
    assert reported[0][0] == records[-1][0].decode("utf-8", "replace")  # the key of the record at fault


def test_a_zlib_manifest_without_codec_never_inflates_beyond_the_bound(monkeypatch):
    """An older writer's manifest records no size: its data are inflated at most to MAX_STATE_BYTES
    (here 1 MiB; 4.3 GB were taken from a 4 MB record before)."""
    from worker.io.kafka import state_topic

    monkeypatch.setattr(state_topic, "MAX_STATE_BYTES", 1 << 20)
    bomb = zlib.compress(bytes(64 << 20), 9)
    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append(why))
    for key, value in forged_manifest(bomb, codec=DROP, size=DROP):
        assembler.add(key, value)
    taken, peak = _with_peak_memory(lambda: assembler.take("partition-0"))
    assert taken is None
    assert reported == ["it decompresses to more than 1,048,576 bytes"]
    assert peak < 8 << 20  # the bound and a few pieces of 1 MiB, of the 64 MiB it would inflate to


def test_a_declared_zstd_size_is_not_what_is_allocated():
    """A manifest may declare the largest size allowed over ten bytes of data: the decompressor
    reads what the data hold (and the state is refused for not matching)."""
    from worker.io.kafka.state_topic import MAX_STATE_BYTES

    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append(why))
    for key, value in forged_manifest(TEN, size=MAX_STATE_BYTES):
        assembler.add(key, value)
    taken, peak = _with_peak_memory(lambda: assembler.take("partition-0"))
    assert taken is None
    assert reported == ["it decompresses to 10 bytes; its manifest says 1,073,741,824"]
    assert peak < 4 << 20


def test_a_newer_state_whose_payload_does_not_read_leaves_the_older_one():
    """``read`` raising ForeignRecord (a partition state with a bad header, say) is a skip too."""
    from worker.io.kafka.state_topic import ForeignRecord

    def read(payload):
        if payload.startswith(b"bad"):
            raise ForeignRecord("unreadable partition state (next_offset must be ...)")
        return payload.decode()

    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append((key, why)))
    for payload in (b"first", b"good", b"bad one", b"bad two"):
        for key, value in write_records("partition-1", payload).records:
            assembler.add(key, value)
    assert assembler.take("partition-1", read) == "good"
    assert [why for _, why in reported] == ["unreadable partition state (next_offset must be ...)"] * 2
    assert assembler.take("partition-1", read) is None  # everything read so far was taken


def test_a_state_whose_chunks_were_tombstoned_is_no_longer_a_fallback():
    """The writer tombstones a replaced state's chunks: the older state is gone, not reported as forged."""
    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append(why))
    first = write_records("partition-1", b"first")
    second = write_records("partition-1", b"second", replaced=first.chunk_keys)
    for key, value in first.records + second.records + forged_manifest(TEN, name="partition-1", sha256="0" * 64):
        assembler.add(key, value)
    assert assembler.take("partition-1") == b"second" and len(reported) == 1
    assert assembler.chunk_keys("partition-1") == second.chunk_keys | {f"partition-1#{GENERATION}#0".encode()}


def test_a_state_larger_than_readers_take_is_not_written(monkeypatch):
    from worker.errors import ConfigError
    from worker.io.kafka import state_topic

    monkeypatch.setattr(state_topic, "MAX_STATE_BYTES", 1_000)
    with pytest.raises(ConfigError, match=r"the state partition-4 is 1,001 bytes; a state topic holds states of at "
                                          r"most 1,000\. Use fewer features"):
        write_records("partition-4", os.urandom(1_001))


def _with_peak_memory(call):
    """(what call() returns, the most memory Python allocated meanwhile, in bytes)."""
    import tracemalloc

    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_every_manifest_carries_the_state_format_version_and_one_without_reads_as_version_1():
    records = write_records("partition-0", b"payload").records
    assert json.loads(records[-1][1])["format"] == STATE_FORMAT == 1
    older = forged_manifest(zstd(b"0123456789"))  # as every release before the field wrote them
    assert "format" not in json.loads(older[-1][1])
    assembler = StateAssembler()
    for key, value in older:
        assembler.add(key, value)
    assert assembler.take("partition-0") == b"0123456789" and assembler.newer() == {}


def test_a_manifest_of_a_newer_format_version_is_not_passed_over_but_kept_as_newer():
    reported = []
    assembler = StateAssembler(on_skip=lambda key, why: reported.append(why), is_name=lambda name: name != "other")
    newer = with_format(write_records("partition-0", b"newer").records, STATE_FORMAT + 1)
    for key, value in write_records("partition-0", b"older").records + newer:
        assert assembler.add(key, value) is None or key == b"partition-0"
    assert assembler.newer() == {"partition-0": STATE_FORMAT + 1} and reported == []
    # its other fields are not read: a newer format may change them; and its name may be new
    for key, value in [(b"partition-1", json.dumps({"format": 7, "pieces": [1, 2]}).encode()),
                       (b"other", json.dumps({"format": STATE_FORMAT + 1}).encode())]:
        assembler.add(key, value)
    assert assembler.newer() == {"partition-0": STATE_FORMAT + 1, "partition-1": 7, "other": STATE_FORMAT + 1}
    assert reported == []


def test_a_newer_manifest_a_later_state_or_tombstone_replaces_is_no_longer_newer():
    assembler = StateAssembler()
    for key, value in with_format(write_records("partition-0", b"newer").records, STATE_FORMAT + 1) + \
            write_records("partition-0", b"after it").records:
        assembler.add(key, value)
    newer = with_format(write_records("partition-1", b"newer").records, STATE_FORMAT + 1)
    for key, value in newer + delete_records("partition-1", [key for key, _ in newer[:-1]]):
        assembler.add(key, value)
    assert assembler.newer() == {}
    assert assembler.take("partition-0") == b"after it"
    # a forged manifest after it (not JSON) replaces nothing
    for key, value in with_format(write_records("partition-2", b"newer").records, 9) + [(b"partition-2", b"{")]:
        assembler.add(key, value)
    assert assembler.newer() == {"partition-2": 9}
