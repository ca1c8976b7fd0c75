"""The one framing of stored bytes: what it writes reads back, and each way bytes can be wrong is one
error line, found before the header is parsed where the bytes themselves are wrong."""

from __future__ import annotations

import io
import zlib

import pytest

from nbstream.persistence.framing import FrameError, Framing, NewerFrameError, compress, cut, decompress, digest

VERSIONED = Framing(b"TEST\x00", "not a test frame", "test frame", versions=(1, 2), length_bytes=8, checksum=True)
PLAIN = Framing(b"TP", "not a plain frame", "plain frame")


@pytest.mark.parametrize("framing", [VERSIONED, PLAIN])
def test_a_frame_reads_back_its_header_and_body(framing):
    data = framing.seal({"a": [1, "x"]}, [b"body", memoryview(b" and more")])
    opened = framing.open(data, "f")
    assert opened.header == {"a": [1, "x"]} and bytes(opened.body) == b"body and more"
    assert opened.version == (2 if framing.versions else None)
    streamed = io.BytesIO()
    framing.write(streamed, b'{"a": [1, "x"]}', [b"body and more"], 2 if framing.versions else None)
    assert framing.open(streamed.getvalue()).header == opened.header


def sealed(version=2, header=b"{}", body=b"x") -> bytearray:
    return bytearray(VERSIONED.seal(header, [body], version))


def resealed(data: bytearray) -> bytes:
    """The bytes with a checksum made anew for them: forged, not damaged."""
    import hashlib

    return bytes(data[:-32]) + hashlib.sha256(data[:-32]).digest()


@pytest.mark.parametrize("data, error, problem", [
    (b"TEST", FrameError, "not a test frame"),
    (b"ELSE\x00" + bytes(60), FrameError, "not a test frame"),
    (resealed(sealed(version=3)), NewerFrameError, "test frame format version 3; this nbstream reads versions 1, 2"),
    (resealed(sealed(version=0)), FrameError, "test frame format version 0; this nbstream reads versions 1, 2"),
    (bytes(sealed()[:-1]), FrameError, "checksum mismatch"),
    (resealed(sealed()[:6] + (1 << 40).to_bytes(8, "little") + sealed()[14:]), FrameError,
     "a header of 1,099,511,627,776"),
    (resealed(sealed(header=b"{\xff")), FrameError, "the header is not JSON (UnicodeDecodeError"),
    (resealed(sealed(header=b"[" * 100_000)), FrameError, "the header is not JSON (RecursionError"),
    (resealed(sealed(header=b"[1]")), FrameError, "the header is not a JSON object but a list"),
])
def test_bytes_that_are_not_a_frame_are_one_line(data, error, problem):
    with pytest.raises(error) as caught:
        VERSIONED.open(data, "the file")
    assert str(caught.value).startswith(f"the file: {problem}") and caught.value.problem.startswith(problem)
    assert "\n" not in str(caught.value)


def test_compressed_bytes_decompress_within_a_limit_and_to_the_size_stated():
    raw = b"abc" * 100_000
    packed = compress(raw, 1)
    assert decompress(packed, len(raw), exact=len(raw)) == raw
    with pytest.raises(FrameError, match="it decompresses to more than 1,000 bytes"):
        decompress(packed, 1_000)
    with pytest.raises(FrameError, match="it decompresses to 300,000 bytes; its manifest says 7"):
        decompress(packed, len(raw), exact=7, stated_by="its manifest")
    with pytest.raises(FrameError, match="its zstd data do not decompress"):
        decompress(b"not zstd", 100)
    assert decompress(zlib.compress(raw), len(raw), codec="zlib") == raw
    with pytest.raises(FrameError, match="its zlib data do not decompress"):
        decompress(zlib.compress(raw)[:50], len(raw), codec="zlib")
    with pytest.raises(FrameError, match="codec must be one of zstd, zlib; got 'lz4'"):
        decompress(packed, 10, codec="lz4")


def test_bytes_are_cut_in_chunks_of_at_most_a_size_under_one_digest():
    data = bytes(range(256)) * 10
    chunks = cut(data, 1_000)
    assert [len(c) for c in chunks] == [1_000, 1_000, 560] and b"".join(chunks) == data
    assert cut(b"", 10) == [b""]
    assert digest(data) == digest(b"".join(chunks)) and len(digest(data)) == 64
